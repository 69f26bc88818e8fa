"""The held-out validation sets: real logs copied verbatim from public threads, never tuned on.

Each tests/logs/validation*/index.yaml (gathered apart, at different times) lists each log with its
thread, the category of the cause the thread settled (or `none` for a healthy / harmless-warning-only
log), the root cause, the fix that worked and words a correct explanation would use. These tests check
each index's integrity, that no thread is used twice or shared with the logs the rules were written
from, and that triage never crashes on any of them. They print the score (`pytest -s`) and
deliberately assert no accuracy floor: a floor would invite tuning rules on these logs, which would
make the sets worthless as a measure.
"""

from __future__ import annotations

import importlib.util
import re

import pytest
import yaml

from conftest import ROOT, SHARED
from triage.model import CATEGORIES

LOGS = ROOT / "tests" / "logs"
SETS = sorted(p for p in LOGS.iterdir() if p.is_dir() and p.name.startswith("validation"))
INDEXES: dict[str, dict[str, dict]] = {d.name: yaml.safe_load((d / "index.yaml").read_text()) for d in SETS}
ENTRIES = [(s, name) for s, index in INDEXES.items() for name in sorted(index)]
# Threads the project cites in its own material live in tests/, shared/, the package and docs;
# a session checkout may also keep a list of cited threads beside the worktrees.
CITED_LISTS = [ROOT.parent / "cited-threads.txt"]
THREAD = re.compile(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull|discussions)/(\d+)")
# A forum thread, a blog post or a project page (not a GitHub thread) is named by its address.
PAGE = re.compile(r"https?://[^\s'\"<>)]+")


def _score_module():
    spec = importlib.util.spec_from_file_location("score_logs", ROOT / "scripts" / "score_logs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _threads(text: str) -> set[tuple[str, str]]:
    return {(repo.lower(), num) for repo, num in THREAD.findall(text)}


def _source(source: str) -> tuple[str, str]:
    """A log's thread: (repo, number) for a GitHub thread, else ("page", its address without a trailing slash)."""
    threads = _threads(source)
    if threads:
        (key,) = threads
        return key
    return ("page", source.strip().rstrip("/").lower())


def test_both_held_out_sets_exist():
    assert {"validation", "validation2"} <= set(INDEXES)


@pytest.mark.parametrize("folder", sorted(INDEXES))
def test_index_lists_every_log_and_only_existing_files(folder):
    logs = {p.name for p in (LOGS / folder).glob("*.log")}
    index = INDEXES[folder]
    assert set(index) == logs, (sorted(set(index) - logs), sorted(logs - set(index)))


@pytest.mark.parametrize("folder,name", ENTRIES, ids=[f"{s}/{n}" for s, n in ENTRIES])
def test_index_entry_is_complete(folder, name):
    e = INDEXES[folder][name]
    assert e["category"] == "none" or e["category"] in CATEGORIES, e["category"]
    assert name.split("--", 1)[0] == e["category"], "file name starts with its category"
    assert THREAD.search(e["source"]) or PAGE.fullmatch(e["source"].strip()), "source is a thread or a page's address"
    assert str(e.get("date", "")).strip(), "date (or 'unknown')"
    assert len(e.get("root_cause", "")) > 20 and len(e.get("working_fix", "")) > 10
    kws = e.get("cause_keywords") or []
    assert all(isinstance(k, str) and k.strip() for k in kws)
    if e["category"] != "none":
        assert kws, "a failure needs words a correct explanation would use"
    assert (LOGS / folder / name).read_bytes().strip(), "log is not empty"


def test_every_thread_used_once_across_all_sets():
    seen: dict[tuple[str, str], str] = {}
    for folder, name in ENTRIES:
        key = _source(INDEXES[folder][name]["source"])
        assert key not in seen, f"{folder}/{name} and {seen[key]} come from the same thread"
        seen[key] = f"{folder}/{name}"


def test_no_thread_shared_with_what_the_rules_were_written_from():
    validation = {_source(INDEXES[f][n]["source"]): f"{f}/{n}" for f, n in ENTRIES}
    cited: set[tuple[str, str]] = set()
    roots = [ROOT / "tests", ROOT / "triage", ROOT / "playbooks", ROOT / "README.md", SHARED]
    for root in roots:
        paths = [root] if root.is_file() else (p for p in root.rglob("*") if p.is_file())
        for p in paths:
            if any(d in p.parents for d in SETS) or p.suffix in {".png", ".gz", ".pyc", ".so"}:
                continue
            try:
                text = p.read_text(errors="replace")
                cited |= _threads(text)
                cited |= {("page", u.rstrip("/.,").lower()) for u in PAGE.findall(text)}
            except OSError:
                continue
    for lst in CITED_LISTS:
        if lst.exists():
            cited |= _threads(lst.read_text())
    shared = sorted(name for key, name in validation.items() if key in cited)
    assert not shared, f"validation logs from threads the project already cites: {shared}"


@pytest.mark.parametrize("folder", sorted(INDEXES))
def test_triage_never_crashes_and_the_score_is_printed(folder):
    score = _score_module()
    cases = score.load_set([LOGS / folder / "index.yaml"])
    assert len(cases) == len(INDEXES[folder])
    results = score.score_set(cases, with_fix=False, jobs=2)
    summary = score.summarise(results)
    print()
    score.print_side_by_side({f"{folder} (held out)": summary}, verbose=True)
    bad = [(r["name"], r["rc"]) for r in results if r["crash"]]
    assert not bad, f"triage crashed (exit 1, traceback or no JSON) on: {bad}"
