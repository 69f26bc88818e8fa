"""Upstream: search GitHub for the failure, rank hits by subsystem, advise on upgrading.

Entry point: `lookup(report, offline=..., runner=..., python=...)`. Importing this package is
cheap (no httpx, no yaml): those load only when a lookup runs.
"""

from __future__ import annotations

from typing import Any


def lookup(report: Any, *, offline: bool, runner: Any = None, python: str | None = None) -> None:
    from triage.upstream.consult import lookup as _lookup

    _lookup(report, offline=offline, runner=runner, python=python)


__all__ = ["lookup"]
