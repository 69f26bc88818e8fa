"""dwn2's dev set (tests/logs/dev-dwn2/): real failures pasted in the trackers of projects that run vLLM underneath
(ms-swift, axolotl, OpenRLHF, lm-eval, TRL, prime-rl, ...), through the CLI, and the mechanisms that name them,
each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.logread.scan import scan_text

DEV, EXPECTED = load("dev-dwn2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "model_loading--lmm-r1-qwen25vl-failed-inspected-stale-ckpt.log":
        "the paste is only the inspection failure and compatible versions (vLLM 0.7.3, transformers 4.49); that the "
        "local checkpoint's preprocessor config is stale came from re-downloading it, nothing in the log says so",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- the synchronous engine has no encode()/generate() in any release ------------------------------------------

@pytest.mark.parametrize("attr", ["encode", "generate"])
def test_async_method_on_the_sync_engine_is_the_engine_choice(attr):
    d = first(f"AttributeError: 'LLMEngine' object has no attribute '{attr}'\n")
    assert (d.signature, d.category) == ("api.sync_engine_async_method", "engine_config")
    assert d.facts["attr"] == attr


def test_sync_engine_rule_outranks_the_framework_api_mismatch():
    d = first('  File "/opt/conda/lib/python3.11/site-packages/swift/llm/infer/infer_engine/vllm_engine.py", line 382,'
              ' in _add_request\n    return self.engine.encode(llm_inputs, pooling_params, request_id)\n'
              "AttributeError: 'LLMEngine' object has no attribute 'encode'\n")
    assert d.signature == "api.sync_engine_async_method"


def test_the_sync_engine_missing_internals_stay_a_release_mismatch():
    d = first("AttributeError: 'LLMEngine' object has no attribute 'model_executor'\n")
    assert d.signature != "api.sync_engine_async_method" and d.category == "install_mismatch"


# ---- 0.8.0-0.8.1's V1 refusing worker classes ----------------------------------------------------------------

@pytest.mark.parametrize("feature", ["--worker-extension-cls", "--worker-cls"])
def test_v1_refusing_a_worker_class_is_the_vllm_release(feature):
    d = first(f"NotImplementedError: VLLM_USE_V1=1 is not supported with {feature}.\n")
    assert (d.signature, d.category) == ("install.v1_worker_extension_unsupported", "install_mismatch")
    assert d.facts["feature"] == feature


def test_the_fallback_warning_in_a_log_is_no_failure():
    # a healthy V0 start: vLLM prints the whole sentence on one line
    d = top("WARNING 03-24 09:12:10 [arg_utils.py:1445] --worker-extension-cls is not supported by the V1 Engine. "
            "Falling back to V0. \n")
    assert d is None or d.signature != "install.v1_worker_extension_unsupported"


def test_other_v1_refusals_stay_engine_config():
    d = first("NotImplementedError: VLLM_USE_V1=1 is not supported with --kv-cache-dtype.\n")
    assert d.signature != "install.v1_worker_extension_unsupported" and d.category == "engine_config"


# ---- the V1 engine's missing internals retold in words -------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Move model onto vLLM causes error claiming model_executor does not exist\n",
    "vllm 0.8: llm_engine.driver_worker doesn't exist anymore with vllm\n",
])
def test_internals_told_in_words(text):
    d = first(text)
    assert (d.signature, d.category) == ("api.engine_internals_moved_told", "install_mismatch")


def test_the_attribute_error_itself_wins_over_the_retelling():
    d = first("model_executor does not exist\nAttributeError: 'LLMEngine' object has no attribute 'model_executor'\n")
    assert d.signature == "api.engine_internals_moved"


# ---- an undefined symbol quoted without its ImportError, in a long paste ------------------------------------

def test_undefined_symbol_title_is_selected_in_a_long_paste():
    text = "# `/vllm/_C.abi3.so: undefined symbol:` MoE\n" + "".join(f"some prose line {i}\n" for i in range(60))
    scan = scan_text(text)
    assert any("undefined symbol" in ln.text for ln in scan.lines)
    d = first(text)
    assert (d.signature, d.category) == ("install.undefined_symbol_cut", "install_mismatch")
