"""inst's dev set (tests/logs/dev-inst/): install, environment and CUDA-driver failures from 2025-2026 threads
through the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-inst")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a source build without the CUDA toolkit --------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "  Getting requirements to build wheel ... error\n      AssertionError: CUDA_HOME is not set\n",
    "      File \"/tmp/pip-build-env-x/overlay/lib/python3.12/site-packages/torch/utils/cpp_extension.py\", line 2416, "
    "in _join_cuda_home\n      OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install "
    "root.\n  Building wheel for vllm (pyproject.toml) ... error\n",
    "  CMake Error at /usr/share/cmake-3.28/Modules/CMakeDetermineCUDACompiler.cmake:180 (message):\n"
    "    Failed to detect a default CUDA architecture.\n",
    "  -- The CUDA compiler identification is unknown\n  CMake Error at CMakeLists.txt:14 (project):\n"
    "    No CMAKE_CUDA_COMPILER could be found.\n",
])
def test_source_build_without_nvcc_is_the_install(text):
    d = top(text)
    assert (d.signature, d.category) == ("install.build_toolchain", "install_mismatch")


def test_the_same_words_at_start_up_stay_a_kernel_jit_failure():
    # no package build in the log: FlashInfer / DeepGEMM compiling a kernel while vLLM starts
    d = top("RuntimeError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.\n")
    assert d.category == "kernel_library"


def test_building_a_kernel_package_without_nvcc_is_that_area():
    d = top("  Building wheel for flash-attn (setup.py) ... error\n      OSError: CUDA_HOME environment variable is not "
            "set. Please set it to your CUDA install root.\n")
    assert (d.signature, d.category) == ("install.build_toolchain", "kernel_library")


@pytest.mark.parametrize("text,pkg", [
    ("ERROR: Failed to build installable wheels for some pyproject.toml based projects (vllm)\n", "vllm"),
    ("  × Building wheel for vllm (pyproject.toml) did not run successfully.\n  │ exit code: 1\n", "vllm"),
    ("  × Getting requirements to build wheel did not run successfully.\n  │ exit code: 1\n", None),
])
def test_build_step_reports_are_a_failed_build(text, pkg):
    d = top(text)
    assert (d.signature, d.category) == ("install.build_failed", "install_mismatch")
    if pkg:
        assert pkg in d.title


# ---- permissions -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,path", [
    ("PermissionError: [Errno 13] Permission denied: '/app/.cache/vllm'", "/app/.cache/vllm"),
    ("permissionError: [error 13] Permission denied: '/.cache'", "/.cache"),
    ("OSError: [Errno 30] Read-only file system: '/root/.cache/flashinfer'", "/root/.cache/flashinfer"),
    ("error: failed to create directory `/.cache/uv`: Permission denied (os error 13)", "/.cache/uv"),
])
def test_unwritable_paths_are_the_environment(line, path):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("environment.permission_denied", "environment") and path in d.title


def test_a_cache_path_gets_the_cache_advice():
    d = top("PermissionError: [Errno 13] Permission denied: '/.cache'\n")
    assert "HF_HOME" in d.fix.summary and "VLLM_CACHE_ROOT" in d.fix.summary


def test_a_permission_warning_in_passing_is_no_failure():
    log = ("WARNING 01-01 10:00:00 [utils.py:10] PermissionError: [Errno 13] Permission denied: '/root/.triton'\n"
           "INFO 01-01 10:00:05 [api_server.py:1000] Starting vLLM API server on http://0.0.0.0:8000\n")
    d = top(log)
    assert d is None or d.signature != "environment.permission_denied"


def test_nvidia_image_banner_without_gpus_is_no_gpu_visible():
    d = top("WARNING: The NVIDIA Driver was not detected.  GPU functionality will not be available.\n"
            "   Use the NVIDIA Container Toolkit to start this container with GPU support\n")
    assert d.signature == "environment.no_gpu_visible"


# ---- vLLM's import, cut before its error -------------------------------------------------------------------

IMPORT_CHAIN = (
    "Traceback (most recent call last):\n"
    '  File "/opt/venv/bin/vllm", line 5, in <module>\n'
    "    from vllm.entrypoints.cli.main import main\n"
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/entrypoints/cli/__init__.py", line 3, in <module>\n'
    "    from vllm.entrypoints.cli.benchmark.latency import BenchmarkLatencySubcommand\n"
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 35, in <module>\n'
    "    from vllm.config import (\n")


def test_a_cut_import_time_traceback_is_the_install():
    d = top(IMPORT_CHAIN)
    assert (d.signature, d.category) == ("install.import_failed_cut", "install_mismatch")
    assert "vllm.engine.arg_utils" in d.title and d.confidence < 0.6


def test_a_cut_traceback_through_running_code_is_not_an_import():
    log = IMPORT_CHAIN.replace("in <module>\n    from vllm.config", "in create_engine_config\n    from vllm.config")
    d = top(log)
    assert d is None or d.signature != "install.import_failed_cut"


def test_a_cut_import_into_transformers_is_left_to_the_frames():
    log = IMPORT_CHAIN + ('  File "/opt/venv/lib/python3.12/site-packages/vllm/transformers_utils/config.py", line 20, '
                          "in <module>\n    from transformers import AutoConfig\n")
    d = top(log)
    assert d is None or d.signature != "install.import_failed_cut"


def test_uv_marker_braces_are_not_part_of_the_requirement():
    d = top("  ╰─▶ Because there is no version of torch{platform_machine == 'x86_64'}==2.6.0+cpu and your project "
            "depends on torch{platform_machine == 'x86_64'}==2.6.0+cpu, we can conclude that your project's "
            "requirements are unsatisfiable.\n")
    assert d.signature == "install.no_matching_distribution" and "torch==2.6.0+cpu" in d.title


def test_a_source_build_whose_nvcc_predates_the_gpu_names_the_architecture():
    log = ("  Building wheel for vllm (pyproject.toml) ... error\n"
           "      nvcc fatal   : Unsupported gpu architecture 'compute_120'\n")
    d = top(log)
    assert (d.signature, d.category) == ("install.build_toolchain", "install_mismatch") and "compute_120" in d.title


# ---- per-process limits ------------------------------------------------------------------------------------

@pytest.mark.parametrize("line,limit", [
    ("OSError: [Errno 24] Too many open files", "open files"),
    ("zmq.error.ZMQError: Too many open files", "open files"),
    ("RuntimeError: can't start new thread", "threads"),
    ("libgomp: Thread creation failed: Resource temporarily unavailable", "threads"),
    ("OpenBLAS blas_thread_init: pthread_create failed for thread 3 of 64: Resource temporarily unavailable", "threads"),
])
def test_per_process_limits_are_the_environment(line, limit):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("environment.resource_limit", "environment") and limit in d.title


def test_vllms_own_ulimit_advisory_is_no_limit_failure():
    d = top("Found ulimit of 1024 and failed to automatically increase with error current limit exceeds maximum "
            "limit. This can cause fd limit errors like `OSError: [Errno 24] Too many open files`. Consider increasing "
            "with ulimit -n\n")
    assert d is None or d.signature != "environment.resource_limit"


# ---- containers and drivers ---------------------------------------------------------------------------------

@pytest.mark.parametrize("line", [
    "bash: nvidia-smi: command not found",
    "docker: Error response from daemon: unknown or invalid runtime name: nvidia.",
    "nvidia-container-cli: mount error: file creation failed: /var/lib/docker/overlay2/x/merged/usr/lib/x86_64-linux-gnu/"
    "libnvidia-ml.so.1: file exists: unknown.",
])
def test_a_container_started_without_its_gpus(line):
    assert top(line + "\n").signature == "environment.no_gpu_visible"


@pytest.mark.parametrize("line", ["cuInit failed with CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                                  "CUDA driver error: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"])
def test_driver_api_names_of_803_and_804(line):
    assert top(line + "\n").signature == "cuda.error_803_compat"


def test_pip_denied_the_system_site_packages_gets_the_venv_advice():
    d = top("ERROR: Could not install packages due to an OSError: [Errno 13] Permission denied: "
            "'/usr/local/lib/python3.10/dist-packages/vllm'\n")
    assert d.signature == "environment.permission_denied" and "venv" in d.fix.summary


@pytest.mark.parametrize("text,pkg,cat", [
    ("error: Failed to download and build `vllm==0.8.5`\n", "vllm", "install_mismatch"),
    ("  × Failed to build `flash-attn==2.7.4.post1`\n", "flash-attn", "kernel_library"),
])
def test_uv_build_failures(text, pkg, cat):
    d = top(text)
    assert (d.signature, d.category) == ("install.build_failed", cat) and pkg in d.title


def test_pip_requires_python_note_is_no_matching_distribution():
    d = top("ERROR: Ignored the following versions that require a different python version: 0.10.0 Requires-Python "
            ">=3.9,<3.13\n")
    assert d.signature == "install.no_matching_distribution" and "?" not in d.title


def test_a_library_the_loader_may_not_read_is_a_permission_problem():
    d = top("python3: error while loading shared libraries: /root/.local/share/uv/python/cpython-3.12.9-linux-x86_64-gnu/"
            "bin/../lib/libpython3.12.so.1.0: cannot open shared object file: Permission denied\n")
    assert (d.signature, d.category) == ("environment.permission_denied", "environment") and "/root" in d.fix.summary


def test_an_import_frame_cut_mid_word_still_counts():
    log = IMPORT_CHAIN + ('  File "/opt/venv/lib/python3.12/site-packages/vllm/config/__init__.py", line 35, '
                          "in <module\n")
    assert top(log).signature == "install.import_failed_cut"


# ---- torch without CUDA ---------------------------------------------------------------------------------------

def test_a_cpu_torch_says_so_when_the_log_shows_its_build():
    d = top("PyTorch version: 2.9.0+cpu\nCUDA used to build PyTorch: None\n"
            "AssertionError: Torch not compiled with CUDA enabled\n")
    assert (d.signature, d.category) == ("install.torch_without_cuda", "install_mismatch") and "CPU-only" in d.title


@pytest.mark.parametrize("head", ["INFO 02-08 04:33:40 __init__.py:190] Automatically detected platform tpu.",
                                  "INFO 05-07 05:58:40 [__init__.py:239] Platform plugin ascend is activated"])
def test_torch_without_cuda_on_another_accelerator_is_a_cuda_only_path(head):
    d = top(head + "\nERROR 05-07 05:58:46 core.py:291] AssertionError: Torch not compiled with CUDA enabled\n")
    assert (d.signature, d.category) == ("environment.unsupported_platform", "environment")


# ---- a package vLLM needs is missing ------------------------------------------------------------------------------

@pytest.mark.parametrize("line,mod", [
    ("ModuleNotFoundError: No module named 'cbor2'", "cbor2"),
    ("ModuleNotFoundError: No module named 'zmq'", "zmq"),
    ("ModuleNotFoundError: No module named 'google.protobuf'", None),
    ("ModuleNotFoundError: No module named 'vllm'", "vllm"),
    ("/usr/bin/python3: Error while finding module specification for 'vllm.entrypoints.openai.api_server' "
     "(ModuleNotFoundError: No module named 'vllm')", "vllm"),
    ("bash: vllm: command not found", "vllm"),
])
def test_a_missing_package_vllm_needs_is_the_install(line, mod):
    d = top(line + "\n")
    assert d.category == "install_mismatch"
    if mod:
        assert d.signature == "install.dependency_missing" and mod in d.title


@pytest.mark.parametrize("line", [
    "ImportError: cannot import name 'LLM' from partially initialized module 'vllm' (most likely due to a circular "
    "import) (/home/u/vllm.py)",
    "ModuleNotFoundError: No module named 'vllm.entrypoints'; 'vllm' is not a package",
])
def test_a_local_file_named_vllm_shadows_the_package(line):
    d = top(line + "\n")
    assert d.signature == "install.dependency_missing" and "hides the installed vLLM" in d.title


@pytest.mark.parametrize("line,cat", [
    ("ModuleNotFoundError: No module named 'ray'", "distributed"),
    ("ModuleNotFoundError: No module named 'compressed_tensors'", "quantization"),
])
def test_feature_packages_keep_their_areas(line, cat):
    assert top(line + "\n").category == cat


def test_an_optional_import_logged_in_passing_is_no_missing_dependency():
    d = top("WARNING 01-01 10:00:00 [utils.py:10] ModuleNotFoundError: No module named 'cbor2'\n"
            "INFO 01-01 10:00:05 [api_server.py:1000] Starting vLLM API server on http://0.0.0.0:8000\n")
    assert d is None or d.signature != "install.dependency_missing"


# ---- ports, the shell's kill report, NVML in the container hook --------------------------------------------------

@pytest.mark.parametrize("line,port", [
    ("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 8000): [errno 98] address already "
     "in use", "8000"),
    ("docker: Error response from daemon: driver failed programming external connectivity on endpoint vllm (1a2b): "
     "Bind for 0.0.0.0:8000 failed: port is already allocated.", "8000"),
    ("Error starting userland proxy: listen tcp4 0.0.0.0:8001: bind: address already in use.", "8001"),
])
def test_a_port_already_taken(line, port):
    d = top(line + "\n")
    assert d.signature == "environment.port_in_use" and port in d.title


@pytest.mark.parametrize("line", ["/bin/bash: line 1:  4242 Killed                  vllm serve Qwen/Qwen3-32B",
                                  "[1]+  Killed                  vllm serve Qwen/Qwen3-32B --port 8000"])
def test_the_shell_reporting_a_killed_job_is_the_oom_killer(line):
    assert top(line + "\n").signature == "environment.host_oom_killed"


def test_nvml_mismatch_inside_the_container_hook_is_the_driver():
    d = top("nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: unknown\n")
    assert (d.signature, d.category) == ("cuda.nvml_driver_mismatch", "cuda_driver")


# ---- the grep path keeps these lines (no error word on them) -----------------------------------------------------

@pytest.mark.parametrize("line,sig", [
    ("bash: nvidia-smi: command not found", "environment.no_gpu_visible"),
    ("mkdir: cannot create directory '/models/.cache': Permission denied", "environment.permission_denied"),
    ("libgomp: Thread creation failed: Resource temporarily unavailable", "environment.resource_limit"),
])
def test_causes_without_an_error_word_survive_the_file_prefilter(tmp_path, line, sig):
    from triage.diagnose import diagnose
    from triage.logread import scan_path
    noise = "".join(f"INFO 01-01 10:00:{i % 60:02d} [loggers.py:123] Engine 000: Avg prompt throughput: {i}.0 tokens/s\n"
                    for i in range(400))
    log = tmp_path / "vllm.log"
    log.write_text(noise + line + "\n" + noise)
    ds, _ = diagnose(scan_path(str(log)))
    assert ds and ds[0].signature == sig, [(d.signature, d.title) for d in ds[:3]]
