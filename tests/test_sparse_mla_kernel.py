"""sparse_mla_fwd against the float32 reference of ../shared/spec/sparse-mla-op.md.

Without a GPU the kernel runs through Triton's interpreter: TRITON_INTERPRET=1 must be set before
triton is first imported (it is read when @triton.jit decorates). With CUDA present and
TRITON_INTERPRET unset, the same tests run natively on the GPU.
"""

from __future__ import annotations

import math
import os
import sys

import pytest
import torch

if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
    if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") != "1":
        raise RuntimeError(
            "triton was imported before TRITON_INTERPRET=1 was set; run this module alone or set "
            "TRITON_INTERPRET=1 in the environment"
        )
    os.environ["TRITON_INTERPRET"] = "1"
    DEVICE = "cpu"
else:
    DEVICE = "cuda"

from triage_sparse_mla import sparse_mla_fwd  # noqa: E402
from triage_sparse_mla.indices import req_local_to_global  # noqa: E402
from triage_sparse_mla.reference import (  # noqa: E402
    dequantize_fp8_ds_mla,
    quantize_fp8_ds_mla,
    sparse_mla_ref,
)
from triage_sparse_mla.tiles import INTERPRETER_TILE, SMALL_SMEM, pick_splits, pick_tile  # noqa: E402

# Spec tolerances (absolute, outputs of unit scale); lse within 1e-3.
ATOL = {torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}
GLM5_SCALE = 0.0625  # (192 + 64) ** -0.5


