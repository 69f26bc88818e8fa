"""A fake `pynvml` that behaves like nvidia-ml-py on machines without a GPU.

Same names, constants, error codes and exception machinery as the real module: `NVMLError(code)`
returns the matching `NVMLError_*` subclass (built the way nvidia-ml-py builds them), calls before
`nvmlInit` raise NVMLError_Uninitialized, unsupported queries raise NVMLError_NotSupported, and so on.

Select the machine with `configure(profile)` in-process, or with FAKE_NVML_PROFILE in the environment
when the module is imported as `pynvml` by another interpreter (remote probe tests copy this file to
`pynvml.py` on that interpreter's path). Every call is recorded in `calls`.
"""

from __future__ import annotations

import os
import string
import sys

__version__ = "13.580.82"

NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_MEMORY_ERROR_TYPE_CORRECTED = 0
NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1
NVML_VOLATILE_ECC = 0
NVML_AGGREGATE_ECC = 1
NVML_GPU_FABRIC_STATE_NOT_SUPPORTED = 0
NVML_GPU_FABRIC_STATE_NOT_STARTED = 1
NVML_GPU_FABRIC_STATE_IN_PROGRESS = 2
NVML_GPU_FABRIC_STATE_COMPLETED = 3
NVML_NVLINK_MAX_LINKS = 18


class NVMLError(Exception):
    _valClassMapping: dict = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value):
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self):
        return self._errcode_to_string.get(self.value, "NVML Error with code %d" % self.value)

    def __eq__(self, other):
        return self.value == other.value

    __hash__ = Exception.__hash__


def _extract_errors_as_classes():
    mod = sys.modules[__name__]
    for err_name in [x for x in dir(mod) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        val = getattr(mod, err_name)

        def gen_new(v):
            def new(typ, *args):
                return NVMLError.__new__(typ, v)
            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(val)})
        cls.__module__ = __name__
        setattr(mod, class_name, cls)
        NVMLError._valClassMapping[val] = cls


_extract_errors_as_classes()


def nvmlExceptionClass(code):
    if code not in NVMLError._valClassMapping:
        raise ValueError("nvmlErrorCode %s is not valid" % code)
    return NVMLError._valClassMapping[code]


class _Struct:
    def __init__(self, **kw):
        self.__dict__.update(kw)


class c_nvmlGpuFabricInfo_t:
    def __init__(self):
        self.clusterUuid = b"\0" * 16
        self.status = 0
        self.cliqueId = 0
        self.state = 0


# ---------------------------------------------------------------- machines
MiB = 1024 * 1024


def _gpu(name, cc, total_mib, *, used_mib=0, persistence=1, ecc=True, nvlinks=0, fabric=None, mig=None,
         procs=(), uuid_seed=0, memory_supported=True, ecc_uncorrected=0):
    return {"name": name, "cc": cc, "total": total_mib * MiB, "used": used_mib * MiB, "persistence": persistence,
            "ecc": ecc, "nvlinks": nvlinks, "fabric": fabric, "mig": mig, "procs": list(procs),
            "uuid_seed": uuid_seed, "memory_supported": memory_supported, "ecc_uncorrected": ecc_uncorrected}


def _uuid(seed, i):
    return "GPU-%08x-%04x-%04x-%04x-%012x" % (0x3f2a9c10 + seed, 0x1b2c + i, 0x4d5e, 0x8f90 + seed, 0xa1b2c3d4e5f0 + i)


