"""mix5's dev set (tests/logs/dev-mix5/): a random-looking sample of 2025-2026 failures from vLLM's tracker and the
projects that run vLLM, through the CLI, and the mechanisms that name them, each on the forms the raising code
writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix5")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- FlashAttention-3's CHECK_CUDA / CHECK_CUTLASS line (hopper/cuda_check.h), by the build its path names ----

@pytest.mark.parametrize("text, build", [
    ("CUDA error (/__w/xformers/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:188): "
     "invalid argument\n", "xFormers"),
    ("CUDA error (/workspace/.deps/vllm-flash-attn-src/hopper/flash_fwd_launch_template.h:180): no kernel image is "
     "available for execution on the device\n", "vllm-flash-attn"),
    ("CUDA error (/tmp/pip-install-x1/flash-attention/hopper/flash_api.cpp:512): invalid device function\n",
     "installed FlashAttention-3"),
    ("CUTLASS error (/root/flash-attention/hopper/flash_bwd_launch_template.h:97): Error Internal\n",
     "installed FlashAttention-3"),
])
def test_fa3_cuda_check_names_the_library_build(text, build):
    d = first(text)
    assert (d.signature, d.category) == ("kernel.fa3_cuda_check_failed", "kernel_library")
    assert build in d.title


def test_fa3_check_wins_over_the_generic_no_kernel_image_on_its_line():
    d = first("INFO 07-16 21:04:34 [gpu_model_runner.py:2238] Encoder cache will be initialized\n"
              "CUDA error (/__w/xformers/xformers/third_party/flash-attention/hopper/flash_fwd_launch_template.h:175):"
              " no kernel image is available for execution on the device\n")
    assert d.signature == "kernel.fa3_cuda_check_failed"
    assert "pip install -U vllm" in d.fix.summary


def test_a_plain_no_kernel_image_stays_the_gpu_build():
    d = first("RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert (d.signature, d.category) == ("gpu.no_kernel_image", "unsupported_gpu")


def test_another_programs_cuda_check_is_not_fa3():
    d = top("CUDA error (/src/kernels/moe_align.cu:88): no kernel image is available for execution on the device\n")
    assert d is None or d.signature != "kernel.fa3_cuda_check_failed"


# ---- a GPU family is not a model feature an attention backend lacks --------------------------------------------

@pytest.mark.parametrize("text", [
    "But unfortunately, xformers does not support Blackwell GPUs\n",
    "FlashAttention does not support Turing GPUs.\n",
    "XFORMERS backend does not support sm_120.\n",
])
def test_backend_not_supporting_a_gpu_is_no_feature_refusal(text):
    d = top(text)
    assert d is None or d.signature != "attention.backend_feature_unsupported"


@pytest.mark.parametrize("text", [
    "NotImplementedError: FlashInfer backend does not support sliding window yet.\n",
    "ValueError: FlexAttention does not support logits soft cap.\n",
])
def test_backend_feature_refusals_still_read(text):
    assert first(text).signature == "attention.backend_feature_unsupported"


# ---- an architecture that is a bare backbone class (no For<Head>) ----------------------------------------------

@pytest.mark.parametrize("text, arch", [
    # model_loader/utils.py (0.8) and registry.py (0.10+)
    ("ValueError: Qwen2VLModel has no vLLM implementation and the Transformers implementation is not compatible "
     "with vLLM.\n", "Qwen2VLModel"),
    ("ValueError: The Transformers implementation of 'Gemma3Model' is not compatible with vLLM.\n", "Gemma3Model"),
])
def test_bare_backbone_architecture_names_the_config_fix(text, arch):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.architecture_unsupported", "model_support")
    assert "bare backbone" in d.title and arch in d.title
    stem = arch[:-len("Model")]
    assert f"{stem}ForConditionalGeneration" in d.fix.summary and "--hf-overrides" in d.fix.summary


@pytest.mark.parametrize("text", [
    # older vLLM without the encoder/pooling class: upgrading is the fix, not the config
    "ValueError: Model architectures ['XLMRobertaModel'] are not supported for now. Supported architectures: "
    "['LlamaForCausalLM']\n",
    "ValueError: FooForCausalLM has no vLLM implementation and the Transformers implementation is not compatible "
    "with vLLM.\n",
])
def test_other_unsupported_architectures_keep_the_upgrade_reading(text):
    d = first(text)
    assert d.signature == "model_support.architecture_unsupported"
    assert "bare backbone" not in d.title
