"""tpu's dev set (tests/logs/dev-tpu/): real logs from vLLM on TPU, CPU, Intel XPU, Gaudi, Neuron and WSL2 hosts,
through the CLI, and the mechanisms that name them, each on the other wordings the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-tpu")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "install_mismatch--neuron-llama-failed-to-be-inspected-old-torch-neuronx.log":
        "the log shows only the registry's 'failed to be inspected' (the inspection subprocess crashed, its own "
        "error not pasted); the old torch-neuronx is the maintainer's reading, not in the log",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- the TPU mesh: a parallel size larger than the slice, or JAX without the TPU -------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: Number of devices 4 must be >= the product of mesh_shape (1, 8)\n",
    "INFO 01-02 10:00:00 [__init__.py:25] TPU info: node_name=n | tpu_type=v6e-4 | worker_id=0 | num_chips=4 | "
    "num_cores_per_chip=1\nValueError: Insufficient devices for 2D mesh: found 4, expected 8 for mesh shape (1, 8).\n",
])
def test_mesh_larger_than_the_slice_is_the_parallel_size(text):
    d = first(text)
    assert (d.signature, d.category) == ("tpu.mesh_devices_short", "engine_config")
    assert d.facts["found"] == 4 and d.facts["expected"] == 8


@pytest.mark.parametrize("text", [
    "ValueError: Number of devices 1 must be >= the product of mesh_shape (4, 1)\n",
    "WARNING: A Google TPU may be present on this machine, but either a TPU-enabled jaxlib or libtpu is not "
    "installed. Falling back to cpu.\nValueError: Number of devices 1 must be >= the product of mesh_shape (1, 4)\n",
    # the plugin's TPU-info row where a paste keeps it (a routine INFO line is not selected from a whole log)
    "TPU info: node_name=n | tpu_type=v5e-8 | worker_id=0 | num_chips=8 | "
    "num_cores_per_chip=1\nValueError: Insufficient devices for 2D mesh: found 4, expected 8 for mesh shape (1, 8).\n",
])
def test_mesh_with_fewer_devices_than_chips_is_a_hidden_tpu(text):
    d = first(text)
    assert (d.signature, d.category) == ("tpu.jax_devices_missing", "environment")


# ---- TPU head sizes and XLA memory ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "NotImplementedError: Head size must be a multiple of 128.\n",
    "RuntimeError: Bad StatusOr access: INTERNAL: Mosaic failed to compile TPU kernel: The last dim size is not 128 "
    "in original base memref\n",
])
def test_tpu_head_size(text):
    d = first(text)
    assert (d.signature, d.category) == ("tpu.head_size_unsupported", "attention_backend")


@pytest.mark.parametrize("text, space", [
    ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in "
     "memory space smem. Used 1.00M of 1.00M smem. Exceeded smem capacity by 1.7K.\n", "SMEM"),
    ("jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory "
     "in memory space hbm. Used 21.95G of 15.48G hbm.\n", "HBM"),
    ("jaxlib._jax.XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space vmem \n", "VMEM"),
    ("RuntimeError: Bad StatusOr access: RESOURCE_EXHAUSTED: Error loading program: Attempting to reserve 1.04G at "
     "the bottom of memory. That was not possible. There are 905.37M free, 0B reserved, and 905.37M reservable.\n",
     "HBM"),
])
def test_xla_resource_exhausted(text, space):
    d = first(text)
    assert (d.signature, d.category) == ("tpu.xla_resource_exhausted", "gpu_oom")
    assert d.facts["space"] == space


# ---- tpu-inference's model registry -----------------------------------------------------------------------------

def test_tpu_inference_unsupported_architecture_exception():
    d = first("INFO 10-21 06:01:52 [__init__.py:30] TPU info: node_name=n | tpu_type=v6e-8 | num_chips=8\n"
              "tpu_inference.models.common.model_loader.UnsupportedArchitectureError: Model architectures "
              "['Glm4MoeForCausalLM'] not registered in tpu-inference.\n")
    assert (d.signature, d.category) == ("tpu.unsupported_architecture", "model_support")
    assert "Glm4MoeForCausalLM" in d.title


def test_tpu_inference_fallback_warning_is_no_failure():
    d = top("WARNING 10-21 06:02:19 [model_loader.py:310] Model architectures ['Glm4MoeForCausalLM'] not registered "
            "in tpu-inference. Falling back to vLLM-native Pytorch definition. JAX-native architectures: "
            "['LlamaForCausalLM']\n")
    assert d is None or d.signature != "tpu.unsupported_architecture"


# ---- Intel XPU: oneCCL ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: oneCCL: ze_fd_manager.cpp:214 fill_device_fds: EXCEPTION: open failed: fd: -1, errno: No such "
    "file or directory\n",
    "RuntimeError: oneCCL: ze_fd_manager.cpp:143 init_device_fds: EXCEPTION: opendir failed: could not open device "
    "directory\n",
    "RuntimeError: Worker failed with error 'oneCCL: ze_call.cpp:28 do_call: EXCEPTION: ze error at "
    "zeMemOpenIpcHandle, code: ZE_RESULT_ERROR_INVALID_ARGUMENT'\n",
    "(WrapperWithLoadBit pid=35347) 2024:09:13-11:21:50:(35347) |CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: "
    "condition !check_msg_retval(\"sendmsg\", send_bytes, iov, msg, sizeof(u.cntr_buf), sock, fd) failed\n",
    "RuntimeError: oneCCL: ze_handle_manager.cpp:42 mem_to_ipc_handle: EXCEPTION: device_fd is invalid value\n",
])
def test_oneccl_failures(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.xpu_oneccl", "distributed")


def test_oneccl_fd_failure_names_the_by_path_mount():
    d = first("RuntimeError: oneCCL: ze_fd_manager.cpp:214 fill_device_fds: EXCEPTION: open failed: fd: -1\n")
    assert "/dev/dri/by-path" in d.fix.summary


def test_a_segfault_without_oneccl_frames_is_not_oneccl():
    d = top("!!!!!!! Segfault encountered !!!!!!!\n  at::native::foo(...)\n")
    assert d is None or d.signature != "distributed.xpu_oneccl"


def test_oneccl_environment_lines_alone_are_no_failure():
    d = top("export CCL_ATL_TRANSPORT=ofi\nexport CCL_ZE_IPC_EXCHANGE=pidfd\n"
            "INFO 07-17 12:28:59 [parallel_state.py:1615] world_size=2 rank=0 local_rank=0 backend=xccl\n")
    assert d is None or d.signature != "distributed.xpu_oneccl"


# ---- platform quantization lists and the Neuron backend's architectures ------------------------------------------

@pytest.mark.parametrize("text, quant, platform", [
    ("ValueError: gptq_bitblas quantization is currently not supported in rocm.\n", "gptq_bitblas", "rocm"),
    ("  Value error, fp8 quantization is currently not supported in tpu. [type=value_error, input_value=ArgsKwargs("
     "(), {})]\n", "fp8", "tpu"),
    ("ValueError: deepseek_v4_fp8 quantization is currently not supported in npu.\n", "deepseek_v4_fp8", "npu"),
    ("ValueError: awq quantization is currently not supported in ROCm.\n", "awq", "ROCm"),
    ("From log we can understand mxfp4 is not currently supported on gaudi3\n", "mxfp4", "gaudi3"),
])
def test_platform_quantization_refusal(text, quant, platform):
    d = first(text)
    assert (d.signature, d.category) == ("quant.platform_unsupported", "quantization")
    assert (d.facts["quant"], d.facts["platform"]) == (quant, platform)


def test_neuron_architecture_refusal():
    d = first("ValueError: Model architectures ['GPTBigCodeForCausalLM'] are not supported on Neuron for now. "
              "Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']\n")
    assert (d.signature, d.category) == ("model_support.neuron_architecture", "model_support")
    assert "LlamaForCausalLM" in d.fix.summary
