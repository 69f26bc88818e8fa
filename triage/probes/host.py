"""Host facts around the GPUs: CUDA toolkits, /dev/shm, container, OS and kernel, CUDA_VISIBLE_DEVICES.

Standard-library only and free of triage imports: its source is also pasted into the probe script that
runs on remote hosts (see triage.probes.script). Every external command has a timeout.
"""

from __future__ import annotations

import glob
import json
import os
import platform
import re
import subprocess
from typing import Any

_MIB = 1024 * 1024


def _finding(fid: str, severity: str, title: str, fix: str) -> dict[str, str]:
    return {"id": fid, "severity": severity, "title": title, "fix": fix}


def _read(path: str, limit: int = 65536) -> str | None:
    try:
        with open(path, "r", errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def _toolkit_version(root: str) -> str | None:
    text = _read(os.path.join(root, "version.json"))
    if text:
        try:
            return str(json.loads(text)["cuda"]["version"])
        except (ValueError, KeyError, TypeError):
            pass
    text = _read(os.path.join(root, "version.txt"))  # CUDA <= 11.0: "CUDA Version 11.0.228"
    if text:
        m = re.search(r"CUDA Version\s+([\d.]+)", text)
        if m:
            return m.group(1)
    nvcc = os.path.join(root, "bin", "nvcc")
    if os.path.exists(nvcc):
        return _nvcc_version(nvcc)
    return None


def _nvcc_version(nvcc: str, timeout: float = 10.0) -> str | None:
    try:
        p = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"release\s+[\d.]+,\s*V([\d.]+)", p.stdout) or re.search(r"release\s+([\d.]+)", p.stdout)
    return m.group(1) if m else None


def cuda_toolkits(roots: list[str] | None = None) -> dict[str, Any]:
    """Installed CUDA toolkits (/usr/local/cuda*, /opt/cuda*) and the nvcc found on PATH."""
    paths = roots if roots is not None else sorted(set(glob.glob("/usr/local/cuda*") + glob.glob("/opt/cuda*")))
    toolkits = []
    for p in paths:
        if not os.path.isdir(p):
            continue
        entry: dict[str, Any] = {"path": p, "version": _toolkit_version(p)}
        if os.path.islink(p):
            entry["link_to"] = os.path.realpath(p)
        toolkits.append(entry)
    nvcc_path = None
    for d in os.environ.get("PATH", "").split(os.pathsep):
        cand = os.path.join(d, "nvcc")
        if d and os.access(cand, os.X_OK):
            nvcc_path = cand
            break
    nvcc = None
    if nvcc_path:
        # The toolkit's version.json beside bin/nvcc answers without starting nvcc (slow on some hosts).
        root = os.path.dirname(os.path.dirname(os.path.realpath(nvcc_path)))
        text = _read(os.path.join(root, "version.json"))
        version = None
        if text:
            try:
                version = str(json.loads(text)["cuda"]["version"])
            except (ValueError, KeyError, TypeError):
                version = None
        nvcc = {"path": nvcc_path, "version": version or _nvcc_version(nvcc_path)}
    return {"toolkits": toolkits, "nvcc": nvcc}


