"""Request-local top-k positions (what vLLM's DSA indexer writes) -> global KV-cache slots.

The indexer fills `topk_indices[t, j]` with a token position inside token t's own request
(0 .. seq_len-1), or -1. The cache is paged: position p of request r lives in physical block
`block_table[r, p // block_size]`, at offset `p % block_size`. The kernel wants a slot id:

    slot = block_table[r, p // block_size] * block_stride_rows + p % block_size

(block_stride_rows = block_size unless the cache view leaves a gap between blocks). -1 stays -1;
a position whose block lies beyond the table, or whose table entry is negative, becomes -1.
Same semantics as vLLM's `triton_convert_req_index_to_global_index` (sparse_utils.py).

Plain torch: a handful of element-wise ops on [T, K] int32, capturable in CUDA graphs, and the
same code runs on the CPU for tests.
"""

from __future__ import annotations

import torch


def req_local_to_global(
    req_id_per_token: torch.Tensor,
    block_table: torch.Tensor,
    topk_indices: torch.Tensor,
    block_size: int = 64,
    block_stride_rows: int | None = None,
    *,
    compact: bool = False,
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """[T] request row per token, [R, max_blocks] table, [T, K] positions -> [T, K] int32 slots.

    compact=True also moves the valid slots to the front of each row (order kept) and returns
    their count per token, usable as the kernel's topk_length.
    """
    if topk_indices.dim() != 2:
        raise ValueError(f"topk_indices must be [T, K], got {tuple(topk_indices.shape)}")
    T = topk_indices.shape[0]
    stride_rows = block_size if block_stride_rows is None else block_stride_rows
    pos = topk_indices.long()
    req = req_id_per_token[:T].long()[:, None]
    blk = torch.div(pos, block_size, rounding_mode="floor")
    off = pos - blk * block_size
    max_blocks = block_table.shape[1]
    valid = (pos >= 0) & (blk < max_blocks)
    phys = block_table[req.expand_as(pos), blk.clamp(0, max_blocks - 1)].long()
    valid &= phys >= 0
    out = torch.where(valid, phys * stride_rows + off, torch.full_like(pos, -1)).to(torch.int32)
    if not compact:
        return out
    order = torch.argsort((~valid).to(torch.int8), dim=1, stable=True)
    return torch.gather(out, 1, order), valid.sum(dim=1).to(torch.int32)
