"""The sparse MLA Triton kernel family (decode and prefill are the same kernel).

One program per (query token, head block, KV split). Each program walks its share of the token's
index list BLOCK_N entries at a time, gathers those KV rows once ([BLOCK_N, d_v] latent +
[BLOCK_N, rope] part) and uses the latent tile both as K (transposed, for q.k) and as V (for p.v),
with an online softmax in float32 in the exp2 domain. Invalid entries (< 0, >= N, beyond
topk_length) are masked: their loads fetch nothing and their scores are -inf. When the grid is too
small to fill the GPU, the index list is split across programs that write partial (out, lse2) in
float32, and a second kernel merges them; empty splits carry lse2 = -inf and drop out of the merge.

Under Triton's interpreter (TRITON_INTERPRET=1, CPU) bfloat16 tiles are upcast to float32 before
any arithmetic (the interpreter's bf16 dot multiplies raw uint16 bit patterns): the UPCAST constexpr.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .tiles import FALLBACKS, Tile, pick_splits, pick_tile

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


@triton.jit
def _sparse_mla_fwd_kernel(
    Q, KV, IDX, TOPK_LEN, OUT, LSE,
    stride_qt, stride_qh,
    stride_kvb, stride_kvr,
    stride_it,
    stride_ot, stride_os, stride_oh,
    stride_lt, stride_ls,
    H, K, N, NUM_HB, K_PER_SPLIT,
    qk_scale,
    PAGE: tl.constexpr,
    BLOCK_H: tl.constexpr,
    BLOCK_N: tl.constexpr,
    D_V: tl.constexpr,
    D_ROPE: tl.constexpr,
    HAS_TOPK_LEN: tl.constexpr,
    KV_FP8: tl.constexpr,
    FP8_BITMATH: tl.constexpr,
    ROPE_BF16: tl.constexpr,
    COMPUTE: tl.constexpr,
    PARTIAL: tl.constexpr,
    PREC: tl.constexpr,
):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    t = (pid // NUM_HB).to(tl.int64)
    hb = pid % NUM_HB

    offs_h = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hmask = offs_h < H
    offs_dv = tl.arange(0, D_V)

    q_rows = Q + t * stride_qt + offs_h.to(tl.int64)[:, None] * stride_qh
    qn = tl.load(q_rows + offs_dv[None, :], mask=hmask[:, None], other=0.0).to(COMPUTE)
    if D_ROPE > 0:
        offs_dr = tl.arange(0, D_ROPE)
        qp = tl.load(q_rows + D_V + offs_dr[None, :], mask=hmask[:, None], other=0.0).to(COMPUTE)

    kend = K
    if HAS_TOPK_LEN:
        kend = tl.minimum(tl.maximum(tl.load(TOPK_LEN + t), 0), K)
    start = split * K_PER_SPLIT
    stop = tl.minimum(start + K_PER_SPLIT, kend)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_V], tl.float32)

    for k0 in range(start, stop, BLOCK_N):
        offs_k = k0 + tl.arange(0, BLOCK_N)
        kmask = offs_k < stop
        idx = tl.load(IDX + t * stride_it + offs_k, mask=kmask, other=-1)
        valid = kmask & (idx >= 0) & (idx < N)
        slot = tl.where(valid, idx, 0).to(tl.int64)
        if PAGE > 0:
            row_off = (slot // PAGE) * stride_kvb + (slot % PAGE) * stride_kvr
        else:
            row_off = slot * stride_kvr
        rows = KV + row_off
        if KV_FP8:
            raw = tl.load(rows[:, None] + offs_dv[None, :], mask=valid[:, None], other=0)
            if FP8_BITMATH:
                # e4m3fn byte -> fp16 bits, times 2^8 (bias 7 vs 15); exact for all non-NaN codes.
                r16 = raw.to(tl.uint16)
                bits = (((r16 & 0x80) << 8) | ((r16 & 0x7F) << 7)).to(tl.uint16)
                lat = bits.to(tl.float16, bitcast=True).to(tl.float32) * 256.0
            else:
                lat = raw.to(tl.float8e4nv, bitcast=True).to(tl.float32)
            scale_ptr = (rows + D_V).to(tl.pointer_type(tl.float32))
            sc = tl.load(scale_ptr[:, None] + (offs_dv // 128)[None, :], mask=valid[:, None], other=0.0)
            kn = (lat * sc).to(COMPUTE)
            if ROPE_BF16:
                rope_ptr = (rows + D_V + 4 * (D_V // 128)).to(tl.pointer_type(tl.bfloat16))
            else:
                rope_ptr = (rows + D_V + 4 * (D_V // 128)).to(tl.pointer_type(tl.float16))
            kp = tl.load(rope_ptr[:, None] + offs_dr[None, :], mask=valid[:, None], other=0.0).to(COMPUTE)
        else:
            kn = tl.load(rows[:, None] + offs_dv[None, :], mask=valid[:, None], other=0.0).to(COMPUTE)
            if D_ROPE > 0:
                kp = tl.load(rows[:, None] + D_V + offs_dr[None, :], mask=valid[:, None], other=0.0).to(COMPUTE)

        s = tl.dot(qn, tl.trans(kn), input_precision=PREC)
        if D_ROPE > 0:
            s += tl.dot(qp, tl.trans(kp), input_precision=PREC)
        s = tl.where(valid[None, :], s * qk_scale, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row with nothing valid yet keeps m = -inf; subtract 0 there so no inf - inf appears.
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(COMPUTE), kn, input_precision=PREC)
        m_i = m_new

    has = l_i > 0.0
    l_safe = tl.where(has, l_i, 1.0)
    o = acc / l_safe[:, None]
    lse2 = tl.where(has, m_i + tl.log2(l_safe), float("-inf"))
    if PARTIAL:
        o_ptr = OUT + t * stride_ot + split * stride_os + offs_h[:, None] * stride_oh + offs_dv[None, :]
        tl.store(o_ptr, o, mask=hmask[:, None])
        tl.store(LSE + t * stride_lt + split * stride_ls + offs_h, lse2, mask=hmask)
    else:
        o_ptr = OUT + t * stride_ot + offs_h[:, None] * stride_oh + offs_dv[None, :]
        tl.store(o_ptr, o.to(OUT.dtype.element_ty), mask=hmask[:, None])
        tl.store(LSE + t * stride_lt + offs_h, lse2 * 0.6931471805599453, mask=hmask)


@triton.jit
def _merge_splits_kernel(
    PO, PL, OUT, LSE,
    stride_pot, stride_pos, stride_poh,
    stride_plt, stride_pls,
    stride_ot, stride_oh,
    stride_lt,
    S,
    S_POW2: tl.constexpr,
    D_V: tl.constexpr,
    D_CHUNK: tl.constexpr,
):
    t = tl.program_id(0).to(tl.int64)
    h = tl.program_id(1)
    offs_s = tl.arange(0, S_POW2)
    smask = offs_s < S
    lse2 = tl.load(PL + t * stride_plt + offs_s * stride_pls + h, mask=smask, other=float("-inf"))
    m = tl.max(lse2, 0)
    m_use = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse2 - m_use)  # empty splits (lse2 = -inf) weigh 0
    wsum = tl.sum(w, 0)
    has = wsum > 0.0
    wsafe = tl.where(has, wsum, 1.0)
    # D_V in chunks: a [S, 512] float32 tile would not stay in registers.
    for d0 in tl.static_range(0, D_V, D_CHUNK):
        offs_d = d0 + tl.arange(0, D_CHUNK)
        po = tl.load(
            PO + t * stride_pot + offs_s[:, None] * stride_pos + h * stride_poh + offs_d[None, :],
            mask=smask[:, None], other=0.0,
        )
        o = tl.sum(po * w[:, None], 0) / wsafe
        tl.store(OUT + t * stride_ot + h * stride_oh + offs_d, o.to(OUT.dtype.element_ty))
    tl.store(LSE + t * stride_lt + h, tl.where(has, (m_use + tl.log2(wsafe)) * 0.6931471805599453, float("-inf")))


_TL_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16, torch.float32: tl.float32}
# Tiles that failed to compile for OutOfResources, per (device, fp8): never retried in this process.
_too_big: set[tuple[int, bool, Tile]] = set()


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _capability(device: torch.device) -> tuple[int, int] | None:
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_capability(device)


def _sm_count(device: torch.device) -> int:
    if device.type != "cuda":
        return 8  # interpreter: small, so tests exercise the split path with few tokens
    return torch.cuda.get_device_properties(device).multi_processor_count


def _kv_geometry(kv: torch.Tensor) -> tuple[torch.Tensor, int, int, int, int]:
    """-> (kv as tensor, page size or 0, block stride, row stride, number of slots)."""
    if kv.dim() == 4 and kv.shape[2] == 1:
        kv = kv[:, :, 0, :]
    if kv.dim() == 2:
        if kv.stride(1) != 1:
            raise ValueError("kv rows must be contiguous in their last dimension")
        return kv, 0, 0, kv.stride(0), kv.shape[0]
    if kv.dim() == 3:
        if kv.stride(2) != 1:
            raise ValueError("kv rows must be contiguous in their last dimension")
        nb, bs = kv.shape[0], kv.shape[1]
        if kv.stride(0) == bs * kv.stride(1):  # no gap between blocks: a flat row view is exact
            return kv, 0, 0, kv.stride(1), nb * bs
        return kv, bs, kv.stride(0), kv.stride(1), nb * bs
    raise ValueError(f"kv must be [N, D], [blocks, block_size, D] or [blocks, block_size, 1, D], got {tuple(kv.shape)}")


def sparse_mla_fwd(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float,
    d_v: int = 512,
    topk_length: torch.Tensor | None = None,
    *,
    kv_format: str = "auto",
    num_splits: int | None = None,
    tile: Tile | None = None,
    fp8_bitmath: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sparse MLA attention; see ../shared/spec/sparse-mla-op.md for the contract.

    q [T, H, D]; kv [N, D] (or paged [blocks, block_size, (1,) D], where an index is a slot
    block * block_size + offset); indices [T, K] (or [T, 1, K]) int32; topk_length [T] int32.
    kv_format "fp8_ds_mla": kv is uint8 [..., 656] and D must be 576.
    Returns out [T, H, d_v] (q's dtype) and lse [T, H] float32 (natural log; -inf for empty rows).
    num_splits / tile / fp8_bitmath override the heuristics (tests, benchmarks).
    """
    if q.dim() != 3:
        raise ValueError(f"q must be [T, H, D], got {tuple(q.shape)}")
    if q.dtype not in _TL_DTYPES:
        raise ValueError(f"q dtype {q.dtype} not supported (float16, bfloat16, float32)")
    if indices.dim() == 3:
        indices = indices[:, 0, :]
    T, H, D = q.shape
    if indices.dim() != 2 or indices.shape[0] != T:
        raise ValueError(f"indices must be [T, K] with T = {T}, got {tuple(indices.shape)}")
    d_rope = D - d_v
    if d_v < 16 or d_v & (d_v - 1) or d_rope < 0 or (d_rope and (d_rope < 16 or d_rope & (d_rope - 1))):
        raise ValueError(f"head size {D} with d_v {d_v}: d_v and D - d_v must be powers of two >= 16 (or D == d_v)")
    fp8 = kv_format == "fp8_ds_mla"
    if fp8:
        if (D, d_v) != (576, 512):
            raise ValueError("fp8_ds_mla needs D = 576 and d_v = 512")
        if kv.dtype != torch.uint8:
            kv = kv.view(torch.uint8)
        if kv.shape[-1] != 656:
            raise ValueError(f"fp8_ds_mla rows are 656 bytes, got {kv.shape[-1]}")
    elif kv_format != "auto":
        raise ValueError(f"kv_format {kv_format!r} not supported ('auto', 'fp8_ds_mla')")
    else:
        if kv.dtype != q.dtype:
            raise ValueError(f"kv dtype {kv.dtype} differs from q dtype {q.dtype}")
        if kv.shape[-1] != D:
            raise ValueError(f"kv rows have {kv.shape[-1]} values, q has {D}")
    kv, page, stride_kvb, stride_kvr, n_rows = _kv_geometry(kv)
    if q.stride(2) != 1:
        q = q.contiguous()
    indices = indices.to(torch.int32)
    if indices.stride(1) != 1:
        indices = indices.contiguous()
    if topk_length is not None:
        topk_length = topk_length.to(device=q.device, dtype=torch.int32).contiguous()

    out = torch.empty(T, H, d_v, dtype=q.dtype, device=q.device)
    lse = torch.empty(T, H, dtype=torch.float32, device=q.device)
    if T == 0 or H == 0:
        return out, lse

    interp = interpreting()
    cap = None if interp else _capability(q.device)
    if not interp and cap is None:
        raise RuntimeError("sparse_mla_fwd needs a CUDA device, or TRITON_INTERPRET=1 to run on the CPU")
    upcast = interp and q.dtype == torch.bfloat16
    compute = tl.float32 if (upcast or q.dtype == torch.float32) else _TL_DTYPES[q.dtype]
    if fp8_bitmath is None:
        fp8_bitmath = cap is not None and cap < (8, 9)
    chosen = tile or pick_tile(cap, fp8)
    candidates = [chosen] + [f for f in FALLBACKS if f.block_n < chosen.block_n or f.num_stages < chosen.num_stages]
    dev_key = q.device.index or 0
    candidates = [c for c in candidates if (dev_key, fp8, c) not in _too_big] or [FALLBACKS[-1]]

    last_err: Exception | None = None
    for cand in candidates:
        try:
            _launch(q, kv, indices, topk_length, out, lse, sm_scale, cand, page, stride_kvb, stride_kvr,
                    n_rows, d_v, d_rope, fp8, fp8_bitmath, compute, num_splits)
            return out, lse
        except triton.runtime.errors.OutOfResources as exc:  # compile-time: too much shared memory
            _too_big.add((dev_key, fp8, cand))
            last_err = exc
    assert last_err is not None
    raise last_err


