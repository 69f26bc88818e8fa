"""From launch to the diagnosis on screen, for a 10 MB log piped into the TUI, against the headless
report of the same log in the same run (target: the TUI within 1 second more).

The TUI runs in a real pseudo-terminal (its controlling terminal) with the log on a pipe, exactly as
`cat vllm.log | triage --log -`; the clock stops when "ROOT CAUSE" is drawn. The headless figure is
`cat vllm.log | triage --log - --report` run to completion. The failure sits at the end of the log,
after 10 MB of request lines (the worst case for a reader that streams).

    python bench/tui_latency.py [--mb 10] [--runs 3]
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import select
import shlex
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "triage" / "demo" / "glm5_sm120.log"


def make_log(path: Path, mb: float) -> None:
    noise = ("(APIServer pid=1) INFO 02-14 10:{m:02d}:{s:02d} [loggers.py:123] Engine 000: Avg prompt throughput: "
             "1234.5 tokens/s, Avg generation throughput: 456.7 tokens/s, Running: 12 reqs, Waiting: 0 reqs, "
             "GPU KV cache usage: 42.0%, Prefix cache hit rate: 87.5%\n")
    target = int(mb * 1024 * 1024)
    with path.open("w") as fh:
        n = 0
        size = 0
        while size < target:
            line = noise.format(m=(n // 60) % 60, s=n % 60)
            fh.write(line)
            size += len(line)
            n += 1
        fh.write(DEMO.read_text())


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e["TEXTUAL_ANIMATIONS"] = "none"
    e.setdefault("TRIAGE_HOME", tempfile.mkdtemp(prefix="triage-bench-"))
    e.pop("TRIAGE_NO_TUI", None)
    return e


def headless(log: Path) -> float:
    cmd = f"cat {shlex.quote(str(log))} | {shlex.quote(sys.executable)} -m triage --log - --report --offline --no-probe"
    t0 = time.perf_counter()
    r = subprocess.run(["sh", "-c", cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env())
    t = time.perf_counter() - t0
    if b"ROOT CAUSE" not in r.stdout:
        raise SystemExit(f"headless report did not diagnose: {r.stderr.decode()[-500:]}")
    return t


def tui(log: Path, timeout: float = 60.0) -> float:
    cmd = f"cat {shlex.quote(str(log))} | {shlex.quote(sys.executable)} -m triage --log - --offline --no-probe"
    e = env()
    t0 = time.perf_counter()
    pid, master = pty.fork()
    if pid == 0:
        os.execvpe("sh", ["sh", "-c", cmd], e)
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 36, 120, 0, 0))
    seen = b""
    found = None
    try:
        while time.perf_counter() - t0 < timeout:
            r, _w, _x = select.select([master], [], [], 0.05)
            if not r:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:
                break
            if not chunk:
                break
            seen = (seen + chunk)[-200000:]
            if b"ROOT CAUSE" in seen:
                found = time.perf_counter() - t0
                break
        if found is None:
            raise SystemExit("the TUI never showed the diagnosis")
        os.write(master, b"q")
        deadline = time.perf_counter() + 10
        while time.perf_counter() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            select.select([master], [], [], 0.05)
            try:
                os.read(master, 65536)
            except OSError:
                pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    finally:
        os.close(master)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=10.0)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "vllm.log"
        make_log(log, args.mb)
        size = log.stat().st_size
        tui(log)  # warm the page cache and Python's bytecode caches
        hs = [headless(log) for _ in range(args.runs)]
        ts = [tui(log) for _ in range(args.runs)]
    h, t = statistics.median(hs), statistics.median(ts)
    print(f"log: {size / 1e6:.1f} MB piped, failure at the end; median of {args.runs} runs")
    print(f"headless report (--report), to exit:     {h:.2f} s")
    print(f"TUI, from launch to the diagnosis drawn: {t:.2f} s")
    print(f"TUI - headless: {t - h:+.2f} s (target: at most +1.00 s); ratio {t / h:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
