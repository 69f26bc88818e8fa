"""Undo survives damaged transcripts and never runs an undo command twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.conftest import ROOT
from triage.transcript import Transcript, transcripts_dir
from triage.runner import Result


def _good(tmp_path, seconds: float = 0.0):
    counter = tmp_path / "undone.txt"
    t = Transcript.start("set a flag", "this machine", id="engine-config")
    t.command(["true"], Result(["true"], 0, "", ""), "this machine")
    t.change("set the flag", ["sh", "-c", f"sleep {seconds}; echo undo >> {counter}"])
    t.finish("fixed")
    return t, counter


def _damage():
    base = transcripts_dir()
    a = base / "29990101T000000000000Z-broken-utf8"
    a.mkdir(parents=True)
    (a / "meta.json").write_bytes(b"\xff\xfe{not utf-8")
    b = base / "29990101T000000000001Z-a-list"
    b.mkdir()
    (b / "meta.json").write_text("[1, 2, 3]")
    c = base / "29990101T000000000002Z-journal"
    c.mkdir()
    (c / "meta.json").write_text(json.dumps({"title": "x", "where": "this machine", "undone": None}))
    (c / "journal.jsonl").write_text('{"n": 1}\n[1, 2]\n{"type": "backup", "path": 3}\n'
                                     '{"type": "change", "description": "kept", "undo_argv": ["true"]}\n')


def triage(*args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.Popen([sys.executable, "-m", "triage", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=str(ROOT), **kw)


def test_damaged_transcripts_are_listed_and_skipped(tmp_path):
    t, counter = _good(tmp_path)
    _damage()
    p = triage("undo", "--list")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    text = out.decode()
    assert "broken-utf8  [unreadable: meta.json: UnicodeDecodeError" in text
    assert "a-list  [unreadable: meta.json is not an object" in text
    assert t.root.name in text
    # The newest undoable one is the damaged journal: its one good entry is undone, the rest named.
    p = triage("undo", "--yes")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert "3 journal entries of 29990101T000000000002Z-journal could not be read" in out.decode()
    p = triage("undo", "--yes")
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    assert counter.read_text() == "undo\n"


def test_two_undos_at_once_run_each_command_once(tmp_path):
    t, counter = _good(tmp_path, seconds=2)
    procs = [triage("undo", "--yes") for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert counter.read_text() == "undo\n", outs
    said = " ".join(o.decode() + e.decode() for o, e in outs)
    assert "another `triage undo` is running" in said or "already undone" in said or "Nothing to undo" in said
    meta = json.loads((t.root / "meta.json").read_text())
    assert meta["undone"]["state"] == "done"


def test_marked_before_anything_runs(tmp_path):
    """The transcript says "in-progress" while the undo command runs: a crash there leaves it marked."""
    marker = tmp_path / "seen.json"
    t = Transcript.start("x", "this machine")
    meta = t.root / "meta.json"
    t.change("look", [sys.executable, "-c", f"import shutil; shutil.copy({str(meta)!r}, {str(marker)!r})"])
    from triage.transcript import undo

    assert undo(t).ok
    assert json.loads(marker.read_text())["undone"]["state"] == "in-progress"
