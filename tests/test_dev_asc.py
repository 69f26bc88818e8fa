"""asc's dev set (tests/logs/dev-asc/): vLLM on Ascend NPUs through vllm-ascend, through the CLI, and the
mechanisms that name them, each on the forms CANN, torch_npu and vllm-ascend write."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-asc")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- CANN libraries torch_npu links at import ------------------------------------------------------------

@pytest.mark.parametrize("text, package", [
    ("ImportError: libatb.so: cannot open shared object file: No such file or directory\n", "NNAL"),
    ("ImportError: libhccl.so: cannot open shared object file: No such file or directory\n", "toolkit"),
    ("OSError: libascendcl.so: cannot open shared object file: No such file or directory\n", "toolkit"),
    ("ImportError: libopapi.so: cannot open shared object file: No such file or directory\n", "toolkit"),
])
def test_a_cann_library_missing_names_its_package(text, package):
    d = first(text)
    assert (d.signature, d.category) == ("ascend.cann_library_missing", "environment")
    assert package in d.title


def test_the_driver_library_stays_the_driver_rule():
    d = first("ImportError: libascend_hal.so: cannot open shared object file: No such file or directory\n")
    assert d.signature == "environment.ascend_driver_missing"


# ---- kernels and compiler targets for this SoC ------------------------------------------------------------

def test_opp_kernels_missing_for_the_soc():
    d = first("RuntimeError: call aclnnSwiGlu failed, detail:EZ1001: [PID: 72153] 2025-03-04-15:41:40.695.851 Get path "
              "and read binary_info_config.json failed, please check if the opp_kernel package is installed!\n")
    assert (d.signature, d.category) == ("ascend.soc_kernels_missing", "unsupported_gpu")


@pytest.mark.parametrize("soc", ["Ascend310P3", "Ascend310P1", "Ascend910B4-1"])
def test_bishengir_without_the_target(soc):
    d = first(f"bishengir-compile: for the --target option: Cannot find option named '{soc}'!\n")
    assert (d.signature, d.category) == ("ascend.triton_soc_target_unknown", "unsupported_gpu")
    assert soc in d.title


# ---- aclnn dtype checks -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    # torch_npu's wrapper with the op, CANN's parameter error on the next line (vllm-ascend #7443)
    "RuntimeError: npu_quant_matmul_symint: NPU function error: call aclnnQuantMatmulWeightNz failed, error code is "
    "161002\nAclNN_Parameter_Error(EZ1001): Tensor scale not implemented for DT_FLOAT16,\nshould be in dtype support "
    "list [DT_UINT64, DT_BFLOAT16, DT_INT64, DT_FLOAT].\n",
    # the w8a16 kernel's bias (vllm-ascend #7039's operator, same check)
    "RuntimeError: call aclnnWeightQuantBatchMatmulV2 failed, detail:EZ1001: [PID: 1] biasOptional not implemented "
    "for DT_BFLOAT16, should be in dtype support list [DT_FLOAT].\n",
])
def test_quantized_matmul_dtype_is_quantization(text):
    d = first(text)
    assert (d.signature, d.category) == ("ascend.quant_matmul_dtype", "quantization")


def test_quantized_matmul_names_the_supported_dtypes():
    d = first("call aclnnQuantMatmulWeightNz failed, error code is 161002\nAclNN_Parameter_Error(EZ1001): Tensor "
              "scale not implemented for DT_FLOAT16, should be in dtype support list [DT_UINT64, DT_BFLOAT16].\n")
    assert "bfloat16" in d.fix.summary and d.facts["dtype"] == "float16"


def test_bf16_on_a_card_without_it_is_a_dtype():
    d = first("RuntimeError: call aclnnRmsNorm failed, detail:EZ1001: self not implemented for DT_BFLOAT16, should "
              "be in dtype support list [DT_FLOAT16,DT_FLOAT].\n")
    assert (d.signature, d.category) == ("ascend.aclnn_dtype_unsupported", "dtype_unsupported")


# ---- graph modes ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "NotImplementedError: ACL Graph does not support deepseek. Please adopt additional_config={'enable_graph_mode': "
    "True} to serve deepseek models with NPU graph mode on vllm-ascend with V1 engine. Or set `enforce_eager=True` "
    "to use eager mode.\n",
    "NotImplementedError: ACL Graph does not support deepseek. Please try torchair graph mode to serve deepseek "
    "models on vllm-ascend. Or set `enforce_eager=True` to use eager mode.\n",
])
def test_acl_graph_refusing_deepseek(text):
    d = first(text)
    assert (d.signature, d.category) == ("ascend.acl_graph_model_refused", "engine_config")
    assert "--enforce-eager" in d.fix.summary


def test_tuple_size_without_the_chunked_mla_path_is_not_torchair():
    d = top("  File \"/x/model.py\", line 3, in forward\n    n = x.size(0)\nAttributeError: 'tuple' object has no "
            "attribute 'size'\n")
    assert d is None or d.signature != "ascend.torchair_chunked_prefill"


# ---- MoE routing and the optional custom ops ---------------------------------------------------------------

def test_zero_groups_without_group_topk_is_not_the_moe_rule():
    d = top("RuntimeError: shape '[4096, 0, -1]' is invalid for input of size 65536\n")
    assert d is None or d.signature != "ascend.moe_group_topk_no_groups"


@pytest.mark.parametrize("level", ["ERROR", "WARNING"])
def test_vllm_ascend_c_import_is_harmless_at_either_level(level):
    d = top(f"{level} 04-28 16:10:09 camem.py:69] Failed to import vllm_ascend_C:No module named "
            "'vllm_ascend.vllm_ascend_C'\n")
    assert d is None or d.confidence <= 0.5
