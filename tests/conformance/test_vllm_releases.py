"""The bundled sparse MLA backend inside every vLLM release it claims (support.PROVEN_VLLM), each
one the real wheel from PyPI: loader, registry, abstract methods, the selector and the MLA layer
building the impl for float16/bfloat16 x auto/fp8_ds_mla, the KV cache spec and the shape the
engine gives it, block sizes asked as the engine asks, the metadata builder from a real VllmConfig,
and one forward_mqa through vLLM's own metadata checked against float64 (Triton's interpreter).
"""

from __future__ import annotations

import pytest

from triage_sparse_mla.support import MAX_VLLM_EXCLUSIVE, MIN_VLLM, PROVEN_VLLM, SUPPORTED_VLLM, vllm_supported

COMBOS = [f"{d}/{k}" for d in ("float16", "bfloat16") for k in ("auto", "fp8_ds_mla")]
CHECKS = (["loader", "registry", "abstract", "config"]
          + [f"{what}:{c}" for c in COMBOS for what in ("selected", "kv_cache", "builder")]
          + ["block_size_selection", "plumbing"])


@pytest.mark.parametrize("version", PROVEN_VLLM)
@pytest.mark.parametrize("name", CHECKS)
def test_release(probe, version, name):
    res = probe(version)
    assert res["vllm"] == version
    got = res["checks"].get(name)
    assert got is not None, f"vLLM {version}: check {name} did not run (ran: {sorted(res['checks'])})"
    assert got["ok"], f"vLLM {version}: {name}: {got['detail']}\n{got.get('trace', '')}"


@pytest.mark.parametrize("version", PROVEN_VLLM)
def test_era_specifics(probe, version):
    """What differs by era is what the engine really did: the impl's base, the cache shape's
    source, the fp8_ds_mla row, and that only compiled modules were replaced."""
    res = probe(version)
    checks = res["checks"]
    line = tuple(int(x) for x in version.split(".")[:2])
    base = checks["abstract"]["detail"]["impl_base"]
    assert base == ("SparseMLAAttentionImpl" if line <= (0, 25) else "MLAAttentionImpl")
    fp8 = checks["kv_cache:bfloat16/fp8_ds_mla"]["detail"]
    assert fp8["cache"] == [3, 64, 656] and fp8["dtype"] == "torch.uint8"
    assert ("shape_bytes" in fp8) == (line >= (0, 29))  # from 0.29 the spec shapes the cache
    assert fp8["block_sizes"] == ["64"]
    assert all(".so" not in m and m.startswith("vllm.") for m in res["stubbed"])
    assert checks["plumbing"]["detail"]["max_abs_err"] <= 1e-4


def test_range_is_what_the_suite_proves():
    assert MIN_VLLM == tuple(int(x) for x in PROVEN_VLLM[0].split(".")[:2])
    newest = tuple(int(x) for x in PROVEN_VLLM[-1].split(".")[:2])
    assert MAX_VLLM_EXCLUSIVE == (newest[0], newest[1] + 1)
    for v in PROVEN_VLLM:
        assert vllm_supported(v)[0], v
    assert not vllm_supported("0.15.1")[0] and not vllm_supported(f"0.{newest[1] + 1}.0")[0]
    assert SUPPORTED_VLLM == f">=0.{MIN_VLLM[1]},<0.{newest[1] + 1}"
