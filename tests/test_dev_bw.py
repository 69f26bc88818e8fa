"""bw's dev set (tests/logs/dev-bw/): the newest GPU generations and the sparse-MLA / MLA models on them, through
the CLI, and the rules that name them, each on the other wordings the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-bw")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
# (the prose-only DeepGEMM-on-sm_121 report is right only by the word model, which learnt its words)
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- SM12x sparse-MLA backends asserting an indexer on every layer ------------------------------------------

@pytest.mark.parametrize("text, backend", [
    ("AssertionError: FLASHINFER_MLA_SPARSE SM120 requires a sparse-MLA indexer (model with index_topk in its "
     "config).\n", "FLASHINFER_MLA_SPARSE SM120"),
    ("AssertionError: SPARSE_MLA_SM120 requires a sparse-MLA indexer (model with index_topk in its config).\n",
     "SPARSE_MLA_SM120"),
    ("AssertionError: B12X_MLA_SPARSE requires a sparse-MLA indexer (model with index_topk in its config).\n",
     "B12X_MLA_SPARSE"),
    # as a report quotes it, in backticks
    ("`  FLASHINFER_MLA_SPARSE_SM120 requires a sparse-MLA indexer (model with index_topk in its config) `\n",
     "FLASHINFER_MLA_SPARSE_SM120"),
])
def test_sparse_backend_without_indexer_is_the_attention_backend(text, backend):
    d = first(text)
    assert (d.signature, d.category) == ("attention.sparse_mla_indexer_required", "attention_backend")
    assert d.facts["backend"] == backend


# ---- FlashInfer's MLA plan() refusing a dtype ----------------------------------------------------------------

@pytest.mark.parametrize("text, which, dtype", [
    ("ValueError: MLA kv_data_type torch.uint8 is not supported. Supported dtypes: [torch.float16, torch.bfloat16, "
     "torch.float8_e4m3fn].\n", "kv", "torch.uint8"),
    ("flashinfer.mla._core._BackendPlanUnsupportedError: MLA kv_data_type torch.float8_e4m3fn is not supported by "
     "the fa2 backend. Supported dtypes: [torch.float16, torch.bfloat16].\n", "kv", "torch.float8_e4m3fn"),
    ("_BackendPlanUnsupportedError: MLA q_data_type torch.float32 is not supported by the cute backend.\n",
     "q", "torch.float32"),
])
def test_mla_plan_dtype_refusal_is_the_attention_backend(text, which, dtype):
    d = first(text)
    assert (d.signature, d.category) == ("attention.mla_plan_dtype_unsupported", "attention_backend")
    assert (d.facts["which"], d.facts["dtype"]) == (which, dtype)
    assert "?" not in d.title


# ---- FlashInfer's TRT-LLM attention kernel tile check --------------------------------------------------------

@pytest.mark.parametrize("text", [
    # the printf-style message printed with its values unformatted, as FlashInfer's TVM-FFI path shows it
    "RuntimeError: Expect (32 <= headDim <= 2048) && (numTokensPerPage <= 128), got headDimPerCtaV=%d, "
    "headDimQk=%d, headDimV=%d, numTokensPerPage=%d256256256544\n",
    "RuntimeError: Expect (32 <= headDim <= 1024) && (numTokensPerPage <= 128), got headDimPerCtaV=128, "
    "headDimQk=128, headDimV=128, numTokensPerPage=256\n",
    "RuntimeError: Expect (headDim <= 2048) && (numTokensPerPage <= 128), got headDim=128, numTokensPerPage=272\n",
])
def test_trtllm_attention_page_size_is_the_attention_backend(text):
    d = first(text)
    assert (d.signature, d.category) == ("attention.trtllm_page_size_unsupported", "attention_backend")


def test_the_trtllm_head_count_check_is_not_the_page_size():
    d = top("RuntimeError: The maxNumHeadsQPerKv <= 128 is required.\n")
    assert d is None or d.signature != "attention.trtllm_page_size_unsupported"


# ---- an fp8 KV cache whose MLA prefill needs an fp8 query ---------------------------------------------------

def test_kimi_fp8_kv_prefill_query_is_the_attention_backend():
    d = first("RuntimeError: Worker failed with error 'Kimi-K3 fp8 KV cache requires an fp8 prefill query; enable "
              "--attention-config '{\"use_prefill_query_quantization\": true}'.', please check the stack trace "
              "above for the root cause\n")
    assert (d.signature, d.category) == ("attention.fp8_kv_prefill_query_required", "attention_backend")
    assert d.facts["model"] == "Kimi-K3"
    assert "use_prefill_query_quantization" in d.fix.summary


# ---- FlashInfer's NVFP4 weight shuffle needing 128-aligned rows ---------------------------------------------

@pytest.mark.parametrize("text", [
    '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/utils.py", line 882, in '
    'get_shuffle_matrix_sf_a_row_indices\n    assert M % 128 == 0\nAssertionError\n',
    '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/utils.py", line 758, in '
    'get_shuffle_matrix_sf_a_row_indices\n    assert K % 4 == 0\n           ^^^^^^^^^^\nAssertionError\n',
    '  File "/usr/local/lib/python3.12/dist-packages/flashinfer/utils.py", line 712, in '
    'get_shuffle_matrix_a_row_indices\n    assert M % shuffle_block_size == 0, (\n'
    'AssertionError: input_tensor.shape[0] must be multiples of 16\n',
])
def test_fp4_shuffle_alignment_is_quantization(text):
    d = first(text)
    assert (d.signature, d.category) == ("quant.fp4_shuffle_alignment", "quantization")


def test_a_bare_modulo_assert_elsewhere_is_not_the_fp4_shuffle():
    d = top('  File "/work/model.py", line 10, in pad\n    assert M % 128 == 0\nAssertionError\n')
    assert d is None or d.signature != "quant.fp4_shuffle_alignment"


# ---- CUTLASS DSL kernels failing to compile ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "cutlass.base_dsl.common.DSLRuntimeError: DSLRuntimeError: Failed to create dynamic if \n",
    "cutlass.base_dsl.common.DSLRuntimeError: DSLRuntimeError: \U0001f9ca\U0001f9ca\U0001f9ca ICE IR Verification "
    "Failed \U0001f9ca\U0001f9ca\U0001f9ca\n",
    "DSLRuntimeError: Unable to convert dynamic Boolean value to bool at compile time\n",
    "TypeError: Expected an MLIR object (got OpResultList)\n",
])
def test_cute_dsl_compile_failure_is_the_kernel_library(text):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.cute_dsl_compile_failed", "kernel_library")


def test_cute_dsl_arch_refusal_keeps_its_own_rule():
    d = first("cutlass.base_dsl.common.DSLRuntimeError: OpError: expects arch to be one of [Arch.sm_100a, "
              "Arch.sm_100f], but got Arch.sm_121a\n")
    assert d.signature == "kernels.cute_dsl_arch_unsupported"


# ---- DeepGEMM refusing a GPU below SM90 vs one it has no build for ------------------------------------------

_DG = "RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/hyperconnection.hpp:56): Unsupported " \
      "architecture\n"


@pytest.mark.parametrize("gpu_line", [
    "Found GPU0 NVIDIA A100-SXM4-80GB which is of cuda capability 8.0.\n",
    "GPU 0: NVIDIA GeForce RTX 3090\n",
    "I am trying to run DeepSeek-V4-Flash on NVIDIA A800 GPUs, which are sm_80 / Ampere GPUs.\n",
])
def test_deepgemm_refusal_below_sm90_is_the_gpu(gpu_line):
    d = first(gpu_line + _DG)
    assert (d.signature, d.category) == ("gpu.deepgemm_below_sm90", "unsupported_gpu")


@pytest.mark.parametrize("gpu_line", [
    "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1.\n",
    "GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition\n",
    "",  # no GPU named: DeepGEMM's build, as before
    # both sides named in prose: no reading of the GPU
    "Works on H100, fails on our A100 nodes.\n",
])
def test_deepgemm_refusal_on_newer_or_unknown_gpus_stays_the_kernel_library(gpu_line):
    d = first(gpu_line + _DG)
    assert (d.signature, d.category) == ("kernels.deepgemm_jit_failed", "kernel_library")


def test_a_gpu_series_named_in_prose_reads_its_generation():
    d = first("Our two RTX 3090 cards cannot run DeepSeek-V4.\n" + _DG)
    assert d.signature == "gpu.deepgemm_below_sm90"
