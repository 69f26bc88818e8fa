"""pgs's dev set (tests/logs/dev-pgs/): real failed vLLM launches posted outside the GitHub trackers (blog write-ups
of solved threads, forum posts, notes pages), through the CLI, and the mechanisms that name them, each on the forms
the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-pgs")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "engine_config--gpustack-gemma3-27b-tp3-32-heads.log":
        "the page retells vLLM's heads-vs-TP check in Chinese prose only (32 heads, 3 GPUs); no error text to read",
    "model_loading--unsloth-qwen2vl-merged-16bit-stale-quantization-config.log":
        "the page paraphrases the loader's unexpected-weight error in Chinese around a bitsandbytes library warning; "
        "the stale quantization_config is only in the explanation",
    "quantization--unsloth-mistral-nemo-bnb-4bit-keyerror-down-proj.log":
        "a plain weight name (layers.0.mlp.down_proj.weight): only the Chinese prose says the checkpoint is a 4-bit "
        "bitsandbytes one (as dev-gen's bnb-merged-keyerror-oneline.log)",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a quantization config that gives a layer no method (FusedMoE / linear __init__ and forward) -------------

@pytest.mark.parametrize("text", [
    # FusedMoE.__init__ (0.4+), the bare traceback
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/fused_moe/layer.py", line 499, '
    'in __init__\n    assert self.quant_method is not None\nAssertionError\n',
    # a linear layer's forward on a V1 worker (process-tagged lines)
    "(VllmWorker rank=0 pid=311) ERROR 06-02 10:01:12 [multiproc_executor.py:470]     assert self.quant_method is "
    "not None\n(VllmWorker rank=0 pid=311) ERROR 06-02 10:01:12 [multiproc_executor.py:470] AssertionError\n",
    # quoted on its own, as a report gives it
    "AssertionError: assert self.quant_method is not None\n",
])
def test_layer_without_a_quant_method_is_quantization(text):
    d = first(text)
    assert (d.signature, d.category) == ("quantization.layer_quant_method_missing", "quantization")


def test_the_assignment_of_a_quant_method_is_no_failure():
    d = top("    self.quant_method = quant_config.get_quant_method(self, prefix)\n")
    assert d is None or d.signature != "quantization.layer_quant_method_missing"


# ---- a config.json without architectures ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "WARNING 05-14 10:02:19 [registry.py:443] No model architectures are specified\n"
    "TypeError: 'NoneType' object is not iterable\n",
    # the later inspection failure that follows the warning on releases that filter the empty list
    "WARNING 11-02 08:15:40 registry.py:406] No model architectures are specified\n"
    "ValueError: Model architectures [] are not supported for now. Supported architectures: ['AquilaModel']\n",
])
def test_config_without_architectures_is_model_loading(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_loading.architectures_unspecified", "model_loading")


def test_an_unknown_named_architecture_stays_model_support():
    d = first("ValueError: Model architectures ['FooForCausalLM'] are not supported for now. "
              "Supported architectures: ['LlamaForCausalLM']\n")
    assert d.category == "model_support"


# ---- Triton's Python backend stub dying under vLLM ------------------------------------------------------------

@pytest.mark.parametrize("text", [
    'E0525 02:13:40.571217 1 model_lifecycle.cc:641] "failed to load \'vllm_model\' version 1: Internal: Stub '
    "process 'vllm_model_0_0' is not healthy.\"\n",
    # older Triton releases, without the instance name
    "E0312 09:00:01.000000 1 model_lifecycle.cc:626] failed to load 'vllm' version 1: Internal: Stub process is not "
    "healthy.\n",
])
def test_triton_stub_not_healthy_is_the_container(text):
    d = first(text)
    assert (d.signature, d.category) == ("environment.triton_python_stub_unhealthy", "environment")


def test_a_real_vllm_error_before_the_stub_outranks_it():
    d = first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
              "23.65 GiB of which 1.24 GiB is free.\n"
              "E0525 02:13:40.571093 1 backend_model.cc:692] \"ERROR: Failed to create instance: Stub process "
              "'vllm_model_0_0' is not healthy.\"\n")
    assert d.category == "gpu_oom"


# ---- the rendezvous port, told in prose --------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    'the system reports "Address already in use"; the error comes from torch.distributed.DistNetworkError.\n',
    "torch.distributed.DistNetworkError: The server socket has failed to listen on any local network address. "
    "port: 51216, useIpv6: false, code: -98, name: EADDRINUSE, message: address already in use\n",
])
def test_rendezvous_port_in_use_is_distributed(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.master_port", "distributed")


# ---- a LoRA adapter path with nothing there -------------------------------------------------------------------

def test_lora_not_found_names_the_path():
    d = first("ValueError: Loading lora sql-lora failed: No adapter found for /adapters/sql-lora\n")
    assert (d.signature, d.category) == ("lora.adapter_not_found", "engine_config")
    assert d.title.endswith("at /adapters/sql-lora")


def test_lora_not_found_quoted_without_its_path():
    d = first('ValueError: "Loading lora _lora failed: No adapter found"\n')
    assert d.signature == "lora.adapter_not_found"
    assert "?" not in d.title and d.title == "vLLM found no LoRA adapter"


def test_the_in_memory_placeholder_stays_an_install_mismatch():
    d = first("ValueError: Loading lora 1 failed: No adapter found for /simon-stub-path\n")
    assert d.signature == "lora.inmemory_placeholder_path"
