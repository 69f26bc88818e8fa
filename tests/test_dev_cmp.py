"""cmp's dev set (tests/logs/dev-cmp/): the offline Python API, `vllm bench` and vLLM's torch.compile cache,
through the CLI, and the mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-cmp")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- SamplingParams._verify_args (ValueError, later VLLMValidationError with the same words) ----------------

@pytest.mark.parametrize("text", [
    "ValueError: max_tokens must be at least 1, got 0.\n",
    "vllm.exceptions.VLLMValidationError: max_tokens must be at least 1, got -239.\n",
    "[rank12]: ValueError: max_tokens must be at least 1, got -160.\n",
])
def test_max_tokens_below_one(text):
    d = first(text)
    assert (d.signature, d.category) == ("sampling.max_tokens_below_one", "engine_config")


@pytest.mark.parametrize("text,param", [
    ("ValueError: temperature must be non-negative, got -0.5.\n", "temperature"),
    ("ValueError: top_p must be in (0, 1], got 0.0.\n", "top_p"),
    ("ValueError: top_k must be -1 (disable), or at least 1, got 0.\n", "top_k"),
    ("ValueError: top_k must be 0 (disable), or at least 1, got -2.\n", "top_k"),
    ("ValueError: min_p must be in [0, 1], got 1.5.\n", "min_p"),
    ("ValueError: n must be at least 1, got 0.\n", "n"),
    ("ValueError: presence_penalty must be in [-2, 2], got 3.0.\n", "presence_penalty"),
    ("ValueError: repetition_penalty must be greater than zero, got 0.0.\n", "repetition_penalty"),
    ("ValueError: min_tokens must be less than or equal to max_tokens=16, got 32.\n", "min_tokens"),
])
def test_sampling_params_refusals(text, param):
    d = first(text)
    assert (d.signature, d.category, d.facts.get("param")) == ("sampling.params_invalid", "engine_config", param)


# ---- a caller written for another vLLM release ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "  File \"/site-packages/vllm/entrypoints/llm.py\", line 12\n"
    "TypeError: LLM.generate() got an unexpected keyword argument 'prompt_token_ids'\n",
    "    outputs = llm.embed(prompt_token_ids=ids, pooling_params=p)  # vllm 0.10.2\n"
    "TypeError: LLM.embed() got an unexpected keyword argument 'prompt_token_ids'\n",
    "    sampling_params = SamplingParams(**kwargs)\n"
    "TypeError: SamplingParams.__init__() got an unexpected keyword argument 'use_beam_search'\n",
    "TypeError: vllm.sampling_params.SamplingParams() argument after ** must be a mapping, not tuple\n",
])
def test_caller_written_for_another_vllm(text):
    d = first(text)
    assert (d.signature, d.category) == ("api.caller_vllm_release_mismatch", "install_mismatch")


def test_another_librarys_llm_generate_is_not_vllms():
    d = top("---> 10         return self.llm.generate(query, top_k=1)\n"
            "TypeError: LLM.generate() got an unexpected keyword argument 'max_new_token'\n")
    assert d is None or d.signature != "api.caller_vllm_release_mismatch"


# ---- vllm bench -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,error", [
    ("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. "
     "Error: Not Found\n", "Not Found"),
    ("ValueError: Initial test run failed - Please make sure benchmark arguments are correctly specified. "
     "Error: Bad Request\n", "Bad Request"),
])
def test_bench_initial_test_failed(text, error):
    d = first(text)
    assert (d.signature, d.category, d.facts.get("error")) == ("bench.initial_test_failed", "engine_config", error)


@pytest.mark.parametrize("text", [
    "ValueError: --random-input-len is too small: with tokenizer special tokens 1 and input range ratio 0.0, the "
    "minimum total input tokens (prefix + sampled) is 0. Increase --random-input-len and/or --random-prefix-len, "
    "or decrease --random-range-ratio.\n",
    "ValueError: --random-input-len is too small: with tokenizer special tokens 2 and input range ratio 0.5, the "
    "minimum possible total input tokens is 0.\n",
])
def test_bench_random_input_len_too_small(text):
    d = first(text)
    assert (d.signature, d.category) == ("bench.random_input_len_too_small", "engine_config")


# ---- vLLM's torch.compile cache --------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "AssertionError: failed to get the hash of the compiled graph\n",
    "RuntimeError: vLLM failed to compile the model. The most likely reason for this is that a previous "
    "compilation failed, leading to a corrupted compilation artifact. We recommend trying to remove "
    "~/.cache/vllm/torch_compile_cache and try again to see the real issue.\n",
    "  File \"/torch/_inductor/standalone_compile.py\", line 122, in CacheCompiledArtifact._compiled_fn\n"
    "AssertionError: Expected tensors only, but got: <class 'int'>\n",
])
def test_compile_cache_artifact(text):
    d = first(text)
    assert (d.signature, d.category) == ("compile.cache_artifact_corrupted", "triton_compile")


def test_using_the_compile_cache_is_no_failure():
    d = top("INFO 05-28 18:58:20 [backends.py:459] Using cache directory: /root/.cache/vllm/torch_compile_cache/"
            "0a1b2c3d4e/rank_0_0 for vLLM's torch.compile\n"
            "INFO 05-28 18:58:22 [backends.py:132] Directly load the compiled graph(s) for shape None from the "
            "cache, took 0.176 s\n")
    assert d is None or d.confidence <= 0.5


# ---- a report ruling an OOM out is no statement of one ------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Not OOM. GPU 0 was at 1.5 / 97 GiB; no `CUDA out of memory` in worker logs.\n",
    "There was no CUDA out of memory error in the worker logs.\n",
])
def test_oom_ruled_out_is_not_stated(text):
    d = top(text)
    assert d is None or d.signature != "oom.stated_in_report"


def test_oom_stated_still_read():
    d = first("CUDA out of memory when loading Qwen3-32B on one A100\n")
    assert d.signature == "oom.stated_in_report"


# ---- a traceback cut where vLLM starts a process with spawn ---------------------------------------------------

SPAWN_CUT = ("  File \"/venv/lib/python3.12/site-packages/vllm/v1/engine/utils.py\", line 150, in __init__\n"
             "    proc.start()\n"
             "  File \"/usr/lib/python3.12/multiprocessing/process.py\", line 121, in start\n"
             "    self._popen = self._Popen(self)\n"
             "  File \"/usr/lib/python3.12/multiprocessing/context.py\", line 289, in _Popen\n"
             "    return Popen(process_obj)\n"
             "  File \"/usr/lib/python3.12/multiprocessing/{popen}\", line 32, in __init__\n"
             "    super().__init__(process_obj)\n")


@pytest.mark.parametrize("popen", ["popen_spawn_posix.py", "popen_spawn_win32.py"])
def test_traceback_cut_in_vllms_spawn_start(popen):
    d = first("Traceback (most recent call last):\n" + SPAWN_CUT.format(popen=popen))
    assert (d.signature, d.category) == ("distributed.spawn_start_cut", "distributed")


def test_spawn_start_outside_vllm_is_not_named():
    text = ("Traceback (most recent call last):\n"
            "  File \"/app/train.py\", line 40, in main\n"
            "    p.start()\n"
            "  File \"/usr/lib/python3.12/multiprocessing/popen_spawn_posix.py\", line 32, in __init__\n"
            "    super().__init__(process_obj)\n")
    d = top(text)
    assert d is None or d.signature != "distributed.spawn_start_cut"


def test_spawn_start_with_its_message_is_the_main_guard_rule():
    d = first("Traceback (most recent call last):\n" + SPAWN_CUT.format(popen="popen_spawn_posix.py") +
              "RuntimeError: \n        An attempt has been made to start a new process before the\n"
              "        current process has finished its bootstrapping phase.\n")
    assert d.signature == "distributed.spawn_main_guard"


# ---- code reaching into engine internals another release moved ----------------------------------------------

@pytest.mark.parametrize("text,attr", [
    ("AttributeError: 'LLMEngine' object has no attribute 'driver_worker'\n", "driver_worker"),
    ("AttributeError: 'LLMEngine' object has no attribute 'model_executor'\n", "model_executor"),
    ("AttributeError: 'LLMEngine' object has no attribute 'collective_rpc'\n", "collective_rpc"),
])
def test_engine_internals_moved(text, attr):
    d = first(text)
    assert (d.signature, d.category, d.facts.get("attr")) == ("api.engine_internals_moved", "install_mismatch", attr)
