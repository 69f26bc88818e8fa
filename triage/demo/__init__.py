"""Bundled demo data for `triage --demo` and `triage fix --demo`: a failed GLM-5 launch on an SM120
server, a recorded probe snapshot of that server, and recorded upstream answers (the demo never probes
and never goes online). Paths are os.path strings: the headless report imports no pathlib."""

import os

DEMO_DIR = os.path.dirname(__file__)
DEMO_LOG = os.path.join(DEMO_DIR, "glm5_sm120.log")
DEMO_SNAPSHOT = os.path.join(DEMO_DIR, "snapshot_rtxpro6000.json")
RECORDED_UPSTREAM = os.path.join(DEMO_DIR, "upstream_recorded.json")


def with_recorded_upstream(report):
    """The demo's report with the recorded upstream hits (each marked recorded) when it has none."""
    if report.upstream:
        return report
    import json

    from triage.model import UpstreamHit

    try:
        with open(RECORDED_UPSTREAM, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return report
    hits = []
    for h in data.get("upstream") or []:
        hit = UpstreamHit.from_json(h)
        hit.recorded = True
        hits.append(hit)
    report.upstream = hits
    note = data.get("recorded")
    if note:
        report.warnings = [w for w in report.warnings if "offline" not in w] + [f"upstream: {note}"]
    return report
