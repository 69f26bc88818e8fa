"""A short kernel check against the reference on the GPU (run by `triage apply` after installing).

`python -m triage_sparse_mla.selftest` prints one JSON line; exit 0 when every case is within the
spec's tolerances, 1 when one is not, 3 when there is no GPU (nothing checked).
"""

from __future__ import annotations

import json
import sys

TOL = {"float16": 2e-3, "bfloat16": 2e-2}


def run() -> dict:
    import torch

    if not torch.cuda.is_available():
        return {"ok": None, "reason": "no CUDA device"}
    from .kernel import sparse_mla_fwd
    from .reference import quantize_fp8_ds_mla, sparse_mla_ref

    dev = torch.device("cuda")
    g = torch.Generator(device="cpu").manual_seed(0)
    cases = []
    for dtype_name, fp8, T in (("bfloat16", False, 1), ("float16", False, 33), ("bfloat16", True, 4)):
        dtype = getattr(torch, dtype_name)
        N, H, K = 4096, 16, 512
        q = torch.randn(T, H, 576, generator=g).to(dtype).to(dev)
        rows = (0.5 * torch.randn(N, 576, generator=g)).to(dtype)
        kv = quantize_fp8_ds_mla(rows).to(dev) if fp8 else rows.to(dev)
        idx = torch.randint(0, N, (T, K), generator=g, dtype=torch.int32).to(dev)
        idx[:, K - 50:] = -1
        fmt = "fp8_ds_mla" if fp8 else "auto"
        out, lse = sparse_mla_fwd(q, kv, idx, 0.0625, kv_format=fmt)
        ref, ref_lse = sparse_mla_ref(q, kv, idx, 0.0625, kv_format=fmt, out_dtype=torch.float32)
        err = ((out.float() - ref).abs() / ref.abs().clamp(min=1.0)).max().item()
        lse_err = (lse - ref_lse).abs().max().item()
        cases.append({"dtype": dtype_name, "kv": fmt, "tokens": T, "max_err": err, "lse_err": lse_err,
                      "ok": err <= TOL[dtype_name] and lse_err <= 1e-3})
    props = torch.cuda.get_device_properties(dev)
    return {"ok": all(c["ok"] for c in cases), "gpu": props.name,
            "capability": list(torch.cuda.get_device_capability(dev)), "cases": cases}


def main() -> int:
    res = run()
    print(json.dumps(res))
    return 3 if res["ok"] is None else (0 if res["ok"] else 1)


if __name__ == "__main__":
    sys.exit(main())
