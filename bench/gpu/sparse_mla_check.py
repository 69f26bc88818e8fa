#!/usr/bin/env python3
"""Sparse MLA kernel on a GPU: correctness against the reference at real sizes, and achieved memory
bandwidth as a fraction of the GPU's peak.

    python bench/gpu/sparse_mla_check.py            # the default sweep
    python bench/gpu/sparse_mla_check.py --quick    # a few cases
    python bench/gpu/sparse_mla_check.py --peak-gbps 1792

Bytes per token (the roofline of ../shared/research/sparse-mla.md section 5.2):
    valid rows x row bytes (1152 bf16/fp16, 656 fp8_ds_mla) + q (H x 576 x 2) + out (H x 512 x 2)
    + indices (top-k x 4)
Logical bytes: a row read by several head blocks, or by several tokens, counts each time (L2 may
serve repeats, so the fraction can exceed what DRAM did). The peak is the GPU's spec bandwidth from
NVML (memory clock x bus width x 2), and a device-to-device copy measured in the same run gives a
practical ceiling; both ratios are printed. Target for batched decode: >= 60% of peak.

Exits 0 with a message when no CUDA GPU is present: nothing is measured then.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

# (tokens, heads, format) sweep: batched decode, small decode (split-KV), prefill.
DEFAULT_CASES = [
    (1, 16, "bf16"), (4, 16, "bf16"), (32, 16, "bf16"), (128, 16, "bf16"), (128, 8, "bf16"),
    (64, 64, "bf16"), (64, 128, "bf16"), (1024, 16, "bf16"), (4096, 16, "bf16"), (4096, 128, "bf16"),
    (1, 16, "fp16"), (128, 16, "fp16"), (4096, 64, "fp16"),
    (1, 16, "fp8_ds_mla"), (4, 8, "fp8_ds_mla"), (128, 16, "fp8_ds_mla"), (128, 128, "fp8_ds_mla"),
    (4096, 16, "fp8_ds_mla"),
]
QUICK_CASES = [(1, 16, "bf16"), (128, 16, "bf16"), (4096, 16, "bf16"), (128, 16, "fp8_ds_mla")]
TOPK = 2048
POOL_ROWS = 262144  # KV rows in the pool the indices draw from (random, scattered gathers)
TOL = {"bf16": 2e-2, "fp16": 2e-3, "fp8_ds_mla": 2e-2}
# Spec bandwidths (GB/s) by name, used when NVML cannot tell.
KNOWN_PEAK_GBPS = {"RTX PRO 6000": 1792, "RTX 5090": 1792, "GB10": 273, "H100": 3350, "H200": 4800,
                   "B200": 8000, "A100-SXM4-80GB": 2039, "A100": 1555, "L40S": 864, "RTX 4090": 1008}


def spec_peak_gbps(torch) -> tuple[float | None, str]:
    try:
        import pynvml

        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
        mhz = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_MEM)
        bits = pynvml.nvmlDeviceGetMemoryBusWidth(h)
        if mhz and bits:
            return 2 * mhz * 1e6 * bits / 8 / 1e9, f"NVML: {mhz} MHz x {bits} bit x 2"
    except Exception:
        pass
    name = torch.cuda.get_device_name()
    for key, gbps in KNOWN_PEAK_GBPS.items():
        if key in name:
            return float(gbps), f"table entry {key!r}"
    return None, "unknown"


def time_ms(torch, fn, iters: int = 20, warmup: int = 5) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def copy_gbps(torch) -> float:
    x = torch.empty(512 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    y = torch.empty_like(x)
    ms = time_ms(torch, lambda: y.copy_(x), iters=10, warmup=3)
    return 2 * x.numel() / (ms * 1e-3) / 1e9


def run_case(torch, T: int, H: int, fmt: str, pool, gen):
    from triage_sparse_mla import sparse_mla_fwd
    from triage_sparse_mla.reference import sparse_mla_ref

    dtype = torch.float16 if fmt == "fp16" else torch.bfloat16
    kv = pool[fmt]
    n = kv.shape[0]
    q = torch.randn(T, H, 576, device="cuda", generator=gen).to(dtype)
    idx = torch.randint(0, n, (T, TOPK), device="cuda", dtype=torch.int32, generator=gen)
    kv_format = "fp8_ds_mla" if fmt == "fp8_ds_mla" else "auto"
    scale = 0.0625
    out, lse = sparse_mla_fwd(q, kv, idx, scale, kv_format=kv_format)
    # Reference on a sample of tokens (the whole batch at T 4096 x H 128 would take minutes).
    sample = torch.unique(torch.cat([torch.arange(min(T, 16)), torch.arange(max(0, T - 16), T)])).cuda()
    ref, ref_lse = sparse_mla_ref(q[sample], kv, idx[sample], scale, kv_format=kv_format, out_dtype=torch.float32)
    err = ((out[sample].float() - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
    lse_err = (lse[sample] - ref_lse).abs().max().item()
    ms = time_ms(torch, lambda: sparse_mla_fwd(q, kv, idx, scale, kv_format=kv_format))
    row = 656 if fmt == "fp8_ds_mla" else 1152
    per_token = TOPK * row + H * 576 * 2 + H * 512 * 2 + TOPK * 4
    logical = T * per_token
    distinct = torch.unique(idx).numel() * row + T * (per_token - TOPK * row)
    return {"T": T, "H": H, "fmt": fmt, "err": err, "lse_err": lse_err, "ok": err <= TOL[fmt] and lse_err <= 1e-3,
            "ms": ms, "gbps": logical / (ms * 1e-3) / 1e9, "distinct_gbps": distinct / (ms * 1e-3) / 1e9,
            "tflops": 2 * T * H * TOPK * (576 + 512) / (ms * 1e-3) / 1e12}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few cases only")
    ap.add_argument("--peak-gbps", type=float, help="the GPU's peak memory bandwidth, if NVML cannot tell")
    args = ap.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("TRITON_INTERPRET=1 is set: this benchmark needs the real GPU path; unset it")
        return 0
    try:
        import torch
    except ImportError:
        print("torch is not installed: nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("no CUDA GPU visible: nothing measured (this script is for a GPU machine)")
        return 0
    from triage_sparse_mla.reference import quantize_fp8_ds_mla

    name = torch.cuda.get_device_name()
    cap = torch.cuda.get_device_capability()
    peak, how = (args.peak_gbps, "--peak-gbps") if args.peak_gbps else spec_peak_gbps(torch)
    copy = copy_gbps(torch)
    print(f"GPU: {name} (SM{cap[0]}{cap[1]}), peak {peak or '?'} GB/s ({how}), measured copy {copy:.0f} GB/s")
    print(f"top-k {TOPK}, KV pool {POOL_ROWS} rows, random indices; bytes/token = rows x row bytes + q + out + indices")
    gen = torch.Generator(device="cuda").manual_seed(0)
    rows = (0.5 * torch.randn(POOL_ROWS, 576, device="cuda", generator=gen))
    pool = {"bf16": rows.to(torch.bfloat16), "fp16": rows.to(torch.float16)}
    pool["fp8_ds_mla"] = quantize_fp8_ds_mla(pool["bf16"].cpu()).cuda()
    cases = QUICK_CASES if args.quick else DEFAULT_CASES
    hdr = f"{'T':>5} {'H':>4} {'format':<11} {'max err':>9} {'ok':>3} {'us':>9} {'GB/s':>7} {'%peak':>6} {'%copy':>6} {'uniq GB/s':>9} {'TFLOPS':>7}"
    print(hdr)
    print("-" * len(hdr))
    bad = 0
    for T, H, fmt in cases:
        r = run_case(torch, T, H, fmt, pool, gen)
        bad += not r["ok"]
        pct = f"{100 * r['gbps'] / peak:5.1f}%" if peak else "    ?"
        print(f"{T:>5} {H:>4} {fmt:<11} {r['err']:>9.2e} {'yes' if r['ok'] else 'NO':>3} {1000 * r['ms']:>9.1f} "
              f"{r['gbps']:>7.0f} {pct:>6} {100 * r['gbps'] / copy:5.1f}% {r['distinct_gbps']:>9.0f} {r['tflops']:>7.1f}")
    print(f"{len(cases) - bad}/{len(cases)} cases within tolerance")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
