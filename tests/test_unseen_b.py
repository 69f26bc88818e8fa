"""Real failure logs reconstructed from public threads (tests/logs/unseen/expected-b.yaml, and
expected-c.yaml for the newest vLLM releases, V1 engine, v0.11+): the top diagnosis must carry the thread's established category (and rule, when the entry names one); a log whose
only oddities are harmless warnings or a normal shutdown must give no diagnosis above 0.5 and exit 3."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from triage.diagnose import diagnose
from triage.logread import scan_path
from triage.model import CATEGORIES, EXIT_NO_FAILURE, Report

UNSEEN = Path(__file__).parent / "logs" / "unseen"
EXPECTED = {name: exp for f in ("expected-b.yaml", "expected-c.yaml")
            for name, exp in yaml.safe_load((UNSEEN / f).read_text()).items()}


def test_every_entry_has_a_log_and_a_source():
    for name, exp in EXPECTED.items():
        assert (UNSEEN / name).is_file(), name
        assert exp["category"] == "none" or exp["category"] in CATEGORIES, name
        assert exp["source"].startswith("https://github.com/"), name
        assert exp.get("root_cause"), name


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_unseen_log(name):
    exp = EXPECTED[name]
    scan = scan_path(str(UNSEEN / name))
    diagnoses, notes = diagnose(scan)
    got = [(d.category, d.signature, round(d.confidence, 2), d.title[:100]) for d in diagnoses[:3]]
    if exp["category"] == "none":
        assert all(d.confidence <= 0.5 for d in diagnoses), got
        report = Report(source=name, bytes=scan.bytes, lines=scan.lines_total, diagnoses=diagnoses, notes=notes)
        assert report.exit_code == EXIT_NO_FAILURE, got
        return
    assert diagnoses, "nothing diagnosed"
    top = diagnoses[0]
    assert top.category == exp["category"], got
    if exp.get("signature"):
        assert top.signature == exp["signature"], got
    assert top.confidence >= 0.5, got
    assert top.evidence, got
