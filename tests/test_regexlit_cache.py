"""triage.regexlit keeps the literals it derived on disk for the next run. A cache that gave a pattern
literals it does not have would make rules skip lines they match: every way it could go stale or bad
is checked here to fall back to deriving."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from triage import regexlit
from triage.rules import all_rules
from triage.rules.base import Rule

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """regexlit as at the start of a run, its cache in this test's TRIAGE_HOME; the derivations counted."""
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setattr(regexlit, "_known", None)
    monkeypatch.setattr(regexlit, "_path", None)
    monkeypatch.setattr(regexlit, "_used", set())
    monkeypatch.setattr(regexlit, "_added", False)
    calls: list[str] = []
    derive = regexlit._derive

    def counted(pattern, min_len):
        calls.append(pattern)
        return derive(pattern, min_len)

    monkeypatch.setattr(regexlit, "_derive", counted)
    return calls


def _new_run(monkeypatch):
    monkeypatch.setattr(regexlit, "_known", None)
    monkeypatch.setattr(regexlit, "_path", None)
    monkeypatch.setattr(regexlit, "_used", set())
    monkeypatch.setattr(regexlit, "_added", False)


def _patterns() -> list[str]:
    return sorted({p for r in all_rules() for p in r.patterns})


def test_a_second_run_takes_every_rule_pattern_from_the_cache_unchanged(fresh, monkeypatch):
    pats = _patterns()
    first = {p: regexlit.derived(p) for p in pats}
    regexlit.save_derived()
    path = regexlit._path
    assert path and os.path.exists(path)
    _new_run(monkeypatch)
    fresh.clear()
    second = {p: regexlit.derived(p) for p in pats}
    assert fresh == []  # none derived again
    assert second == first
    # and what the cache holds is what deriving gives
    for p in pats:
        clauses = tuple(regexlit.required_clauses(p))
        singles = [c[0] for c in clauses if len(c) == 1 and len(c[0]) >= 4]
        assert second[p] == (max(singles, key=len, default=None), clauses)


def test_a_changed_pattern_gets_its_own_literals(fresh, monkeypatch):
    old = Rule("t.changed", "environment", "t", "f", patterns=[r"Cannot find libfoo\.so"])
    assert old._guards == ["Cannot find libfoo.so"]
    regexlit.save_derived()
    _new_run(monkeypatch)
    new = Rule("t.changed", "environment", "t", "f", patterns=[r"Cannot load libbar\.so"])
    assert new._guards == ["Cannot load libbar.so"]
    assert fresh[-1] == r"Cannot load libbar\.so"  # derived, not taken from the old entry


def test_the_file_is_named_for_the_module_code(tmp_path, monkeypatch):
    """A change to how literals are derived makes a new file: entries of the old code are never read."""
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    src = Path(regexlit.__file__).read_text()
    changed = tmp_path / "regexlit_changed.py"
    changed.write_text(src.replace("_ESCAPED_CLASSES = set(", "_ESCAPED_CLASSES = set(  # changed\n    ", 1))
    spec = importlib.util.spec_from_file_location("regexlit_changed", changed)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod._cache_file() != regexlit._cache_file()
    assert f"{sys.version_info[0]}.{sys.version_info[1]}" in regexlit._cache_file()


@pytest.mark.parametrize("damage", ["flip", "truncate", "structure", "empty", "magic"])
def test_a_damaged_file_is_not_used(fresh, monkeypatch, damage):
    p = r"No available memory for the cache blocks\."
    want = regexlit.derived(p)
    regexlit.save_derived()
    path = regexlit._path
    data = Path(path).read_bytes()
    head = len(regexlit._MAGIC) + 8
    if damage == "flip":  # a literal changed on disk (the value, after the key): the checksum no longer holds
        i = data.rindex(b"cache blocks", head)
        data = data[:i] + b"X" + data[i + 1:]
    elif damage == "truncate":
        data = data[:-7]
    elif damage == "structure":  # a valid checksum over something that is not a table of literals
        data = regexlit._encode({p: ("No available", ("not a tuple of tuples",))})  # type: ignore[dict-item]
    elif damage == "empty":
        data = b""
    else:
        data = b"something else entirely\n" + data
    Path(path).write_bytes(data)
    _new_run(monkeypatch)
    fresh.clear()
    assert regexlit.derived(p) == want
    assert fresh == [p]  # derived again


def test_an_unwritable_cache_costs_only_the_derivation(fresh, monkeypatch, tmp_path):
    blocker = tmp_path / "file-not-dir"
    blocker.write_text("")
    monkeypatch.setenv("TRIAGE_HOME", str(blocker))  # its cache dir cannot be made
    p = r"CUDA error: (?P<what>out of memory|an illegal memory access)"
    want = regexlit.derived(p)
    regexlit.save_derived()  # no exception
    _new_run(monkeypatch)
    fresh.clear()
    assert regexlit.derived(p) == want
    assert fresh == [p]


def test_the_report_is_the_same_with_and_without_the_cache(tmp_path):
    """End to end: a first run (derives, writes), a second (reads), a third after the file was damaged."""
    from conftest import run_triage

    log = ROOT / "tests" / "logs" / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log"
    env = {"TRIAGE_HOME": str(tmp_path / "home")}
    args = ("--log", str(log), "--json", "--offline", "--no-probe")
    first = run_triage(*args, env=env)
    files = list((tmp_path / "home" / "cache").glob("regexlit-*.bin"))
    assert len(files) == 1
    second = run_triage(*args, env=env)
    files[0].write_bytes(files[0].read_bytes()[:-100])
    third = run_triage(*args, env=env)
    assert first.returncode == second.returncode == third.returncode == 0
    assert first.stdout == second.stdout == third.stdout
