"""Environment / install / driver / GPU / dtype / distributed: the dev batch of real thread logs through
the CLI, and the mechanisms that name them (worker deaths by signal, pip/uv resolver output, platform
detection on TPU/XPU/ROCm hosts, native crash lines in NCCL), each on the forms the raising source writes.
"""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-envi")




# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    # the paste holds only Ray's generic note on a vanished worker, whose first named cause is the OOM killer;
    # the segfault is in the thread's prose, not in the log
    "distributed--ray-worker-sigsegv-vgpu-before-nccl.log": "only Ray's generic worker-died note",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- installers: pip's resolver, uv's solver, conda; a version no index has ---------------------------------

@pytest.mark.parametrize("text", [
    "ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
    "This behaviour is the source of the following dependency conflicts.\n"
    "outlines 0.0.46 requires pydantic>=2.0, but you have pydantic 1.10.13 which is incompatible.\n",
    "flashinfer-python 0.2.5 requires torch==2.6.*, but you have torch 2.7.0 which is incompatible.\n",
    "ERROR: Cannot install vllm==0.8.5 and xformers==0.0.27 because these package versions have conflicting "
    "dependencies.\n",
    "  × No solution found when resolving dependencies:\n"
    "  ╰─▶ Because vllm==0.9.0 depends on torch==2.7.0 and you require torch==2.5.1, we can conclude that your "
    "requirements and vllm==0.9.0 are incompatible.\n",
    "LibMambaUnsatisfiableError: Encountered problems while solving:\n",
])
def test_installer_conflicts_are_install_mismatch(text):
    d = top(text)
    assert d is not None and d.category == "install_mismatch", d


def test_pip_conflict_names_the_pinning_package():
    d = top("outlines 0.0.46 requires pydantic>=2.0, but you have pydantic 1.10.13 which is incompatible.\n")
    assert d.signature == "install.dependency_conflict" and "outlines 0.0.46 requires pydantic>=2.0" in d.title


def test_a_conflict_printed_during_install_ranks_below_the_failure_after_it():
    log = ("xformers 0.0.30 requires torch==2.7.0, but you have torch 2.5.1 which is incompatible.\n"
           "Traceback (most recent call last):\n"
           '  File "/x/site-packages/vllm/worker/worker.py", line 10, in init_device\n'
           "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n")
    assert top(log).category == "distributed"


@pytest.mark.parametrize("text,req", [
    ("ERROR: Could not find a version that satisfies the requirement torch==2.6.0.dev20241216+cpu (from versions: "
     "2.5.1, 2.6.0)\n", "torch==2.6.0.dev20241216+cpu"),
    ("ERROR: No matching distribution found for vllm==0.3.3\n", "vllm==0.3.3"),
    ("  ╰─▶ Because there is no version of flashinfer-python==0.2.99 and you require flashinfer-python==0.2.99, we "
     "can conclude that your requirements are unsatisfiable.\n", "flashinfer-python==0.2.99"),
])
def test_no_matching_distribution(text, req):
    d = top(text)
    assert d.signature == "install.no_matching_distribution" and req in d.title


# ---- platform detection failed: a missing GPU, or a vLLM build that cannot run here ------------------------

def test_no_platform_with_vllm_c_unable_to_load_its_cuda_runtime_is_the_build():
    log = ("INFO 11-20 18:08:10 [__init__.py:220] No platform detected, vLLM is running on UnspecifiedPlatform\n"
           "WARNING 11-20 18:08:11 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcudart.so.12:"
           " cannot open shared object file: No such file or directory')\n")
    d = top(log)
    assert (d.signature, d.category) == ("install.platform_build_mismatch", "install_mismatch")


def test_no_platform_with_vllm_package_metadata_missing_is_the_install():
    log = ("WARNING 06-21 19:07:50 [__init__.py:25] The vLLM package was not found, so its version could not be "
           "inspected. This may cause platform detection to fail.\n"
           "INFO 06-21 19:07:50 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n")
    d = top(log)
    assert d.signature == "install.platform_build_mismatch" and "metadata" in d.title


def test_no_platform_with_the_driver_library_missing_stays_no_gpu_visible():
    # libcuda.so.1 is the driver's: its absence means no GPU reached the container
    log = ("INFO 02-14 09:49:07 [__init__.py:253] No platform detected, vLLM is running on UnspecifiedPlatform\n"
           "WARNING 02-14 09:49:08 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('libcuda.so.1: "
           "cannot open shared object file: No such file or directory')\n")
    assert top(log).signature == "environment.no_gpu_visible"


