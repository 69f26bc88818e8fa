"""Attention backends, kernel libraries (FlashInfer, DeepGEMM, FlashMLA, AITER) and Triton/Inductor compilation
as users paste them in 2025-2026 threads (tests/logs/dev-kern/, through the CLI), and the mechanisms that name
them, one case per form."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-kern")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {
    "attn-rocm-mla-gluon-gfx942.log": "an AITER kernel's GPU-generation assertion is not known",
    "attn-flashinfer-mla-prefill-head-dims.log": "FlashInfer's tvm-ffi 'Check failed' head-dimension refusal",
    "attn-flashmla-b200-kv-shape-invalid.log": "a KV-cache reshape in the runner after a forced backend",
    "attn-dcp-requires-lse.log": "DCP's backend requirement is not known",
    "attn-flashmla-sparse-dsv4-tile-sched.log": "the sparse MLA backend's metadata assertion reads as a library",
    "kl-deepgemm-smxx-layout-assert.log": "DeepGEMM's 'Failed: Assertion error csrc/...' form (no parentheses)",
    "kl-flashinfer-sparse-mla-sm120-unsupported.log": "FlashInfer's sparse-MLA unsupported configuration",
    "kl-aiter-gfx1151-unsupported-title.log": "AITER's GPU-arch refusal",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])
