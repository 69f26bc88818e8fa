"""Queries: built from stable facets, within GitHub's limits, and nothing private in them."""

from __future__ import annotations

import pytest

from triage.model import Diagnosis, Evidence
from triage.upstream.facets import Facets, diagnosis_facets, error_phrase
from triage.upstream.query import MAX_OPERATORS, build_queries, count_operators, valid
from triage.upstream.redact import is_clean
from upstream_cases import sm120_diagnosis, sm120_env

IDS = ["alice", "gpu-node-17"]


def _check(queries):
    assert queries
    for q in queries:
        assert len(q.q) <= 256, q
        assert count_operators(q.q) <= MAX_OPERATORS, q
        assert ("is:issue" in q.q) != ("is:pull-request" in q.q)
        assert "repo:vllm-project/vllm" in q.q
        assert is_clean(q.q, identities=IDS), q


def test_sm120_queries():
    f = diagnosis_facets(sm120_diagnosis(), sm120_env())
    f.related_backends = {"TRITON_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"}
    qs = build_queries(f, identities=IDS)
    _check(qs)
    assert qs[0].q == 'repo:vllm-project/vllm is:issue "No valid attention backend found" (SM120 OR "RTX PRO 6000")'
    assert "DeepseekV32ForCausalLM" in qs[1].q
    assert qs[2].kind == "pr" and '"sparse MLA"' in qs[2].q and "TRITON_MLA_SPARSE" in qs[2].q
    # the selector's full dump of backends is not pasted into the search
    assert "FLASH_ATTN_MLA" not in qs[0].q


@pytest.mark.parametrize(
    "line,phrase",
    [
        ("(Worker_TP0 pid=215) ERROR 01-20 13:03:50 [v1/executor/multiproc_executor.py:749] ValueError: No valid attention "
         "backend found for cuda with AttentionSelectorConfig(head_size=576)", "No valid attention backend found"),
        ("vllm-1  | RuntimeError: CUDA error: no kernel image is available for execution on the device",
         "no kernel image is available for execution"),
        ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "CUDA out of memory"),
        ("ImportError: /home/alice/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c10", "undefined symbol"),
        ("ValueError: Selected backend AttentionBackendEnum.FLASHINFER_MLA is not valid for this configuration. Reason: "
         "['sparse not supported']", "is not valid for this configuration"),
    ],
)
def test_error_phrase(line, phrase):
    assert error_phrase(line) == phrase


def test_long_phrase_and_many_terms_are_trimmed_to_fit():
    f = Facets(subsystem="attention backend", phrase=" ".join(["word"] * 120), backends={"TRITON_MLA"},
               gpu_family=("12", "SM12x"), architecture="X" * 200, repos=["vllm-project/vllm", "flashinfer-ai/flashinfer"])
    _check(build_queries(f, identities=IDS))


def test_related_repo_when_the_failure_is_in_flashinfer():
    d = Diagnosis("kernel_library", "kernel_library.flashinfer_version", "FlashInfer cubin version mismatch", 0.9,
                  [Evidence(3, "RuntimeError: flashinfer-cubin version (0.6.13) does not match flashinfer version (0.6.14)")])
    qs = build_queries(diagnosis_facets(d, {"compute_capability": "9.0"}), identities=IDS)
    _check(qs)
    assert "repo:flashinfer-ai/flashinfer" in qs[0].q


def test_private_words_in_the_log_never_reach_a_query():
    line = ("ERROR 02-14 10:12:44 [core.py:700] OSError: alice cannot read gpu-node-17 model at "
            "/home/alice/models/acme weights token hf_abcdefghijklmnopqrstuvwxyz1234")
    d = Diagnosis("model_loading", "model_loading.oserror", "Cannot read model", 0.8, [Evidence(1, line)])
    qs = build_queries(diagnosis_facets(d, {}), identities=IDS)
    for q in qs:
        assert "alice" not in q.q and "gpu-node-17" not in q.q and "hf_" not in q.q and "/home" not in q.q
        assert valid(q.q)


def test_operator_counting_ignores_quoted_words():
    assert count_operators('"this OR that" (a OR b) NOT c') == 2
