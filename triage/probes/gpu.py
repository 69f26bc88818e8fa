"""GPU facts from NVML (nvidia-ml-py), each call failing alone into a fact instead of an exception.

This module is standard-library only and imports nothing from triage: its source is also pasted into
the probe script (triage.probes.script) that runs on remote hosts with their own Python and NVML.

- NVML is initialised once, lazily (first query), never at import; shut down at exit.
- Every NVML call goes through `Nvml.q`, which returns the value or an `NA` reason ("not supported",
  "no permission", ...). NA is a str, so it lands in JSON as that reason.
- Failures of the library itself (not found, driver not loaded, driver/library mismatch, a legacy
  `pynvml` package shadowing nvidia-ml-py) become findings with their fix. No driver at all is a normal
  case: `gpus: []` and a finding that says why.
- Without the Python bindings, `nvidia-smi` (with a timeout) gives the basic facts instead.
"""

from __future__ import annotations

import atexit
import os
import re
import subprocess
import threading
from typing import Any


class NA(str):
    """A fact that could not be read; the string is the reason ("not supported")."""


# NVML return codes (nvml.h; the same values as nvidia-ml-py's NVML_ERROR_*).
_NVML_REASONS = {
    1: "NVML not initialised",
    2: "invalid argument",
    3: "not supported",
    4: "no permission",
    6: "not found",
    9: "driver not loaded",
    10: "timeout",
    12: "NVML library not found",
    13: "not in this driver",
    15: "GPU is lost",
    16: "GPU requires reset",
    17: "blocked by the operating system",
    18: "driver/library version mismatch",
    999: "unknown error",
}
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_LIB_RM_VERSION_MISMATCH = 18
_ERR_NO_PERMISSION = 4
_ERR_NOT_SUPPORTED = 3
_ERR_INVALID_ARGUMENT = 2
_ERR_NOT_FOUND = 6

_FABRIC_STATES = {0: "not supported", 1: "not started", 2: "in progress", 3: "completed"}
_MIB = 1024 * 1024


def finding(fid: str, severity: str, title: str, fix: str) -> dict[str, str]:
    return {"id": fid, "severity": severity, "title": title, "fix": fix}


def _text(v: Any) -> Any:
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _legacy_pynvml_owner(module: Any) -> str | None:
    """Name the package that shipped `module` when it is not nvidia-ml-py (legacy pynvml <12,
    nvidia-ml-py3): those shadow the official bindings and lack newer calls."""
    path = getattr(module, "__file__", None)
    if not path:
        return None
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    path = os.path.realpath(path)
    for dist in metadata.distributions():
        name = (dist.metadata.get("Name") or "").lower().replace("_", "-")  # type: ignore[attr-defined]  # an email Message
        if name not in ("pynvml", "nvidia-ml-py3"):
            continue
        for f in dist.files or ():
            if f.name == os.path.basename(path) and f.parts[0].startswith("pynvml"):
                try:
                    if os.path.realpath(str(dist.locate_file(f))) == path:
                        return f"{name} {dist.version}"
                except Exception:
                    continue
    return None


