"""Transcripts record every change with backups; undo restores them, newest first, and says what it
cannot revert. Commands time out; a failed change leaves the machine as it was."""

from __future__ import annotations

import json
import textwrap

import pytest

from tests.playbook_support import ElsewhereRunner
from triage.commands import undo as undo_cmd
from triage.playbooks.actions import ActionContext, SetEnv, SetFlag
from triage.playbooks.engine import Session, derive_facts
from triage.playbooks.load import load_text
from triage.runner import LocalRunner
from triage.transcript import Transcript, last_transcript, transcripts_dir, undo, undo_last


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def test_recorder_protocol_and_undo(tmp_path):
    edited = tmp_path / "serve.sh"
    edited.write_text("vllm serve m\n")
    created = tmp_path / "new.conf"
    t = Transcript.start("Demo fix", LocalRunner.where, id="demo")
    assert t.root.parent == transcripts_dir() and t.root.name.endswith("-demo")
    r = LocalRunner().run(["true"])
    t.command(["true"], r, LocalRunner.where)
    assert t.backup(str(edited), LocalRunner()) is not None
    edited.write_text("vllm serve m --port 1\n")
    assert t.backup(str(created), LocalRunner()) is None
    created.write_text("x")
    marker = tmp_path / "installed"
    marker.write_text("plugin")
    t.change("installed a plugin", ["rm", "-f", str(marker)])
    t.change("restarted the service", None)
    t.finish("flag:--port")
    meta = json.loads((t.root / "meta.json").read_text())
    assert meta["outcome"] == "flag:--port" and meta["where"] == "this machine"
    kinds = [e["type"] for e in t.entries()]
    assert kinds == ["command", "backup", "backup", "change", "change"]

    assert last_transcript().root == t.root
    rep = undo_last(runner_for=lambda where: LocalRunner())
    assert rep.ok
    assert edited.read_text() == "vllm serve m\n"
    assert not created.exists() and not marker.exists()
    assert rep.cannot == ["restarted the service"]
    assert last_transcript() is None, "an undone transcript is not undone twice"


def test_undo_restores_files_edited_twice_to_the_original(tmp_path):
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve m\n")
    t = Transcript.start("twice", LocalRunner.where)
    ctx = ActionContext(LocalRunner(), t, {}, "python3")
    assert SetFlag().apply({"file": str(f), "flag": "--port", "value": "8001"}, ctx).ok
    assert SetEnv().apply({"file": str(f), "name": "NCCL_P2P_DISABLE", "value": "1"}, ctx).ok
    assert "--port 8001" in f.read_text() and "NCCL_P2P_DISABLE" in f.read_text()
    undo(t, runner_for=lambda w: LocalRunner())
    assert f.read_text() == "vllm serve m\n"


def test_remote_files_go_through_the_runner(tmp_path):
    """A runner for another host: backups are fetched with cat, restores written with sh -c 'cat > "$1"'."""
    f = tmp_path / "compose.yaml"
    original = "services:\n  vllm:\n    command: [\"--model\", \"x\"]\n"
    f.write_text(original)
    runner = ElsewhereRunner("gpu-a")
    t = Transcript.start("remote", runner.where)
    ctx = ActionContext(runner, t, {}, "python3")
    got = SetFlag().apply({"file": str(f), "flag": "--max-model-len", "value": "4096"}, ctx)
    assert got.ok and '"--max-model-len", "4096"' in f.read_text()
    entry = next(e for e in t.entries() if e["type"] == "backup")
    assert entry["where"] == "gpu-a" and entry["existed"]
    missing = tmp_path / "absent.txt"
    assert t.backup(str(missing), runner) is None
    missing.write_text("new")
    seen = []
    rep = undo(t, runner_for=lambda w: seen.append(w) or ElsewhereRunner(w))
    assert rep.ok and set(seen) == {"gpu-a"}
    assert f.read_text() == original and not missing.exists()


def test_undo_command(tmp_path, capsys):
    assert undo_cmd.main(["--yes"]) == 0
    assert "Nothing to undo" in capsys.readouterr().out
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve m\n")
    t = Transcript.start("cmd", LocalRunner.where)
    SetFlag().apply({"file": str(f), "flag": "--enforce-eager"}, ActionContext(LocalRunner(), t, {}, "python3"))
    t.change("pip install something", None)
    t.finish("flag:--enforce-eager")
    assert undo_cmd.main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"restore {f}" in out and "cannot revert: pip install something" in out
    assert "--enforce-eager" in f.read_text()
    assert undo_cmd.main([]) == 2  # no terminal and no --yes
    assert "use --yes" in capsys.readouterr().err
    assert undo_cmd.main(["--yes"]) == 0
    out = capsys.readouterr().out
    assert f"reverted: restored {f}" in out and "cannot revert (do it by hand if needed): pip install something" in out
    assert f.read_text() == "vllm serve m\n"
    assert undo_cmd.main(["--list"]) == 0
    out = capsys.readouterr().out
    assert "[undone]" in out and "result: change the launch flag --enforce-eager" in out
    assert "outcome=" not in out and "None" not in out


RUNS = textwrap.dedent(
    """\
    id: runs
    title: Runs
    categories: [gpu_oom]
    steps:
      - id: slow
        kind: run
        argv: [sleep, "5"]
        timeout: 0.3
        on_success: done:ok
        on_failure: edit
      - id: edit
        kind: apply
        action: set-flag
        with: {file: "{launch_file}", flag: --port, value: "1"}
        on_success: done:edited
        on_failure: manual:escalate
    facts: {launch_file: text}
    """
)


def test_a_hanging_command_times_out_and_the_playbook_goes_on(tmp_path):
    pb = load_text(RUNS, "runs.yaml")
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve m\n")
    facts = derive_facts({})
    facts["launch_file"] = str(f)
    s = Session(pb, facts, runner=LocalRunner())
    v = s.start()
    assert v.argv == ["sleep", "5"]
    v = s.advance(True)
    assert v.result.status == "failure" and v.result.timed_out
    v = s.advance()
    assert v.step_id == "edit" and v.needs == "confirm"
    assert "+vllm serve --port 1 m" in v.diff
    assert f.read_text() == "vllm serve m\n", "nothing is changed before it is confirmed"
    v = s.advance(False)
    assert v is None and s.outcome == "manual:declined"
    assert f.read_text() == "vllm serve m\n"
    entries = s.recorder.entries()
    assert entries[0]["type"] == "command" and entries[0]["timed_out"]


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    f = tmp_path / "serve.sh"
    f.write_text("vllm serve m\n")
    t = Transcript.start("fail", LocalRunner.where)
    import triage.playbooks.actions as actions

    real = actions.write_file
    calls = []

    def flaky(ctx, path, text):
        calls.append(text)
        if len(calls) == 1:
            with open(path, "w") as fh:
                fh.write(text[:5])  # a partial write, then the disk fills up
            raise OSError("No space left on device")
        return real(ctx, path, text)

    monkeypatch.setattr(actions, "write_file", flaky)
    got = SetFlag().apply({"file": str(f), "flag": "--port", "value": "1"}, ActionContext(LocalRunner(), t, {}, "python3"))
    assert not got.ok and "No space left" in got.message
    assert f.read_text() == "vllm serve m\n"
