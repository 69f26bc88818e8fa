"""The report's records read a saved `triage --json` back and write it out unchanged (spec/report.md
is a public interface: a saved report and the records must agree key for key)."""

from __future__ import annotations

import json

import pytest

from conftest import ROOT, run_triage
from triage.model import Report, Upgrade, UpstreamHit


def test_saved_report_round_trips_exactly():
    data = json.loads((ROOT / "tests" / "fixtures" / "tui" / "demo_report.json").read_text(encoding="utf-8"))
    assert data.get("upstream") and data.get("upgrade")  # the fixture carries both sections
    assert Report.from_json(data).to_json() == data


def test_fresh_report_round_trips_exactly():
    r = run_triage("--demo", "--json")
    assert r.returncode == 0, r.stderr
    data = json.loads(r.stdout)
    assert Report.from_json(data).to_json() == data


def test_optional_hit_fields_appear_only_when_known():
    hit = UpstreamHit(1, "t", "https://x/1", "open", "issue", 1.5, "why", "o/r")
    assert set(hit.to_json()) == {"number", "title", "url", "state", "kind", "score", "why", "repo"}
    merged = UpstreamHit.from_json({**hit.to_json(), "fixed_by": 2, "fixed_in": "0.24.0", "age": "3h"})
    assert merged.to_json() == {**hit.to_json(), "age": "3h", "fixed_by": 2, "fixed_in": "0.24.0"}


def test_upgrade_evidence_is_always_a_list():
    assert Upgrade.from_json({"verdict": "fixes", "evidence": "one line"}).evidence == ["one line"]
    assert Upgrade.from_json({"verdict": "unknown"}).to_json() == {
        "verdict": "unknown", "target_version": None, "evidence": [], "overwrites": []}


@pytest.mark.parametrize("bad", [[], {"diagnoses": "x"}, {"diagnoses": [{"title": "no category"}]}])
def test_not_a_report(bad):
    with pytest.raises(ValueError):
        Report.from_json(bad)