def shm(path: str = "/dev/shm") -> dict[str, Any] | None:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return {"size_mib": st.f_frsize * st.f_blocks // _MIB, "free_mib": st.f_frsize * st.f_bavail // _MIB}


def container(root: str = "/") -> dict[str, Any]:
    """Whether we run in a container, and which kind (docker, podman, kubernetes, containerd, lxc)."""
    kind = None
    if os.path.exists(os.path.join(root, ".dockerenv")):
        kind = "docker"
    elif os.path.exists(os.path.join(root, "run/.containerenv")):
        kind = "podman"
    if os.environ.get("KUBERNETES_SERVICE_HOST"):
        kind = "kubernetes"
    if kind is None:
        cg = _read(os.path.join(root, "proc/1/cgroup")) or ""
        for word, k in (("kubepods", "kubernetes"), ("docker", "docker"), ("containerd", "containerd"),
                        ("libpod", "podman"), ("lxc", "lxc")):
            if word in cg:
                kind = k
                break
    if kind is None and os.environ.get("container"):
        kind = os.environ["container"]
    return {"in_container": kind is not None, "runtime": kind}


def os_info(root: str = "/") -> dict[str, Any]:
    pretty = None
    text = _read(os.path.join(root, "etc/os-release"))
    if text:
        m = re.search(r'^PRETTY_NAME="?([^"\n]*)"?', text, re.M)
        pretty = m.group(1) if m else None
    libc = platform.libc_ver()
    return {
        "name": pretty or platform.system(),
        "kernel": platform.release(),
        "arch": platform.machine(),
        "hostname": platform.node(),
        "libc": "-".join(x for x in libc if x) or None,
    }


def kernel_module_version(root: str = "/") -> str | None:
    """The loaded NVIDIA kernel module's version (compare with NVML's library version for a mismatch)."""
    text = _read(os.path.join(root, "proc/driver/nvidia/version"))
    if not text:
        return None
    m = re.search(r"Kernel Module(?: for \S+)?\s+([\d.]+)", text)
    return m.group(1) if m else None


def map_visible_devices(value: str | None, gpus: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Map CUDA_VISIBLE_DEVICES to physical GPUs the way the CUDA runtime reads it.

    Entries are indices, GPU-UUIDs (a unique prefix is enough) or MIG-UUIDs; CUDA stops at the first
    entry it cannot resolve, so everything after an invalid one is invisible. Indices follow NVML's
    PCI order only when CUDA_DEVICE_ORDER=PCI_BUS_ID (else CUDA puts the fastest GPU first).
    """
    if value is None:
        return None
    out: dict[str, Any] = {"value": value, "visible": [], "invalid": None}
    entries = [e.strip() for e in value.split(",")] if value.strip() else []
    for logical, e in enumerate(entries):
        match = None
        if re.fullmatch(r"\d+", e):
            i = int(e)
            match = next((g for g in gpus if g.get("index") == i), None)
        elif e.startswith("MIG-"):
            for g in gpus:
                mig = g["mig"] if isinstance(g.get("mig"), dict) else {}
                for d in mig.get("devices", []) or []:
                    if isinstance(d.get("uuid"), str) and d["uuid"].startswith(e):
                        match = g
        elif e.startswith("GPU-") or re.fullmatch(r"[0-9a-fA-F-]{4,}", e):
            want = e if e.startswith("GPU-") else "GPU-" + e
            cands = [g for g in gpus if isinstance(g.get("uuid"), str) and g["uuid"].startswith(want)]
            match = cands[0] if len(cands) == 1 else None
        if match is None:
            out["invalid"] = e
            break
        out["visible"].append({"logical": logical, "entry": e, "physical_index": match.get("index"),
                               "name": match.get("name")})
    return out


def host_findings(facts: dict[str, Any]) -> list[dict[str, str]]:
    out = []
    s = facts.get("shm")
    cont = facts.get("container") or {}
    if s and s.get("size_mib") is not None and s["size_mib"] < 1024:
        out.append(_finding(
            "host.shm_small", "warning" if cont.get("in_container") else "info",
            f"/dev/shm is only {s['size_mib']} MiB: NCCL and vLLM's multiprocessing need more "
            "(Docker's default is 64 MiB)",
            "Run the container with --ipc=host or --shm-size=16g (Kubernetes: an emptyDir with medium: Memory "
            "mounted at /dev/shm)"))
    cvd = facts.get("cuda_visible_devices")
    if cvd:
        if cvd.get("value", "").strip() == "" or cvd.get("value") in ("-1", "NoDevFiles"):
            out.append(_finding("host.cuda_visible_devices_empty", "error",
                                f"CUDA_VISIBLE_DEVICES={cvd.get('value')!r} hides every GPU",
                                "unset CUDA_VISIBLE_DEVICES, or list the GPUs to use (e.g. 0,1)"))
        elif cvd.get("invalid") is not None and facts.get("gpus"):
            out.append(_finding("host.cuda_visible_devices_invalid", "error",
                                f"CUDA_VISIBLE_DEVICES entry {cvd['invalid']!r} matches no GPU here; CUDA ignores it "
                                "and every entry after it",
                                "Use indices or UUIDs from `nvidia-smi -L`"))
    tk = facts.get("cuda_toolkit") or {}
    nvcc = tk.get("nvcc")
    if not nvcc and not tk.get("toolkits"):
        out.append(_finding("host.no_cuda_toolkit", "info",
                            "No CUDA toolkit (nvcc) on this host: fine for wheels, but JIT-compiled kernels "
                            "(FlashInfer on new GPUs, DeepGEMM, Triton's ptxas is bundled) need one",
                            "Install the CUDA toolkit matching torch's CUDA, or put its bin/ on PATH"))
    km = facts.get("kernel_module_version")
    dv = facts.get("driver_version")
    if km and isinstance(dv, str) and re.match(r"^[\d.]+$", dv) and km != dv:
        out.append(_finding("host.driver_module_mismatch", "error",
                            f"The loaded NVIDIA kernel module is {km} but the driver library is {dv}: the driver "
                            "was upgraded without reloading the module",
                            "Reboot, or stop every GPU process and reload: sudo rmmod nvidia_uvm nvidia_drm "
                            "nvidia_modeset nvidia && sudo modprobe nvidia"))
    return out


def probe_host(gpus: list[dict[str, Any]] | None = None, environ: dict[str, str] | None = None) -> dict[str, Any]:
    env = os.environ if environ is None else environ
    facts: dict[str, Any] = {
        "os": os_info(),
        "container": container(),
        "shm": shm(),
        "cuda_toolkit": cuda_toolkits(),
        "kernel_module_version": kernel_module_version(),
        "cuda_visible_devices": map_visible_devices(env.get("CUDA_VISIBLE_DEVICES"), gpus or []),
        "cuda_device_order": env.get("CUDA_DEVICE_ORDER"),
    }
    return facts
