"""The machine a diagnosis speaks about, as one typed record read from the environment facts.

The facts arrive as the report's `environment` object (spec/report.md: the log's facts, merged with the
probes' where a probe ran); that dict stays the public shape. Stages that reason about the machine read
it through `Environment.from_facts`, which settles once what several keys may say about one thing
(the vLLM version from `vllm_version` or the decoded install, the compute capability from the machine
or its first GPU, the hand-patched files from the probe or the install).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from triage.computecap import ComputeCapability, env_cc, parse_cc


@dataclass(frozen=True, slots=True)
class Gpu:
    name: str
    index: int | None = None
    compute_capability: ComputeCapability | None = None
    processes: tuple[dict[str, Any], ...] = ()  # what holds memory on it now (probe only)

    @classmethod
    def from_facts(cls, g: Mapping[str, Any]) -> Gpu:
        procs = g.get("processes")
        index = g.get("index")
        return cls(str(g.get("name") or ""), index if isinstance(index, int) else None,
                   parse_cc(g.get("compute_capability")),
                   tuple(p for p in procs if isinstance(p, dict)) if isinstance(procs, list) else ())


def _text(v: Any) -> str | None:
    return None if v is None or v == "" else str(v)


@dataclass(frozen=True, slots=True)
class Environment:
    gpus: tuple[Gpu, ...] = ()
    compute_capability: ComputeCapability | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None  # the newest CUDA the driver supports
    torch_version: str | None = None
    torch_cuda_version: str | None = None  # the CUDA torch was built for
    torch_arch_list: tuple[str, ...] = ()
    python_executable: str | None = None
    packages: Mapping[str, str] = field(default_factory=dict)
    vllm_version: str | None = None
    vllm_install: Mapping[str, Any] = field(default_factory=dict)  # triage.versions.decode_vllm_version + probe
    patched_files: tuple[str, ...] = ()  # vLLM files that differ from the installed wheel's
    # The facts it was read from, for code that matches on keys not modelled here (the capability table).
    facts: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_facts(cls, env: Mapping[str, Any]) -> Environment:
        inst = env.get("vllm_install")
        inst = inst if isinstance(inst, dict) else {}
        gpus = env.get("gpus")
        py = env.get("python")
        pk = env.get("packages")
        arch = env.get("torch_arch_list")
        return cls(
            gpus=tuple(Gpu.from_facts(g) for g in gpus if isinstance(g, dict)) if isinstance(gpus, list) else (),
            compute_capability=env_cc(dict(env)),
            driver_version=_text(env.get("driver_version")),
            cuda_driver_version=_text(env.get("cuda_driver_version")),
            torch_version=_text(env.get("torch_version")),
            torch_cuda_version=_text(env.get("torch_cuda_version")),
            torch_arch_list=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
            python_executable=_text(py.get("executable")) if isinstance(py, dict) else None,
            packages={str(k): str(v) for k, v in pk.items()} if isinstance(pk, dict) else {},
            vllm_version=_text(env.get("vllm_version") or inst.get("version")),
            vllm_install=inst,
            patched_files=tuple(_paths(env.get("patched_files") or inst.get("patched_files") or [])),
            facts=env,
        )


def _paths(entries: Any) -> list[str]:
    """Patched files as paths: the probe writes strings, older snapshots {"path": ..., "sha256": ...}."""
    out = []
    for p in entries if isinstance(entries, list) else []:
        if isinstance(p, str):
            out.append(p)
        elif isinstance(p, dict) and (p.get("path") or p.get("file")):
            out.append(str(p.get("path") or p.get("file")))
    return out