class Nvml:
    """One lazy NVML session. `module` is injected by tests; otherwise `pynvml` is imported on first use."""

    def __init__(self, module: Any = None):
        self._module = module
        self._lock = threading.Lock()
        self._started: bool | None = None
        self.failure: NA | None = None  # why NVML is unusable, when it is
        self.findings: list[dict[str, str]] = []
        self.source: str | None = None

    @property
    def module(self) -> Any:
        return self._module

    def start(self) -> bool:
        with self._lock:
            if self._started is not None:
                return self._started
            self._started = self._start()
            return self._started

    def _start(self) -> bool:
        if self._module is None:
            try:
                import pynvml  # nvidia-ml-py installs the module `pynvml`
            except ImportError:
                self.failure = NA("nvidia-ml-py not installed")
                self.findings.append(finding(
                    "nvml.bindings_missing", "info",
                    "The NVML Python bindings (nvidia-ml-py) are not installed in this Python; "
                    "GPU facts come from nvidia-smi instead",
                    "pip install nvidia-ml-py"))
                return False
            self._module = pynvml
        m = self._module
        owner = _legacy_pynvml_owner(m)
        if owner or not hasattr(m, "nvmlDeviceGetCudaComputeCapability"):
            self.findings.append(finding(
                "nvml.shadowed_pynvml", "warning",
                f"A legacy `pynvml` package ({owner or 'unknown origin'}) shadows the official NVML "
                "bindings; vLLM and triage may read wrong or missing GPU facts",
                "pip uninstall -y pynvml nvidia-ml-py3 && pip install --force-reinstall nvidia-ml-py"))
        try:
            m.nvmlInit()
        except AttributeError:
            self.failure = NA("the pynvml module has no nvmlInit (shadowed)")
            return False
        except Exception as exc:  # NVMLError subclasses, by code
            code = getattr(exc, "value", None)
            self.failure = NA(_NVML_REASONS.get(code, str(exc) or type(exc).__name__))  # type: ignore[arg-type]  # code may be None
            self.findings.append(_init_finding(code, exc))
            return False
        atexit.register(self._shutdown)
        version = getattr(m, "__version__", None)
        self.source = "nvidia-ml-py" + (f" {version}" if version else "")
        return True

    def _shutdown(self) -> None:
        try:
            self._module.nvmlShutdown()
        except Exception:
            pass

    def q(self, name: str, *args: Any) -> Any:
        """Call NVML function `name`; its value, or NA(reason) when this one call fails."""
        if not self.start():
            return NA(self.failure or "NVML unavailable")
        try:
            fn = getattr(self._module, name)
        except AttributeError:
            return NA("not in these NVML bindings")
        try:
            return _text(fn(*args))
        except Exception as exc:
            code = getattr(exc, "value", None)
            if code is not None:
                return NA(_NVML_REASONS.get(code, str(exc)))
            return NA(f"{type(exc).__name__}: {exc}")


def _init_finding(code: Any, exc: BaseException) -> dict[str, str]:
    if code == _ERR_LIBRARY_NOT_FOUND:
        return finding(
            "nvml.library_not_found", "warning",
            "No NVIDIA driver: libnvidia-ml.so.1 (NVML, shipped with the driver) was not found, so no GPU is visible",
            "Install the NVIDIA driver on the host; in a container, run it with the NVIDIA Container Toolkit "
            "(`docker run --gpus all ...` / a GPU resource in Kubernetes)")
    if code == _ERR_DRIVER_NOT_LOADED:
        return finding(
            "nvml.driver_not_loaded", "error",
            "The NVIDIA kernel driver is not loaded",
            "sudo modprobe nvidia (check `dmesg | grep -i nvrm` for why it failed); after a kernel update, "
            "reinstall the driver or its DKMS module, or reboot")
    if code == _ERR_LIB_RM_VERSION_MISMATCH:
        return finding(
            "nvml.version_mismatch", "error",
            "Driver/library version mismatch: the NVIDIA driver was upgraded but the old kernel module is "
            "still loaded (CUDA initialisation fails until it is reloaded)",
            "Reboot, or stop every GPU process and reload the module: "
            "sudo rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && sudo modprobe nvidia")
    if code == _ERR_NO_PERMISSION:
        return finding(
            "nvml.no_permission", "error",
            "No permission to open the NVIDIA devices (/dev/nvidia*)",
            "Run as a user in the group owning /dev/nvidia* (often `video`), or fix the device permissions")
    return finding("nvml.init_failed", "error", f"NVML failed to initialise: {exc}",
                   "Check the driver with `nvidia-smi`; reboot if it reports an error")


def _onoff(v: Any) -> Any:
    if isinstance(v, NA):
        return v
    return "enabled" if v else "disabled"


