"""Plain PyTorch reference of the sparse MLA contract (../shared/spec/sparse-mla-op.md), in float32.

Used by the tests, by the GPU check and as the `--reference` fallback. Also holds the fp8_ds_mla
row codec (656 bytes per token: 512 e4m3 latent values, 4 float32 scales, 64 16-bit rope values).
"""

from __future__ import annotations

import math

import torch

FP8_ROW_BYTES = 656
FP8_LATENT = 512
FP8_GROUP = 128
FP8_SCALES_OFFSET = 512
FP8_ROPE_OFFSET = 528
FP8_ROPE_DIM = 64
E4M3_MAX = 448.0


def _as_uint8_rows(kv: torch.Tensor) -> torch.Tensor:
    if kv.dtype != torch.uint8:
        kv = kv.view(torch.uint8)
    return kv


def quantize_fp8_ds_mla(rows: torch.Tensor, pow2_scales: bool = False) -> torch.Tensor:
    """[..., 576] float rows -> [..., 656] uint8 fp8_ds_mla rows.

    Scales are amax/448 per 128 latent values, the way vLLM's cache writer stores them
    (`max(amax/448, FLT_MIN)`), or rounded up to a power of two as FlashMLA's test quantizer does.
    The rope part keeps the input dtype (bf16 or fp16: vLLM writes the model dtype there).
    """
    if rows.shape[-1] != FP8_LATENT + FP8_ROPE_DIM:
        raise ValueError(f"fp8_ds_mla rows need 576 values, got {rows.shape[-1]}")
    rope_dtype = rows.dtype if rows.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16
    lead = rows.shape[:-1]
    flat = rows.reshape(-1, rows.shape[-1])
    latent = flat[:, :FP8_LATENT].float().reshape(-1, FP8_LATENT // FP8_GROUP, FP8_GROUP)
    amax = latent.abs().amax(dim=-1)
    scale = torch.clamp(amax / E4M3_MAX, min=torch.finfo(torch.float32).tiny)
    if pow2_scales:
        scale = torch.exp2(torch.ceil(torch.log2(scale)))
    q8 = (latent / scale[..., None]).clamp(-E4M3_MAX, E4M3_MAX).to(torch.float8_e4m3fn)
    out = torch.empty(flat.shape[0], FP8_ROW_BYTES, dtype=torch.uint8)
    out[:, :FP8_LATENT] = q8.reshape(-1, FP8_LATENT).view(torch.uint8)
    out[:, FP8_SCALES_OFFSET:FP8_ROPE_OFFSET] = scale.contiguous().view(torch.uint8).reshape(-1, 16)
    rope = flat[:, FP8_LATENT:].to(rope_dtype).contiguous()
    out[:, FP8_ROPE_OFFSET:] = rope.view(torch.uint8).reshape(-1, 2 * FP8_ROPE_DIM)
    return out.reshape(*lead, FP8_ROW_BYTES).to(rows.device)


def dequantize_fp8_ds_mla(kv: torch.Tensor, rope_dtype: torch.dtype = torch.bfloat16) -> torch.Tensor:
    """[..., 656] fp8_ds_mla rows -> [..., 576] float32 rows."""
    kv = _as_uint8_rows(kv)
    if kv.shape[-1] != FP8_ROW_BYTES:
        raise ValueError(f"fp8_ds_mla rows are {FP8_ROW_BYTES} bytes, got {kv.shape[-1]}")
    lead = kv.shape[:-1]
    flat = kv.reshape(-1, FP8_ROW_BYTES).contiguous()
    latent = flat[:, :FP8_LATENT].contiguous().view(torch.float8_e4m3fn).float()
    scales = flat[:, FP8_SCALES_OFFSET:FP8_ROPE_OFFSET].contiguous().view(torch.float32)
    latent = (latent.reshape(-1, 4, FP8_GROUP) * scales[:, :, None]).reshape(-1, FP8_LATENT)
    rope = flat[:, FP8_ROPE_OFFSET:].contiguous().view(rope_dtype).float()
    return torch.cat([latent, rope], dim=-1).reshape(*lead, FP8_LATENT + FP8_ROPE_DIM)


def _flat_rows(kv: torch.Tensor) -> tuple[torch.Tensor, int | None]:
    """kv as [N, D'] plus the page size when it is paged ([blocks, block_size, (1,) D'])."""
    if kv.dim() == 2:
        return kv, None
    if kv.dim() == 4 and kv.shape[2] == 1:
        kv = kv[:, :, 0, :]
    if kv.dim() != 3:
        raise ValueError(f"kv must be [N, D], [blocks, block_size, D] or [blocks, block_size, 1, D], got {tuple(kv.shape)}")
    return kv, kv.shape[1]


def sparse_mla_ref(
    q: torch.Tensor,
    kv: torch.Tensor,
    indices: torch.Tensor,
    sm_scale: float,
    d_v: int = 512,
    topk_length: torch.Tensor | None = None,
    *,
    kv_format: str = "auto",
    chunk: int = 32,
    out_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The contract in float32. Returns (out [T, H, d_v] in out_dtype (default q's), lse [T, H] float32).

    Chunked over tokens so that real sizes (T 4096 x top-k 2048) fit in memory.
    """
    if indices.dim() == 3:
        indices = indices[:, 0, :]
    T, H, D = q.shape
    K = indices.shape[1]
    rows, page = _flat_rows(kv)
    if kv_format == "fp8_ds_mla":
        rope_dtype = q.dtype if q.dtype in (torch.float16, torch.bfloat16) else torch.bfloat16
        rows = dequantize_fp8_ds_mla(rows, rope_dtype)
    n_rows = rows.shape[0] * page if page else rows.shape[0]
    out = torch.zeros(T, H, d_v, dtype=torch.float32, device=q.device)
    lse = torch.full((T, H), -math.inf, dtype=torch.float32, device=q.device)
    pos = torch.arange(K, device=q.device)
    for t0 in range(0, T, chunk):
        t1 = min(T, t0 + chunk)
        idx = indices[t0:t1].long()
        valid = (idx >= 0) & (idx < n_rows)
        if topk_length is not None:
            valid &= pos[None, :] < topk_length[t0:t1, None].long()
        safe = torch.where(valid, idx, torch.zeros_like(idx))
        if page:
            g = rows[safe // page, safe % page].float()  # [t, K, D]
        else:
            g = rows[safe].float()
        s = torch.einsum("thd,tkd->thk", q[t0:t1].float(), g[..., :D]) * sm_scale
        s = s.masked_fill(~valid[:, None, :], -math.inf)
        l = torch.logsumexp(s, dim=-1)  # -inf for empty rows
        p = torch.exp(s - l[..., None])
        p = torch.nan_to_num(p, nan=0.0)  # empty rows: exp(-inf - -inf)
        out[t0:t1] = torch.einsum("thk,tkd->thd", p, g[..., :d_v])
        lse[t0:t1] = l
    return out.to(out_dtype or q.dtype), lse
