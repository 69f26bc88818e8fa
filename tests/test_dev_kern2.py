"""Attention backends and kernel libraries, second round: backend refusals on CPU, Turing, Blackwell and ROCm,
kernel libraries (FlashInfer, AITER, DeepGEMM, FlashMLA) failing at load, warm-up or run time, as users paste
them in 2024-2026 threads (tests/logs/dev-kern2/, through the CLI), and the mechanisms that name them."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-kern2")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {
    "deepgemm-unknown-recipe-sm120-warmup.log": "DeepGEMM's 'Unknown recipe' is the project's quant.deepgemm_scale_layout "
                                                "(an FP8 block-scaled model routed through DeepGEMM, fixture "
                                                "quant.deepgemm_scale_layout); this thread blames the warm-up that "
                                                "ignores the auto-disable, so the category is disputed, not unknown",
}

@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a kernel library run from a source checkout: its frames are <repo>/<package>/..., not site-packages ----

@pytest.mark.parametrize("frame", [
    "/venv/aiter/aiter/jit/core.py",  # AITER built from its repository (pip install -e)
    "/opt/aiter/aiter/ops/mha.py",
    "/workspace/xformers/xformers/ops/fmha/dispatch.py",
    "/src/flash_mla/flash_mla/flash_mla_interface.py",
])
def test_source_checkout_of_a_kernel_library_is_the_library(frame):
    d = top("Traceback (most recent call last):\n"
            '  File "/usr/lib/python3.12/site-packages/vllm/v1/attention/backends/rocm_aiter_fa.py", line 700, in forward\n'
            "    out = op(q, k, v)\n"
            f'  File "{frame}", line 12, in wrapper\n'
            "    return op(*args, **kwargs)\n"
            "RuntimeError: invalid argument for some_kernel_fwd\n")
    assert d is not None and d.category == "kernel_library", d and (d.signature, d.category)


def test_a_folder_merely_named_like_a_library_is_not_one(monkeypatch):
    """The frames alone: the word model, which may guess from any word (the folder's too), kept out."""
    from triage.catalogue import wordclass

    monkeypatch.setattr(wordclass, "_model", {"classes": [], "totals": [], "docs": [], "counts": {}})
    d = top("Traceback (most recent call last):\n"
            '  File "/home/u/aiter_experiments/run.py", line 3, in <module>\n'
            "    main()\n"
            "RuntimeError: invalid argument for some_kernel_fwd\n")
    assert d is None or d.category != "kernel_library", (d.signature, d.category)


# ---- a dispatch table refusing the model's head dimensions is the attention kernel's -------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Unsupported CPU attention configuration: head_dim=512 isa=1",
    "Unsupported CPU attention configuration: head_dim=80 isa=2 dtype=bf16",
])
def test_attention_configuration_refused_for_head_dim(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "attention.kernel_head_dim_unsupported", d and d.signature
    assert "head_dim=" in d.facts["dims"]


def test_configuration_refused_for_other_parameters_stays_the_library():
    d = top("Unsupported sparse-MLA prefill configuration: model=DSV4 num_heads=16 topk=512 page_block_size=64\n")
    assert d is not None and d.signature == "kernels.library_check_failed"


# ---- FlashMLA's extension missing, raised when an MLA path calls it anyway ----------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: vllm._flashmla_C is not available, likely was not compiled due to insufficient nvcc version or a "
    "supported arch was not in the list of target arches to compile for.",
    "RuntimeError: vllm_flashmla_C is not available, likely was not compiled due to insufficient nvcc version",
    "RuntimeError: vllm._flashmla_extension_C is not available, likely was not compiled due to a build error.",
])
def test_flashmla_extension_missing(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "kernels.flashmla_unavailable", d and d.signature


def test_flashmla_reason_in_the_selector_note_is_not_the_failure():
    d = top("INFO 01-01 00:00:00 [cuda.py:1] FLASHMLA backend is not supported due to vllm._flashmla_C is not "
            "available, likely was not compiled due to insufficient nvcc version\n"
            "INFO 01-01 00:00:00 [cuda.py:2] Using TRITON_MLA backend.\n")
    assert d is None or d.signature != "kernels.flashmla_unavailable"


# ---- an attention implementation that does not take vLLM's call ---------------------------------------------

@pytest.mark.parametrize("text,cls", [
    ("TypeError: vllm.model_executor.layers.attention.mla_attention.MLACommonImpl.__init__() got multiple values "
     "for keyword argument 'q_pad_num_heads'", "MLACommonImpl"),
    ("TypeError: AscendAttentionBackendImpl.__init__() missing 1 required positional argument: "
     "'kv_sharing_target_layer_name'", "AscendAttentionBackendImpl"),
    ("TypeError: TritonAttentionImpl.forward() takes 8 positional arguments but 9 were given", "TritonAttentionImpl"),
    ("TypeError: Can't instantiate abstract class MyAttentionBackend with abstract method get_builder_cls",
     "MyAttentionBackend"),
])
def test_attention_impl_call_mismatch(text, cls):
    d = top(text + "\n")
    assert d is not None and d.signature == "attention.impl_interface_mismatch" and d.facts["cls"] == cls, (
        d and (d.signature, d.facts))


@pytest.mark.parametrize("text", [
    "TypeError: LlamaForCausalLM.__init__() got an unexpected keyword argument 'config'",
    "TypeError: FusedMoE.__init__() got an unexpected keyword argument 'activation'",
    # the layer a model builds is the model code's call, not a backend's implementation
    "TypeError: Attention.__init__() got an unexpected keyword argument 'per_layer_sliding_window'",
])
def test_other_call_errors_are_not_the_backend(text):
    d = top(text + "\n")
    assert d is None or d.signature != "attention.impl_interface_mismatch"


@pytest.mark.parametrize("text", [
    # a builder's call error, an unexpected keyword on an Impl: the backend's too, whichever rule names it
    "TypeError: FlashInferMetadataBuilder.build() takes 4 positional arguments but 5 were given",
    "TypeError: FlashAttentionImpl.__init__() got an unexpected keyword argument 'sinks'",
])
def test_backend_call_errors_read_by_either_rule(text):
    d = top(text + "\n")
    assert d is not None and d.category == "attention_backend", d and (d.signature, d.category)
