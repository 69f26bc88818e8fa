"""k3's dev set (tests/logs/dev-k3/): kernel toolchains on new and old NVIDIA parts, through the CLI, and the
mechanisms that name them, each on the forms the raising code (Triton's make_cubin and ptxas, FlashInfer's JIT and
sampling kernels, CUDA's error strings) writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.diagnose import diagnose
from triage.logread import scan_text
from triage.logread.select import PREFILTER_RE

DEV, EXPECTED = load("dev-k3")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "kernel_library--deepgemm-sm121-family-gate.log":
        "the thread's paste stops before its error text: only vLLM's support_deep_gemm() source and the capability "
        "probe are left, no line that failed",
}


FAILED = {n: c for n, c in EXPECTED.items() if c["category"] != "none"}
HEALTHY = sorted(n for n, c in EXPECTED.items() if c["category"] == "none")


@pytest.mark.parametrize("name", params(FAILED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


@pytest.mark.parametrize("name", HEALTHY)
def test_harmless_dev_log_is_no_failure(name):
    d = top((DEV / name).read_text())
    assert d is None or d.confidence <= 0.5, (d.signature, d.title)


# ---- Triton's bundled ptxas older than the GPU -----------------------------------------------------------

@pytest.mark.parametrize("text,arch", [
    # ptxas itself, under Triton's PTXASError (triton/backends/nvidia/compiler.py make_cubin)
    ("triton.runtime.errors.PTXASError: PTXAS error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
     "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n", "sm_121a"),
    # newer Triton runs a separate ptxas-blackwell for sm_100 and later
    ("ptxas-blackwell fatal   : Value 'sm_110a' is not defined for option 'gpu-name'\n", "sm_110a"),
    # Inductor's autotuning wrapper around the same error
    ("torch._inductor.runtime.triton_heuristics.NoTritonConfigsError: No valid triton configs. PTXASError: PTXAS "
     "error: Internal Triton PTX codegen error\n`ptxas` stderr:\n"
     "ptxas fatal   : Value 'sm_103a' is not defined for option 'gpu-name'\n", "sm_103a"),
    # a ticket title restating it, no "fatal" and no option name
    ('[Bug] Rubin/SM107: opaque ptxas "sm_107a is not defined" on CUDA 13.2\n', "sm_107a"),
    # a title of the bare message
    ("[Bug]: NVIDIA Jetson Thor: Value 'sm_110a' is not defined for option 'gpu-name'\n", "sm_110a"),
])
def test_ptxas_not_knowing_the_arch(text, arch):
    d = first(text)
    assert (d.signature, d.category) == ("triton.ptxas_failed", "triton_compile")
    assert d.facts["arch"] == arch
    assert "TRITON_PTXAS_BLACKWELL_PATH" in d.fix.summary and arch in d.title


def test_ptxas_arch_names_the_toolkit_that_knows_it():
    d = first("ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'\n")
    assert "CUDA 12.9" in d.fix.summary
    d = first("ptxas fatal   : Value 'sm_110a' is not defined for option 'gpu-name'\n")
    assert "CUDA 13.0" in d.fix.summary


def test_the_ptxas_error_header_above_it_names_the_arch_below():
    d = first("(EngineCore_DP0 pid=60) ERROR 01-12 01:09:14 [core.py:708] triton.runtime.errors.PTXASError: PTXAS "
              "error: Internal Triton PTX codegen error\n"
              "(EngineCore_DP0 pid=60) ERROR 01-12 01:09:14 [core.py:708] `ptxas` stderr:\n"
              "(EngineCore_DP0 pid=60) ERROR 01-12 01:09:14 [core.py:708] ptxas fatal   : Value 'sm_121a' is not "
              "defined for option 'gpu-name'\n")
    assert d.signature == "triton.ptxas_failed" and "sm_121a" in d.title


def test_a_ptx_isa_too_old_for_the_target_is_not_an_unknown_arch():
    # Triton emitting an older PTX ISA than the target needs: the generic ptxas failure (upgrade triton)
    d = first("ptxas /tmp/tmpmwke15zw.ptx, line 6; error   : PTX .version 8.4 does not support .target sm_120a\n"
              "ptxas fatal   : Ptx assembly aborted due to errors\n")
    assert (d.signature, d.category) == ("triton.ptxas_failed", "triton_compile")
    assert "arch" not in d.facts and "upgrade triton" in d.fix.summary


def test_a_python_name_error_is_no_ptxas_message():
    d = top("NameError: name 'sm_90a' is not defined\n")
    assert d is None or d.signature != "triton.ptxas_failed"


@pytest.mark.parametrize("text", [
    "ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'",
    '[Bug] Rubin/SM107: opaque ptxas "sm_107a is not defined" on CUDA 13.2',
    "2026-09-10 08:12:03,118 - INFO - flashinfer.jit: Loading JIT ops: sampling",
])
def test_the_prefilter_keeps_these_lines(text):
    assert PREFILTER_RE.search(text.encode())


# ---- a FlashInfer JIT module built with another CUDA than torch's -----------------------------------------

@pytest.mark.parametrize("text", [
    # FlashInfer's sampling kernels check the CUDA status and report cudaGetErrorString's words
    "2026-09-10 08:12:03,118 - INFO - flashinfer.jit: Loading JIT ops: sampling\n"
    "2026-09-10 08:13:41,502 - INFO - flashinfer.jit: Finished loading JIT ops: sampling\n"
    "RuntimeError: TopKTopPSamplingFromProb failed with error code CUDA driver version is insufficient for CUDA "
    "runtime version\n",
    # the cached module's path in a frame, the error by its enum name
    '  File "/root/.cache/flashinfer/0.6.16/120f/cached_ops/sampling/sampling.so", line 1, in <module>\n'
    "RuntimeError: CUDA error: cudaErrorInsufficientDriver\n",
    # a thread's account of it
    "FlashInfer JIT selected the host `nvcc` and generated a cached sampler linked against `libcudart.so.13`. "
    "The same cache was later loaded by Ray workers using CUDA 12.9 compatibility libraries, and sampling failed "
    "with `cudaErrorInsufficientDriver (35)`.\n",
])
def test_flashinfer_jit_module_against_an_older_driver(text):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.flashinfer_jit_other_cuda", "kernel_library")
    assert "~/.cache/flashinfer" in d.fix.summary


def test_insufficient_driver_without_flashinfer_jit_stays_the_driver():
    d = first("RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n")
    assert d.category == "cuda_driver"


def test_torch_refusing_the_driver_stays_the_driver_even_with_flashinfer_jit_lines():
    d = first("2026-09-10 08:12:03,118 - INFO - flashinfer.jit: Loading JIT ops: sampling\n"
              "RuntimeError: The NVIDIA driver on your system is too old (found version 12020). Please update your "
              "GPU driver\n"
              "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version\n")
    assert d.category == "cuda_driver"


def test_the_driver_error_before_any_flashinfer_jit_stays_the_driver():
    d = first("RuntimeError: CUDA error: cudaErrorInsufficientDriver\n"
              "2026-09-10 08:12:03,118 - INFO - flashinfer.jit: Loading JIT ops: sampling\n")
    assert d.category == "cuda_driver"


# ---- CUTLASS's Python DSL older than the GPU -------------------------------------------------------------

@pytest.mark.parametrize("text,arch", [
    # Python's enum refusing Arch[name] inside cute.compile (an older nvidia-cutlass-dsl)
    ('  File "/x/nvidia_cutlass_dsl/python_packages/cutlass/base_dsl/compiler.py", line 228, in compile\n'
     '  File "/usr/lib/python3.12/enum.py", line 813, in __getitem__\n'
     "KeyError: 'sm_107a'\n", "sm_107a"),
    # a thread quoting it
    ("On SM107 (Rubin) with a CuTe DSL older than 4.8, FlashInfer fails with a bare `KeyError: 'sm_107a'` raised "
     "from `enum.py` inside `cute.compile`\n", "sm_107a"),
])
def test_cute_dsl_without_the_arch(text, arch):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.cute_dsl_arch_missing", "kernel_library")
    assert d.facts["arch"] == arch and "CUTE_DSL_ARCH" in d.fix.summary


def test_an_sm_keyerror_without_the_dsl_is_not_claimed():
    d = top("KeyError: 'sm_90a'\n")
    assert d is None or d.signature != "kernels.cute_dsl_arch_missing"


@pytest.mark.parametrize("text,arch", [
    # the op's admissible-arch check, with and without the enum prefix (CuTe DSL 4.2 printed the bare name)
    ("cutlass.cute.nvgpu.common.OpError: OpError: expects arch to be one of ['sm_100a', 'sm_100f'], but got "
     "sm_121a\n", "sm_121a"),
    ("cutlass.cute.nvgpu.common.OpError: OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a\n",
     "sm_121a"),
])
def test_cute_dsl_op_refusing_the_arch(text, arch):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.cute_dsl_arch_unsupported", "kernel_library")
    assert d.facts["arch"] == arch


# ---- vLLM's default Triton kernel configs: a warning, never the failure ------------------------------------

@pytest.mark.parametrize("line", [
    # fused_moe.get_moe_configs
    "WARNING 05-03 17:42:23 [fused_moe.py:668] Using default MoE config. Performance might be sub-optimal! Config "
    "file not found at /x/fused_moe/configs/E=16,N=1536,device_name=NVIDIA_H100_80GB_HBM3.json",
    # quantization/utils/fp8_utils.py and int8_utils.py, block-scaled GEMM
    "WARNING 05-03 17:42:24 [fp8_utils.py:435] Using default W8A8 Block FP8 kernel config. Performance might be "
    "sub-optimal! Config file not found at /x/configs/N=9216,K=4096,device_name=NVIDIA_L20.json",
    "WARNING 05-03 17:42:24 [int8_utils.py:421] Using default W8A8 Block INT8 kernel config. Performance might be "
    "sub-optimal! Config file not found at /x/configs/N=9216,K=4096,device_name=NVIDIA_A100.json",
])
def test_default_kernel_config_is_harmless(line):
    ds, notes = diagnose(scan_text(line + "\n"))
    assert all(d.confidence <= 0.5 for d in ds)
    assert "harmless.default_kernel_config" in {n.signature for n in notes}


def test_default_kernel_config_does_not_hide_the_failure_after_it():
    d = first("WARNING 05-03 17:42:23 [fused_moe.py:668] Using default MoE config. Performance might be "
              "sub-optimal! Config file not found at /x/E=8,N=3584,device_name=Tesla_T4.json\n"
              "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 81920, Hardware "
              "limit: 65536. Reducing block sizes or `num_stages` may help.\n")
    assert d.category == "triton_compile"


# ---- FlashAttention 4's architecture assertion --------------------------------------------------------------

@pytest.mark.parametrize("text", [
    # vllm_flash_attn/cute/flash_fwd_sm100.py (and flash_attn/cute upstream): assert on the DSL's arch
    '  File "/x/vllm/vllm_flash_attn/cute/flash_fwd_sm100.py", line 162, in __init__\n'
    '    assert self.arch >= Arch.sm_100 and self.arch <= Arch.sm_110f, "Only SM 10.x and 11.x are supported"\n'
    "AssertionError: Only SM 10.x and 11.x are supported\n",
    # a thread quoting it in a fenced block
    "```text\nAssertionError: Only SM 10.x and 11.x are supported\n```\n",
])
def test_fa4_refusing_the_arch(text):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.fa4_arch_refused", "kernel_library")
    assert "nvidia-cutlass-dsl[cu13]" in d.fix.summary and "VLLM_FLASH_ATTN_VERSION" in d.fix.summary


# ---- FlashInfer refusing a backend on this GPU --------------------------------------------------------------

@pytest.mark.parametrize("text,title", [
    # flashinfer/utils.py backend_requirement: an explicit backend the capability lacks
    ("flashinfer.utils.BackendSupportedError: mm_fp4 does not support backend 'cute-dsl' with capability 120\n",
     "FlashInfer's mm_fp4 has no 'cute-dsl' kernel for this GPU (compute capability 120)"),
    # the same message, re-raised by vLLM's executor around a worker's failure
    ("RuntimeError: Worker failed with error 'bmm_fp8 does not support backend 'cudnn'', please check the stack "
     "trace above for the root cause\n", "FlashInfer's bmm_fp8 has no 'cudnn' kernel for this GPU"),
    # backend="auto" with none left
    ("flashinfer.utils.BackendSupportedError: No suitable auto backends found for mm_fp4\n",
     "FlashInfer found no backend of mm_fp4 that runs here"),
])
def test_flashinfer_backend_refused_on_this_gpu(text, title):
    d = first(text)
    assert (d.signature, d.category) == ("kernels.flashinfer_backend_unsupported", "kernel_library")
    assert d.title == title
