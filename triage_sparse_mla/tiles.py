"""Static tile table and split heuristic (no @triton.autotune: it needs a GPU benchmarker and
breaks under the interpreter; a table also makes CPU and GPU run the same code path).

Pure Python so that it can be read and tested without torch.

Shared memory per block (opt-in maximum) decides the tiles: a bf16 KV tile of BLOCK_N x 576 is
BLOCK_N * 1152 bytes per pipeline stage, the q tile 16 x 576 another 18 KB, and Triton keeps the
P tile and layout-conversion scratch there too.
- SM120/SM121 (RTX PRO 6000, RTX 5090, GB10), SM86/SM89: ~99-100 KB. BLOCK_N 32, 1 stage
  (36.9 KB KV + 18.4 KB q + scratch). BLOCK_N 64 or 2 stages overflow (~109 KB+, as reported in
  vLLM PR #54929 for the same loop shape).
- SM80 (A100, 163 KB) and SM90/SM100 (227 KB): BLOCK_N 64 with one stage (73.7 KB KV), or 32 with
  two stages; the larger tile halves the loop trip count. Not yet measured on hardware: the
  OutOfResources fallback in kernel.py steps down this table if the compiler says it does not fit.
The accumulator 16 x 512 fp32 is 32 KB of registers = 64 per thread at 4 warps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tile:
    block_h: int
    block_n: int
    num_warps: int
    num_stages: int


SMALL_SMEM = Tile(block_h=16, block_n=32, num_warps=4, num_stages=1)
# Fallback chain tried in order after an OutOfResources error.
FALLBACKS = (SMALL_SMEM, Tile(16, 16, 4, 1))

# (major, minor) -> tile; lookups fall back from (major, minor) to (major, None) to the default.
TILE_TABLE: dict[tuple[int, int | None], Tile] = {
    (8, 0): Tile(16, 64, 4, 1),
    (8, 6): SMALL_SMEM,
    (8, 7): SMALL_SMEM,
    (8, 9): SMALL_SMEM,
    (9, 0): Tile(16, 64, 4, 2),
    (10, None): Tile(16, 64, 4, 2),
    (12, None): SMALL_SMEM,
}
# fp8_ds_mla tiles hold the raw bytes (656/row) and the dequantised tile: keep the small one on
# small-smem parts, and one stage everywhere until measured.
FP8_TILE_TABLE: dict[tuple[int, int | None], Tile] = {
    (8, 0): Tile(16, 64, 4, 1),
    (9, 0): Tile(16, 64, 4, 1),
    (10, None): Tile(16, 64, 4, 1),
}
# Triton's interpreter: tile sizes only change the trip count; 32 keeps per-iteration cost low.
INTERPRETER_TILE = Tile(16, 32, 1, 1)


def pick_tile(capability: tuple[int, int] | None, fp8: bool = False) -> Tile:
    """The tile for a compute capability; None means Triton's interpreter (CPU)."""
    if capability is None:
        return INTERPRETER_TILE
    major, minor = capability
    table = FP8_TILE_TABLE if fp8 else TILE_TABLE
    for key in ((major, minor), (major, None)):
        if key in table:
            return table[key]
    # Unknown or small-smem part: the tile that fits ~99 KB fits everywhere.
    return SMALL_SMEM


def pick_splits(num_tokens: int, head_blocks: int, topk: int, block_n: int, sm_count: int) -> int:
    """How many KV splits per (token, head block) program.

    Split only when the grid is too small to fill the GPU (fewer programs than SMs): partial results
    cost 2 * H * S * 513 * 4 bytes per token, ~45% of the bf16 KV bytes at S = 16, so a full grid
    never splits. Each split keeps at least 4 tiles (>= 128 index positions at BLOCK_N 32) so the
    reduction stays cheap relative to the work. Power of two, at most 32.
    """
    programs = max(1, num_tokens * head_blocks)
    if programs >= sm_count or topk <= block_n:
        return 1
    want = -(-sm_count // programs)
    max_by_work = max(1, topk // (4 * block_n))
    s = 1
    while s * 2 <= min(want, max_by_work, 32):
        s *= 2
    return s