def test_no_platform_alone_stays_no_gpu_visible():
    d = top("INFO 05-14 04:44:35 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n")
    assert d.signature == "environment.no_gpu_visible"


# ---- a worker killed by a signal ------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "ERROR 07-26 14:50:35 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 214281 died, exit code: -11",
    "(EngineCore pid=9) ERROR 06-01 10:00:00 [multiproc_executor.py:381] Worker proc VllmWorker-1 died unexpectedly "
    "(exit code: -11), shutting down executor.",
    "RuntimeError: Process EngineCore_DP0 (PID: 4242) died with exit code -6",
    "Fatal Python error: Segmentation fault",
    "(RayWorkerWrapper pid=77) *** SIGSEGV received at time=1746566409 on cpu 3 ***",
])
def test_worker_killed_by_a_crash_signal_is_named_below_half(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("distributed.worker_crashed", "distributed")
    assert d.confidence < 0.5  # a guess: the cause is in the worker's own output


@pytest.mark.parametrize("line", [
    "ERROR 07-26 14:50:35 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 214281 died, exit code: -9",
    "ChildProcessError: worker died (-9)",
    "ERROR 01-01 10:00:00 [multiproc_executor.py:381] Worker proc VllmWorker-0 died unexpectedly (exit code: -9), "
    "shutting down executor.",
])
def test_worker_killed_by_sigkill_is_the_host_oom_killer(line):
    assert top(line + "\n").signature == "environment.host_oom_killed"


def test_segfault_inside_nccl_is_distributed_with_confidence():
    log = ("(RayWorkerWrapper pid=2191173, ip=10.52.51.232) *** SIGSEGV received at time=1746566409 on cpu 131 ***\n"
           "(RayWorkerWrapper pid=2191173, ip=10.52.51.232) PC: @     0x7fcfcd849b8a  (unknown)  addProxyOpIfNeeded()\n")
    d = top(log)
    assert d.signature == "distributed.worker_crashed" and d.confidence > 0.5 and "NCCL" in d.title


def test_worker_death_ranks_below_the_error_that_killed_it():
    log = ("(VllmWorkerProcess pid=11) ERROR 01-01 10:00:00 multiproc_worker_utils.py:226] RuntimeError: CUDA error: "
           "no kernel image is available for execution on the device\n"
           "ERROR 01-01 10:00:01 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 11 died, exit code: -11\n")
    assert top(log).category == "unsupported_gpu"


def test_bus_error_signal_points_at_shared_memory():
    d = top("ERROR 01-01 10:00:01 multiproc_worker_utils.py:120] Worker VllmWorkerProcess pid 11 died, exit code: -7\n")
    assert d.category == "distributed" and "/dev/shm" in d.title


# ---- a CUDA call on a machine whose platform is not CUDA -----------------------------------------------

def test_cuda_only_code_on_a_tpu_machine_is_not_a_missing_gpu():
    log = ("INFO 02-08 04:33:40 __init__.py:190] Automatically detected platform tpu.\n"
           'ERROR 02-08 04:34:00 engine.py:389]   File "/x/vllm/model_executor/models/deepseek_v2.py", line 589, in '
           "__init__\n"
           "ERROR 02-08 04:34:00 engine.py:389] AssertionError: Torch not compiled with CUDA enabled\n")
    d = top(log)
    assert (d.signature, d.category) == ("environment.unsupported_platform", "environment") and "TPU" in d.title


def test_torch_without_cuda_and_no_other_platform_is_the_torch_build():
    # torch raises it only when built without CUDA: the GPU is there (NVML found it), torch is a CPU wheel
    assert top("AssertionError: Torch not compiled with CUDA enabled\n").signature == "install.torch_without_cuda"


# ---- Intel GPUs: the Unified Runtime under torch-xpu ------------------------------------------------------

@pytest.mark.parametrize("text,sig,cat", [
    ("ERROR 06-26 19:39:06 [worker_base.py:622] RuntimeError: UR error\n", "xpu.ur_error", "unsupported_gpu"),
    ("RuntimeError: level_zero backend failed with error: 20 (UR_RESULT_ERROR_DEVICE_LOST)\n", "xpu.runtime_error",
     "cuda_driver"),
    ("torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 15.11 GiB.\n",
     "xpu.out_of_memory", "gpu_oom"),
    ("RuntimeError: level_zero backend failed with error: 39 (UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY)\n",
     "xpu.out_of_memory", "gpu_oom"),
])
def test_xpu_runtime_messages(text, sig, cat):
    d = top(text)
    assert (d.signature, d.category) == (sig, cat)


# ---- torch's CUDA errors that are the machine's, and a container for another CPU ---------------------------

@pytest.mark.parametrize("line,sig", [
    ("RuntimeError: CUDA error: no CUDA-capable device is detected", "environment.no_gpu_visible"),
    ("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
     "NumCudaDevices() that might have already set an error? Error 100: no CUDA-capable device is detected",
     "environment.no_gpu_visible"),
    ("RuntimeError: Cannot access accelerator device when none is available.", "environment.no_gpu_visible"),
    ("Failed to initialize NVML: Insufficient Permissions", "environment.no_gpu_visible"),
    ("  Warning  FailedScheduling  12s  default-scheduler  0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
     "environment.no_gpu_visible"),
    ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "environment.gpu_hardware_fault"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "environment.gpu_hardware_fault"),
    ("RuntimeError: CUDA error: the launch timed out and was terminated", "environment.gpu_watchdog_timeout"),
    ("exec /usr/bin/python3: exec format error", "environment.unsupported_platform"),
    ("WARNING: The requested image's platform (linux/amd64) does not match the detected host platform "
     "(linux/arm64/v8) and no specific platform was requested", "environment.unsupported_platform"),
])
def test_machine_level_messages(line, sig):
    d = top(line + "\n")
    assert d.signature == sig and d.category == "environment"