def _gpu(n: Nvml, index: int) -> dict[str, Any]:
    h = n.q("nvmlDeviceGetHandleByIndex", index)
    if isinstance(h, NA):
        return {"index": index, "error": str(h)}
    g: dict[str, Any] = {"index": index}
    g["name"] = n.q("nvmlDeviceGetName", h)
    g["uuid"] = n.q("nvmlDeviceGetUUID", h)
    pci = n.q("nvmlDeviceGetPciInfo", h)
    g["pci_bus_id"] = pci if isinstance(pci, NA) else _text(getattr(pci, "busId", None))
    cc = n.q("nvmlDeviceGetCudaComputeCapability", h)
    g["compute_capability"] = cc if isinstance(cc, NA) else f"{cc[0]}.{cc[1]}"
    mem = n.q("nvmlDeviceGetMemoryInfo", h)
    for key in ("total", "used", "free"):
        g[f"memory_{key}_mib"] = mem if isinstance(mem, NA) else int(getattr(mem, key)) // _MIB
    g["persistence_mode"] = _onoff(n.q("nvmlDeviceGetPersistenceMode", h))
    g["mig"] = _mig(n, h)
    g["ecc"] = _ecc(n, h)
    g["processes"] = _processes(n, h)
    g["nvlink"] = _nvlink(n, h)
    g["fabric"] = _fabric(n, h)
    return g


def _mig(n: Nvml, h: Any) -> Any:
    mode = n.q("nvmlDeviceGetMigMode", h)
    if isinstance(mode, NA):
        return {"mode": mode}
    cur, pending = mode[0], mode[1]
    out: dict[str, Any] = {"mode": _onoff(cur)}
    if pending != cur:
        out["pending"] = _onoff(pending)
    if cur:
        devices = []
        count = n.q("nvmlDeviceGetMaxMigDeviceCount", h)
        for i in range(0 if isinstance(count, NA) else int(count)):
            mh = n.q("nvmlDeviceGetMigDeviceHandleByIndex", h, i)
            if isinstance(mh, NA):
                continue  # empty slot: NOT_FOUND
            mem = n.q("nvmlDeviceGetMemoryInfo", mh)
            devices.append({
                "index": i,
                "uuid": n.q("nvmlDeviceGetUUID", mh),
                "memory_total_mib": mem if isinstance(mem, NA) else int(mem.total) // _MIB,
            })
        out["devices"] = devices
    return out


def _ecc(n: Nvml, h: Any) -> Any:
    mode = n.q("nvmlDeviceGetEccMode", h)
    if isinstance(mode, NA):
        return {"mode": mode}
    out: dict[str, Any] = {"mode": _onoff(mode[0])}
    if mode[0]:
        # nvmlMemoryErrorType: 0 corrected, 1 uncorrected; nvmlEccCounterType: 0 volatile, 1 aggregate
        out["uncorrected_volatile"] = n.q("nvmlDeviceGetTotalEccErrors", h, 1, 0)
        out["uncorrected_aggregate"] = n.q("nvmlDeviceGetTotalEccErrors", h, 1, 1)
        out["corrected_volatile"] = n.q("nvmlDeviceGetTotalEccErrors", h, 0, 0)
    return out


def _processes(n: Nvml, h: Any) -> Any:
    procs = n.q("nvmlDeviceGetComputeRunningProcesses", h)
    if isinstance(procs, NA):
        return procs
    out = []
    for p in procs:
        used = getattr(p, "usedGpuMemory", None)
        name = n.q("nvmlSystemGetProcessName", p.pid)
        out.append({
            "pid": int(p.pid),
            "name": name,
            "used_memory_mib": None if used is None else int(used) // _MIB,
        })
    return out


def _nvlink(n: Nvml, h: Any) -> Any:
    active = total = 0
    for link in range(18):  # NVLink 4 has 18 links per GPU; the first error ends the scan
        state = n.q("nvmlDeviceGetNvLinkState", h, link)
        if isinstance(state, NA):
            if link == 0:
                return state
            break
        total += 1
        active += 1 if state else 0
    return {"links": total, "active": active}


def _fabric(n: Nvml, h: Any) -> Any:
    m = n.module
    struct = getattr(m, "c_nvmlGpuFabricInfo_t", None)
    if struct is None:
        return NA("not in these NVML bindings")
    info = struct()
    r = n.q("nvmlDeviceGetGpuFabricInfo", h, info)
    if isinstance(r, NA):
        return r
    state = int(getattr(info, "state", 0))
    if state == 0:
        return NA("not supported")
    status = int(getattr(info, "status", 0) or 0)
    return {"state": _FABRIC_STATES.get(state, str(state)),
            "status": "ok" if status == 0 else _NVML_REASONS.get(status, f"NVML error {status}")}


