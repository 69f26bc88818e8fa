"""Attention backends, kernel libraries (FlashInfer, DeepGEMM, FlashMLA, AITER) and Triton/Inductor compilation
as users paste them in 2025-2026 threads (tests/logs/dev-kern/, through the CLI), and the mechanisms that name
them, one case per form."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-kern")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {
    "attn-triton-mla-make-shape-compatible.log": "Triton's shape error alone does not say which kernel failed; the "
                                                 "thread's frames (not pasted) put it in TRITON_MLA's decode kernel",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a kernel built for other GPU generations: the attention backend's kernel, or a library's -----------

@pytest.mark.parametrize("text,sig,have", [
    # AITER's Gluon MLA decode (ROCm): an attention kernel, so the attention backend's choice
    ("AssertionError: mla_gluon requires gfx950 (CDNA4), got gfx942", "attention.kernel_arch_unsupported", "gfx942"),
    ("RuntimeError: paged_attention_decode needs sm_100a, but got sm_120", "attention.kernel_arch_unsupported", "sm_120"),
    # AITER's JIT refusing the arch list, a GEMM's gate: the library's
    ("One of GPU archs of ['gfx1151'] is invalid or not supported with VLLM_ROCM_USE_AITER: 1",
     "kernels.arch_unsupported", "gfx1151"),
    ("AssertionError: hipb_mm requires gfx950, got gfx942", "kernels.arch_unsupported", "gfx942"),
])
def test_kernel_arch_refusal(text, sig, have):
    d = top(text + "\n")
    assert d is not None and d.signature == sig and d.facts["have"] == have, d and (d.signature, d.facts)


def test_arch_note_with_a_fallback_is_not_a_refusal():
    d = top("WARNING 01-01 00:00:00 [rocm.py:88] mla_gluon requires gfx950, got gfx942; falling back to TRITON_MLA\n")
    assert d is None or d.signature not in ("attention.kernel_arch_unsupported", "kernels.arch_unsupported")


# ---- an attention kernel without a variant for the model's head dimensions -----------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Check failed: (dispatched) is false:\nUnsupported head dimensions: head_dim_qk=256, head_dim_vo=256",
    "RuntimeError: Unsupported head_dim: 72",
    "RuntimeError: Only support head size 64, 128, and 256 for now",
])
def test_head_dimension_refusal_is_attention_backend(text):
    d = top(text + "\n")
    assert d is not None and d.signature == "attention.kernel_head_dim_unsupported", d and d.signature


# ---- kernel libraries' check formats: TVM-FFI, DeepGEMM's older form, FlashMLA, a dispatch table ---------

@pytest.mark.parametrize("text,lib", [
    ("E       RuntimeError: Failed: Assertion error csrc/jit_kernels/impls/smxx_layout.hpp:136 'mn % 4 == 0 and "
     "num_groups == 1'", "DeepGEMM"),
    ("RuntimeError: Assertion error (/workspace/.deps/flashmla-src/csrc/sm90/prefill/sparse/phase1.cuh:614): "
     "Assertion `res == CUresult::CUDA_SUCCESS` failed.", "FlashMLA"),
    ('  File "/x/site-packages/flashinfer/mla/_sparse_mla_sm120.py", line 402, in _paged_attention\n'
     "tvm.error.InternalError: Check failed: output.size(0) == num_tokens (84 vs. 83) :", "FlashInfer"),
    ("Unsupported sparse-MLA prefill configuration: model=DSV4 num_heads=16 topk=512 page_block_size=64", "FlashInfer"),
    # DeepGEMM's relative __FILE__ (csrc/apis/, csrc/jit/) without its package name
    ("RuntimeError: Assertion error (csrc/apis/layout.hpp:49): not disable_ue8m0_cast", "DeepGEMM"),
])
def test_library_check_formats(text, lib):
    d = top(text + "\n")
    assert d is not None and d.signature == "kernels.library_check_failed" and d.facts["library"] == lib, (
        d and (d.signature, d.facts))


@pytest.mark.parametrize("text", [
    # glog's CHECK of other native code (Ray's raylet, XLA) is not a kernel library's
    "[2025-01-01 00:00:00,000 C 123 456] (raylet) node_manager.cc:100: Check failed: (x) is false: lost node",
    "RuntimeError: torch_xla/csrc/runtime/pjrt_computation_client.cc:1: Check failed: status.ok()",
])
def test_other_native_checks_are_not_kernel_library(text):
    d = top(text + "\n")
    assert d is None or d.signature != "kernels.library_check_failed"


# ---- what a backend needs of the launch: context parallelism, its metadata builder, its KV layout --------

def test_context_parallelism_needs_lse():
    d = top("AssertionError: Decode Context Parallelism (DCP) requires attention implementations to return the "
            "softmax LSE during decode, but FlashInferImpl does not. Try a different backend by setting "
            "--attention-backend or disable DCP.\n")
    assert d is not None and d.signature == "attention.backend_refused" and d.facts["backend"] == "FlashInferImpl"


def test_metadata_builder_invariant_is_the_backend():
    d = top("AssertionError: swa_metadata missing tile_sched entry for compress_ratio=1; DeepseekSparseSWAMetadataBuilder"
            ".build_tile_scheduler did not allocate one for this layer type.\n")
    assert d is not None and d.category == "attention_backend"


def test_kv_reshape_outside_the_runner_is_not_a_layout_mismatch():
    d = top("RuntimeError: shape '[4, -1, 128]' is invalid for input of size 1000\n")
    assert d is None or d.signature != "attention.kv_layout_mismatch"


# ---- Triton: its ptxas as a bare subprocess failure, an LLVM target it lacks, a compiler row wrapped ------

def test_triton_ptxas_called_process_error():
    d = top("subprocess.CalledProcessError: Command '['/x/triton/backends/nvidia/bin/ptxas', '-lineinfo', '-v', "
            "'--gpu-name=sm_100', '/tmp/t.ptx', '-o', '/tmp/t.ptx.o']' returned non-zero exit status 255.\n")
    assert d is not None and d.signature == "triton.ptxas_failed"


def test_triton_unsupported_llvm_target():
    d = top('loc("/x/vllm/attention/ops/triton_flash_attention.py":309:0): error: unsupported target: \'gfx906\'\n')
    assert d is not None and d.category == "triton_compile"


def test_compiler_error_wrapped_onto_the_next_row():
    d = top("deep_gemm/include/deep_gemm/impls/sm90_tf32_hc_prenorm_gemm.cuh(120): error:\n"
            '  identifier "cudaGridDependencySynchronize" is undefined\n')
    assert d is not None and d.signature == "kernels.jit_compile_error" and "undefined" in d.facts["compiler_error"]


# ---- frames alone: a kernel library's own package tree, even where it keeps Triton kernels ---------------

def test_cut_traceback_in_aiter_triton_kernel_is_the_library(monkeypatch):
    """The frames alone (the word model, which may overrule a frame when all but sure, kept out)."""
    from triage.catalogue import wordclass

    monkeypatch.setattr(wordclass, "_model", {"classes": [], "totals": [], "docs": [], "counts": {}})
    d = top("Traceback (most recent call last):\n"
            '  File "/x/site-packages/vllm/v1/attention/backends/mla/rocm_aiter_mla.py", line 402, in forward_mqa\n'
            "    mla_decode_gluon(\n"
            '  File "/x/site-packages/aiter/ops/triton/gluon/mla_gluon.py", line 889, in mla_decode_gluon\n'
            "    assert (\n")
    assert d is not None and d.category == "kernel_library", d and (d.signature, d.category)


@pytest.mark.parametrize("text,hit", [
    ("The reporter hit `ValueError: provided out is the wrong size for the accumulation` from the `np.cumsum` in "
     "`_compute_flashinfer_kv_metadata`.", True),
    ("RuntimeError: index out of range in build_for_cudagraph_capture", True),
    # a metadata step named without any error is not a failure
    ("INFO 01-01 00:00:00 [utils.py:1] _build_attention_metadata took 3 ms", False),
])
def test_error_beside_the_metadata_step(text, hit):
    d = top(text + "\n")
    assert (d is not None and d.category == "attention_backend") is hit, d and (d.signature, d.category)


# ---- backend names as messages spell them: MLA and vendor backends, lower-case flash attention, the Enum ----

@pytest.mark.parametrize("text,sig", [
    ("RuntimeError: TRTLLM FMHA is not supported on this GPU", "attention.backend_refused"),
    ("NotImplementedError: Triton MLA does not support FP8 KV cache", "attention.backend_refused"),
    ("ValueError: FlashMLA is only supported on Hopper devices.", "attention.backend_refused"),
    ("AssertionError: Sliding window is not supported by ROCm flash attention", "attention.backend_refused"),
    ("NotImplementedError: Encoder self-attention is not implemented for PagedAttention", "attention.backend_refused"),
    ("NotImplementedError: MLA is not supported for this model with the XFORMERS backend", "attention.backend_refused"),
    ("AssertionError: attention sinks are only supported by FlashAttention 3", "attention.backend_refused"),
    ("ValueError: 'TORCH_SDPA' is not a valid _Backend", "attention.unknown_backend_name"),
])
def test_backend_names_as_spelled(text, sig):
    d = top(text + "\n")
    assert d is not None and d.signature == sig, d and (d.signature, d.category)


@pytest.mark.parametrize("text", [
    # the selector's warnings in a full log: start-up went on with another backend
    "WARNING 01-01 00:00:00 [cuda.py:195] FlashMLA backend is not supported due to FlashMLA is only supported on "
    "Hopper devices.\nINFO 01-01 00:00:00 [cuda.py:188] Using Triton MLA backend.\n",
    # a MoE backend's refusal is not the attention backend's
    "ValueError: Expert parallelism is not supported with this model when using the FlashInfer MoE backend\n",
])
def test_not_an_attention_refusal(text):
    d = top(text)
    assert d is None or d.signature != "attention.backend_refused", (d.signature, d.title)


def test_arch_requirement_in_an_info_line_is_not_the_failure():
    d = top("INFO 01-01 00:00:00 [mla.py:12] mla_gluon requires gfx950, got gfx942: using the ASM decode kernel\n")
    assert d is None or d.signature != "attention.kernel_arch_unsupported"


def test_mlir_verifier_error_on_a_triton_op():
    d = top("loc(\"/x/vllm/attention/ops/triton_decode_attention.py\":120:16): error: 'tt.dot' op requires the same "
            "element type for all operands\n")
    assert d is not None and d.signature == "triton.llvm_failed", d and d.signature


@pytest.mark.parametrize("text,sig", [
    ("ValueError: trtllm-gen MLA requires SM100/SM103/SM107, got compute capability SM120.",
     "attention.kernel_arch_unsupported"),
    ("RuntimeError: Cake MoE all-reduce requires SM100 or SM103, got SM90", None),  # a quantized MoE's: not ours
])
def test_arch_gates_of_flashinfer(text, sig):
    d = top(text + "\n")
    if sig is None:
        assert d is None or d.signature not in ("attention.kernel_arch_unsupported", "kernels.arch_unsupported")
    else:
        assert d is not None and d.signature == sig, d and d.signature
