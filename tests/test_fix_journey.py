"""The guided fix as a user reads it, on every log we have: every playbook of the log's category walked
as a dry run (each answer of its first questions) on every fixture log, every log reconstructed from
public threads, the flagship logs and the demo. What the user reads must never show "unknown", "None",
an unfilled {placeholder}, a condition expression, an internal outcome id or a traceback
(triage.playbooks.wording.leaks), and `triage fix --dry-run` itself must read the same way."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from conftest import run_triage
from tests.playbook_support import NoRunRunner, fake_actions
from triage.playbooks.engine import ConsoleFrontEnd, Session, default_upstream, derive_facts
from triage.playbooks.load import load_library
from triage.playbooks.wording import leaks
from triage.pipeline import build_report

ROOT = Path(__file__).resolve().parent.parent
LOGS = sorted((ROOT / "tests" / "logs").glob("*.log")) + sorted((ROOT / "tests" / "logs" / "unseen").glob("*.log")) \
    + sorted((ROOT / "tests" / "logs" / "flagship").glob("*.log")) + [ROOT / "triage" / "demo" / "glm5_sm120.log"]
LIB = load_library(include_user=False)


def _walk(pb, facts, report, answers: list[str]) -> tuple[str, list[str]]:
    """One dry-run walk with the console front end; the first choices answered from `answers`.
    Returns the text and the keys of the first choice it met (to walk the others too)."""
    out = io.StringIO()
    s = Session(pb, facts, runner=NoRunRunner(), dry_run=True, actions=fake_actions(),
                upstream=lambda f: default_upstream(f, report, offline=True), sparse_probe=lambda: {"available": True})
    front = ConsoleFrontEnd(out, io.StringIO(), yes=True, interactive=False)
    first: list[str] = []
    pending = list(answers)

    def answer(v, _orig=front.answer):
        if v.needs == "choice":
            if not first:
                first.extend(k for k, _l in v.choices)
            if pending:
                got = pending.pop(0)
                front.say(f"    -> {dict(v.choices).get(got, got)}")
                return got
        return _orig(v)

    front.answer = answer  # type: ignore[method-assign]
    front.run(s)
    return out.getvalue(), first


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_playbook_of_the_logs_category_reads_clean(log, tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    report = build_report(str(log), offline=True, probe=False)
    if not report.diagnoses:
        return
    diag = report.diagnoses[0].to_json()
    books = [pb for pb in LIB.playbooks.values() if diag["category"] in pb.categories]
    for pb in books:
        facts = derive_facts(dict(report.environment), diag, log_path="vllm.log", dry_run=True)
        text, first = _walk(pb, facts, report, [])
        for key in first[1:]:
            more, _ = _walk(pb, facts, report, [key])
            text += more
        problems = leaks(text)
        assert not problems, f"{pb.id} on {log.name}:\n" + "\n".join(problems[:8])


@pytest.mark.parametrize("log", [
    "tests/logs/kv_cache.insufficient_for_max_len.log",
    "tests/logs/unseen/cuda_driver--driver-too-old-12080-wrapped.log",
    "tests/logs/unseen/install_mismatch--vllm-c-undefined-constantstring.log",
])
def test_the_fix_command_reads_clean(log):
    r = run_triage("fix", "--log", log, "--dry-run", "--offline", "--no-probe", env={"COLUMNS": "80"})
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err
    assert not leaks(out + err), leaks(out + err)
    # Wrapped at word boundaries to 80 columns; only a word longer than the line (a path, a command) runs over.
    assert all(len(line) <= 80 or " " not in line.strip() or line.lstrip().startswith("$") for line in out.splitlines())


def test_the_kv_limit_is_one_number_in_diagnosis_playbook_and_command():
    r = run_triage("fix", "--log", "tests/logs/kv_cache.insufficient_for_max_len.log", "--dry-run", "--offline",
                   "--no-probe")
    out = r.stdout.decode()
    # vLLM's own estimate is 5104: the diagnosis, the budget, the choice and the by-hand flag all say 5104.
    assert "holds 5104 tokens (vLLM's own estimate)" in " ".join(out.split())
    assert "--max-model-len 5104 (the most that fits)" in out
    assert "Set `--max-model-len 5104`" in out
    assert "4864" not in out and "--max-model-len 32768" not in out


def test_kv_capacity_for_every_message_form():
    """Every form of vLLM's KV-cache error that names a length gives kv_capacity_tokens (v0 count, v1
    estimate, v1 without an estimate scaled from the GiB)."""
    for name, want in [("kv_cache.max_len_exceeds_capacity.log", 16816), ("kv_cache.insufficient_for_max_len.log", 5104),
                       ("unseen/kv_cache_memory--llama4-scout-1m-no-estimate.log", 435595)]:
        d = build_report(str(ROOT / "tests" / "logs" / name), offline=True, probe=False).diagnoses[0]
        assert d.facts["kv_capacity_tokens"] == want, name


def test_the_upgrade_installs_what_the_new_vllm_needs_and_relaunches_with_its_flags():
    """The demo's upgrade verdict says the new vLLM needs a newer flashinfer-python (0.6.3 installed) and
    --kv-cache-dtype fp8_ds_mla: one pip command installs both, and the relaunch carries the flag."""
    import re

    r = run_triage("fix", "--demo", "--dry-run", env={"COLUMNS": "200"})
    out = r.stdout.decode()
    needs = re.search(r"needs flashinfer-python>=([\d.]+) \(installed", out)
    assert needs, out
    assert re.search(r"-m pip install vllm==[\d.]+ 'flashinfer-python>=" + re.escape(needs.group(1)) + "'", out)
    flat = " ".join(out.split())
    relaunch = flat[flat.index("Let triage launch it"):]
    relaunch = relaunch[:relaunch.index(")")]
    assert "--kv-cache-dtype fp8_ds_mla" in relaunch and "--kv-cache-dtype auto" not in relaunch
    assert not leaks(out)


@pytest.mark.parametrize("text", [
    "Driver unknown supports CUDA up to unknown. torch unknown was built for CUDA unknown.",
    "    1) Shorter max context: --max-model-len unknown (or less) (default)",
    "    $ '{*launch_argv}'",
    "    -> fail: upstream: unknown; upstream.verdict == 'fixes' and upstream.target_version is known: fail",
    "    -> pass: cc_major not in [9, 10]: pass",
    "Outcome: upgrade:vllm",
    "20261130-1  Fix  on this machine  outcome=None  [no changes]",
    'Traceback (most recent call last):',
])
def test_the_check_catches_what_the_issue_saw(text):
    assert leaks(text)


def test_the_check_lets_plain_words_and_quoted_code_through():
    assert not leaks("The model's architecture is unknown to this vLLM. Set `--kv-cache-dtype auto`.")
    assert not leaks("spawned workers re-ran the script (missing `if __name__ == '__main__':` guard)")


def test_the_reads_clean_script_measures_a_folder(tmp_path):
    import shutil
    import subprocess
    import sys

    for name in ("kv_cache.insufficient_for_max_len.log", "cuda.driver_too_old.log"):
        shutil.copy(ROOT / "tests" / "logs" / name, tmp_path / name)
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "reads_clean.py"), str(tmp_path), "--jobs", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "reads clean: 2/2 = 100%" in r.stdout, r.stdout + r.stderr
