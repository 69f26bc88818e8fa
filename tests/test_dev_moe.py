"""moe's dev set (tests/logs/dev-moe/): real logs of mixture-of-experts and expert-parallel failures, through the
CLI, and the MoE rules on the other forms the raising code writes (vLLM's MoE oracles, quantization methods, EPLB
checks, DeepEP, FlashInfer)."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.logread.normalize import clean

DEV, EXPECTED = load("dev-moe")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a forced --moe-backend the quantization's MoE oracle does not map ------------------------------------

@pytest.mark.parametrize("text, backend, quant", [
    ("ValueError: moe_backend='triton' is not supported for NvFP4 MoE. Expected one of ['cutlass', "
     "'flashinfer_trtllm', 'flashinfer_cutlass', 'flashinfer_cutedsl', 'marlin', 'emulation'].\n", "triton", "NvFP4"),
    ("ValueError: moe_backend='marlin' is not supported for unquantized MoE. Expected one of ['triton', "
     "'flashinfer_trtllm', 'flashinfer_cutlass', 'aiter'].\n", "marlin", "unquantized"),
    ("ValueError: moe_backend='flashinfer_b12x' is not supported for FP8 MoE. Expected one of ['triton', "
     "'deep_gemm', 'cutlass', 'flashinfer_trtllm', 'flashinfer_cutlass', 'marlin', 'aiter'].\n",
     "flashinfer_b12x", "FP8"),
    ("ValueError: Unknown flashinfer moe backend: fast expected one of ['throughput', 'latency']\n", "fast", None),
])
def test_moe_backend_refused_by_the_quantization_is_engine_config(text, backend, quant):
    d = first(text)
    assert (d.signature, d.category) == ("moe.backend_not_for_quant", "engine_config")
    assert d.facts["backend"] == backend
    if quant:
        assert d.facts["quant"] == quant


# ---- a quantized MoE scheme no fused MoE method implements ------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Unsupported FusedMoe scheme\n",  # quark, auto-round without the schemes
    "RuntimeError: Unsupported FusedMoe scheme: num_bits=8 type='int' symmetric=True group_size=None "
    "strategy='channel', num_bits=8 type='int' symmetric=True strategy='token' dynamic=True\n",
    "NotImplementedError: Apply router weight on input is not supported forfused Marlin MoE method.\n",
    "NotImplementedError: Expert Parallelism is not supported for fused Marlin MoE method.\n",
])
def test_moe_quant_scheme_unsupported(text):
    d = first(text)
    assert (d.signature, d.category) == ("moe.quant_scheme_unsupported", "quantization")


# ---- gpt-oss's triton_kernels: the failure only where the MXFP4 path needs them ---------------------------

TRITON_LOGGED = ("ERROR 11-05 10:16:20 [gpt_oss_triton_kernels_moe.py:27] Failed to import Triton kernels. Please "
                 "make sure your triton version is compatible. Error: No module named 'triton_kernels.matmul_ogs'\n")
ENGINE_FAILED = "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"


def test_triton_kernels_import_with_gpt_oss_and_no_start_is_the_failure():
    d = first(TRITON_LOGGED + "INFO 11-05 10:16:21 [utils.py:253] non-default args: {'model': 'openai/gpt-oss-20b'}\n"
              + ENGINE_FAILED)
    assert (d.signature, d.category) == ("moe.triton_kernels_unavailable", "kernel_library")


def test_triton_kernels_import_for_another_model_is_harmless():
    d = top(TRITON_LOGGED + "INFO 11-05 10:16:21 [utils.py:253] non-default args: {'model': 'Qwen/Qwen3-8B'}\n")
    assert d is None or d.confidence <= 0.5


def test_triton_kernels_import_before_a_gpt_oss_server_came_up_is_harmless():
    d = top(TRITON_LOGGED + "INFO 11-05 10:16:21 [utils.py:253] non-default args: {'model': 'openai/gpt-oss-20b'}\n"
            "(APIServer pid=1) INFO:     Application startup complete.\n")
    assert d is None or d.confidence <= 0.5


def test_triton_kernels_import_yields_to_the_real_failure():
    d = first(TRITON_LOGGED + "INFO 11-05 10:16:21 [utils.py:253] non-default args: {'model': 'openai/gpt-oss-20b'}\n"
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity "
              "of 79.19 GiB of which 1.02 GiB is free.\n")
    assert d.category == "gpu_oom"


# ---- FlashInfer's CUTLASS fused MoE on a GPU it has no module for ----------------------------------------

@pytest.mark.parametrize("sm", ["80", "86", "75"])
def test_flashinfer_cutlass_fused_moe_arch(sm):
    d = first('  File "/usr/local/lib/python3.12/dist-packages/flashinfer/fused_moe/core.py", line 290, in '
              'get_cutlass_fused_moe_module\n    raise ValueError(f"Invalid backend: {backend}")\n'
              f"ValueError: Invalid backend: {sm}\n")
    assert (d.signature, d.category) == ("moe.flashinfer_cutlass_moe_arch", "unsupported_gpu")
    assert d.facts["sm"] == int(sm)


def test_invalid_backend_outside_fused_moe_is_not_claimed():
    d = top("ValueError: Invalid backend: 80\n")
    assert d is None or d.signature != "moe.flashinfer_cutlass_moe_arch"


# ---- EPLB where the model or its quantization has no support ----------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: enable_eplb=True requiere expert_load_view != None\n",
    "ValueError: enable_eplb=True requiere logical_to_physical_map != None\n",
    "NotImplementedError: EPLB is only supported for FP8 quantization for now.\n",
    "NotImplementedError: EPLB is not supported GPTQMarlinMoEMethod. EPLB is only supported for FP8 quantization "
    "for now.\n",
    "NotImplementedError: EPLB not supported for `CompressedTensorsW4A4MoeMethod` yet.\n",
    '    raise NotImplementedError("EPLB is not supported.")\n',
    "Value error, enable_expert_parallel must be True to use EPLB. [type=value_error, input_value=ArgsKwargs((), {})]\n",
    "ValueError: EPLB requires tensor_parallel_size or data_parallel_size to be greater than 1, but got TP=1,DP=1.\n",
    "ValueError: Expert parallelism load balancing is only supported on CUDA devices now.\n",
])
def test_eplb_unsupported_is_engine_config(text):
    d = first(text)
    assert (d.signature, d.category) == ("moe.eplb_unsupported", "engine_config")


@pytest.mark.parametrize("text, count", [
    ("  Value error, num_redundant_experts should be used with EPLB.16. [type=value_error, input_value=ArgsKwargs(("
     "), {'pipeline...text_parallel_size': 1}), input_type=ArgsKwargs]\n", 16),
    ("ValueError: num_redundant_experts should be used with EPLB.32.\n", 32),
])
def test_redundant_experts_without_eplb(text, count):
    d = first(text)
    assert (d.signature, d.category) == ("moe.redundant_experts_without_eplb", "engine_config")
    assert d.facts["count"] == count


def test_experts_not_divisible_by_ep_size():
    d = first("AssertionError: n_physical_experts=256 must be divisible by ep_size=3. Adjust num_redundant_experts.\n")
    assert (d.signature, d.category) == ("moe.experts_not_divisible_by_ep", "engine_config")
    assert (d.facts["experts"], d.facts["ep"]) == (256, 3)


# ---- DeepEP's all2all waiting for peers that never sent -----------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: DeepEP error: CPU recv timeout\n",
    "[rank428]: RuntimeError: DeepEP error: timeout (dispatch CPU)\n",
    "DeepEP timeout for dispatch senders, rank 3, responsible_channel = 5\n",
    "DeepEP timeout check failed: rank = 2, thread = 1, value = 1)\n",
    "DeepEP RDMA sender coordinator timeout, channel: 2, IB: 0, dst IB: 1, tail: 4, remaining: 12\n",
])
def test_deepep_timeouts_are_distributed(text):
    d = first(text)
    assert (d.signature, d.category) == ("moe.deepep_timeout", "distributed")


# ---- MoE model code against another vLLM's FusedMoE API -----------------------------------------------------

@pytest.mark.parametrize("text, cls", [
    ("TypeError: FusedMoE.make_expert_params_mapping() missing 1 required positional argument: 'model'\n", "FusedMoE"),
    ("TypeError: FusedMoE.__init__() got an unexpected keyword argument 'num_redundant_experts'\n", "FusedMoE"),
    ("TypeError: AscendFusedMoE.forward_impl() takes 3 positional arguments but 4 were given\n", "AscendFusedMoE"),
    ("TypeError: vllm.model_executor.layers.fused_moe.layer.UnquantizedFusedMoEMethod.apply() got multiple values "
     "for argument 'router_logits'\n", "UnquantizedFusedMoEMethod"),
])
def test_fused_moe_call_mismatch_is_an_install_mismatch(text, cls):
    d = first(text)
    assert (d.signature, d.category) == ("moe.fused_moe_interface_mismatch", "install_mismatch")
    assert d.facts["cls"] == cls


def test_a_non_moe_call_error_is_not_claimed():
    d = top("TypeError: LlamaModel.forward() missing 1 required positional argument: 'positions'\n")
    assert d is None or d.signature != "moe.fused_moe_interface_mismatch"


# ---- colour escapes pasted in caret notation ----------------------------------------------------------------

def test_caret_notation_colours_are_dropped():
    assert clean("^[[1;36m(EngineCore_DP0 pid=2344883)^[[0;0m RuntimeError: x") == \
        "(EngineCore_DP0 pid=2344883) RuntimeError: x"
    assert clean("a ^[ b") == "a ^[ b"  # a caret and a bracket that are no escape stay
