"""Real failures the rules were not written from: logs reconstructed from public threads.

tests/logs/unseen/<category>--<name>.log keeps the thread's exact error strings inside the shape vLLM
really prints (process tags, the traceback's vLLM files and functions, the wrapper cascade);
expected.yaml records the category established in the thread (and the rule that must match, when
one should), with the thread's address and root cause. Each log goes through the file path (grep)
and the in-memory path (Python selection), which must agree.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from triage.diagnose import diagnose
from triage.logread import scan_path, scan_text
from triage.model import CATEGORIES

UNSEEN = Path(__file__).parent / "logs" / "unseen"
EXPECTED: dict[str, dict] = yaml.safe_load((UNSEEN / "expected.yaml").read_text())


def test_every_unseen_log_has_an_expectation():
    # expected-b.yaml (tests/test_unseen_b.py) covers the other categories' logs of this folder,
    # expected-c.yaml (tests/test_unseen_c.py) the newest vLLM releases' logs.
    b = set(yaml.safe_load((UNSEEN / "expected-b.yaml").read_text()))
    c = set(yaml.safe_load((UNSEEN / "expected-c.yaml").read_text()))
    assert not b & c, sorted(b & c)
    other = b | c
    logs = {p.name for p in UNSEEN.glob("*.log")}
    assert not set(EXPECTED) & other, sorted(set(EXPECTED) & other)
    assert logs == set(EXPECTED) | other, (sorted(logs - set(EXPECTED) - other), sorted(set(EXPECTED) - logs))
    for name, e in EXPECTED.items():
        assert e["category"] in CATEGORIES, name
        assert name.split("--", 1)[0] == e["category"], name
        assert e["source"].startswith("https://"), name
        assert e.get("root_cause"), name


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_unseen_log_diagnosed(name):
    e = EXPECTED[name]
    path = UNSEEN / name
    diagnoses, _ = diagnose(scan_path(str(path)))
    assert diagnoses, f"{name}: nothing diagnosed"
    top = diagnoses[0]
    summary = [(d.category, d.signature, round(d.confidence, 2), d.title) for d in diagnoses[:3]]
    assert top.category == e["category"], summary
    if e.get("signature"):
        assert top.signature == e["signature"], summary
    assert top.confidence >= e.get("min_confidence", 0.5), summary
    assert top.evidence, "a diagnosis must quote its evidence"
    assert not re.search(r"(?<![\w])\?(?![\w])", top.title), f"unfilled fact in title: {top.title}"
    d2, _ = diagnose(scan_text(path.read_bytes()))
    assert d2 and (d2[0].category, d2[0].signature) == (top.category, top.signature)