def cuda_version_str(v: Any) -> Any:
    """NVML's CUDA driver version int (12080) as "12.8"."""
    if isinstance(v, NA) or v is None:
        return v
    v = int(v)
    return f"{v // 1000}.{(v % 1000) // 10}"


def probe_gpus(module: Any = None) -> dict[str, Any]:
    """GPU facts and findings: {"gpus", "driver_version", "cuda_driver_version", "nvml_source", "findings"}."""
    n = Nvml(module)
    facts: dict[str, Any] = {"gpus": [], "driver_version": None, "cuda_driver_version": None,
                             "nvml_source": None, "findings": []}
    if not n.start():
        facts["findings"] = n.findings
        if n.failure == "nvidia-ml-py not installed":
            smi = probe_nvidia_smi()
            facts.update({k: v for k, v in smi.items() if k != "findings"})
            facts["findings"] = n.findings + smi.get("findings", [])
        return facts
    facts["nvml_source"] = n.source
    facts["driver_version"] = n.q("nvmlSystemGetDriverVersion")
    facts["cuda_driver_version"] = cuda_version_str(n.q("nvmlSystemGetCudaDriverVersion"))
    count = n.q("nvmlDeviceGetCount")
    if isinstance(count, NA):
        n.findings.append(finding("nvml.count_failed", "error", f"NVML could not count the GPUs: {count}",
                                  "Run `nvidia-smi`; a lost GPU needs a reset or a reboot"))
        count = 0
    facts["gpus"] = [_gpu(n, i) for i in range(int(count))]
    facts["findings"] = n.findings + gpu_findings(facts["gpus"])
    return facts


def gpu_findings(gpus: list[dict[str, Any]]) -> list[dict[str, str]]:
    """What the per-GPU facts mean for running vLLM."""
    out: list[dict[str, str]] = []
    if not gpus:
        return out
    names = sorted({str(g.get("name")) for g in gpus if g.get("name") and not isinstance(g.get("name"), NA)})
    if len(names) > 1:
        out.append(finding("gpu.mixed_models", "warning",
                           "Different GPU models in one machine: " + ", ".join(names),
                           "Pin vLLM to one model with CUDA_VISIBLE_DEVICES (set CUDA_DEVICE_ORDER=PCI_BUS_ID "
                           "so its indices match nvidia-smi)"))
    lost = [str(g["index"]) for g in gpus if g.get("error")]
    if lost:
        out.append(finding("gpu.unreadable", "error", "NVML cannot open GPU " + ", ".join(lost),
                           "Check `nvidia-smi` and `dmesg | grep -i xid`; a lost GPU needs a reset or a reboot"))
    off = [str(g["index"]) for g in gpus if g.get("persistence_mode") == "disabled"]
    if off:
        out.append(finding("gpu.persistence_off", "info",
                           "Persistence mode is off (GPU " + ", ".join(off) + "): every CUDA/NVML start pays "
                           "the driver's initialisation again",
                           "sudo nvidia-smi -pm 1 (or enable the nvidia-persistenced service)"))
    mig = [str(g["index"]) for g in gpus if isinstance(g.get("mig"), dict) and g["mig"].get("mode") == "enabled"]
    if mig:
        out.append(finding("gpu.mig_enabled", "warning",
                           "MIG is enabled on GPU " + ", ".join(mig) + ": CUDA sees MIG slices, not whole GPUs, "
                           "and vLLM cannot use several slices for tensor parallelism",
                           "Give vLLM one MIG device (CUDA_VISIBLE_DEVICES=MIG-<uuid>), or disable MIG: "
                           "sudo nvidia-smi -i <gpu> -mig 0"))
    for g in gpus:
        ecc = g.get("ecc")
        if isinstance(ecc, dict):
            bad = ecc.get("uncorrected_volatile")
            if isinstance(bad, int) and not isinstance(bad, bool) and bad > 0:
                out.append(finding("gpu.ecc_uncorrected", "error",
                                   f"GPU {g['index']} has {bad} uncorrected ECC errors since the driver loaded",
                                   "Drain the GPU and reset it (sudo nvidia-smi -r -i %s); run `dcgmi diag -r 1`; "
                                   "persistent errors mean an RMA" % g["index"]))
        fabric = g.get("fabric")
        if isinstance(fabric, dict) and fabric.get("state") != "completed":
            out.append(finding("gpu.fabric_incomplete", "error",
                               f"GPU {g['index']}: NVSwitch fabric state is '{fabric.get('state')}', "
                               "so NCCL over NVLink cannot work yet",
                               "sudo systemctl restart nvidia-fabricmanager (and check its journal)"))
    held = []
    for g in gpus:
        procs = g.get("processes")
        if isinstance(procs, list) and procs:
            mib = sum(p.get("used_memory_mib") or 0 for p in procs)
            pids = ", ".join(f"{p['pid']} ({p.get('name')})" for p in procs[:4])
            held.append(f"GPU {g['index']}: {mib} MiB by {pids}")
    if held:
        out.append(finding("gpu.memory_held", "warning",
                           "Processes hold GPU memory (a leftover vLLM worker is a common cause of "
                           "'No available memory for the cache blocks'): " + "; ".join(held),
                           "Check they are not stale (`nvidia-smi`, `ps -fp <pid>`), stop them, or lower "
                           "--gpu-memory-utilization"))
    return out


