"""The TUI in real terminals: tmux end to end with a piped log, and the plain report without any tty."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tui_helpers import DEMO_LOG_REL, ROOT

TMUX = shutil.which("tmux")


def _env(tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TRIAGE_HOME"] = str(tmp_path / "home")
    env["TEXTUAL_ANIMATIONS"] = "none"
    env.pop("TRIAGE_NO_TUI", None)
    return env


def test_without_any_terminal_prints_the_plain_report(tmp_path):
    """No controlling terminal (cron, ssh without -t, CI): the plain report and its exit code, even
    when stdout is a terminal device."""
    master, slave = os.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "triage", "--log", "-", "--offline", "--no-probe"],
            input=(ROOT / DEMO_LOG_REL).read_bytes(), stdout=slave, stderr=subprocess.PIPE,
            env=_env(tmp_path), cwd=str(ROOT), start_new_session=True, timeout=60)
        os.close(slave)
        slave = -1
        out = b""
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    text = out.decode(errors="replace")
    assert proc.returncode == 0, proc.stderr
    assert "ROOT CAUSE" in text and "No sparse MLA attention backend" in text
    assert "\x1b[?1049h" not in text  # never the alternate screen of a TUI


def test_output_to_a_pipe_is_the_plain_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "triage", "--log", DEMO_LOG_REL, "--offline", "--no-probe"],
                          capture_output=True, env=_env(tmp_path), cwd=str(ROOT), timeout=60)
    assert proc.returncode == 0 and "ROOT CAUSE" in proc.stdout.decode()


def _capture(target: str) -> str:
    return subprocess.run([TMUX, "capture-pane", "-p", "-t", target], capture_output=True, text=True).stdout


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_tmux_piped_log_diagnosis_keys_and_quit(tmp_path):
    sock = str(tmp_path / "tmux.sock")
    status = tmp_path / "status"
    env = _env(tmp_path)
    cmd = (f"cd {ROOT} && cat {DEMO_LOG_REL} | PYTHONPATH={ROOT} TRIAGE_HOME={env['TRIAGE_HOME']} "
           f"TEXTUAL_ANIMATIONS=none {sys.executable} -m triage --log - --offline --no-probe; "
           f"echo $? > {status}")
    base = [TMUX, "-S", sock, "-f", "/dev/null"]
    subprocess.run(base + ["new-session", "-d", "-x", "80", "-y", "24", "-s", "t", "sh", "-c", cmd],
                   check=True, env={k: v for k, v in env.items() if k != "TMUX"})
    try:
        def capture() -> str:
            return subprocess.run(base + ["capture-pane", "-p", "-t", "t"], capture_output=True, text=True).stdout

        deadline = time.monotonic() + 30
        screen = ""
        while time.monotonic() < deadline:
            screen = capture()
            if "ROOT CAUSE" in screen and "input ended" in screen:
                break
            time.sleep(0.2)
        assert "ROOT CAUSE" in screen and "No sparse MLA attention" in screen, screen
        assert "input ended" in screen and "standard input" in screen
        # keys work although stdin was the pipe: go to the Machine view and back
        subprocess.run(base + ["send-keys", "-t", "t", "2"], check=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and "Machine (" not in capture():
            time.sleep(0.2)
        assert "Machine (" in capture()
        subprocess.run(base + ["send-keys", "-t", "t", "1"], check=True)
        subprocess.run(base + ["send-keys", "-t", "t", "q"], check=True)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not status.exists():
            time.sleep(0.2)
        assert status.exists(), capture()
        assert status.read_text().strip() == "0"
    finally:
        subprocess.run(base + ["kill-server"], capture_output=True)
