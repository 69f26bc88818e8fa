"""The held-out validation set: real logs copied verbatim from public threads, never tuned on.

tests/logs/validation/index.yaml lists each log with its thread, the category of the cause the thread
settled (or `none` for a healthy / harmless-warning-only log), the root cause, the fix that worked
and words a correct explanation would use. These tests check the index's integrity, that no thread
is shared with the logs the rules were written from, and that triage never crashes on any of them.
They print the score (`pytest -s`) and deliberately assert no accuracy floor: a floor would invite
tuning rules on these logs, which would make the set worthless as a measure.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml

from conftest import ROOT, SHARED
from triage.model import CATEGORIES

VALIDATION = ROOT / "tests" / "logs" / "validation"
INDEX: dict[str, dict] = yaml.safe_load((VALIDATION / "index.yaml").read_text())
# Threads the project cites in its own material live in tests/, shared/, the package and docs;
# a session checkout may also keep a list of cited threads beside the worktrees.
CITED_LISTS = [ROOT.parent / "cited-threads.txt"]
THREAD = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)")


def _score_module():
    spec = importlib.util.spec_from_file_location("score_logs", ROOT / "scripts" / "score_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _threads(text: str) -> set[tuple[str, str]]:
    return {(repo.lower(), num) for repo, num in THREAD.findall(text)}


def test_index_lists_every_log_and_only_existing_files():
    logs = {p.name for p in VALIDATION.glob("*.log")}
    assert set(INDEX) == logs, (sorted(set(INDEX) - logs), sorted(logs - set(INDEX)))


@pytest.mark.parametrize("name", sorted(INDEX))
def test_index_entry_is_complete(name):
    e = INDEX[name]
    assert e["category"] == "none" or e["category"] in CATEGORIES, e["category"]
    assert name.split("--", 1)[0] == e["category"], "file name starts with its category"
    assert THREAD.search(e["source"]), "source is a GitHub thread"
    assert str(e.get("date", "")).strip(), "date (or 'unknown')"
    assert len(e.get("root_cause", "")) > 20 and len(e.get("working_fix", "")) > 10
    kws = e.get("cause_keywords") or []
    assert all(isinstance(k, str) and k.strip() for k in kws)
    if e["category"] != "none":
        assert kws, "a failure needs words a correct explanation would use"
    assert (VALIDATION / name).read_bytes().strip(), "log is not empty"


def test_every_thread_used_once():
    seen: dict[tuple[str, str], str] = {}
    for name, e in INDEX.items():
        (key,) = _threads(e["source"])
        assert key not in seen, f"{name} and {seen[key]} come from the same thread"
        seen[key] = name


def test_no_thread_shared_with_what_the_rules_were_written_from():
    validation = {next(iter(_threads(e["source"]))): name for name, e in INDEX.items()}
    cited: set[tuple[str, str]] = set()
    roots = [ROOT / "tests", ROOT / "triage", ROOT / "playbooks", ROOT / "README.md", SHARED]
    for root in roots:
        paths = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file())
        for p in paths:
            if VALIDATION in p.parents or p.suffix in {".png", ".gz", ".pyc", ".so"}:
                continue
            try:
                cited |= _threads(p.read_text(errors="replace"))
            except OSError:
                continue
    for lst in CITED_LISTS:
        if lst.exists():
            cited |= _threads(lst.read_text())
    shared = sorted(name for key, name in validation.items() if key in cited)
    assert not shared, f"validation logs from threads the project already cites: {shared}"


def test_triage_never_crashes_and_the_score_is_printed():
    score = _score_module()
    cases = score.load_set([VALIDATION / "index.yaml"])
    assert len(cases) == len(INDEX)
    results = score.score_set(cases, with_fix=False, jobs=2)
    summary = score.summarise(results)
    print()
    score.print_side_by_side({"validation (held out)": summary}, verbose=True)
    bad = [(r["name"], r["rc"]) for r in results if r["crash"]]
    assert not bad, f"triage crashed (exit 1, traceback or no JSON) on: {bad}"
