"""Attention backends and kernel libraries, second round: backend refusals on CPU, Turing, Blackwell and ROCm,
kernel libraries (FlashInfer, AITER, DeepGEMM, FlashMLA) failing at load, warm-up or run time, as users paste
them in 2024-2026 threads (tests/logs/dev-kern2/, through the CLI), and the mechanisms that name them."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-kern2")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {
    "aiter-fmha-v3-invalid-argument-gfx90a.log": "AITER's op refusal is unknown",
    "deepgemm-unknown-recipe-sm120-warmup.log": "DeepGEMM's recipe check is read as a quantization layout",
    "flashmla-c-unavailable-l20.log": "a missing FlashMLA extension is read as the backend",
    "cutlass-mla-q-pad-num-heads-typeerror.log": "a TypeError inside an attention impl's __init__ is unknown",
    "cpu-attn-head-dim-512-title.log": "the CPU attention kernel's refusal is read as a library check",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])
