"""Runtime-side rules (driver, NCCL/Ray, host, GPU generation, kernels, install) on the forms real
logs take: messages as the raising source writes them, and the dev set's real logs through the CLI.
"""

from __future__ import annotations


import pytest

from tests.dev_sets import check, load, params, top
from triage.logread import scan_text

DEV, EXPECTED = load("dev-rt")




def test_paste_starting_mid_traceback_keeps_its_frames():
    # Pasted from the middle of a worker's traceback: no "Traceback" line, and the paste ends in a frame.
    log = ("(Worker pid=11) ERROR 04-14 13:46:59 [multiproc_executor.py:857]   File \"/x/site-packages/vllm/"
           "distributed/parallel_state.py\", line 376, in __init__\n"
           "(Worker pid=11) ERROR 04-14 13:46:59 [multiproc_executor.py:857]     self.device_communicator = c(\n"
           "(Worker pid=11) ERROR 04-14 13:46:59 [multiproc_executor.py:857]   File \"/x/site-packages/vllm/"
           "distributed/device_communicators/pynccl.py\", line 99, in __init__\n")
    d = top(log)
    assert d is not None and d.category == "distributed"


def test_headerless_frames_then_message_attach_to_the_message():
    scan = scan_text('  File "/x/site-packages/flashinfer/jit/core.py", line 10, in build_and_load\n'
                     "    run()\n"
                     "RuntimeError: Ninja build failed.\n")
    exc = [e for e in scan.exceptions if e.type == "RuntimeError"]
    assert exc and exc[0].frames and exc[0].frames[-1].func == "build_and_load"


# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


# ---- DeepGEMM: DGException's "<kind> error (<file>:<line>): <reason>" (csrc/utils/exception.hpp) ----------

@pytest.mark.parametrize("line,sig,cat", [
    ("RuntimeError: Assertion error (/workspace/.deps/deepgemm-src/csrc/apis/layout.hpp:59): Unknown SF transformation",
     "quant.deepgemm_scale_layout", "quantization"),
    ("RuntimeError: Assertion error (csrc/apis/../jit_kernels/impls/../heuristics/../../utils/layout.hpp:76): "
     "Unknown recipe", "quant.deepgemm_scale_layout", "quantization"),
    ("tvm.error.InternalError: Assertion error (/deepgemm/csrc/apis/layout.hpp:59): Unknown SF transformation",
     "quant.deepgemm_scale_layout", "quantization"),
    ("RuntimeError: Assertion error (/x/deepgemm-src/csrc/apis/einsum.hpp:174): Unsupported architecture",
     "kernels.deepgemm_jit_failed", "kernel_library"),
])
def test_deepgemm_assertions(line, sig, cat):
    d = top(line + "\n")
    assert (d.signature, d.category) == (sig, cat)


# ---- a kernel library that is not the release vLLM calls -------------------------------------

@pytest.mark.parametrize("line,lib", [
    ("TypeError: trtllm_batch_decode_sparse_mla_dsv4() got an unexpected keyword argument 'swa_topk_lens'",
     "flashinfer"),
    ("TypeError: trtllm_fp4_block_scale_moe() missing 1 required positional argument: 'routing_logits'",
     "flashinfer"),
    ("TypeError: fp8_gemm_nt() takes from 3 to 5 positional arguments but 6 were given", "deep_gemm"),
    ("ImportError: cannot import name 'fp8_gemm_nt' from 'deep_gemm' (/opt/venv/lib/python3.12/site-packages/"
     "deep_gemm/__init__.py)", "deep_gemm"),
    ("ImportError: cannot import name 'trtllm_batch_decode_with_kv_cache_mla' from 'flashinfer.decode'", "flashinfer"),
])
def test_library_api_mismatch(line, lib):
    d = top(line + "\n")
    assert d.signature == "kernels.library_api_mismatch" and d.facts["library"] == lib


def test_library_module_without_the_attribute_is_a_mismatch():
    d = top("AttributeError: module 'cutlass.cute.core' has no attribute 'ThrMma'\n")
    assert d.signature == "kernels.library_api_mismatch" and d.facts["package"] == "nvidia-cutlass-dsl"
    d = top("AttributeError: module 'flashinfer.comm' has no attribute 'trtllm_allreduce_fusion'\n")
    assert d.signature == "kernels.library_api_mismatch" and d.facts["library"] == "flashinfer"


def test_cute_dsl_arch_refusal():
    d = top("cutlass.cute.nvgpu.common.OpError: OpError: expects arch to be one of ['sm_120a'], but got Arch.sm_121a\n")
    assert d.signature == "kernels.cute_dsl_arch_unsupported" and d.facts["arch"] == "sm_121a"


