"""edge's dev set (tests/logs/dev-edge/): real logs from vLLM on consumer, workstation and edge machines (RTX 50 /
SM120, DGX Spark / GB10, Jetson Orin / Thor, Pascal cards, native Windows, mixed-GPU boxes, Colab) through the CLI,
and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-edge")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "environment--windows-v100-no-module-named-triton.log":
        "the paste never says Windows (only the answer does): a missing triton module reads as an install gap",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a SIGKILL on a board whose GPU memory is the system RAM -------------------------------------------------

@pytest.mark.parametrize("text", [
    "Jetson AGX Orin 64GB, JetPack 6.2\n"
    "INFO 01-23 07:34:26 gpu_executor.py:122] # GPU blocks: 11836, # CPU blocks: 4681\nKilled\n",
    "GPU models and configuration : GPU 0: NVIDIA GB10\n"
    "[1]+  Killed                  vllm serve Qwen/Qwen3-32B --gpu-memory-utilization 0.95\n",
    "docker run --runtime nvidia dustynv/vllm:0.8.6-r36.4.0-cu128-24.04 vllm serve facebook/opt-125m\n"
    "RuntimeError: Engine process (pid 212) died with <Signals.SIGKILL: 9>\n",
    "DGX Spark, vLLM 0.12.0\n[ 5123.442] Out of memory: Killed process 4301 (VLLM::EngineCor) total-vm:1283736kB\n",
])
def test_a_kill_on_a_unified_memory_board_is_vllms_gpu_memory_budget(text):
    d = first(text)
    assert (d.signature, d.category) == ("gpu.unified_memory_killed", "gpu_oom")


def test_a_kill_on_a_discrete_gpu_stays_the_hosts_oom_killer():
    d = first("GPU 0: NVIDIA GeForce RTX 4090\n"
              "INFO 01-23 07:34:26 gpu_executor.py:122] # GPU blocks: 11836, # CPU blocks: 4681\nKilled\n")
    assert d.signature == "environment.host_oom_killed"


def test_a_jetson_log_with_no_kill_is_not_an_oom():
    d = top("Jetson Orin Nano 8GB, L4T 36.4.0\nINFO 12-13 10:40:50 [core.py:58] Initializing a V1 LLM engine\n")
    assert d is None or d.signature != "gpu.unified_memory_killed"


# ---- a CUTLASS GEMM's status (CUTLASS_CHECK: the RuntimeError's message is the status string) ----------------

@pytest.mark.parametrize("line,status", [
    ("RuntimeError: Error Internal", "Error Internal"),
    ("(EngineCore_DP0 pid=120) ERROR 01-28 06:36:45 [core.py:946] RuntimeError: Error Not Supported", "Error Not Supported"),
    ("RuntimeError: Error Arch Mismatch", "Error Arch Mismatch"),
    ("RuntimeError: Error Misaligned Operand", "Error Misaligned Operand"),
    ("This reproduces the same `cutlass_gemm_caller.cuh:61` Error Internal outside the OpenAI server path", "Error Internal"),
    ("Error Internal (raised from cutlass_gemm_caller at csrc/quantization/w8a8/cutlass/c3x/cutlass_gemm_caller.cuh:61)",
     "Error Internal"),
])
def test_cutlass_check_status_is_a_kernel_failing_on_this_gpu(line, status):
    d = first(line + "\n")
    assert (d.signature, d.category) == ("quant.cutlass_kernel_status", "quantization")
    assert d.facts["status"] == status


def test_the_selected_cutlass_kernel_is_the_one_to_disable():
    d = first("INFO 05-14 09:02:41 [fp8.py:68] Selected CutlassFP8ScaledMMLinearKernel for Fp8LinearMethod\n"
              "ERROR 05-14 09:04:20 [core.py:700] RuntimeError: Error Internal\n")
    assert "VLLM_DISABLED_KERNELS=CutlassFP8ScaledMMLinearKernel" in d.fix.summary


def test_flashinfer_fp4_runner_status_stays_its_own_rule():
    d = first("RuntimeError: [FP4 gemm Runner] Failed to run cutlass FP4 gemm on sm120. Error: Error Internal\n")
    assert d.signature == "quant.kernel_unsupported_gpu"


# ---- TRL's vLLM server client, in a plain TRL run and in Unsloth ----------------------------------------------

@pytest.mark.parametrize("text", [
    "ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after 240.0 seconds. Make sure the server is "
    "running by running `trl vllm-serve`.\n",
    # TRL's async client (vllm_client_async.py)
    "ConnectionError: The async vLLM server can't be reached at http://localhost:8000 after 300 seconds. Make sure the "
    "server is running by running `trl vllm-serve-async`.\n",
    # releases that printed it and went on
    "The vLLM server can't be reached at 10.0.0.5:8000 after 240 seconds. Make sure the server is running by running "
    "`trl vllm-serve`.\n",
])
def test_trl_without_its_server_is_the_launch(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.trl_vllm_server_unreachable", "engine_config")


def test_the_same_message_under_unsloth_is_a_release_mismatch():
    d = first("==((====))==  Unsloth 2025.3.18: Fast Qwen2 patching. Transformers: 4.50.0. vLLM: 0.8.1.\n"
              "ConnectionError: The vLLM server can't be reached at 0.0.0.0:8000 after 120.0 seconds. Make sure the "
              "server is running by running `trl vllm-serve`.\n")
    assert (d.signature, d.category) == ("downstream.unsloth_trl_vllm_server", "install_mismatch")


# ---- the container runtime's own check of the image's CUDA requirement ----------------------------------------

@pytest.mark.parametrize("text", [
    "docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime "
    "create failed: failed to create NVIDIA Container Runtime: failed to construct OCI spec modifier: requirements not "
    "met: unsatisfied condition: cuda>=13.0\n",
    "OCI runtime create failed: could not apply required modification to OCI specification: error modifying OCI spec: "
    "requirements not met: \ncuda>=13.3||brand=unknown&&driver>=535&&driver<536||brand=grid&&driver>=535: unknown.\n",
])
def test_an_image_needing_a_newer_cuda_than_the_driver_is_the_driver(text):
    d = first(text)
    assert (d.signature, d.category) == ("cuda.driver_too_old", "cuda_driver")


def test_the_requirement_in_an_env_listing_is_no_failure():
    d = top("NVIDIA_REQUIRE_CUDA=cuda>=12.9 brand=tesla,driver>=535,driver<536\n")
    assert d is None or d.signature != "cuda.driver_too_old"
