"""The distinctive words of an error message, and queries that carry them."""

from __future__ import annotations

import pytest

from triage.model import Diagnosis, Evidence
from triage.upstream.facets import diagnosis_facets
from triage.upstream.query import build_queries
from triage.upstream.terms import is_generic, read_message, search_term

IDS = ["alice", "gpu-node-17"]


@pytest.mark.parametrize(
    "line,phrase,key",
    [
        ("vllm: error: unrecognized arguments: --enable-reasoning --reasoning-parser deepseek_r1",
         "unrecognized arguments", ["--enable-reasoning"]),
        ("ImportError: /home/alice/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
         "_ZN3c104cuda9SetDeviceEi", "undefined symbol", ["_ZN3c104cuda9SetDeviceEi"]),
        ("AttributeError: 'EagleLlama4ForCausalLM' object has no attribute 'lm_head'",
         "object has no attribute", ["EagleLlama4ForCausalLM", "lm_head"]),
        ("ModuleNotFoundError: No module named 'vllm._C'", "No module named", ["vllm._C"]),
        ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
         "cannot open shared object file", ["libcudart.so.12"]),
        ("vllm serve: error: argument --tool-call-parser: invalid choice: 'openai2' (choose from 'hermes', 'llama3_json')",
         "invalid choice", ["--tool-call-parser", "openai2"]),
        ("ValueError: Selected backend AttentionBackendEnum.FLASHINFER_MLA is not valid for this configuration. "
         "Reason: ['sparse not supported']", "is not valid for this configuration", ["FLASHINFER_MLA"]),
        ("ImportError: /opt/conda/bin/../lib/libstdc++.so.6: version `GLIBCXX_3.4.32' not found (required by "
         "/opt/conda/lib/python3.11/site-packages/vllm/_C.abi3.so)", "not found", ["GLIBCXX_3.4.32"]),
    ],
)
def test_message_phrase_and_key_tokens(line, phrase, key):
    m = read_message(line)
    assert m.phrase == phrase
    assert m.key[: len(key)] == key


def test_pydantic_and_argparse_wrappers_are_not_part_of_the_phrase():
    m = read_message("  Value error, User-specified max_model_len (40960) is greater than the derived max_model_len "
                     "(max_position_embeddings=32768 or model_max_length=None in model's config.json).")
    assert not m.phrase.lower().startswith("value error")
    assert "Value error" not in m.text


def test_a_selector_dump_names_no_backend_as_the_culprit():
    line = ("ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, "
            "use_mla=True, use_sparse=True). Reasons: {FLASH_ATTN_MLA: [sparse not supported], FLASHMLA: [sparse "
            "not supported], TRITON_MLA: [sparse not supported], FLASHMLA_SPARSE: [compute capability not supported]}.")
    assert read_message(line).key == []


def test_units_paths_and_file_names_are_not_tokens():
    m = read_message("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                     "capacity of 23.5 GiB. Of the allocated memory 20 GiB is allocated by PyTorch. "
                     "/home/alice/models/acme/config.json")
    assert m.exc_type == "OutOfMemoryError"
    assert not {"GiB", "PyTorch", "config.json", "Tried"} & set(m.tokens)
    assert is_generic(m.phrase)


def test_search_terms_quote_what_github_would_misread():
    assert search_term("--enable-reasoning") == '"--enable-reasoning"'  # a bare leading - means NOT
    assert search_term("vllm._C") == '"vllm._C"'
    assert search_term("qwen3_moe") == "qwen3_moe"


def _queries(line, category="engine_config", env=None):
    d = Diagnosis(category, f"{category}.x", "A failure", 0.9, [Evidence(7, line)])
    return [q.q for q in build_queries(diagnosis_facets(d, env or {}), identities=IDS)]


def test_a_generic_phrase_is_never_sent_alone():
    generic = {'"undefined symbol"', '"No module named"', '"object has no attribute"', '"unrecognized arguments"',
               '"CUDA out of memory"'}
    for line, cat in [
        ("vllm: error: unrecognized arguments: --task embed", "engine_config"),
        ("ImportError: vllm/_C.abi3.so: undefined symbol: _ZN3c1013MessageLoggerC1EPKciib", "install_mismatch"),
        ("ModuleNotFoundError: No module named 'flash_attn'", "kernel_library"),
        ("AttributeError: 'Qwen3Config' object has no attribute 'rope_theta'", "model_support"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "gpu_oom"),
    ]:
        qs = _queries(line, cat)
        assert qs, line
        for q in qs:
            terms = q.replace("repo:vllm-project/vllm", "").replace("is:issue", "").replace("is:pull-request", "")
            assert terms.strip() not in generic, q


def test_the_gpu_narrows_only_failures_that_depend_on_it():
    env = {"compute_capability": "12.0"}
    flag = _queries("vllm: error: unrecognized arguments: --task embed", "engine_config", env)
    assert not any("SM120" in q for q in flag)
    backend = _queries("ValueError: Selected backend AttentionBackendEnum.FLASHINFER_MLA is not valid for this "
                       "configuration. Reason: ['sparse not supported']", "attention_backend", env)
    assert "SM120" in backend[0]


def test_every_query_fits_github_and_carries_nothing_private():
    qs = _queries("ModuleNotFoundError: No module named 'alice_private_pkg' at /home/alice/x on gpu-node-17",
                  "install_mismatch")
    for q in qs:
        assert "alice" not in q and "gpu-node-17" not in q and len(q) <= 256


def test_threads_from_releases_without_the_message_rank_lower():
    from triage.upstream.rank import rank

    d = Diagnosis("engine_config", "catalogue.vllm", "vLLM refused the configuration", 0.6,
                  [Evidence(3, "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2048) is larger")],
                  facts={"catalogue": {"package": "vllm", "first_release": "0.8.5", "last_release": "0.10.2"}})
    f = diagnosis_facets(d, {})
    base = {"state": "open", "is_pr": False, "title": "Chunked MM input disabled but max_tokens_per_mm_item is larger"}
    items = [{**base, "number": 1, "body": "vllm==0.6.3 crashes"}, {**base, "number": 2, "body": "vllm 0.9.1 crashes"}]
    ranked = rank(items, f)
    assert [h["number"] for h in ranked] == [2, 1]
    assert "0.8.5-0.10.2" in ranked[1]["why"]