def test_generic_or_unknown_callee_is_not_a_library_mismatch():
    for line in ("TypeError: run() got an unexpected keyword argument 'x'",
                 "TypeError: my_own_helper_function() got an unexpected keyword argument 'x'"):
        d = top(line + "\n")
        assert d is None or d.signature != "kernels.library_api_mismatch"


def test_library_api_list_is_generated_from_vllm_wheels():
    from triage.rules.library_api import LIBRARY_API
    assert {"flashinfer", "deep_gemm"} <= set(LIBRARY_API)
    assert "trtllm_batch_decode_with_kv_cache" in LIBRARY_API["flashinfer"]


# ---- vLLM on native Windows ----------------------------------------------------------------------

def test_native_windows_import_failure_is_the_platform():
    log = ("Python 3.11.11 | packaged by Anaconda, Inc. | (main, Dec 11 2024) [MSC v.1929 64 bit (AMD64)] on win32\n"
           ">>> import vllm\nTraceback (most recent call last):\n"
           '  File "C:\\Users\\me\\vllm\\vllm\\utils.py", line 7, in <module>\n    import resource\n'
           "ModuleNotFoundError: No module named 'resource'\n")
    d = top(log)
    assert (d.signature, d.category) == ("environment.unsupported_platform", "environment")


def test_vllm_c_missing_on_linux_stays_an_install_problem():
    d = top('  File "/usr/lib/python3/dist-packages/vllm/_custom_ops.py", line 9, in <module>\n'
            "ModuleNotFoundError: No module named 'vllm._C'\n")
    assert d.signature == "install.vllm_c_missing"


def test_wsl_paths_are_not_windows():
    assert top("Traceback (most recent call last):\n"
               '  File "/mnt/c/Users/me/venv/lib/python3.12/site-packages/vllm/__init__.py", line 3, in <module>\n'
               "ModuleNotFoundError: No module named 'vllm._C'\n").signature == "install.vllm_c_missing"


# ---- Ray placement group never created -------------------------------------------------------

def test_placement_group_wait_counts_only_past_the_first_interval():
    base = ("INFO 05-12 08:01:20 [ray_utils.py:224] Waiting for creating a placement group of specs for {s} seconds. "
            "specs=[{{'GPU': 1.0}}, {{'GPU': 1.0}}]. Check `ray status` and `ray list nodes` to see if you have "
            "enough resources.\n")
    assert top(base.format(s=10)) is None or top(base.format(s=10)).signature != "distributed.ray_gpus"
    assert top(base.format(s=70)).signature == "distributed.ray_gpus"


def test_placement_group_wait_then_start_up_goes_on_is_no_failure():
    log = ("INFO 05-12 08:01:40 [ray_utils.py:224] Waiting for creating a placement group of specs for 30 seconds. "
           "specs=[{'GPU': 1.0}, {'GPU': 1.0}]. Check `ray status` and `ray list nodes` to see if you have enough "
           "resources.\n"
           "(RayWorkerWrapper pid=311) INFO 05-12 08:03:10 [default_loader.py:262] Loading weights took 31.20 seconds\n")
    d = top(log)
    assert d is None or d.signature != "distributed.ray_gpus"


def test_placement_group_timeout_new_form():
    d = top("ValueError: Cannot provide a placement group requiring 8 GPUs (placement_group_specs=[{'GPU': 1.0}]) "
            "within 1800 seconds.\n")
    assert d.signature == "distributed.ray_gpus"


# ---- host RAM: Ray's raylet and memory monitor -----------------------------------------------

