"""Quantization, speculative decoding, dtype and GPU-generation refusals as real users paste them
(tests/logs/dev-qsd/, through the CLI), and the mechanisms that name them, one case per form.

A known miss is said with its reason; it must stay a miss until a general mechanism names it (an
xfail that starts passing fails the run, so the list stays honest).
"""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-qsd")
KNOWN_MISSES: dict[str, str] = {
    "speculative_decoding--gemma4-mtp-mat1-mat2-v025.log":
        "a bare shape mismatch under torch.compile: nothing yet ties the drafter's projection to speculative decoding",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_qsd_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])


def test_every_dev_qsd_log_has_a_thread_and_a_root_cause():
    for name, e in EXPECTED.items():
        assert (DEV / name).is_file(), name
        assert e["source"].startswith("https://github.com/") and len(e["root_cause"]) > 30, name


# ---- quantization method vs the launch dtype (vllm/config: "<dtype> is not supported for quantization method") --

@pytest.mark.parametrize("text,method,advice", [
    # 0.11+: pydantic's wrapper around VllmConfig's ValueError
    ("  Value error, torch.bfloat16 is not supported for quantization method awq. Supported dtypes: [torch.float16] "
     "[type=value_error, input_value=ArgsKwargs((), {'model_co...additional_config': {}}), input_type=ArgsKwargs]",
     "awq", "--dtype half"),
    # 0.6-0.8: the plain ValueError
    ("ValueError: torch.float32 is not supported for quantization method gptq. Supported dtypes: [torch.float16]",
     "gptq", "--dtype half"),
    ("torch.float16 is not supported for quantization method mxfp4. Supported dtypes: [torch.bfloat16]",
     "mxfp4", "--dtype bfloat16"),
])
def test_quant_method_dtype_names_the_dtype_to_launch_with(text, method, advice):
    d = top(text + "\n")
    assert d is not None and d.signature == "quant.dtype_unsupported" and d.category == "quantization"
    assert d.facts["method"] == method and advice in d.fix.summary


def test_quant_method_dtype_with_no_dtype_left():
    # the model refuses the only dtype the method takes (gemma3 and float16 for AWQ)
    d = top("Value error, The model type 'gemma3' does not support float16. Reason: Numerical instability. Please use "
            "bfloat16 or float32 instead. [type=value_error]\n"
            "Value error, torch.bfloat16 is not supported for quantization method awq. Supported dtypes: "
            "[torch.float16] [type=value_error]\n")
    assert d is not None and d.signature == "quant.dtype_unsupported" and "no dtype satisfies both" in d.fix.summary
    # a bfloat16-only method on a GPU without bfloat16
    d = top("WARNING 10-07 13:51:42 [model.py:1679] Your device 'Tesla T4' (with compute capability 7.5) doesn't "
            "support torch.bfloat16. Falling back to torch.float16 for compatibility.\n"
            "ValueError: torch.float16 is not supported for quantization method mxfp4. Supported dtypes: "
            "[torch.bfloat16]\n")
    assert d is not None and d.signature == "quant.dtype_unsupported" and "no bfloat16" in d.fix.summary


