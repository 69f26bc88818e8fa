"""Right in substance: real failures whose cause and working fix are settled in a public thread.

tests/logs/substance/<category>--<name>.log rebuilds a thread's failure with its exact error strings and
numbers; expected.yaml records the thread, the settled cause and the fix that worked, and what the
diagnosis must say: the words that name the cause, the remedy that must come first in the fix, and the
claims the thread refutes. A right category alone does not pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from triage.diagnose import diagnose
from triage.enrich import enrich
from triage.logread import scan_path, scan_text
from triage.model import CATEGORIES
from triage.pipeline import environment_from_log

HERE = Path(__file__).parent / "logs" / "substance"
EXPECTED: dict[str, dict] = yaml.safe_load((HERE / "expected.yaml").read_text())


def test_every_log_has_its_thread():
    assert {p.name for p in HERE.glob("*.log")} == set(EXPECTED)
    for name, e in EXPECTED.items():
        assert e["category"] in CATEGORIES and name.split("--", 1)[0] == e["category"], name
        assert e["source"].startswith("https://") and e["root_cause"] and e["working_fix"], name
        assert e["cause"] and e["fix_first"], name


def _top(name: str):
    scan = scan_path(str(HERE / name))
    diagnoses, _ = diagnose(scan)
    enrich(diagnoses, environment_from_log(scan))
    return diagnoses


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_cause_and_first_fix(name):
    e = EXPECTED[name]
    diagnoses = _top(name)
    assert diagnoses, name
    d = diagnoses[0]
    assert (d.category, d.signature) == (e["category"], e["signature"]), [(x.signature, x.title) for x in diagnoses[:3]]
    said = "\n".join([d.title, *d.explanation, d.fix.summary])
    for words in e["cause"]:
        assert words in said, (words, said)
    fix = d.fix.summary
    assert e["fix_first"] in fix, (e["fix_first"], fix)
    first = fix.index(e["fix_first"])
    for alt in e.get("after") or []:
        assert alt in fix and fix.index(alt) > first, (alt, fix)
    for words in e.get("also") or []:
        assert words in said, (words, said)
    for claim in e.get("not") or []:
        assert claim not in said, (claim, said)
    # the same verdict from the in-memory path (Python selection instead of grep)
    d2, _ = diagnose(scan_text((HERE / name).read_bytes()))
    assert d2 and d2[0].signature == d.signature