PROFILES = {
    "rtxpro6000x8": {
        "driver": "580.95.05", "cuda": 13000,
        "gpus": [_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), 97887, used_mib=0, uuid_seed=1)
                 for _ in range(8)],
    },
    "rtxpro6000x8_busy": {
        "driver": "580.95.05", "cuda": 13000,
        "gpus": [_gpu("NVIDIA RTX PRO 6000 Blackwell Server Edition", (12, 0), 97887, uuid_seed=1,
                      used_mib=88110 if i == 0 else 0,
                      procs=[(48213, "/root/ml-env/bin/python3", 88104)] if i == 0 else ())
                 for i in range(8)],
    },
    "h100x8": {
        "driver": "550.127.05", "cuda": 12040,
        "gpus": [_gpu("NVIDIA H100 80GB HBM3", (9, 0), 81559, nvlinks=18, fabric=3, uuid_seed=2) for _ in range(8)],
    },
    "h100x8_fabric_down": {
        "driver": "550.127.05", "cuda": 12040,
        "gpus": [_gpu("NVIDIA H100 80GB HBM3", (9, 0), 81559, nvlinks=18, fabric=1, uuid_seed=2) for _ in range(8)],
    },
    "a100x4": {
        "driver": "535.216.01", "cuda": 12020,
        "gpus": [_gpu("NVIDIA A100-SXM4-80GB", (8, 0), 81920, nvlinks=12, uuid_seed=3,
                      ecc_uncorrected=2 if i == 3 else 0) for i in range(4)],
    },
    "t4": {
        "driver": "535.216.01", "cuda": 12020,
        "gpus": [_gpu("Tesla T4", (7, 5), 15360, persistence=0, uuid_seed=4)],
    },
    "gb10": {
        # DGX Spark: unified memory, so NVML reports no framebuffer memory and no ECC.
        "driver": "580.95.05", "cuda": 13000,
        "gpus": [_gpu("NVIDIA GB10", (12, 1), 0, ecc=False, memory_supported=False, uuid_seed=5)],
    },
    "a100_mig": {
        "driver": "535.216.01", "cuda": 12020,
        "gpus": [_gpu("NVIDIA A100-SXM4-40GB", (8, 0), 40960, nvlinks=12, uuid_seed=6,
                      mig={"current": 1, "pending": 1, "devices": [(0, 19968), (1, 9856), (3, 4864)], "max": 7})],
    },
    "mixed": {
        "driver": "550.127.05", "cuda": 12040,
        "gpus": [_gpu("NVIDIA H100 80GB HBM3", (9, 0), 81559, uuid_seed=7),
                 _gpu("NVIDIA A100-SXM4-80GB", (8, 0), 81920, uuid_seed=8)],
    },
    # Library-level failures, raised by nvmlInit like the real module does.
    "nodriver": {"init_error": NVML_ERROR_LIBRARY_NOT_FOUND},
    "not_loaded": {"init_error": NVML_ERROR_DRIVER_NOT_LOADED},
    "mismatch": {"init_error": NVML_ERROR_LIB_RM_VERSION_MISMATCH},
    "no_permission": {"init_error": NVML_ERROR_NO_PERMISSION},
}

_state = {"profile": None, "initialised": 0}
calls: list = []


def configure(profile):
    _state["profile"] = PROFILES[profile]
    _state["initialised"] = 0
    calls.clear()


configure(os.environ.get("FAKE_NVML_PROFILE", "nodriver"))


def _rec(name, *args):
    calls.append((name,) + args)


def _need_init():
    if _state["initialised"] <= 0:
        raise NVMLError(NVML_ERROR_UNINITIALIZED)


class _Handle:
    def __init__(self, index, gpu, mig_index=None, mig_mem=None):
        self.index, self.gpu, self.mig_index, self.mig_mem = index, gpu, mig_index, mig_mem


def _gpu_of(handle):
    if not isinstance(handle, _Handle):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return handle.gpu


# ---------------------------------------------------------------- API
def nvmlInitWithFlags(flags):
    _rec("nvmlInitWithFlags", flags)
    err = _state["profile"].get("init_error")
    if err:
        raise NVMLError(err)
    _state["initialised"] += 1


def nvmlInit():
    nvmlInitWithFlags(0)


def nvmlShutdown():
    _rec("nvmlShutdown")
    _need_init()
    _state["initialised"] -= 1


def nvmlSystemGetDriverVersion():
    _rec("nvmlSystemGetDriverVersion")
    _need_init()
    return _state["profile"]["driver"]


def nvmlSystemGetCudaDriverVersion():
    _rec("nvmlSystemGetCudaDriverVersion")
    _need_init()
    return _state["profile"]["cuda"]


