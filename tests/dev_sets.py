"""What every development set of real thread logs (tests/logs/dev-*/expected.yaml) is checked with: each
log through the real CLI, its top category the one its thread settled; a known miss is a strict xfail,
so a fix must take its name off the list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_triage
from triage.diagnose import diagnose
from triage.logread import scan_text

LOGS = Path(__file__).parent / "logs"


def load(name: str) -> tuple[Path, dict[str, dict]]:
    folder = LOGS / name
    return folder, yaml.safe_load((folder / "expected.yaml").read_text())


def params(expected: dict[str, dict], misses: dict[str, str]) -> list:
    unknown = set(misses) - set(expected)
    assert not unknown, f"known misses with no log: {sorted(unknown)}"
    return [pytest.param(n, id=n, marks=pytest.mark.xfail(reason=misses[n], strict=True)) if n in misses
            else pytest.param(n, id=n) for n in sorted(expected)]


def check(folder: Path, name: str, case: dict, min_confidence: float = 0.0) -> None:
    r = run_triage("--log", str(folder / name), "--json", "--offline", "--no-probe",
                   env={"TRIAGE_GITHUB_API": "http://127.0.0.1:9"})
    assert r.returncode in (0, 2, 3), r.stderr.decode()[-2000:]
    report = json.loads(r.stdout)
    shown = [(d["category"], round(d["confidence"], 2), d["title"]) for d in report["diagnoses"][:3]]
    if case["category"] == "none":  # a healthy log: nothing may be diagnosed (harmless notes are not diagnoses)
        assert not report["diagnoses"], (name, shown)
        return
    assert report["diagnoses"] and report["diagnoses"][0]["category"] == case["category"], (name, shown)
    assert report["diagnoses"][0]["confidence"] >= case.get("min_confidence", min_confidence), (name, shown)


def top(text: str):
    """The first diagnosis of a pasted text, in process (the mechanisms' unit tests); None when nothing."""
    ds, _notes = diagnose(scan_text(text))
    return ds[0] if ds else None


def first(text: str):
    """The first diagnosis of a pasted text, which must have one."""
    d = top(text)
    assert d is not None, f"nothing diagnosed: {text[:200]!r}"
    return d
