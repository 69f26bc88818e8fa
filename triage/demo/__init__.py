"""Bundled demo data: the GLM-5 log, a recorded probe snapshot, and recorded upstream answers for
`triage --demo` (which never probes and never goes online)."""

from __future__ import annotations

import json
import os
from typing import Any

RECORDED_UPSTREAM = os.path.join(os.path.dirname(__file__), "upstream_recorded.json")


def with_recorded_upstream(report: Any) -> Any:
    """The demo's report with the recorded upstream hits (each marked "recorded") when it has none."""
    if report.upstream:
        return report
    try:
        with open(RECORDED_UPSTREAM, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return report
    report.upstream = [dict(h, recorded=True) for h in data.get("upstream") or []]
    note = data.get("recorded")
    if note:
        report.warnings = [w for w in report.warnings if "offline" not in w] + [f"upstream: {note}"]
    return report