def make(T, H, N, K, dtype, D=576, seed=0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(T, H, D, generator=g).to(dtype)
    kv = (0.5 * torch.randn(N, D, generator=g)).to(dtype)
    idx = torch.randint(0, N, (T, K), generator=g, dtype=torch.int32)
    return q.to(DEVICE), kv.to(DEVICE), idx.to(DEVICE)


def check(q, kv, idx, scale, d_v=512, topk_length=None, kv_format="auto", **kw):
    out, lse = sparse_mla_fwd(q, kv, idx, scale, d_v=d_v, topk_length=topk_length, kv_format=kv_format, **kw)
    ref_out, ref_lse = sparse_mla_ref(q, kv, idx, scale, d_v=d_v, topk_length=topk_length,
                                      kv_format=kv_format, out_dtype=torch.float32)
    assert out.dtype == q.dtype and out.shape == ref_out.shape
    assert lse.dtype == torch.float32 and lse.shape == ref_lse.shape
    # Absolute on unit-scale outputs, relative above (a large fp8 scale makes outputs ~100).
    err = ((out.float() - ref_out).abs() / ref_out.abs().clamp(min=1.0)).max().item()
    assert err <= ATOL[q.dtype], f"out error {err} > {ATOL[q.dtype]}"
    empty = torch.isinf(ref_lse)
    assert torch.equal(torch.isinf(lse), empty), "lse -inf pattern differs"
    assert (lse[empty] < 0).all()
    if (~empty).any():
        assert (lse[~empty] - ref_lse[~empty]).abs().max().item() <= 1e-3
    assert (out[empty.nonzero(as_tuple=True)] == 0).all(), "rows with no valid index must give 0"
    return out, lse


def messy_indices(idx, N):
    """Padding, out-of-range, repeated and scattered invalid entries; row 1 entirely invalid."""
    idx = idx.clone()
    T, K = idx.shape
    idx[0, K - 7:] = -1  # trailing padding
    idx[0, 3] = idx[0, 4]  # repeated
    idx[0, 10] = idx[0, 4]
    if T > 1:
        idx[1, :] = -1  # no valid entry at all
    if T > 2:
        idx[2, ::5] = N  # out of range (== N)
        idx[2, 1] = N + 1000
        idx[2, 2] = -5  # any negative is invalid
    return idx


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("splits", [1, 3])
def test_dtypes_padding_invalid_repeated(dtype, splits):
    T, H, N, K = 4, 20, 300, 80  # H 20: two head blocks, the second partly masked; K 80: partial tile
    q, kv, idx = make(T, H, N, K, dtype)
    out, lse = check(q, kv, messy_indices(idx, N), GLM5_SCALE, num_splits=splits)
    assert torch.isinf(lse[1]).all() and (out[1] == 0).all()


def test_head_512_nope():
    q, kv, idx = make(3, 16, 200, 64, torch.float16, D=512)
    check(q, kv, messy_indices(idx, 200), 512 ** -0.5, d_v=512)


def test_single_row_kv_and_small_topk():
    q, kv, idx = make(2, 8, 1, 5, torch.float32)  # K below one tile, N = 1
    idx[1, 2:] = -1
    check(q, kv, idx, 0.1)


def test_topk_length_and_entirely_invalid_splits():
    T, H, N, K = 5, 16, 400, 128
    q, kv, idx = make(T, H, N, K, torch.float16)
    # 0 entries, fewer than one tile, one tile, mid, more than K (clamped to K)
    topk_length = torch.tensor([0, 7, 32, 70, 500], dtype=torch.int32, device=DEVICE)
    # With 4 splits of 32, token 1..3 leave whole splits with nothing to do (lse2 = -inf partials).
    out, lse = check(q, kv, idx, GLM5_SCALE, topk_length=topk_length, num_splits=4)
    assert torch.isinf(lse[0]).all() and (out[0] == 0).all()


def test_split_whose_indices_are_all_invalid():
    T, H, N, K = 2, 16, 100, 128
    q, kv, idx = make(T, H, N, K, torch.float32)
    idx[:, 32:] = -1  # splits 2..4 of 4 hold only invalid indices
    idx[1, :32] = -1
    idx[1, 100] = 3  # token 1: a single valid index, in the third split
    check(q, kv, idx, 0.2, num_splits=4)


def test_splits_match_single_pass():
    q, kv, idx = make(2, 16, 256, 256, torch.float32, seed=3)
    a = sparse_mla_fwd(q, kv, idx, 0.07, num_splits=1)
    b = sparse_mla_fwd(q, kv, idx, 0.07, num_splits=8)
    assert (a[0] - b[0]).abs().max() < 1e-5 and (a[1] - b[1]).abs().max() < 1e-5


def test_heuristic_splits_used_for_small_grid():
    # Interpreter pretends 8 SMs: 1 token x 1 head block -> the heuristic splits.
    assert pick_splits(1, 1, 256, INTERPRETER_TILE.block_n, 8) > 1
    q, kv, idx = make(1, 16, 300, 256, torch.bfloat16, seed=4)
    check(q, kv, idx, GLM5_SCALE)


def test_paged_cache_with_block_gap_and_index_conversion():
    """vLLM layout: [blocks, 64, 576] with other data between blocks; request-local top-k."""
    g = torch.Generator().manual_seed(7)
    B, nb, D = 64, 6, 576
    big = (0.5 * torch.randn(nb, B + 16, D, generator=g)).to(torch.bfloat16).to(DEVICE)
    cache = big[:, :B, :]  # block stride (80 rows) > block size (64 rows)
    block_table = torch.tensor([[4, 1, -1], [0, 5, 2]], dtype=torch.int32, device=DEVICE)
    req_id = torch.tensor([0, 0, 1, 1, 1], dtype=torch.int32, device=DEVICE)
    T, K, H = 5, 48, 16
    local = torch.randint(0, 150, (T, K), generator=g, dtype=torch.int32).to(DEVICE)
    local[0, :5] = -1
    local[1, 0] = 190  # beyond request 0's table -> -1
    local[1, 1] = 130  # request 0's third block is -1 in the table -> -1
    slots = req_local_to_global(req_id, block_table, local, block_size=B)
    assert slots[1, 0] == -1 and slots[1, 1] == -1
    q = torch.randn(T, H, D, generator=g).to(torch.bfloat16).to(DEVICE)
    check(q, cache, slots, GLM5_SCALE, num_splits=2)
    # The same answer as gathering rows by hand from a flat copy.
    flat = cache.reshape(nb * B, D)
    out_flat, _ = sparse_mla_fwd(q, flat, slots, GLM5_SCALE)
    out_paged, _ = sparse_mla_fwd(q, cache, slots, GLM5_SCALE)
    assert torch.equal(out_flat, out_paged)


@pytest.mark.parametrize("pow2", [False, True])
@pytest.mark.parametrize("bitmath", [False, True])
def test_fp8_ds_mla(pow2, bitmath):
    T, H, N, K = 3, 16, 200, 64
    g = torch.Generator().manual_seed(11)
    rows = torch.randn(N, 576, generator=g).to(torch.bfloat16)
    rows[5, :128] *= 40  # a tile with a large scale
    kv8 = quantize_fp8_ds_mla(rows, pow2_scales=pow2).to(DEVICE)
    assert kv8.shape == (N, 656) and kv8.dtype == torch.uint8
    q = torch.randn(T, H, 576, generator=g).to(torch.bfloat16).to(DEVICE)
    idx = messy_indices(torch.randint(0, N, (T, K), generator=g, dtype=torch.int32), N).to(DEVICE)
    idx[0, 0] = 5
    # Output scale: dequantised rows are ~unit normal; compare to the reference on the same bytes.
    check(q, kv8, idx, GLM5_SCALE, kv_format="fp8_ds_mla", fp8_bitmath=bitmath)


def test_fp8_ds_mla_fp16_rope_and_paged():
    g = torch.Generator().manual_seed(12)
    nb, B = 4, 64
    rows = torch.randn(nb, B, 576, generator=g).to(torch.float16)
    kv8 = quantize_fp8_ds_mla(rows).to(DEVICE)  # rope stored as fp16 for an fp16 model
    q = torch.randn(3, 16, 576, generator=g).to(torch.float16).to(DEVICE)
    idx = torch.randint(0, nb * B, (3, 96), generator=g, dtype=torch.int32).to(DEVICE)
    check(q, kv8, idx, GLM5_SCALE, kv_format="fp8_ds_mla", num_splits=2)


def test_fp8_bitmath_decode_is_exact():
    """The SM80 bit-math e4m3 decode equals the hardware-style bitcast for every non-NaN code."""
    codes = torch.tensor([c for c in range(256) if c not in (0x7F, 0xFF)], dtype=torch.uint8)
    kv8 = torch.zeros(2, 656, dtype=torch.uint8)
    latent = torch.zeros(2, 512, dtype=torch.uint8)
    latent[0, : codes.numel()] = codes
    latent[1, : codes.numel()] = codes.flip(0)
    kv8[:, :512] = latent
    kv8[:, 512:528] = torch.ones(2, 4, dtype=torch.float32).view(torch.uint8)
    deq = dequantize_fp8_ds_mla(kv8)
    assert torch.equal(deq[0, : codes.numel()], codes.view(torch.float8_e4m3fn).float())
    # q = unit vector on latent dim d: out = softmax over 2 rows of their dim-d values... use one row.
    q = torch.zeros(1, 16, 576, dtype=torch.bfloat16)
    idx = torch.tensor([[0]], dtype=torch.int32)
    a, _ = sparse_mla_fwd(q.to(DEVICE), kv8.to(DEVICE), idx.to(DEVICE), 1.0, kv_format="fp8_ds_mla", fp8_bitmath=True)
    b, _ = sparse_mla_fwd(q.to(DEVICE), kv8.to(DEVICE), idx.to(DEVICE), 1.0, kv_format="fp8_ds_mla", fp8_bitmath=False)
    # One valid row: out = that row's value, so every code's decoded value appears as is.
    assert torch.equal(a.cpu(), b.cpu())
    assert torch.equal(a[0, 0].float().cpu(), deq[0, :512].to(torch.bfloat16).float())


def test_reference_against_naive_loops():
    q, kv, idx = make(3, 4, 40, 12, torch.float32, seed=5)
    idx = messy_indices(idx, 40)
    tl_ = torch.tensor([12, 12, 9], dtype=torch.int32)
    out, lse = sparse_mla_ref(q.cpu(), kv.cpu(), idx.cpu(), 0.3, d_v=512, topk_length=tl_)
    for t in range(3):
        for h in range(4):
            js = [int(j) for p, j in enumerate(idx[t].tolist()) if p < tl_[t] and 0 <= j < 40]
            if not js:
                assert math.isinf(lse[t, h]) and lse[t, h] < 0 and not out[t, h].any()
                continue
            s = [0.3 * float(q[t, h].double().cpu() @ kv[j].double().cpu()) for j in js]
            m = max(s)
            z = sum(math.exp(x - m) for x in s)
            assert abs(lse[t, h].item() - (m + math.log(z))) < 1e-4
            o = sum(math.exp(x - m) / z * kv[j, :512].double().cpu() for x, j in zip(s, js))
            assert (out[t, h].double() - o).abs().max() < 1e-4


def test_empty_batch_and_bad_input():
    q, kv, idx = make(0, 16, 10, 8, torch.float16)
    out, lse = sparse_mla_fwd(q, kv, idx, 0.1)
    assert out.shape == (0, 16, 512) and lse.shape == (0, 16)
    q, kv, idx = make(1, 16, 10, 8, torch.float16)
    with pytest.raises(ValueError, match="dtype"):
        sparse_mla_fwd(q, kv.float(), idx, 0.1)
    with pytest.raises(ValueError, match="656"):
        sparse_mla_fwd(q, torch.zeros(10, 600, dtype=torch.uint8, device=DEVICE), idx, 0.1, kv_format="fp8_ds_mla")
    with pytest.raises(ValueError, match="indices"):
        sparse_mla_fwd(q, kv, idx[:, None, :].expand(1, 2, 8).reshape(2, 8), 0.1)


def test_tile_table():
    assert pick_tile((12, 0)) == SMALL_SMEM and pick_tile((12, 1)) == SMALL_SMEM
    assert pick_tile((12, 0), fp8=True) == SMALL_SMEM
    assert pick_tile((8, 9)) == SMALL_SMEM
    assert pick_tile((9, 0)).block_n == 64 and pick_tile((10, 3)).block_n == 64
    assert pick_tile((7, 5)) == SMALL_SMEM  # unknown: the tile that fits everywhere
    assert pick_tile(None) == INTERPRETER_TILE
    # A full grid never splits; a single decode token splits, power of two, bounded by the work.
    assert pick_splits(188, 1, 2048, 32, 188) == 1
    assert pick_splits(64, 1, 2048, 32, 188) == 2
    assert pick_splits(1, 1, 2048, 32, 188) == 16
    assert pick_splits(1, 1, 128, 32, 188) == 1
    assert pick_splits(2, 8, 2048, 32, 188) == 8


@pytest.mark.slow
def test_topk_2048():
    T, H, N, K = 2, 16, 5000, 2048
    q, kv, idx = make(T, H, N, K, torch.bfloat16, seed=9)
    idx[1, 1500:] = -1
    check(q, kv, idx, GLM5_SCALE)
