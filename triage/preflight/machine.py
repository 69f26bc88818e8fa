"""The machine a launch would run on: its GPUs (NVML, or what the user says) and the installed vLLM,
read from the environment's files (never run)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any

from triage.computecap import parse_cc
from triage.probes.pyenv import disk_dists, env_site_dirs, read_bounded

MAX_SOURCE = 2 << 20


@dataclass(slots=True)
class Machine:
    gpus: list[dict[str, Any]] = field(default_factory=list)  # name, compute_capability, memory_total_mib
    packages: dict[str, str] = field(default_factory=dict)  # distribution name (lower case) -> version
    site_dirs: list[str] = field(default_factory=list)
    where: str = "this machine"
    shm_bytes: int | None = None  # /dev/shm's size where vLLM would run
    in_container: bool | None = None
    cuda_driver_version: str | None = None  # the newest CUDA the driver runs ("12.8"), from NVML
    torch_pin: str | None = None  # the torch version the installed vLLM requires (its METADATA)

    @property
    def cc(self) -> tuple[int, int] | None:
        for g in self.gpus:
            c = parse_cc(g.get("compute_capability"))
            if c:
                return c.major, c.minor
        return None

    @property
    def gpu_mem_bytes(self) -> int | None:
        mib = [int(g["memory_total_mib"]) for g in self.gpus if isinstance(g.get("memory_total_mib"), int)]
        return min(mib) * (1 << 20) if mib else None

    @property
    def gpu_name(self) -> str:
        return str(self.gpus[0].get("name")) if self.gpus else "no GPU"

    def source(self, rel: str) -> str | None:
        """A file of an installed package (`vllm/model_executor/models/registry.py`), as text."""
        for site in self.site_dirs:
            raw = read_bounded(os.path.join(site, rel), MAX_SOURCE)
            if raw is not None:
                return raw.decode("utf-8", "replace")
        return None


def read_environment(m: Machine, python: str) -> None:
    """The packages of the environment `python` belongs to, from its dist-info folders."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    sites, _ = env_site_dirs(prefix, None)
    m.site_dirs = sites
    for d in disk_dists(sites):
        name = str(d.metadata.get("Name") or "").lower().replace("_", "-")
        if name and name not in m.packages:
            m.packages[name] = d.version
            if name == "vllm":
                pin = re.search(r"^Requires-Dist: torch\s*==\s*([\w.]+)\s*$", d.read_text("METADATA") or "", re.M)
                m.torch_pin = pin.group(1) if pin else None


def given_gpus(name: str, count: int, cc: str, mem_gib: float) -> list[dict[str, Any]]:
    return [{"index": i, "name": name, "compute_capability": cc, "memory_total_mib": int(mem_gib * 1024)}
            for i in range(count)]


def probe_this_machine() -> Machine:
    """This host: its GPUs and driver (NVML), whether it is a container and its /dev/shm."""
    from triage.probes.gpu import probe_gpus

    facts = probe_gpus()
    m = Machine(gpus=[g for g in facts.get("gpus", []) if isinstance(g, dict) and "error" not in g])
    m.cuda_driver_version = facts.get("cuda_driver_version")
    m.in_container, m.shm_bytes = container_and_shm()
    return m


def vllm_python() -> str | None:
    """The interpreter of the `vllm` command on PATH (its script's #! line), read, never run."""
    import shutil

    exe = shutil.which("vllm")
    raw = read_bounded(exe, 4096) if exe else None
    if not raw or not raw.startswith(b"#!"):
        return None
    first = raw.split(b"\n", 1)[0][2:].strip().decode("utf-8", "replace").split()
    return first[0] if first and os.path.isabs(first[0]) else None


def container_and_shm() -> tuple[bool, int | None]:
    """Whether this process runs in a container, and the size of its /dev/shm (Docker's default: 64 MB)."""
    inside = os.path.exists("/.dockerenv") or os.path.exists("/run/.containerenv")
    if not inside:
        raw = read_bounded("/proc/1/cgroup", 1 << 16) or b""
        inside = any(w in raw for w in (b"docker", b"kubepods", b"containerd", b"libpod"))
    try:
        st = os.statvfs("/dev/shm")
        size = st.f_frsize * st.f_blocks
    except OSError:
        size = None
    return inside, size
