"""Nothing a log or a snapshot names runs: a planted interpreter beside a crafted log (a ticket bundle)
stays untouched through the report, the JSON, the fix walk and the probe."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, run_triage
from tests.fakes.fake_env import make_dist, VLLM_FILES
from triage.launch import serve_argv
from triage.probes import gather
from triage.interpreter import refuse_reason

LOG = ROOT / "tests" / "logs" / "install.undefined_symbol.log"


def plant(root: Path) -> tuple[Path, Path, Path]:
    """A bundle: PREFIX/bin/python3.12 (and python3, python) that leave a mark when run, a vLLM dist-info
    in PREFIX/lib/python3.12/site-packages, and a log whose tracebacks name that prefix."""
    prefix = root / "bundle" / "env"
    marker = root / "RAN"
    (prefix / "bin").mkdir(parents=True)
    for name in ("python3.12", "python3", "python", "vllm"):
        p = prefix / "bin" / name
        p.write_text(f"#!/bin/sh\necho ran >> {marker}\n")
        p.chmod(0o755)
    site = prefix / "lib" / "python3.12" / "site-packages"
    make_dist(site, "vllm", "0.11.2", dict(VLLM_FILES))
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.12.3\n")
    log = root / "bundle" / "vllm.log"
    log.write_text(LOG.read_text().replace("/usr/local/lib/python3.12/dist-packages", f"{prefix}/lib/python3.12/site-packages"))
    return prefix, marker, log


@pytest.fixture
def bundle(tmp_path):
    return plant(tmp_path)


@pytest.mark.parametrize("args", [["--report"], ["--report", "--offline"], ["--json"], ["--json", "--offline"]])
def test_report_and_json_run_nothing_the_log_names(bundle, args):
    prefix, marker, log = bundle
    p = run_triage("--log", str(log), *args, env={"FAKE_NVML_PROFILE": "none"})
    assert p.returncode in (0, 1, 3), p.stderr
    assert not marker.exists()
    if "--json" in args:
        env = json.loads(p.stdout)["environment"]
        # ... yet the environment was read from its files
        assert env["python"]["read_from"] == "disk"
        assert env["python"]["executable"] == f"{prefix}/bin/python3.12"
        assert env["vllm_install"]["version"] == "0.11.2"


def test_fix_runs_nothing_the_log_names(bundle):
    prefix, marker, log = bundle
    for extra in (["--dry-run"], ["--yes"]):  # --yes never vouches for an interpreter the log names
        p = run_triage("fix", "--log", str(log), "--offline", *extra, input=b"")
        assert p.returncode in (0, 1, 3, 4, 5), p.stderr
        assert not marker.exists(), p.stdout.decode()
    assert "which the log or a snapshot names" in p.stdout.decode()


def test_fix_asks_before_running_the_logs_interpreter(bundle):
    """In a terminal the check shows the interpreter and runs it only on `y`."""
    import io

    from triage.pipeline import build_report
    from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
    from triage.playbooks.load import load_library

    prefix, marker, log = bundle
    report = build_report(str(log), offline=True)
    facts = derive_facts(report.environment, report.diagnoses[0].to_json())
    assert facts["target_python"] == f"{prefix}/bin/python3.12" and not facts["target_python_trusted"]
    pb = load_library().get("install-mismatch")
    out = io.StringIO()
    ConsoleFrontEnd(out, io.StringIO("n\n" * 20), interactive=True).run(Session(pb, facts))
    assert not marker.exists() and "not run: running" in out.getvalue()
    ConsoleFrontEnd(io.StringIO(), io.StringIO("y\n" * 20), interactive=True).run(Session(pb, facts))
    assert marker.exists()  # a person said yes to that exact command


def test_probe_reads_the_logs_environment_from_disk(bundle, monkeypatch):
    prefix, marker, _ = bundle
    monkeypatch.setitem(sys.modules, "pynvml", None)
    hp = gather(site_packages=f"{prefix}/lib/python3.12/site-packages")
    assert hp.facts["python"]["read_from"] == "disk" and hp.facts["vllm_version"] == "0.11.2"
    hp = gather(python_prefix=str(prefix))
    assert hp.facts["python"]["read_from"] == "disk"
    assert not marker.exists()


def test_snapshot_interpreter_is_not_run(bundle, tmp_path):
    prefix, marker, log = bundle
    snap = {"hosts": [{"host": "gpu-a", "ok": True, "error": None, "findings": [],
                       "facts": {"gpus": [], "python": {"executable": f"{prefix}/bin/python3.12",
                                                         "read_from": "interpreter"},
                                 "packages": {"vllm": "0.11.2"}}}]}
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    for args in (["--json"], ["--report"]):
        p = run_triage("--log", str(log), "--snapshot", str(path), *args)
        assert p.returncode in (0, 1, 3), p.stderr
    p = run_triage("fix", "--log", str(log), "--offline", input=b"")
    assert not marker.exists()


def test_user_named_interpreter_refused_when_others_can_write_it(bundle, tmp_path):
    prefix, marker, _ = bundle
    py = prefix / "bin" / "python3.12"
    assert refuse_reason(str(py)) is None
    py.chmod(py.stat().st_mode | stat.S_IWOTH)
    assert "writable by every user" in refuse_reason(str(py))
    py.chmod(0o755)
    (prefix / "bin").chmod(0o777)
    assert "writable by every user" in refuse_reason(str(py))
    (prefix / "bin").chmod(0o755)
    assert "/proc" in refuse_reason("/proc/self/cwd/bin/python")
    if os.geteuid() == 0:
        os.chown(py, 65534, 65534)
        assert "another user" in refuse_reason(str(py))
        p = run_triage("probe", "--python", str(py), "--json", env={"FAKE_NVML_PROFILE": "none"})
        found = json.loads(p.stdout)["hosts"][0]["findings"]
        assert found[0]["id"] == "python.probe_failed" and "another user" in found[0]["title"]
    assert not marker.exists()


def test_log_prefix_under_proc_is_no_environment():
    from triage.logread.extract import _odd_prefix

    assert _odd_prefix("/proc/self/cwd") and _odd_prefix("/opt/../tmp/x") and not _odd_prefix("/root/ml-env")


def test_dashed_model_goes_after_double_dash():
    argv = serve_argv({"model": "--trust-remote-code", "tokenizer": "--trust-remote-code", "seed": -1,
                       "x; rm -rf /": True, "served_model_name": ["ok", "--enforce-eager"]})
    assert argv[-2:] == ["--", "--trust-remote-code"]
    assert "--tokenizer=--trust-remote-code" in argv and "--enforce-eager" not in argv
    assert ["--seed", "-1"] == argv[argv.index("--seed"):argv.index("--seed") + 2]
    assert not any("rm" in a for a in argv)


def test_metadata_linked_to_dev_zero_reads_as_nothing(tmp_path):
    from triage.probes.pyenv import probe_pyenv_at

    site = tmp_path / "env" / "lib" / "python3.12" / "site-packages"
    d = make_dist(site, "vllm", "0.11.2", dict(VLLM_FILES))
    (d / "RECORD").unlink()
    (d / "RECORD").symlink_to("/dev/zero")
    (site / "vllm" / "version.py").unlink()
    (site / "vllm" / "version.py").symlink_to("/dev/zero")
    got = probe_pyenv_at(str(tmp_path / "env"))
    assert got["packages"]["vllm"] == "0.11.2" and got["vllm"]["files"]["record"] is False


def test_snapshot_from_dev_zero_is_one_line():
    p = run_triage("--log", str(LOG), "--snapshot", "/dev/zero", "--report", "--offline", timeout=60)
    assert p.returncode == 2 and p.stderr.count(b"\n") == 1 and b"larger than 64 MB" in p.stderr


def test_the_logs_vllm_is_not_launched_on_yes(bundle):
    """A relaunch step runs PREFIX/bin/vllm from the log's prefix: --yes does not vouch for it either."""
    import io

    from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
    from triage.playbooks.load import load_text

    prefix, marker, _log = bundle
    pb = load_text("""
id: relaunch
title: relaunch
categories: [environment]
steps:
  - id: verify
    kind: verify
    title: Launch it again
    argv: ["{*launch_argv}"]
    on_pass: "fixed:done"
    on_fail: "manual:escalate"
""")
    facts = derive_facts({"python_prefix": str(prefix), "model": "Qwen/Qwen3-8B"}, None)
    assert facts["launch_argv"][0] == f"{prefix}/bin/vllm" and facts["launch_program_unvouched"]
    out = io.StringIO()
    ConsoleFrontEnd(out, io.StringIO(""), yes=True).run(Session(pb, facts))
    assert not marker.exists() and f"not confirmed: it runs {prefix}/bin/vllm" in out.getvalue()
    # The interpreter the user named beside it vouches for its environment's vllm.
    facts = derive_facts({"python_prefix": str(prefix), "model": "m"}, None, python=f"{prefix}/bin/python3")
    assert not facts["launch_program_unvouched"]
