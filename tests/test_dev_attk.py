"""Attention backends, kernel libraries, Triton/Inductor compilation and CUDA-graph capture as real users paste
them (tests/logs/dev-attk/, through the CLI), and the mechanisms that name them, one case per form."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-attk")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- an attention backend named in a refusal, across releases' wordings and modules -------------------

@pytest.mark.parametrize("text,backend", [
    # a vision encoder refusing the forced backend (0.10: _Backend.X, 0.16+: AttentionBackendEnum.X)
    ("RuntimeError: Qwen2.5-VL does not support _Backend.FLASHINFER backend now.", "FLASHINFER"),
    ("RuntimeError: GLM-4V does not support AttentionBackendEnum.TORCH_SDPA backend now.", "TORCH_SDPA"),
    # a backend's own impl, the message as a title with the user's words after it
    ("ValueError: XFormers does not support attention logits soft capping for GPU Quadro RTX 4000", "XFormers"),
    # in prose, without an exception type at the start of the line
    ("And I have AssertionError: Torch SDPA backend is only used for the CPU device.", "Torch SDPA"),
    # the V0 model runner asking for another backend (pydantic's wrapper form too)
    ("1. Please use Flashinfer backend for models with logits_soft_cap (i.e., Gemma-2). Otherwise, the output might "
     "be wrong. (type=value_error)", "Flashinfer"),
    ("NotImplementedError: FlashInfer backend on SM90 currently crashes with sliding-window attention layers. Use "
     "the default attention backend.", "FlashInfer"),
    # a connector that only works with one backend
    ("ERROR 03-19 11:54:51 [engine.py:158] AssertionError('Only FlashAttention backend is supported for now.')",
     "FlashAttention"),
])
def test_backend_refusal_names_attention_backend(text, backend):
    d = top(text + "\n")
    assert d is not None and d.category == "attention_backend", d and (d.signature, d.category)
    if d.signature == "attention.backend_refused":
        assert d.facts["backend"] == backend


@pytest.mark.parametrize("text", [
    # the selector's notes in passing: harmless when start-up goes on
    "INFO 03-19 11:53:56 [cuda.py:234] Cannot use FlashAttention-2 backend for Volta and Turing GPUs.\n"
    "INFO 03-19 11:53:56 [cuda.py:282] Using XFormers backend.\n",
    # a warning that vLLM downgrades the CUDA-graph mode by itself
    "(EngineCore_DP0 pid=1) WARNING 11-12 16:25:20 [gpu_model_runner.py:4284] CUDAGraphMode.FULL_AND_PIECEWISE is not "
    "supported with FlashInferBackend backend (support: AttentionCGSupport.NEVER); setting cudagraph_mode=PIECEWISE\n",
    # the sampler's fallback
    "INFO 05-03 20:21:10 [topk_topp_sampler.py:44] Currently, FlashInfer top-p & top-k sampling sampler is disabled "
    "because FlashInfer>=v0.2.3 is not backward compatible. Falling back to the PyTorch-native implementation.\n",
])
def test_backend_notes_in_passing_are_not_refusals(text):
    d = top(text)
    assert d is None or d.signature != "attention.backend_refused"
    assert d is None or d.confidence <= 0.5


def test_gpu_generation_and_missing_package_stay_with_their_rules():
    d = top("RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert d is not None and d.signature != "attention.backend_refused"
    d = top("ImportError: FlashInfer backend is not installed: No module named 'flashinfer'\n")
    assert d is not None and d.signature != "attention.backend_refused"


# ---- a kernel library's JIT build: the compiler's own diagnostics --------------------------------------

@pytest.mark.parametrize("text,lib", [
    # nvcc, a FlashInfer header (as the bare compiler line of a paste)
    ('/x/site-packages/flashinfer/data/cutlass/include/cute/arch/mma_sm90.hpp(6108): error: static assertion failed '
     'with "MajorB must be GMMA::Major::K for this config."', "FlashInfer"),
    # the template context only (the error line was cut)
    ('            instantiation of class "flashinfer::AttentionKernelTraits<true, 128>" at line 431 of '
     '/x/site-packages/flashinfer/data/include/flashinfer/attention/hopper/prefill_sm90.cuh', "FlashInfer"),
    # gcc: a CUDA header missing from a conda toolchain's include path, in FlashInfer's JIT cache
    ("/root/.cache/flashinfer/0.6.14/120a/generated/fp4_gemm_cutlass_sm120/gemm.cu:12:10: fatal error: "
     "curand_kernel.h: No such file or directory", "FlashInfer"),
    # a torch C++ extension built at first use
    ("FAILED: /root/.cache/torch_extensions/py312_cu128/my_ext/kernel.cuda.o", "a torch C++ extension"),
])
def test_jit_compile_error_names_the_library(text, lib):
    d = top(text + "\n")
    assert d is not None and d.category == "kernel_library" and d.signature == "kernels.jit_compile_error"
    assert d.facts["library"] == lib


def test_compiler_error_outside_a_library_tree_is_not_a_kernel_library():
    d = top("/home/me/vllm/csrc/attention/attention_kernels.cu(12): error: identifier \"foo\" is undefined\n")
    assert d is None or d.signature != "kernels.jit_compile_error"


# ---- CUDA-graph capture named by the capture step in the frames ---------------------------------------

V1_CAPTURE = (
    '  File "/x/site-packages/vllm/v1/worker/gpu_worker.py", line 315, in compile_or_warm_up_model\n'
    "    self.model_runner.capture_model()\n"
    '  File "/x/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2691, in capture_model\n'
    "    self._capture_cudagraphs(\n"
    '  File "/x/site-packages/vllm/v1/worker/gpu_model_runner.py", line 2741, in _capture_cudagraphs\n'
    "    self._dummy_run(num_tokens,\n")


def test_cut_traceback_in_capture_is_cudagraph_capture():
    d = top("Traceback (most recent call last):\n" + V1_CAPTURE)
    assert d is not None and d.signature == "cudagraph.capture_step_failed" and d.facts["message_cut"] is True


def test_v0_capture_frame_cut_is_cudagraph_capture():
    d = top("Traceback (most recent call last):\n"
            '  File "/x/dist-packages/vllm/worker/model_runner.py", line 1724, in capture\n'
            "    output_hidden_or_intermediate_states = self.model(\n"
            '  File "/x/dist-packages/torch/nn/modules/module.py", line 1553, in _wrapped_call_impl\n')
    assert d is not None and d.category == "cudagraph_capture"


def test_library_failing_inside_capture_is_that_library():
    # FlashInfer JIT-building during capture: the library's failure, not the capture's
    d = top("Traceback (most recent call last):\n" + V1_CAPTURE
            + '  File "/x/site-packages/flashinfer/jit/cpp_ext.py", line 258, in run_ninja\n    subprocess.run(\n')
    assert d is not None and d.signature != "cudagraph.capture_step_failed"
    assert d.category == "kernel_library"


def test_bare_cuda_error_at_capture_end_is_cudagraph_capture():
    d = top("Traceback (most recent call last):\n" + V1_CAPTURE
            + '  File "/x/site-packages/torch/cuda/graphs.py", line 84, in capture_end\n    super().capture_end()\n'
            "torch.AcceleratorError: CUDA error: invalid argument\n")
    assert d is not None and d.category == "cudagraph_capture"


def test_oom_at_capture_end_stays_gpu_oom():
    d = top("Traceback (most recent call last):\n" + V1_CAPTURE
            + '  File "/x/site-packages/torch/cuda/graphs.py", line 84, in capture_end\n    super().capture_end()\n'
            "RuntimeError: CUDA error: out of memory\n")
    assert d is not None and d.category == "gpu_oom"


# ---- kernel libraries' own C++ error formats -----------------------------------------------------------

@pytest.mark.parametrize("text,lib", [
    ("RuntimeError: Error in function 'BatchPrefillWithPagedKVCacheWrapperDispatched' at /workspace/include/flashinfer/"
     "attention/prefill.cuh:2304: FlashInfer Internal Error: Invalid configuration : NUM_MMA_Q=1", "FlashInfer"),
    # the same, as a C++ exception nobody caught (no Python exception type)
    ("  what():  Error in function 'plan' at /x/flashinfer/data/csrc/batch_decode.cu:92: Batch size mismatch", "FlashInfer"),
    ("RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/gemm.hpp:120): k % 128 == 0", "DeepGEMM"),
    ("RuntimeError: CUDA runtime error (csrc/jit_kernels/impls/sm90_fp8_gemm_1d2d.hpp:88): invalid argument", "DeepGEMM"),
])
def test_library_error_format_names_the_library(text, lib):
    d = top(text + "\n")
    assert d is not None and d.category == "kernel_library" and d.facts.get("library") == lib, d and d.signature


def test_specific_deepgemm_checks_keep_their_rules():
    d = top("RuntimeError: Assertion error (/x/deepgemm-src/csrc/apis/layout.hpp:59): Unknown SF transformation\n")
    assert d is not None and d.signature == "quant.deepgemm_scale_layout"


def test_unknown_backend_name_from_the_enum_lookup():
    d = top("  File \"/x/site-packages/vllm/config/attention.py\", line 65, in validate_backend_before\n"
            "    return AttentionBackendEnum[value.upper()]\n"
            "KeyError: 'XFORMERS'\n")
    assert d is not None and d.signature == "attention.unknown_backend_name" and d.facts["backend"] == "XFORMERS"


def test_not_implemented_for_a_backend_impl():
    d = top("NotImplementedError: Encoder self-attention and encoder/decoder cross-attention are not implemented for "
            "FlashInferImpl\n")
    assert d is not None and d.category == "attention_backend"


# ---- torch.compile / Triton: Dynamo's refusals, Inductor's C++ build, Triton's launcher --------------

@pytest.mark.parametrize("text,sig,cat", [
    ("torch._dynamo.exc.Unsupported: Data-dependent branching", "triton.inductor_failed", "triton_compile"),
    ("torch._inductor.exc.CUDACompileError: nvcc failed", "triton.inductor_failed", "triton_compile"),
    ("/tmp/torchinductor_root/cx/ccx4.cpp:12:10: fatal error: omp.h: No such file or directory",
     "kernels.jit_compile_error", "triton_compile"),
    ("RuntimeError: Triton Error [CUDA]: invalid argument", "triton.launch_failed", "triton_compile"),
    ("RuntimeError: Triton Error [HIP]:  Code: 1, Messsage: invalid argument", "triton.launch_failed", "triton_compile"),
])
def test_compile_step_failures(text, sig, cat):
    d = top(text + "\n")
    assert d is not None and (d.signature, d.category) == (sig, cat)


def test_triton_launch_of_a_crashing_kernel_is_the_crash():
    d = top("RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered\n")
    assert d is not None and d.signature == "kernels.illegal_memory_access"


@pytest.mark.parametrize("text", [
    "RuntimeError: Cannot call CUDAGeneratorImpl::current_seed during CUDA graph capture. If you need this call to "
    "be captured, please file an issue.",
    "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture unless the CPU tensor is pinned.",
    "torch.AcceleratorError: CUDA error: operation would make the legacy stream depend on a capturing blocking stream",
    "NCCL WARN Cuda failure 'dependency created on uncaptured work in another stream'",
    "RuntimeError: HIP error: hipErrorStreamCaptureUnsupported",
])
def test_capture_refusals_of_torch_and_the_runtime(text):
    d = top(text + "\n")
    assert d is not None and d.category == "cudagraph_capture", d and (d.signature, d.category)


@pytest.mark.parametrize("text", [
    "RuntimeError: This flash attention build does not support tanh softcapping.",
    "ValueError: FLASHINFER_MLA backend requires block size 32 or 64, got 16",
])
def test_more_backend_refusals(text):
    d = top(text + "\n")
    assert d is not None and d.category == "attention_backend", d and (d.signature, d.category)


# ---- a bare CUDA error while capture was in progress (vLLM's own progress lines) --------------------

CAPTURE_BAR = "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  14%|#4        | 1/7 [00:01<00:06,  1.04s/it]\n"


@pytest.mark.parametrize("err", [
    "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'",
    "[rank0]: RuntimeError: CUDA error: invalid argument",
    "RuntimeError: CUDA error: capturing stream has unjoined work",
])
def test_cuda_error_while_capturing(err):
    d = top("INFO 09-10 09:37:31 [kv_cache_utils.py:1087] GPU KV cache size: 85,232 tokens\n" + CAPTURE_BAR + err + "\n")
    assert d is not None and d.category == "cudagraph_capture", d and (d.signature, d.category)


def test_cuda_error_after_capture_finished_is_not_capture():
    d = top(CAPTURE_BAR + "INFO 09-10 09:37:40 [gpu_model_runner.py:3480] Graph capturing finished in 5 secs, took "
            "0.49 GiB\nRuntimeError: CUDA error: invalid argument\n")
    assert d is None or d.signature != "cudagraph.error_during_capture"


def test_oom_while_capturing_stays_gpu_oom():
    d = top(CAPTURE_BAR + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total "
            "capacity of 23.54 GiB of which 1.19 MiB is free.\n")
    assert d is not None and d.category == "gpu_oom"


def test_a_library_that_requires_a_gpu_is_not_a_backend_refusal():
    d = top("RuntimeError: FlashInfer requires sm75+\n")
    assert d is None or d.signature != "attention.backend_refused"


def test_vllm_flash_attn_without_the_function_vllm_imports():
    d = top("ImportError: cannot import name 'flash_attn_varlen_func' from 'vllm.vllm_flash_attn' (unknown location)\n")
    assert d is not None and d.signature == "kernels.flash_attn_missing"


@pytest.mark.parametrize("text,expect", [
    ("ValueError: Attention sinks are not supported by this backend", True),
    ("NotImplementedError: Sliding window is not supported by the selected backend", True),
    ("ValueError: Expert parallelism is not supported by this backend", False),
    ("TypeError: FlashAttentionImpl.__init__() got an unexpected keyword argument 'sinks'", True),
])
def test_unnamed_backend_and_impl_arguments(text, expect):
    d = top(text + "\n")
    got = d is not None and d.signature == "attention.backend_refused"
    assert got is expect, d and (d.signature, d.category)


# ---- the selector's reasons pasted without its sentence ----------------------------------------------

@pytest.mark.parametrize("text", [
    "Reasons: {FLASH_ATTN: [head_size not supported], TRITON_ATTN: [sink setting not supported], FLASHINFER: "
    "[compute capability not supported]}.",
    "FLASH_ATTN: [sink setting not supported]\nTRITON_ATTN: [sink setting not supported]",
])
def test_selector_reasons_without_the_sentence(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "attention.no_valid_backend" and d.confidence == 0.8
    assert "TRITON_ATTN" in d.facts["rejected"] and "None" not in d.title


def test_selector_debug_note_is_not_a_failure():
    d = top("DEBUG 01-01 00:00:00 [cuda.py:467] Some attention backends are not valid for cuda with "
            "AttentionSelectorConfig(head_size=64). Reasons: {FLASHINFER: [sink setting not supported]}.\n"
            "INFO 01-01 00:00:00 [cuda.py:480] Using FLASH_ATTN attention backend out of potential backends: "
            "['FLASH_ATTN']\n")
    assert d is None or d.confidence <= 0.5