# ---- Triton's float8 types, NVIDIA's and AMD's ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError(\"type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', "
    "'fp8e5')\")",
    "AMD Instinct MI210 + vllm fail: ValueError(\"type fp8e4b8 not supported in this architecture. The supported fp8 "
    "dtypes are ('fp8e5',)\")",
    "triton.compiler.errors.CompilationError: at 1:0: ValueError('type fp8e5b16 not supported in this architecture. "
    "The supported fp8 dtypes are (\\'fp8e5\\',)')",
])
def test_triton_fp8_type_refusal_is_a_dtype_the_gpu_lacks(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "dtype.fp8_unsupported" and d.category == "dtype_unsupported"


# ---- vLLM's C++ quantization kernels refusing (csrc TORCH_CHECKs) -------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Int8 not supported for this architecture",
    # the newer wording names the SM
    "RuntimeError: Int8 not supported on SM120. Use FP8 quantization instead, or run on older arch (SM < 100).",
])
def test_int8_w8a8_on_blackwell(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "quant.int8_arch_unsupported" and d.category == "quantization"


@pytest.mark.parametrize("text,func", [
    # a check without a message: libtorch_stable prints the function and the place
    ("RuntimeError: dispatch_scaled_mm,\n  /workspace/csrc/libtorch_stable/quantization/w8a8/cutlass/c3x/"
     "scaled_mm_helper.hpp:17\n", "dispatch_scaled_mm"),
    # torch's C++ trace of a TORCH_CHECK
    ("RuntimeError: Expected a.dtype() == torch::kInt8 to be true, but got false.\nException raised from "
     "dispatch_scaled_mm at /workspace/csrc/quantization/w8a8/cutlass/c3x/scaled_mm_helper.hpp:27 (most recent call "
     "first):\n", "dispatch_scaled_mm"),
])
def test_a_quantization_kernel_check_names_its_source(text, func):
    d = top(text)
    assert d is not None and d.category == "quantization" and d.signature == "quant.native_check_failed"
    assert d.facts["function"] == func


def test_a_build_error_in_the_same_sources_is_not_a_kernel_refusal():
    text = ("/home/u/vllm/csrc/quantization/w8a8/cutlass/c3x/scaled_mm_blockwise_sm90_fp8_dispatch.cuh(147): error: a "
            "value of type \"const ElementBlockScale *\" cannot be used to initialize an entity of type \"uint32_t\"\n"
            "8 errors detected in the compilation of \"/home/u/vllm/csrc/quantization/w8a8/cutlass/c3x/"
            "scaled_mm_blockwise_sm90_fp8.cu\".\nninja: build stopped: subcommand failed.\n")
    d = top(text)
    assert d is None or d.signature != "quant.native_check_failed"


# ---- an exception raised in a draft model's own file ----------------------------------------------------------

@pytest.mark.parametrize("frame", [
    "vllm/model_executor/models/qwen3_next_mtp.py", "/usr/lib/python3.12/site-packages/vllm/model_executor/models/"
    "llama_eagle3.py", "/opt/venv/lib/python3.12/site-packages/vllm/model_executor/models/qwen3_dflash.py",
])
def test_an_exception_in_a_draft_model_file_is_speculative_decoding(frame):
    text = ("Traceback (most recent call last):\n"
            f'  File "{frame}", line 217, in load_weights\n'
            "    weight_loader(param, loaded_weight)\n"
            '  File "vllm/model_executor/parameter.py", line 153, in load_column_parallel_weight\n'
            "    assert self.data.shape == loaded_weight.shape\n"
            "AssertionError\n")
    d = top(text)
    assert d is not None and d.category == "speculative_decoding" and d.signature == "speculative.drafter_crash"


def test_eagle_vision_language_model_is_not_a_draft():
    text = ("Traceback (most recent call last):\n"
            '  File "/x/vllm/model_executor/models/eagle2_5_vl.py", line 300, in forward\n'
            "    x = self.vision(x)\n"
            "AssertionError: This line should be unreachable.\n")
    d = top(text)
    assert d is None or d.signature != "speculative.drafter_crash"


# ---- a kernel library's table of GPU targets without this one ---------------------------------------------------

@pytest.mark.parametrize("text,arch", [
    ('KeyError: "Unknown GPU architecture: gfx1151. Please make sure your rocminfo is correct."', "gfx1151"),
    ("RuntimeError: GPU is not supported: sm_120", "sm_120"),
    ("ValueError: Unsupported GPU architecture: sm_121a", "sm_121a"),
])
def test_unknown_gpu_architecture(text, arch):
    d = top(text + "\n")
    assert d is not None and d.signature == "gpu.arch_unknown" and d.category == "unsupported_gpu"
    assert d.facts["arch"] == arch


def test_a_library_falling_back_on_an_unknown_architecture_is_no_failure():
    d = top("WARNING 12-03 14:20:31 [rocm.py:120] Unsupported GPU architecture gfx1100 for AITER, falling back to "
            "Triton kernels.\n")
    assert d is None or d.signature != "gpu.arch_unknown"


def test_a_wrapped_moe_backend_refusal_is_still_a_quantization_gap():
    d = top("ValueError: NvFp4 MoE backend 'FLASHINFER_CUTLASS' does not support the \n"
            "deployment configuration since kernel does not support current device.\n")
    assert d is not None and d.signature == "quant.kernel_unsupported_gpu"


def test_an_op_without_a_kernel_for_the_dtype():
    d = top("RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'\n")
    assert d is not None and d.signature == "dtype.op_not_implemented" and d.facts["dtype"] == "Half"


def test_a_draft_model_frame_in_a_paste_without_its_traceback_header():
    d = top('ERROR 03-01 20:10:41 [core.py:1100]   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/'
            'models/qwen3_5_mtp.py", line 310, in load_weights\n'
            "ERROR 03-01 20:10:41 [core.py:1100]     weight_loader(param, loaded_weight)\n"
            "ERROR 03-01 20:10:41 [core.py:1100] AssertionError: Tried to load weights of size torch.Size([2048, 1024]) "
            "to a parameter of size torch.Size([1024, 512])\n")
    assert d is not None and d.category == "speculative_decoding"


@pytest.mark.parametrize("method,words", [
    ("mxfp4", "every vLLM release from 0.10 to 0.33"), ("fp8", "vLLM 0.16+"), ("awq_marlin", "--quantization awq"),
    ("bitsandbytes", "7.0 in every vLLM release"), ("compressed-tensors", "a newer vLLM"),
])
def test_min_capability_advice_says_whether_an_upgrade_helps(method, words):
    d = top(f"ValueError: The quantization method {method} is not supported for the current GPU. Minimum capability: "
            "80. Current capability: 75.\n")
    assert d is not None and d.signature == "quant.min_capability" and words in d.fix.summary


# ---- the step vLLM logged before it failed: building the drafter ----------------------------------------------

DRAFTER_STEP = ("(Worker_TP0 pid=529) INFO 10-06 18:54:29 [v1/worker/gpu_model_runner.py:2641] Loading drafter model...\n"
                "(Worker_TP0 pid=529) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] WorkerProc failed to "
                "start.\n")


def test_a_weight_the_draft_lacks_right_after_loading_the_drafter():
    d = top(DRAFTER_STEP + "(Worker_TP0 pid=529) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] KeyError: "
            "'layers.0.self_attn.qkv_proj.weight'\n")
    assert d is not None and d.category == "speculative_decoding"


def test_an_exception_with_its_own_rule_still_wins_after_the_drafter_step():
    d = top(DRAFTER_STEP + "(Worker_TP0 pid=529) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] "
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.02 GiB. GPU 0 has a total capacity of "
            "79.19 GiB of which 312.00 MiB is free.\n")
    assert d is not None and d.category == "gpu_oom"


def test_a_plain_exception_right_after_the_drafter_step_is_the_drafters():
    d = top(DRAFTER_STEP + "(Worker_TP0 pid=529) ERROR 10-06 18:54:30 [v1/executor/multiproc_executor.py:597] "
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8192x3840 and 5632x1024)\n")
    assert d is not None and d.category == "speculative_decoding"


def test_a_failure_under_the_runners_drafting_step():
    d = top("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 3935, in '
            "propose_draft_token_ids\n"
            "    draft_token_ids = self.drafter.propose(\n"
            '  File "/usr/local/lib/python3.12/dist-packages/torch/nn/functional.py", line 100, in linear\n'
            "    return torch._C._nn.linear(input, weight, bias)\n"
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied (8192x3840 and 5632x1024)\n")
    assert d is not None and d.signature == "speculative.drafter_crash"
