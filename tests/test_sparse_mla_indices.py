"""Request-local top-k positions -> global cache slots (vLLM sparse_utils semantics)."""

from __future__ import annotations

import torch

from triage_sparse_mla.indices import req_local_to_global


def naive(req_id, table, local, B, stride_rows):
    out = torch.full_like(local, -1)
    for t in range(local.shape[0]):
        r = int(req_id[t])
        for j, p in enumerate(local[t].tolist()):
            if p < 0 or p // B >= table.shape[1]:
                continue
            blk = int(table[r, p // B])
            if blk < 0:
                continue
            out[t, j] = blk * stride_rows + p % B
    return out


def test_matches_naive_with_invalid_entries():
    g = torch.Generator().manual_seed(0)
    table = torch.tensor([[7, 2, 9, -1], [0, 3, 1, 4], [5, 6, 8, 10]], dtype=torch.int32)
    req_id = torch.tensor([0, 1, 1, 2, 2, 2], dtype=torch.int32)
    local = torch.randint(-3, 300, (6, 40), generator=g, dtype=torch.int32)
    for B, stride in ((64, 64), (64, 80), (16, 16)):
        got = req_local_to_global(req_id, table, local, block_size=B, block_stride_rows=stride)
        assert got.dtype == torch.int32
        assert torch.equal(got, naive(req_id, table, local, B, stride))


def test_known_values():
    table = torch.tensor([[3, 1]], dtype=torch.int32)
    req = torch.tensor([0], dtype=torch.int32)
    local = torch.tensor([[0, 63, 64, 127, 128, -1]], dtype=torch.int32)
    got = req_local_to_global(req, table, local, block_size=64)
    assert got.tolist() == [[192, 255, 64, 127, -1, -1]]


def test_compact_moves_valid_first_and_counts():
    table = torch.tensor([[0, 1]], dtype=torch.int32)
    req = torch.tensor([0, 0], dtype=torch.int32)
    local = torch.tensor([[-1, 5, -1, 70, 200], [-1, -1, -1, -1, -1]], dtype=torch.int32)
    slots, counts = req_local_to_global(req, table, local, block_size=64, compact=True)
    assert counts.tolist() == [2, 0]
    assert slots[0, :2].tolist() == [5, 70]
    assert (slots[0, 2:] == -1).all() and (slots[1] == -1).all()


def test_req_id_buffer_longer_than_tokens():
    # vLLM passes a persistent buffer sliced or not: only the first T entries count.
    table = torch.tensor([[2]], dtype=torch.int32)
    req = torch.zeros(100, dtype=torch.int32)
    local = torch.tensor([[1, 2]], dtype=torch.int32)
    assert req_local_to_global(req, table, local, block_size=64).tolist() == [[129, 130]]
