"""A GPU's CUDA compute capability (12.0 for an RTX PRO 6000, 9.0 for an H100): the one parser.

Probes report it as "12.0" (NVML, nvidia-smi), logs as "12.0", "(12, 0)" or "12"; every stage reads
it through `parse_cc`, and the environment's through `env_cc`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from triage.lazyre import lazy

_CC = lazy(r"^\s*\(?\s*(\d+)\s*(?:[.,]\s*(\d+))?")


@dataclass(frozen=True, slots=True, order=True)
class ComputeCapability:
    major: int
    minor: int = 0

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


def parse_cc(value: Any) -> ComputeCapability | None:
    """"12.0", "12", "(12, 0)", 12.0 or (12, 0) -> 12.0; None for anything else (NA, "", None)."""
    if isinstance(value, ComputeCapability):
        return value
    if isinstance(value, (tuple, list)) and len(value) == 2 and all(isinstance(x, int) for x in value):
        return ComputeCapability(value[0], value[1])
    if value is None or isinstance(value, bool):
        return None
    m = _CC.match(str(value))
    return ComputeCapability(int(m.group(1)), int(m.group(2) or 0)) if m else None


def env_cc(env: dict[str, Any]) -> ComputeCapability | None:
    """The environment's compute capability: its own, else its first GPU's that has one."""
    cc = parse_cc(env.get("compute_capability"))
    if cc:
        return cc
    gpus = env.get("gpus")
    for g in gpus if isinstance(gpus, list) else []:
        cc = parse_cc(g.get("compute_capability")) if isinstance(g, dict) else None
        if cc:
            return cc
    return None