@pytest.mark.parametrize("line", [
    "(raylet) node_manager.cc:3007: 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed "
    "due to other reasons at node (ID: abd4, IP: 10.0.167.26) over the last time period.",
    "(raylet) 1 worker(s) were killed due to the node running low on memory. Memory on the node (IP: 10.0.0.3, ID: "
    "ab12) was 120.10GB used / 125.00GB limit (0.960800)",
    "WARNING worker.py:2037 -- A worker died or was killed while executing a task by an unexpected system error. "
    "Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of file. There are some "
    "potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage.",
])
def test_ray_host_oom_lines(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("environment.host_oom_killed", "environment")


def test_unspecified_platform_in_a_whole_log():
    log = ("INFO 05-14 04:44:35 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n"
           "INFO 05-14 04:44:37 [api_server.py:1034] vLLM API server version 0.8.4\n")
    d = top(log)
    assert (d.signature, d.category) == ("environment.no_gpu_visible", "environment")


@pytest.mark.parametrize("line", [
    'RuntimeError: NVML_SUCCESS == r INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":838, '
    "please report a bug to PyTorch.",
    "RuntimeError: NVML_SUCCESS == DriverAPI::get()->nvmlDeviceGetHandleByPciBusId_v2_( pci_id, &nvml_device) "
    'INTERNAL ASSERT FAILED at "../c10/cuda/CUDACachingAllocator.cpp":1139, please report a bug to PyTorch.',
])
def test_nvml_assert_in_the_oom_report_is_an_oom(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("oom.cuda_out_of_memory", "gpu_oom")


# ---- ports: vLLM's ZMQ sockets, and a traceback cut inside bind() -----------------------------

def test_zmq_address_in_use_names_the_port():
    d = top("zmq.error.ZMQError: Address already in use (addr='tcp://127.0.0.1:5570')\n")
    assert d.signature == "environment.port_in_use" and d.title.endswith("(port 5570)")


def test_traceback_cut_inside_bind_is_a_port_in_use():
    d = top('  File "/usr/local/lib/python3.10/dist-packages/vllm/entrypoints/openai/rpc/server.py", line 35, in __init__\n'
            '    self.socket.bind(f"tcp://127.0.0.1:{port}")\n'
            '  File "/usr/local/lib/python3.10/dist-packages/zmq/sugar/socket.py", line 311, in bind\n'
            "    super().bind(addr)\n")
    assert (d.signature, d.category) == ("environment.port_in_use", "environment") and d.confidence <= 0.6


# ---- torch / container runtime messages ---------------------------------------------------------

@pytest.mark.parametrize("line,sig", [
    ("RuntimeError: CUDA error: invalid device ordinal", "environment.invalid_device_ordinal"),
    ("RuntimeError: No HIP GPUs are available", "environment.no_gpu_visible"),
    ("docker: Error response from daemon: failed to create task for container: OCI runtime create failed: "
     "nvidia-container-cli: initialization error: nvml error: driver not loaded: unknown.", "environment.no_gpu_visible"),
    ("RuntimeError: Found Tesla P100-SXM2-16GB which is too old to be supported by the triton GPU compiler, which is "
     "used as the backend. Triton only supports devices of CUDA Capability >= 7.0, but your device is of CUDA "
     "capability 6.0", "gpu.compute_capability_too_low"),
    ("RuntimeError: GPUs with compute capability below 7.0 are not supported.", "gpu.compute_capability_too_low"),
    ("NotImplementedError: No compiled get_cutlass_moe_mm_data: no cutlass_scaled_mm kernel for CUDA device "
     "capability: 120. Required capability: 90 or 100", "quant.kernel_unsupported_gpu"),
    ("      The detected CUDA version (11.8) mismatches the version that was used to compile",
     "install.build_cuda_mismatch"),
    # ROCm builds of torch say HIP where CUDA builds say CUDA
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 816.00 MiB. GPU 0 has a total capacity of 64.00 GiB "
     "of which 487.46 MiB is free.", "oom.cuda_out_of_memory"),
    ("RuntimeError: HIP error: out of memory", "oom.cuda_out_of_memory"),
    ("RuntimeError: UVA is not available", "environment.uva_unavailable"),
    # triton/backends/nvidia/driver.py
    ("AssertionError: libcuda.so cannot found!", "triton.libcuda_not_found"),
    ("/usr/bin/ld: cannot find -lcuda: No such file or directory", "triton.libcuda_not_found"),
])
def test_torch_and_runtime_messages(line, sig):
    assert top(line + "\n").signature == sig


# ---- more of vLLM's own runtime messages, as its source writes them -----------------------------------

@pytest.mark.parametrize("line,sig", [
    ("AssertionError: Error in memory profiling. Initial free memory 61.2 GiB, current free memory 64.8 GiB. This "
     "happens when other processes sharing the same container release GPU memory", "environment.gpu_memory_changed"),
    ("AssertionError: Error in memory profiling. Initial free memory 23622320128, current free memory 24135073792. "
     "This happens when the GPU memory was not properly cleaned up", "environment.gpu_memory_changed"),
    ("ValueError: Using Ray backend requires installation of ray.", "distributed.ray_missing"),
    ("RuntimeError: Fault detected in EP all2all communication: one or more ranks timed out during dispatch/combine. "
     "Mask: [1, 0]", "distributed.collective_timeout"),
    ("RuntimeError: DeepGEMM backend is unavailable in the current vLLM environment, or the available DeepGEMM package "
     "does not provide the required kernels", "kernels.deepgemm_missing"),
    ("ValueError: libcudart is not loaded in the current process, try setting VLLM_CUDART_SO_PATH",
     "install.cuda_runtime_lib_missing"),
    ("RuntimeError: Insufficient space in /dev/shm for shm_broadcast: 512.00 MiB required, 64.00 MiB free. Increase "
     "/dev/shm (e.g. --shm-size or --ipc=host).", "distributed.nccl_shm"),
])
def test_runtime_messages_from_source(line, sig):
    assert top(line + "\n").signature == sig


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])
