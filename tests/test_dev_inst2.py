"""inst2's dev set (tests/logs/dev-inst2/): install, environment, CUDA-driver and unsupported-GPU failures from
2024-2026 threads through the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params, top

DEV, EXPECTED = load("dev-inst2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- CUDA's missing-kernel error as people retell it ---------------------------------------------------------

@pytest.mark.parametrize("text", [
    '[Usage]: Qwen3-30B-A3B-NVFP4 fails on GB10 with "no kernel image is available for execution on the device"\n',
    "[Installation]: CUDA kernel image not available for GTX 1080 Ti (Compute 6.1) using pip-installed vLLM 0.9.1\n",
    "RuntimeError: no kernel image available on this card\n",
])
def test_a_retold_no_kernel_image_is_an_unsupported_gpu(text):
    d = top(text)
    assert (d.signature, d.category) == ("gpu.no_kernel_image", "unsupported_gpu")


def test_a_quoted_no_kernel_image_title_survives_a_log_with_headers():
    # vLLM's headers make the paste a log, not a fragment: the title line has no error word, the prefilter keeps it
    log = ('[Usage]: model fails with "no kernel image is available for execution on the device"\n\n'
           "(EngineCore_DP0 pid=7) ERROR 12-17 16:05:36 [core.py:843]   File \"/x/vllm/model_executor/models/"
           'qwen3_moe.py", line 721, in forward\n'
           "(EngineCore_DP0 pid=7) ERROR 12-17 16:05:36 [core.py:843]     hidden_states = self.model(\n")
    assert top(log).signature == "gpu.no_kernel_image"


def test_the_kernel_image_words_in_other_senses_are_no_failure():
    d = top("INFO 01-01 10:00:00 [utils.py:10] Building the kernel image cache took 2.1 s\n")
    assert d is None or d.signature != "gpu.no_kernel_image"


# ---- a source build of vLLM on macOS ------------------------------------------------------------------------

MAC_BUILD = ("  × Getting requirements to build wheel did not run successfully.\n  │ exit code: 1\n"
             "      <string>:56: RuntimeWarning: Failed to get commit hash:\n"
             '        File "/opt/homebrew/Caskroom/miniconda/base/envs/t2/lib/python3.11/site-packages/pip/_vendor/'
             'pyproject_hooks/_in_process/_in_process.py", line 353, in <module>\n')


def test_a_vllm_source_build_on_macos_is_the_platform():
    d = top(MAC_BUILD)
    assert (d.signature, d.category) == ("environment.unsupported_platform", "environment") and "macOS" in d.title


def test_the_same_build_failure_on_linux_stays_an_install_failure():
    d = top(MAC_BUILD.replace("/opt/homebrew/Caskroom/miniconda", "/home/u/miniconda3"))
    assert d.category == "install_mismatch"


def test_another_package_failing_to_build_on_macos_is_not_vllms_platform():
    log = ("  × Getting requirements to build wheel did not run successfully.\n"
           '        File "/Users/me/venv/lib/python3.12/site-packages/pip/_vendor/pyproject_hooks/_in_process/'
           '_in_process.py", line 353, in <module>\n      ModuleNotFoundError: No module named \'setuptools_rust\'\n')
    d = top(log)
    assert d is None or d.signature != "environment.unsupported_platform"


def test_a_resolver_failure_on_macos_is_not_the_platform_rule():
    d = top("  × No solution found when resolving dependencies:\n  ╰─▶ Because torch==2.9.0+cpu has no wheels with a "
            "matching platform tag (e.g., `macosx_14_0_x86_64`) and you require torch==2.9.0+cpu, we can conclude "
            "that your requirements are unsatisfiable.\n")
    assert d.category == "install_mismatch"


# ---- a GPU below the installed torch's capability range -------------------------------------------------------

RANGE_WARNING = ("/venv/lib/python3.12/site-packages/torch/cuda/__init__.py:283: UserWarning: \n"
                 "    Found GPU0 {name} which is of cuda capability {cc}.\n"
                 "    Minimum and Maximum cuda capability supported by this version of PyTorch is\n"
                 "    ({lo}) - (12.0)\n    \n  warnings.warn(\n")


@pytest.mark.parametrize("name,cc,lo", [("NVIDIA GeForce GTX 1080 Ti", "6.1", "7.0"), ("Tesla P40", "6.1", "7.5"),
                                        ("Tesla V100-SXM2-32GB", "7.0", "7.5")])
def test_a_gpu_below_torchs_range_is_too_old(name, cc, lo):
    d = top(RANGE_WARNING.format(name=name, cc=cc, lo=lo))
    assert (d.signature, d.category) == ("gpu.below_torch_range", "unsupported_gpu")
    assert name in d.title and cc in d.title


@pytest.mark.parametrize("cc", ["12.1", "7.0"])
def test_a_gpu_above_or_at_the_range_edge_is_no_failure(cc):
    # GB10 (12.1) above torch's tested 12.0 runs; the minimum itself is supported
    d = top(RANGE_WARNING.format(name="NVIDIA GB10", cc=cc, lo="7.0"))
    assert d is None or d.signature != "gpu.below_torch_range"


@pytest.mark.parametrize("name", ["Tesla P40", "Quadro P6000", "TITAN Xp", "NVIDIA GeForce GTX 1080 Ti"])
def test_torchs_incompatible_device_warning_names_older_cards(name):
    d = top(f"UserWarning: {name} with CUDA capability sm_61 is not compatible with the current PyTorch installation.\n")
    assert d.signature == "gpu.torch_arch_missing" and name in d.title


# ---- /dev/shm exhausted under torch's shared tensors or vLLM's shared-memory segments ---------------------------

@pytest.mark.parametrize("line", [
    "RuntimeError: unable to mmap 2147483648 bytes from file </torch_23_1829_0>: Cannot allocate memory (12)",
    "RuntimeError: unable to write to file </torch_1234_567_8>: No space left on device (28)",
    "RuntimeError: unable to open shared memory object </torch_88_99_1> in read-write mode: Too many open files (24)",
])
def test_torchs_shared_tensor_files_failing_are_shm(line):
    d = top(line + "\n")
    assert (d.signature, d.category) == ("distributed.shm_exhausted", "distributed")


def test_enospc_from_a_shared_memory_segment_is_shm_not_the_disk():
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/lib/python3.12/multiprocessing/shared_memory.py", line 126, in __init__\n'
           "    os.ftruncate(self._fd, size)\n"
           "OSError: [Errno 28] No space left on device\n")
    assert top(log).signature == "distributed.shm_exhausted"


def test_enospc_while_downloading_stays_a_full_disk():
    log = ("Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/huggingface_hub/file_download.py", line 1500, in http_get\n'
           "    temp_file.write(chunk)\n"
           "OSError: [Errno 28] No space left on device\n")
    assert top(log).signature == "model_loading.disk_full"


def test_a_mapped_checkpoint_file_is_not_shared_memory():
    d = top("RuntimeError: unable to mmap 4294967296 bytes from file </models/llama/consolidated.00.pth>: "
            "Cannot allocate memory (12)\n")
    assert d is None or d.signature != "distributed.shm_exhausted"
