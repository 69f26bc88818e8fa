"""The CUDA driver underneath: too old for the build, PTX from a newer toolchain, compat libraries."""

from __future__ import annotations

from triage.rules.base import Rule


def _driver_cuda(m) -> dict:
    """torch's `found version 12020` is the newest CUDA the driver supports, as CUDA writes it (12.2)."""
    found = (m.groupdict() or {}).get("found")
    if found and found.isdigit() and int(found) >= 1000:
        v = int(found)
        return {"cuda_driver_version": f"{v // 1000}.{v % 1000 // 10}"}
    return {}


def _compat_facts(m, line, scan) -> dict:
    """803 and 804 are different failures of the same machinery (the CUDA forward-compatibility libraries)."""
    t = line.text
    if "804" in t or "forward compatibility was attempted" in t or "CompatNotSupportedOnDevice" in t:
        gpus = ", ".join(g.get("name", "") for g in scan.facts.get("gpus") or [] if isinstance(g, dict)) or None
        return {"code": 804, "what": "Error 804: CUDA forward compatibility is not supported on this GPU",
                "advice": ("The container's CUDA is newer than the host driver supports, and the forward-compatibility "
                           "libraries (cuda-compat) that would bridge the gap only work on data-center GPUs"
                           + (f", not on {gpus}" if gpus else " (not GeForce/RTX workstation cards)")
                           + ": upgrade the host NVIDIA driver to one that supports the container's CUDA version, or "
                           "use an image/wheel built for an older CUDA that the driver supports (`nvidia-smi` shows the "
                           "driver's CUDA).")}
    return {"code": 803, "what": "Error 803: the CUDA driver libraries in use do not match the loaded kernel driver",
            "advice": ("A second libcuda (the cuda-compat package of the image, or one on LD_LIBRARY_PATH) shadows the host "
                       "driver's, or the user-space driver was upgraded without the kernel module: remove the compat "
                       "path from LD_LIBRARY_PATH (or the image's /usr/local/cuda/compat), or reboot/reload the driver so "
                       "the libraries and the module match.")}


RULES = [
    Rule(signature="cuda.driver_too_old", category="cuda_driver",
         title="The NVIDIA driver is too old for this CUDA build",
         fix="Upgrade the NVIDIA driver to one that supports the CUDA version torch/vLLM were built for "
             "(see `nvidia-smi` for the driver's CUDA version), or install torch/vLLM built for an older CUDA.",
         patterns=[r"The NVIDIA driver on your system is too old(?: \(found version (?P<found>\d+)\))?",
                   r"CUDA driver version is insufficient for CUDA runtime version",
                   r"cudaErrorInsufficientDriver", r"CUDA_ERROR_INSUFFICIENT_DRIVER",
                   r"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=(?P<needed_cuda>[\d.]+)",
                   # nvidia-container-runtime's own check of the image's NVIDIA_REQUIRE_CUDA (CSV mode on Jetson, the
                   # OCI spec modifiers): "requirements not met: <the image's requirement>", which may wrap onto the
                   # next row ("cuda>=13.3||brand=unknown&&driver>=535&&...")
                   r"requirements not met:\s*(?:unsatisfied condition:\s*)?cuda>=(?P<needed_cuda>[\d.]+)",
                   r"^\s*cuda>=(?P<needed_cuda>[\d.]+)\|\|brand="],
         facts=lambda m, line, scan: _driver_cuda(m), playbook="cuda-driver", confidence=0.95),
    Rule(signature="cuda.error_803_compat", category="cuda_driver",
         title="{what}",
         fix="{advice}", facts=_compat_facts,
         patterns=[r"Error 803: system has unsupported display driver / cuda driver combination",
                   r"Error 804: forward compatibility was attempted on non supported HW",
                   r"cudaErrorSystemDriverMismatch", r"cudaErrorCompatNotSupportedOnDevice",
                   # the driver API's names for 803 / 804 (cuInit, cupy, numba, NVRTC-built kernels)
                   r"CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                   r"system has unsupported display driver / cuda driver combination",
                   # the same two messages cut short (a ticket title, a terminal row)
                   r"Error 803: system has unsupported display", r"Error 804: forward compatibility"],
         playbook="cuda-driver", confidence=0.95),
    Rule(signature="cuda.ptx_toolchain", category="cuda_driver",
         title="PTX compiled by a newer CUDA toolchain than the driver supports",
         fix="The kernels were compiled with a newer CUDA than the driver can JIT: upgrade the driver, or use "
             "wheels/containers built for the driver's CUDA version.",
         patterns=[r"the provided PTX was compiled with an unsupported toolchain",
                   r"CUDA_ERROR_UNSUPPORTED_PTX_VERSION", r"cudaErrorUnsupportedPtxVersion"],
         playbook="cuda-driver", confidence=0.95),
    Rule(signature="cuda.nvml_driver_mismatch", category="cuda_driver",
         title="NVIDIA driver/library version mismatch (driver upgraded without reloading the kernel module)",
         fix="The user-space driver libraries were upgraded but the old kernel module is still loaded: reboot the "
             "host (or unload and reload the nvidia modules).",
         patterns=[r"[Dd]river/library version mismatch", r"NVML library version mismatch",
                   r"Failed to initialize NVML: Driver/library version mismatch"],
         playbook="cuda-driver", confidence=0.95),
    Rule(signature="cuda.system_not_initialized", category="cuda_driver",
         title="CUDA reports the system is not yet initialized (Error 802: fabric manager not running)",
         fix="On NVSwitch systems (HGX/DGX) start nvidia-fabricmanager with the same version as the driver "
             "(`systemctl status nvidia-fabricmanager`).",
         patterns=[r"Error 802: system not yet initialized", r"cudaErrorSystemNotReady", r"CUDA_ERROR_SYSTEM_NOT_READY"],
         playbook="cuda-driver", confidence=0.9),
    Rule(signature="cuda.unknown_error_init", category="cuda_driver",
         title="CUDA failed to initialize (unknown error from the driver)",
         fix="CUDA could not talk to the driver: check `nvidia-smi`, that /dev/nvidia* exist in the container, "
             "and that the driver modules are loaded; a reboot often clears it after a driver update.",
         patterns=[r"CUDA unknown error - this may be due to an incorrectly set up environment",
                   r"Unexpected error from cudaGetDeviceCount\(\)(?!.*Error 80[234])"],
         playbook="cuda-driver", confidence=0.75),
]


