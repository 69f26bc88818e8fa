"""The TUI in real terminals: tmux end to end with a piped log, and the plain report without any tty."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import pytest

from tui_helpers import DEMO_LOG_REL, ROOT, read_pty

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
        out = read_pty(master)
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


def _run_in_pty(args: list[str], tmp_path, extra_env: dict[str, str] | None = None) -> tuple[bytes, int]:
    """Run triage with a pseudo-terminal as its controlling terminal; quit with q once diagnosed."""
    import pty
    import select

    env = _env(tmp_path)
    env["TERM"] = "xterm-256color"  # as over SSH: 256 colours, no COLORTERM
    env.pop("COLORTERM", None)
    env.update(extra_env or {})
    pid, master = pty.fork()
    if pid == 0:  # the child: triage itself
        os.chdir(str(ROOT))
        os.execvpe(sys.executable, [sys.executable, "-m", "triage", *args], env)
    out = b""
    sent = False
    deadline = time.monotonic() + 30
    status = None
    try:
        while time.monotonic() < deadline:
            r, _w, _x = select.select([master], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    chunk = b""
                out += chunk
            if not sent and b"ROOT CAUSE" in out:
                os.write(master, b"q")
                sent = True
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                break
    finally:
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(master)
    return out, status


def test_mouse_is_off_unless_asked_and_no_color_is_respected(tmp_path):
    out, status = _run_in_pty(["--log", DEMO_LOG_REL, "--offline", "--no-probe"], tmp_path)
    assert status == 0 and b"ROOT CAUSE" in out
    assert b"\x1b[?1000h" not in out and b"\x1b[?1006h" not in out  # no mouse reporting: the terminal's copy works
    assert b"\x1b[38;5;" in out and b"\x1b[38;2;" not in out  # 256 colours; truecolour not assumed
    assert not _only_greys(out)
    out, status = _run_in_pty(["--log", DEMO_LOG_REL, "--offline", "--no-probe", "--mouse"], tmp_path)
    assert status == 0 and b"\x1b[?1000h" in out
    out, status = _run_in_pty(["--log", DEMO_LOG_REL, "--offline", "--no-probe"], tmp_path, {"NO_COLOR": "1"})
    assert status == 0 and b"ROOT CAUSE" in out
    assert _only_greys(out)  # NO_COLOR: Textual's monochrome filter, greys only


def _only_greys(out: bytes) -> bool:
    import re

    greys = {0, 7, 8, 15, 16, 231, *range(232, 256)}
    for n in re.findall(rb"\x1b\[(?:[0-9;]*;)?[34]8;5;(\d+)", out):
        if int(n) not in greys:
            return False
    for r, g, b in re.findall(rb"[34]8;2;(\d+);(\d+);(\d+)", out):
        if not (r == g == b):
            return False
    return True


def test_log_dash_from_a_terminal_is_a_one_line_error(tmp_path):
    out, status = _run_in_pty(["--log", "-", "--offline", "--no-probe"], tmp_path)
    assert status == 2 and b"standard input is a terminal" in out and b"Traceback" not in out


@pytest.mark.skipif(TMUX is None, reason="tmux is not installed")
def test_tmux_keys_work_while_a_fast_pipe_streams(tmp_path):
    """vLLM writing as fast as a pipe takes (the demo's start-up and crash, then requests and repeated
    errors without end): the diagnosis shows, views switch on keys, and two quit keys quit."""
    feed = tmp_path / "feed.py"
    feed.write_text(
        "import sys\n"
        f"head = open({str(ROOT / DEMO_LOG_REL)!r}, 'rb').read()\n"
        "noise = b''.join(b'(APIServer pid=7) ERROR 02-14 10:00:%02d [serving_chat.py:1245] Error in preprocessing '\n"
        "                 b'prompt inputs: too long (%d tokens)\\n' % (i % 60, 40000 + i) for i in range(2000))\n"
        "out = sys.stdout.buffer\n"
        "out.write(head)\n"
        "while True:\n"
        "    out.write(noise)\n")
    sock = str(tmp_path / "tmux.sock")
    status = tmp_path / "status"
    env = _env(tmp_path)
    cmd = (f"cd {ROOT} && {sys.executable} {feed} | PYTHONPATH={ROOT} TRIAGE_HOME={env['TRIAGE_HOME']} "
           f"TEXTUAL_ANIMATIONS=none {sys.executable} -m triage --log - --offline --no-probe; echo $? > {status}")
    base = [TMUX, "-S", sock, "-f", "/dev/null"]
    subprocess.run(base + ["new-session", "-d", "-x", "80", "-y", "24", "-s", "t", "sh", "-c", cmd],
                   check=True, env={k: v for k, v in env.items() if k != "TMUX"})

    def capture() -> str:
        return subprocess.run(base + ["capture-pane", "-p", "-t", "t"], capture_output=True, text=True).stdout

    def wait(ok, seconds: float = 30) -> str:
        deadline = time.monotonic() + seconds
        screen = capture()
        while time.monotonic() < deadline and not ok(screen):
            time.sleep(0.1)
            screen = capture()
        return screen

    try:
        screen = wait(lambda s: "ROOT CAUSE" in s and "still writing" in s)
        assert "ROOT CAUSE" in screen and "still writing" in screen, screen
        for _ in range(3):
            subprocess.run(base + ["send-keys", "-t", "t", "2"], check=True)
            assert "Machine (" in wait(lambda s: "Machine (" in s), capture()
            subprocess.run(base + ["send-keys", "-t", "t", "1"], check=True)
            assert "ROOT CAUSE" in wait(lambda s: "Machine (" not in s and "ROOT CAUSE" in s), capture()
        subprocess.run(base + ["send-keys", "-t", "t", "q"], check=True)
        assert "Press q" in wait(lambda s: "Press q" in s), capture()
        subprocess.run(base + ["send-keys", "-t", "t", "q"], check=True)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "quit. vLLM is still running" not in capture():
            time.sleep(0.2)
        assert "quit. vLLM is still running" in capture()
    finally:
        subprocess.run(base + ["kill-server"], capture_output=True)
