"""`triage fix`: dry-run plans, refusals without a terminal, one-line errors."""

from __future__ import annotations

import json

import pytest

from tests.playbook_support import diagnosis, snapshot
from triage.commands import fix


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def report_file(tmp_path, diagnoses):
    path = tmp_path / "report.json"
    path.write_text(json.dumps({"schema": "triage.report/1", "input": {"source": "vllm.log", "bytes": 1, "lines": 1},
                                "diagnoses": diagnoses, "environment": snapshot("sm120-nightly")}))
    return path


def test_dry_run_from_a_saved_report_shows_the_whole_plan(tmp_path, capsys):
    path = report_file(tmp_path, [diagnosis("attention_backend")])
    assert fix.main(["--from-report", str(path), "--dry-run", "--offline"]) == 0
    out = capsys.readouterr().out
    assert "(playbook attention-sparse-mla; dry run" in out
    assert "Result: " in out and "outcome: " not in out
    assert "Other steps of this playbook" in out and "  - Upgrade vLLM" in out
    assert not (tmp_path / "home" / "state" / "transcripts").exists()


def test_changes_are_refused_without_a_terminal_or_yes(tmp_path, capsys):
    path = report_file(tmp_path, [diagnosis("kv_cache_memory")])
    assert fix.main(["--from-report", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--yes" in err[0] and "--dry-run" in err[0]


def test_category_fallback_and_nothing_to_fix(tmp_path, capsys):
    diag = diagnosis("gpu_oom")
    diag["fix"] = {"summary": "", "playbook": None}
    assert fix.main(["--from-report", str(report_file(tmp_path, [diag])), "--dry-run"]) == 0
    assert "(playbook gpu-oom" in capsys.readouterr().out
    assert fix.main(["--from-report", str(report_file(tmp_path, [])), "--dry-run"]) == 3


@pytest.mark.parametrize(
    "argv,words",
    [
        (["--log", "/no/such/file.log", "--dry-run"], "no such file"),
        (["--log", ".", "--dry-run"], "is a directory"),
        (["--log", "x.log", "--playbook", "nope", "--dry-run"], "no playbook 'nope'"),
        (["--from-report", "/no/such/report.json", "--dry-run"], "No such file"),
        (["--dry-run"], None),
    ],
)
def test_user_errors_are_one_line(argv, words, capsys):
    assert fix.main(argv) == 2
    err = capsys.readouterr().err.strip()
    if words:
        assert words in err and "\n" not in err and "Traceback" not in err


def test_named_playbook_runs_on_a_log(tmp_path, capsys):
    log = tmp_path / "vllm.log"
    log.write_text("INFO nothing to see\n")
    assert fix.main(["--log", str(log), "--playbook", "kv-cache-memory", "--dry-run", "--offline", "--no-probe"]) == 0
    assert "(playbook kv-cache-memory" in capsys.readouterr().out
