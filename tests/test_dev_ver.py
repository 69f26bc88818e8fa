"""ver's dev set (tests/logs/dev-ver/): failures after moving vLLM (or a library it runs with) to another release,
through the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-ver")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- transformers 5.15's per-layer attributes read globally by an older vLLM --------------------------------

@pytest.mark.parametrize("text, attr", [
    ("transformers.integrations.heterogeneity.configuration_utils.AmbiguousGlobalPerLayerAttributeError: "
     "'head_dim' is a per-layer attribute and may vary across layers. Access it via the individual layer configs "
     "instead (e.g. config.per_layer_config[i].head_dim).\n", "head_dim"),
    ("AmbiguousGlobalPerLayerAttributeError: 'num_key_value_heads' is a per-layer attribute and may vary across "
     "layers.\n", "num_key_value_heads"),
    # the message alone, its class cut off by a paste
    ("'head_dim' is a per-layer attribute and may vary across layers. Access it via the individual layer configs\n",
     "head_dim"),
])
def test_per_layer_attribute_is_transformers_too_new(text, attr):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.transformers_per_layer_attribute", "model_support")
    assert d.facts.get("attr") == attr


# ---- the attention layer's newer forward keywords -----------------------------------------------------------

@pytest.mark.parametrize("text, kw", [
    ("TypeError: custom_gems_flash_attention_impl_forward() got an unexpected keyword argument "
     "'output_block_scale'\n", "output_block_scale"),
    ("TypeError: forward() got an unexpected keyword argument 'output_scale'\n", "output_scale"),
])
def test_forward_without_the_layers_keywords_is_the_backend(text, kw):
    d = first(text)
    assert (d.signature, d.category) == ("attention.impl_forward_kwarg_unknown", "attention_backend")
    assert d.facts["kw"] == kw


def test_other_unexpected_keywords_are_not_the_attention_layer():
    d = top("TypeError: forward() got an unexpected keyword argument 'output_attentions'\n")
    assert d is None or d.signature != "attention.impl_forward_kwarg_unknown"


# ---- objects the V1 engine cannot pickle -----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "AttributeError: Can't get local object 'patch_vllm_compute_dtype.<locals>.BitsAndBytesConfig'\n",
    "AttributeError: Can't pickle local object 'make_processor.<locals>.MyLogitsProcessor'\n",
    "RuntimeError: Can't get local object 'patch_vllm_compute_dtype.<locals>.BitsAndBytesConfig'\n",
])
def test_local_object_across_the_engine_process_is_the_patching_library(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.engine_pickle_local_object", "install_mismatch")
    assert "<locals>" in d.facts["obj"]


def test_a_module_level_pickling_error_is_not_claimed():
    d = top("_pickle.PicklingError: Can't pickle <class 'foo.Bar'>: it's not the same object as foo.Bar\n")
    assert d is None or d.signature != "install.engine_pickle_local_object"


# ---- the model-inspection subprocess killed by a signal ---------------------------------------------------

INSPECTED = ("pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
             "  Value error, Model architectures ['KimiK25ForConditionalGeneration'] failed to be inspected. "
             "Please check the logs for more details.\n")


@pytest.mark.parametrize("death, signal", [
    ("subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', 'vllm.model_executor.models.registry']' "
     "died with <Signals.SIGSEGV: 11>.\n", "SIGSEGV"),
    ("subprocess.CalledProcessError: Command '['/usr/bin/python3', '-m', 'vllm.model_executor.models.registry']' "
     "died with <Signals.SIGABRT: 6>.\n", "SIGABRT"),
    ("RuntimeError: Error raised in subprocess:\nFatal Python error: Segmentation fault\n", "Segmentation fault"),
])
def test_inspection_subprocess_killed_is_the_install(death, signal):
    d = first(death + INSPECTED)
    assert (d.signature, d.category) == ("install.inspection_subprocess_killed", "install_mismatch")
    assert d.facts["signal"] == signal
    assert d.facts["arch"] == "KimiK25ForConditionalGeneration"


def test_inspection_failing_on_an_import_error_is_not_a_native_crash():
    d = top("RuntimeError: Error raised in subprocess:\n"
            "ImportError: cannot import name 'LlamaFlashAttention2' from 'transformers.models.llama.modeling_llama'\n"
            + INSPECTED)
    assert d is None or d.signature != "install.inspection_subprocess_killed"


def test_a_segfault_without_an_inspection_is_not_claimed():
    d = top("Segmentation fault (core dumped)\n")
    assert d is None or d.signature != "install.inspection_subprocess_killed"
