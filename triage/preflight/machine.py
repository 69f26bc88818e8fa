"""The machine a launch would run on: its GPUs (NVML, or what the user says) and the installed vLLM,
read from the environment's files (never run)."""

from __future__ import annotations

import os
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


def given_gpus(name: str, count: int, cc: str, mem_gib: float) -> list[dict[str, Any]]:
    return [{"index": i, "name": name, "compute_capability": cc, "memory_total_mib": int(mem_gib * 1024)}
            for i in range(count)]


def probe_this_machine() -> list[dict[str, Any]]:
    from triage.probes.gpu import probe_gpus

    return [g for g in probe_gpus().get("gpus", []) if isinstance(g, dict) and "error" not in g]