def _launch(q, kv, indices, topk_length, out, lse, sm_scale, tile, page, stride_kvb, stride_kvr,
            n_rows, d_v, d_rope, fp8, fp8_bitmath, compute, num_splits):
    T, H, _ = q.shape
    K = indices.shape[1]
    num_hb = triton.cdiv(H, tile.block_h)
    if num_splits is None:
        num_splits = pick_splits(T, num_hb, K, tile.block_n, _sm_count(q.device))
    num_splits = max(1, min(num_splits, triton.cdiv(K, tile.block_n)))
    k_per_split = triton.cdiv(triton.cdiv(K, num_splits), tile.block_n) * tile.block_n
    num_splits = triton.cdiv(K, k_per_split)
    prec = "ieee" if compute == tl.float32 else "tf32"
    common = dict(
        PAGE=page, BLOCK_H=tile.block_h, BLOCK_N=tile.block_n, D_V=d_v, D_ROPE=d_rope,
        HAS_TOPK_LEN=topk_length is not None, KV_FP8=fp8, FP8_BITMATH=bool(fp8_bitmath),
        ROPE_BF16=q.dtype != torch.float16, COMPUTE=compute, PREC=prec,
        num_warps=tile.num_warps, num_stages=tile.num_stages,
    )
    qk_scale = float(sm_scale) * LOG2E
    tl_arg = topk_length if topk_length is not None else indices  # unused pointer when absent
    grid = (T * num_hb, num_splits)
    if num_splits == 1:
        _sparse_mla_fwd_kernel[grid](
            q, kv, indices, tl_arg, out, lse,
            q.stride(0), q.stride(1), stride_kvb, stride_kvr, indices.stride(0),
            out.stride(0), 0, out.stride(1), lse.stride(0), 0,
            H, K, n_rows, num_hb, k_per_split, qk_scale, PARTIAL=False, **common,
        )
        return
    part_o = torch.empty(T, num_splits, H, d_v, dtype=torch.float32, device=q.device)
    part_l = torch.empty(T, num_splits, H, dtype=torch.float32, device=q.device)
    _sparse_mla_fwd_kernel[grid](
        q, kv, indices, tl_arg, part_o, part_l,
        q.stride(0), q.stride(1), stride_kvb, stride_kvr, indices.stride(0),
        part_o.stride(0), part_o.stride(1), part_o.stride(2), part_l.stride(0), part_l.stride(1),
        H, K, n_rows, num_hb, k_per_split, qk_scale, PARTIAL=True, **common,
    )
    _merge_splits_kernel[(T, H)](
        part_o, part_l, out, lse,
        part_o.stride(0), part_o.stride(1), part_o.stride(2),
        part_l.stride(0), part_l.stride(1),
        out.stride(0), out.stride(1), lse.stride(0),
        num_splits, S_POW2=max(2, triton.next_power_of_2(num_splits)), D_V=d_v, D_CHUNK=min(128, d_v),
        num_warps=4 if not interpreting() else 1,
    )


__all__ = ["sparse_mla_fwd", "interpreting"]
