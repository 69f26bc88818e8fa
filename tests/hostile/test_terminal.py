"""No terminal control from outside reaches a terminal: OSC 52 (clipboard), OSC 0 (title), C1 CSI/OSC
from a log line, a snapshot and a GitHub issue, read through a real pty; markup in GitHub fields is
shown, never obeyed; a GitHub that sends far too much is cut to what was asked for."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

from tests.conftest import ROOT
from tests.tui_helpers import read_pty
from tests.upstream_fake_github import Answer, fake_github  # noqa: F401 (pytest fixture)

OSC52 = "\x1b]52;c;ZWNobyBwd25lZA==\x07"
OSC0 = "\x1b]0;pwned-title\x1b\\"
C1 = "\x9b2J\x9d0;c1-title\x07"
HOSTILE = OSC52 + OSC0 + C1
DEMO = ROOT / "triage" / "demo" / "glm5_sm120.log"
FORBIDDEN = (b"\x1b]", b"\x1bP", b"\x07", "\x9b".encode(), "\x9d".encode(), b"pwned-title", b"c1-title",
             b"ZWNobyBwd25lZA")


def hostile_log(tmp_path):
    lines = DEMO.read_text().splitlines()
    lines = [ln + " " + HOSTILE if "No valid attention backend" in ln else ln for ln in lines]
    path = tmp_path / "hostile.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def hostile_snapshot(tmp_path):
    snap = json.loads((ROOT / "triage" / "demo" / "snapshot_rtxpro6000.json").read_text())
    host = snap["hosts"][0]
    for g in host["facts"]["gpus"]:
        g["name"] = "NVIDIA RTX PRO 6000 " + HOSTILE
    host["findings"].append({"id": "x", "severity": "warning", "title": "finding " + HOSTILE, "fix": "[bold red]x"})
    path = tmp_path / "snap.json"
    path.write_text(json.dumps(snap))
    return path


def hostile_issue(n):
    return {"number": n, "title": f"SM120 sparse MLA {HOSTILE} [bold]not markup[/bold]",
            "html_url": "[link=file:///etc/passwd]x[/link]", "state": "[/]", "labels": [{"name": "bug" + OSC52}],
            "repository_url": "https://api.github.com/repos/vllm-project/vllm", "body": "DeepSeek V3.2 SM120 " + HOSTILE,
            "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-02T00:00:00Z", "comments": 3}


def run_in_pty(args, env):
    master, slave = os.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "triage", *args], stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=slave, env=env, cwd=str(ROOT), start_new_session=True)
        os.close(slave)
        slave = -1
        out = read_pty(master)
        proc.wait(60)
    finally:
        if slave >= 0:
            os.close(slave)
        os.close(master)
    return proc.returncode, out


def test_nothing_from_outside_controls_the_terminal(tmp_path, fake_github):
    fake_github.route("/search/issues", Answer(200, {"total_count": 1, "incomplete_results": False,
                                                     "items": [hostile_issue(4242)]}))
    env = dict(os.environ, PYTHONPATH=str(ROOT), TRIAGE_NO_TUI="1", TERM="xterm-256color")
    env.pop("NO_COLOR", None)
    code, out = run_in_pty(["--log", str(hostile_log(tmp_path)), "--snapshot", str(hostile_snapshot(tmp_path)),
                            "--report"], env)
    assert code == 0, out.decode(errors="replace")
    for bad in FORBIDDEN:
        assert bad not in out, (bad, out.decode(errors="replace")[-3000:])
    text = out.decode()
    assert "#4242" in text and "[bold]not markup[/bold]" in text  # shown, not obeyed
    assert "\x1b[" in text  # the report's own colours are still there


def test_json_carries_no_control_characters(tmp_path, fake_github):
    fake_github.route("/search/issues", Answer(200, {"total_count": 1, "incomplete_results": False,
                                                     "items": [hostile_issue(4243)]}))
    p = subprocess.run([sys.executable, "-m", "triage", "--log", str(hostile_log(tmp_path)), "--snapshot",
                        str(hostile_snapshot(tmp_path)), "--json"], capture_output=True, cwd=str(ROOT),
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)

    def strings(o):
        if isinstance(o, str):
            yield o
        elif isinstance(o, dict):
            for k, v in o.items():
                yield k
                yield from strings(v)
        elif isinstance(o, list):
            for v in o:
                yield from strings(v)

    control = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
    assert not [s for s in strings(data) if control.search(s)]
    assert "pwned-title" not in p.stdout.decode()
    hit = next(h for h in data["upstream"] if h.get("number") == 4243)
    assert hit["url"] in ("", None) or hit["url"].startswith("https://github.com/")


def test_fix_walk_output_is_clean(tmp_path):
    p = subprocess.run([sys.executable, "-m", "triage", "fix", "--log", str(hostile_log(tmp_path)), "--offline",
                        "--dry-run", "--no-probe"], capture_output=True, cwd=str(ROOT),
                       env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    for bad in FORBIDDEN:
        assert bad not in p.stdout


def test_a_flood_of_items_is_cut_to_what_was_asked(tmp_path, fake_github):
    items = [hostile_issue(100000 + i) for i in range(50000)]
    fake_github.route("/search/issues", Answer(200, {"total_count": 50000, "incomplete_results": False,
                                                     "items": items}))
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "triage", "--log", str(hostile_log(tmp_path)), "--no-probe", "--json"],
                       capture_output=True, cwd=str(ROOT), env=dict(os.environ, PYTHONPATH=str(ROOT)), timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    assert len(data["upstream"]) <= 10
    assert time.monotonic() - t0 < 60  # bounded by the deadline, not by the flood


def test_retry_after_is_capped_and_per_base(tmp_path, fake_github):
    import asyncio

    from triage.upstream.github import GitHub, RateGate

    fake_github.route("/search/issues", Answer(403, {"message": "API rate limit exceeded"},
                                               headers={"Retry-After": "99999999999"}))

    async def go(base):
        async with GitHub(base) as gh:
            return await gh.search("x")

    r = asyncio.run(go(fake_github.url))
    assert r.status == "rate_limited" and "retry in 3600s" in r.message
    assert RateGate(base=fake_github.url).wait_needed() <= 900
    assert RateGate(base="http://127.0.0.1:1").wait_needed() == 0  # another API base is not blocked


def test_tui_shows_no_control_from_outside(tmp_path):
    """The TUI in a pty: the diagnosis with its log view, then the Machine and Upstream views."""
    import pty
    import select

    log, snap = hostile_log(tmp_path), hostile_snapshot(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", TEXTUAL_ANIMATIONS="none",
               TRIAGE_HOME=str(tmp_path / "home"))
    env.pop("TRIAGE_NO_TUI", None)
    pid, master = pty.fork()
    if pid == 0:
        os.chdir(str(ROOT))
        os.execvpe(sys.executable, [sys.executable, "-m", "triage", "--log", str(log), "--snapshot", str(snap),
                                    "--offline"], env)
    out, keys, status, at = b"", [b"2", b"3", b"1", b"q"], None, None
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            r, _w, _x = select.select([master], [], [], 0.1)
            if r:
                try:
                    out += os.read(master, 65536)
                except OSError:
                    pass
            if b"ROOT CAUSE" in out and keys and (at is None or time.monotonic() - at > 1.5):
                os.write(master, keys.pop(0))
                at = time.monotonic()
            done, st = os.waitpid(pid, os.WNOHANG)
            if done:
                status = os.waitstatus_to_exitcode(st)
                break
    finally:
        if status is None:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(master)
    assert status == 0 and b"ROOT CAUSE" in out and b"RTX PRO 6000" in out  # the Machine view was drawn
    for bad in (b"pwned-title", b"c1-title", b"ZWNobyBwd25lZA", "\x9b".encode(), "\x9d".encode()):
        assert bad not in out, bad