# ---- Intel GPUs (XPU): the driver layer under torch's XPU build -----------------------------------------
# torch-xpu reaches the GPU through SYCL and oneAPI's Unified Runtime (UR) over Level Zero. A failed runtime
# call surfaces as a bare "UR error" (a SYCL exception without detail) or as "level_zero backend failed with
# error: N (UR_RESULT_ERROR_...)": the Intel GPU driver stack (compute-runtime, level-zero) does not match the
# runtime torch bundles, an older oneAPI sourced over it, or a GPU that hung (DEVICE_LOST).
RULES += [
    Rule(signature="xpu.runtime_error", category="cuda_driver",
         title="The Intel GPU runtime failed a call ({what})",
         fix="torch's XPU build could not drive the Intel GPU through Level Zero: update the Intel GPU driver "
             "(intel-compute-runtime and level-zero) to the release the torch/IPEX XPU build was made for, do not "
             "source an older oneAPI setvars.sh over the runtime torch bundles, and check that `sycl-ls` lists the GPU; "
             "DEVICE_LOST means the GPU hung or reset (driver update, smaller batch, `dmesg` for i915/xe resets).",
         patterns=[r"level_zero backend failed with error: \d+ \((?P<what>UR_RESULT_ERROR_(?!OUT_OF_DEVICE_MEMORY)\w+)\)",
                   r"(?P<what>UR_RESULT_ERROR_DEVICE_LOST|UR_RESULT_ERROR_UNINITIALIZED|UR_RESULT_ERROR_ADAPTER_SPECIFIC)"],
         facts=lambda m, line, scan: {"what": m.group("what")},
         playbook="cuda-driver", confidence=0.8),
    # A bare "UR error" (no result code) is what torch-xpu raises when the device cannot run a kernel at all; in
    # vLLM threads that is mostly an integrated GPU the XPU build does not support (Iris Xe, UHD), less often a
    # driver older than the build.
    Rule(signature="xpu.ur_error", category="unsupported_gpu",
         title="The Intel GPU could not run vLLM's XPU kernels (UR error)",
         fix="vLLM's XPU backend supports Intel Arc (Alchemist, Battlemage), Data Center GPU Max/Flex and recent Core "
             "Ultra graphics; older integrated GPUs (Iris Xe, UHD) fail with a bare UR error: use a supported GPU or "
             "vLLM's CPU backend. On a supported GPU, update the Intel GPU driver (intel-compute-runtime, level-zero) "
             "to the release the torch XPU build needs and check that `sycl-ls` lists the GPU.",
         patterns=[r"RuntimeError: UR error\s*$", r"^UR error\s*$"],
         playbook="unsupported-gpu", confidence=0.6),
    Rule(signature="xpu.out_of_memory", category="gpu_oom",
         title="The Intel GPU (XPU) ran out of memory",
         fix="Lower --gpu-memory-utilization, --max-model-len or --max-num-seqs, use a smaller or quantized model, "
             "or spread it over more GPUs with --tensor-parallel-size.",
         patterns=[r"XPU out of memory", r"UR_RESULT_ERROR_OUT_OF_DEVICE_MEMORY"],
         playbook="gpu-oom", confidence=0.85),
]