def test_error_802_and_804_stay_driver_failures():
    for code, text in (("802", "system not yet initialized"), ("804", "forward compatibility was attempted on non "
                                                                      "supported HW")):
        d = top("RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before "
                f"calling NumCudaDevices() that might have already set an error? Error {code}: {text}\n")
        assert d.category == "cuda_driver", code


# ---- a source build pip fell back to -------------------------------------------------------------------

def test_failed_wheel_build_is_an_install_failure():
    d = top("  ERROR: Failed building wheel for vllm\nFailed to build vllm\n")
    assert (d.signature, d.category) == ("install.build_failed", "install_mismatch") and "vllm" in d.title


def test_failed_wheel_build_of_a_kernel_library_is_that_area():
    d = top("  ERROR: Failed building wheel for flash-attn\n")
    assert d.category == "kernel_library"


# ---- Python-level API mismatches ------------------------------------------------------------------------

@pytest.mark.parametrize("line,what", [
    ("ImportError: cannot import name 'custom_op' from 'torch.library' (/x/torch/library.py)", "torch.library.custom_op"),
    ("AttributeError: module 'torch.library' has no attribute 'register_fake'", "torch.library.register_fake"),
    ("ModuleNotFoundError: No module named 'torch._inductor.standalone_compile'", "torch._inductor.standalone_compile"),
    ("ImportError: cannot import name 'resolve_obj_by_qualname' from 'vllm.utils' (/x/vllm/utils/__init__.py)",
     "vllm.utils.resolve_obj_by_qualname"),
])
def test_module_api_mismatch(line, what):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("install.module_api_mismatch", "install_mismatch") and what in d.title


def test_a_numpy_alias_numpy_removed_is_named_as_such():
    d = top("AttributeError: module 'numpy' has no attribute 'bool'.\n")
    assert (d.signature, d.category) == ("install.numpy_removed_alias", "install_mismatch")


@pytest.mark.parametrize("line,sig", [
    ("ModuleNotFoundError: No module named 'vllm._C'", "install.vllm_c_missing"),
    ("ModuleNotFoundError: No module named 'vllm.vllm_flash_attn'", None),
])
def test_compiled_parts_keep_their_own_rules(line, sig):
    d = top(line + "\n")
    assert d is not None and d.signature != "install.module_api_mismatch"
    if sig:
        assert d.signature == sig


@pytest.mark.parametrize("line", [
    "vllm-1 exited with code 1",
    "RuntimeError: Process EngineCore_DP0 (PID: 4242) died with exit code 1",
])
def test_an_ordinary_exit_status_is_no_signal_death(line):
    d = top(line + "\n")
    assert d is None or d.signature != "distributed.worker_crashed"