_SMI_FIELDS = ["index", "name", "uuid", "compute_cap", "memory.total", "memory.used", "memory.free",
               "persistence_mode", "mig.mode.current", "pci.bus_id", "driver_version"]


def probe_nvidia_smi(timeout: float = 15.0) -> dict[str, Any]:
    """Basic GPU facts from `nvidia-smi` when the NVML bindings are missing."""
    out: dict[str, Any] = {"gpus": [], "findings": [], "nvml_source": "nvidia-smi"}
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(_SMI_FIELDS), "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        out["nvml_source"] = None
        out["findings"].append(finding("nvml.library_not_found", "warning",
                                       "No NVIDIA driver tools: nvidia-smi is not installed, so no GPU is visible",
                                       "Install the NVIDIA driver on the host; in a container, run it with the "
                                       "NVIDIA Container Toolkit (`docker run --gpus all ...`)"))
        return out
    except (subprocess.TimeoutExpired, OSError) as exc:
        out["findings"].append(finding("nvml.smi_failed", "error", f"nvidia-smi did not answer: {exc}",
                                       "A hung nvidia-smi often means a GPU in a bad state: check `dmesg | grep -i xid`"))
        return out
    if p.returncode != 0:
        msg = (p.stdout + p.stderr).strip().splitlines()
        out["findings"].append(finding("nvml.smi_failed", "error",
                                       "nvidia-smi failed: " + (msg[0] if msg else f"exit {p.returncode}"),
                                       "Run `nvidia-smi` and fix what it reports (driver not loaded, mismatch)"))
        return out
    for line in p.stdout.splitlines():
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(_SMI_FIELDS):
            continue
        row = dict(zip(_SMI_FIELDS, cols))

        def num(v: str) -> Any:
            return int(float(v)) if re.match(r"^[\d.]+$", v) else NA(v.lower().strip("[]"))

        out["driver_version"] = row["driver_version"]
        out["gpus"].append({
            "index": int(row["index"]), "name": row["name"], "uuid": row["uuid"],
            "pci_bus_id": row["pci.bus_id"], "compute_capability": row["compute_cap"],
            "memory_total_mib": num(row["memory.total"]), "memory_used_mib": num(row["memory.used"]),
            "memory_free_mib": num(row["memory.free"]),
            "persistence_mode": {"Enabled": "enabled", "Disabled": "disabled"}.get(row["persistence_mode"],
                                                                                   NA(row["persistence_mode"])),
            "mig": {"mode": {"Enabled": "enabled", "Disabled": "disabled"}.get(row["mig.mode.current"],
                                                                              NA("not supported"))},
        })
    try:
        head = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=timeout).stdout
        m = re.search(r"CUDA Version:\s*([\d.]+)", head)
        out["cuda_driver_version"] = m.group(1) if m else None
    except (subprocess.TimeoutExpired, OSError):
        out["cuda_driver_version"] = None
    out["findings"] = gpu_findings(out["gpus"])
    return out
