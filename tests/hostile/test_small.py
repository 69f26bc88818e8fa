"""The smaller points: what a bug report keeps, a closed pipe, a read-only HOME, a symlink loop."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, run_triage
from triage.upstream.redact import redact

LOG = ROOT / "tests" / "logs" / "install.undefined_symbol.log"


def test_report_redacts_host_names_and_a_short_active_token(tmp_path):
    log = tmp_path / "v.log"
    log.write_text(LOG.read_text().replace(
        "throw_data_ptr_access_errorEv'", "throw_data_ptr_access_errorEv' on gpu-node-17.corp.internal tok-s3cr3t"))
    p = run_triage("report", "--log", str(log), env={"GITHUB_TOKEN": "tok-s3cr3t"})
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "gpu-node-17" not in out and "tok-s3cr3t" not in out and "<host>" in out
    assert redact("os.path.join and vllm.v1.engine.core and model.tar.gz", identities=[]) == \
        "os.path.join and vllm.v1.engine.core and model.tar.gz"


def test_report_into_head_exits_zero():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = f"{sys.executable} -m triage --log {LOG} --report --offline --no-probe | head -1; exit ${{PIPESTATUS[0]}}"
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, env=env, cwd=str(ROOT), timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count(b"\n") == 1 and not p.stderr


def test_read_only_home_makes_fix_say_one_line(tmp_path):
    """A HOME where the undo transcript cannot be written: one line, exit 2, and nothing run."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "state").write_text("a file where the state folder must go (read-only or full HOME alike)")
    log = ROOT / "tests" / "logs" / "attention.no_valid_backend.log"
    p = run_triage("fix", "--log", str(log), "--offline", "--no-probe", "--yes", env={"TRIAGE_HOME": str(home)})
    err = p.stderr.decode()
    assert p.returncode == 2, (p.stdout.decode()[-2000:], err)
    assert err.startswith("triage fix: cannot record changes for undo") and err.count("\n") == 1


def test_symlink_loop_is_named(tmp_path):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.symlink_to(b)
    b.symlink_to(a)
    p = run_triage("--log", str(a), "--report", "--no-probe", "--offline")
    assert p.returncode == 2 and b"symbolic links" in p.stderr and b"no such file" not in p.stderr