@pytest.mark.parametrize("line,sig,cat", [
    ("WARNING[XFORMERS]: xFormers can't load C++/CUDA extensions. xFormers was built for: PyTorch 2.1.0+cu121 with "
     "CUDA 1201 (you have 2.1.2+cu118)", "install.extension_built_for_other_torch", "install_mismatch"),
    ("ERROR: Package 'vllm' requires a different Python: 3.8.10 not in '>=3.9'", "install.no_matching_distribution",
     "install_mismatch"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the latest NVIDIA "
     "driver is installed and running.", "environment.no_gpu_visible", "environment"),
    ("RuntimeError: CUDA error: peer mapping resources exhausted", "distributed.p2p_unsupported", "distributed"),
    ("RuntimeError: Ray has not been started yet. You can start Ray with 'ray start' on one of the machines in the "
     "cluster.", "distributed.ray_not_running", "distributed"),
    ("ImportError: cannot import name 'cached_download' from 'huggingface_hub' (/x/huggingface_hub/__init__.py)",
     "install.module_api_mismatch", "install_mismatch"),
])
def test_more_installer_and_runtime_forms(line, sig, cat):
    d = top(line + "\n")
    assert (d.signature, d.category) == (sig, cat)


@pytest.mark.parametrize("line", [
    "RuntimeError: Bad StatusOr access: UNKNOWN: TPU initialization failed: open(/dev/accel0): Device or resource "
    "busy: Device or resource busy; Couldn't open device: /dev/accel0",
    "INFO:2024-06-25 00:34:55,142:jax._src.xla_bridge:889: Unable to initialize backend 'tpu': ABORTED: The TPU is "
    "already in use by process with pid 176028. Not attempting to load libtpu.so in this process.",
    "RuntimeError: Failed to get global TPU topology.",
])
def test_tpu_that_cannot_be_opened(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("environment.tpu_unavailable", "environment")


def test_kubernetes_oomkilled_is_host_memory():
    d = top("    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n")
    assert d.signature == "environment.host_oom_killed"


def test_a_conflict_before_a_server_that_came_up_is_no_failure():
    log = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are installed."
           " This behaviour is the source of the following dependency conflicts.\n"
           "trl 0.12.0 requires transformers<4.47, but you have transformers 4.53.0 which is incompatible.\n"
           "INFO 07-01 10:00:00 [api_server.py:1043] vLLM API server version 0.9.2\n"
           "INFO:     Application startup complete.\n")
    d = top(log)
    assert d is None or d.signature != "install.dependency_conflict"


@pytest.mark.parametrize("line,req", [
    ("ERROR: vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl is not a supported wheel on this platform.",
     "vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl"),
    ("error: Distribution `vllm==0.10.0 @ registry+https://pypi.org/simple` can't be installed because it doesn't "
     "have a source distribution or wheel for the current platform", "vllm==0.10.0"),
])
def test_no_build_for_this_platform(line, req):
    d = top(line + "\n")
    assert d.signature == "install.no_matching_distribution" and req in d.title


def test_bf16_refused_on_intel_arc():
    d = top("ValueError: Intel Arc A770 have bfloat16 accuracy known issue. You can use float16 instead by explicitly "
            "setting the `dtype` flag in CLI, for example: --dtype=half.\n")
    assert (d.signature, d.category) == ("dtype.bf16_intel_arc", "dtype_unsupported")


@pytest.mark.parametrize("line", [
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node1]:29500 (errno: 110 - Connection "
    "timed out).",
    "RuntimeError: [1] is setting up NCCL communicator and retrieving ncclUniqueId from [0] via c10d key-value store by "
    "key '0', but store->get('0') got error: Connection reset by peer",
])
def test_rendezvous_store_unreachable(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("distributed.master_port", "distributed")


def test_platform_detection_failing_on_a_machine_torch_xla_sees_as_tpu_is_the_tpu_stack():
    log = ("WARNING:root:libtpu.so and TPU device found. Setting PJRT_DEVICE=TPU.\n"
           "ERROR 01-26 17:51:44 engine.py:387] RuntimeError: Failed to infer device type\n")
    d = top(log)
    assert (d.signature, d.category) == ("install.platform_build_mismatch", "install_mismatch") and "TPU" in d.title