def nvmlSystemGetProcessName(pid):
    _rec("nvmlSystemGetProcessName", pid)
    _need_init()
    for g in _state["profile"]["gpus"]:
        for p in g["procs"]:
            if p[0] == pid:
                return p[1]
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetCount():
    _rec("nvmlDeviceGetCount")
    _need_init()
    return len(_state["profile"]["gpus"])


def nvmlDeviceGetHandleByIndex(index):
    _rec("nvmlDeviceGetHandleByIndex", index)
    _need_init()
    gpus = _state["profile"]["gpus"]
    if not 0 <= index < len(gpus):
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return _Handle(index, gpus[index])


def nvmlDeviceGetName(handle):
    _need_init()
    return _gpu_of(handle)["name"]


def nvmlDeviceGetUUID(handle):
    _need_init()
    g = _gpu_of(handle)
    if handle.mig_index is not None:
        return "MIG-%08x-1111-2222-3333-%012x" % (g["uuid_seed"], handle.mig_index)
    return _uuid(g["uuid_seed"], handle.index)


def nvmlDeviceGetPciInfo(handle):
    _need_init()
    _gpu_of(handle)
    return _Struct(busId=("00000000:%02X:00.0" % (0x18 + 0x10 * handle.index)).encode(), domain=0,
                   bus=0x18 + 0x10 * handle.index, device=0)


def nvmlDeviceGetCudaComputeCapability(handle):
    _need_init()
    return tuple(_gpu_of(handle)["cc"])


def nvmlDeviceGetMemoryInfo(handle, version=None):
    _need_init()
    g = _gpu_of(handle)
    if not g["memory_supported"]:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if handle.mig_mem is not None:
        total = handle.mig_mem * MiB
        return _Struct(total=total, used=0, free=total)
    return _Struct(total=g["total"], used=g["used"], free=g["total"] - g["used"])


def nvmlDeviceGetPersistenceMode(handle):
    _need_init()
    return _gpu_of(handle)["persistence"]


def nvmlDeviceGetMigMode(device):
    _need_init()
    g = _gpu_of(device)
    if g["mig"] is None:
        if any(k in g["name"] for k in ("A100", "A30", "H100", "H200", "B200")):
            return [0, 0]  # MIG-capable, disabled
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [g["mig"]["current"], g["mig"]["pending"]]


def nvmlDeviceGetMaxMigDeviceCount(device):
    _need_init()
    g = _gpu_of(device)
    if not g["mig"]:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return g["mig"]["max"]


def nvmlDeviceGetMigDeviceHandleByIndex(device, index):
    _need_init()
    g = _gpu_of(device)
    if not g["mig"] or index >= g["mig"]["max"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    for i, mem in g["mig"]["devices"]:
        if i == index:
            return _Handle(device.index, g, mig_index=i, mig_mem=mem)
    raise NVMLError(NVML_ERROR_NOT_FOUND)


def nvmlDeviceGetEccMode(handle):
    _need_init()
    g = _gpu_of(handle)
    if not g["ecc"]:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return [1, 1]


def nvmlDeviceGetTotalEccErrors(handle, errorType, counterType):
    _need_init()
    g = _gpu_of(handle)
    if not g["ecc"]:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    return g["ecc_uncorrected"] if errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED else 0


def nvmlDeviceGetComputeRunningProcesses(handle):
    _need_init()
    return [_Struct(pid=p[0], usedGpuMemory=p[2] * MiB, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
            for p in _gpu_of(handle)["procs"]]


def nvmlDeviceGetNvLinkState(device, link):
    _need_init()
    g = _gpu_of(device)
    if not g["nvlinks"]:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    if link >= g["nvlinks"]:
        raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
    return NVML_FEATURE_ENABLED


def nvmlDeviceGetGpuFabricInfo(device, gpuFabricInfo):
    _need_init()
    g = _gpu_of(device)
    if g["fabric"] is None:
        raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
    gpuFabricInfo.state = g["fabric"]
    gpuFabricInfo.status = NVML_SUCCESS
