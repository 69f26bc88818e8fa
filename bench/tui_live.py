"""The live TUI on a fast pipe: how long a key takes to change the screen while 50 MB/s of log arrives,
against the same TUI on a pipe that stays quiet, in the same run (target: keys answered within 100 ms).

A generator writes an error-dense served log (one line in eight an error or a warning that is not the
failure, the flagship crash at the end of each 16 MB pass, then again from the start: a server that
keeps failing) at a fixed rate into `triage --log -`, in tmux at 80x24. Once the TUI is up, the bench
presses 2 (the Machine view) and 1 (back to the Diagnosis) with `tmux send-keys`, and polls
`tmux capture-pane` until the screen shows the view asked for: that delay is the key's latency.
The quiet case writes the first 200 KB once and then holds the pipe open; the floor of the method
(tmux, send-keys, capture-pane, Textual itself) is a bare Textual app switching two views on the same keys.

    python bench/tui_live.py [--rate 50] [--keys 40]
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import ROOT, make_error_dense_log  # noqa: E402

PY = shlex.quote(sys.executable)

FEED = r'''
import os, sys, time
path, rate, stats = sys.argv[1], float(sys.argv[2]), sys.argv[3]
data = open(path, "rb").read()
out = sys.stdout.buffer
if rate <= 0:
    out.write(data[:200000]); out.flush()
    time.sleep(3600)
    sys.exit()
CHUNK = 1 << 18
t0 = time.perf_counter(); sent = 0; pos = 0; told = t0
while True:
    chunk = data[pos:pos + CHUNK]
    pos = pos + CHUNK if pos + CHUNK < len(data) else 0
    try:
        out.write(chunk); out.flush()
    except BrokenPipeError:
        break
    sent += len(chunk)
    now = time.perf_counter()
    if now - told > 0.25:
        told = now
        with open(stats + ".tmp", "w") as fh:
            fh.write(f"{sent} {now - t0}")
        os.replace(stats + ".tmp", stats)
    ahead = sent / (rate * 1e6) - (now - t0)
    if ahead > 0:
        time.sleep(ahead)
'''


BARE = r'''
from textual.app import App
from textual.widgets import ContentSwitcher, Static

class Bare(App):
    BINDINGS = [("1", "show('a')"), ("2", "show('b')")]

    def compose(self):
        with ContentSwitcher(initial="a"):
            yield Static("Log: still writing", id="a")
            yield Static("Machine (bare)", id="b")

    def action_show(self, which):
        self.query_one(ContentSwitcher).current = which

Bare().run()
'''


def percentile(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    k = min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))
    return xs[k]


class Session:
    def __init__(self, folder: Path, name: str, cmd: str, env: dict[str, str]):
        self.base = ["tmux", "-S", str(folder / f"{name}.sock"), "-f", "/dev/null"]
        self.env = env
        # From the checkout measured: `python -m` looks in the current folder first.
        subprocess.run(self.base + ["new-session", "-d", "-x", "80", "-y", "24", "-s", "t", "-c", str(ROOT),
                                    "sh", "-c", cmd], check=True, env=env)

    def capture(self) -> str:
        return subprocess.run(self.base + ["capture-pane", "-p", "-t", "t"], capture_output=True, text=True,
                              env=self.env).stdout

    def key(self, k: str) -> None:
        subprocess.run(self.base + ["send-keys", "-t", "t", k], check=True, env=self.env)

    def wait(self, ok, timeout: float) -> float | None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < timeout:
            if ok(self.capture()):
                return time.perf_counter() - t0
        return None

    def close(self) -> None:
        subprocess.run(self.base + ["kill-server"], capture_output=True, env=self.env)


def in_machine(screen: str) -> bool:
    return "Machine (" in screen


def in_diagnosis(screen: str) -> bool:
    return "Machine (" not in screen and ("Log" in screen or "ROOT CAUSE" in screen)


def measure(folder: Path, name: str, feed_log: Path, rate: float, keys: int, env: dict[str, str],
            bare: bool = False) -> dict:
    feed = folder / "feed.py"
    stats = folder / f"{name}.stats"
    cmd = (f"{PY} {shlex.quote(str(feed))} {shlex.quote(str(feed_log))} {rate} {shlex.quote(str(stats))} | "
           f"{PY} -m triage --log - --offline --no-probe")
    if bare:  # Textual reads keys from standard input: the bare app gets the terminal, no pipe
        cmd = f"{PY} {shlex.quote(str(folder / 'bare.py'))}"
    s = Session(folder, name, cmd, env)
    lat: list[float] = []
    missed = 0
    try:
        if s.wait(lambda sc: "still writing" in sc, 60) is None:
            raise SystemExit(f"the TUI did not come up:\n{s.capture()}")
        time.sleep(2.0)  # the stream is in full flow, the first diagnoses are done
        rnd = random.Random(5)
        for i in range(keys):
            want, ok = ("2", in_machine) if i % 2 == 0 else ("1", in_diagnosis)
            t0 = time.perf_counter()
            s.key(want)
            took = s.wait(ok, 5.0)
            if took is None:
                missed += 1
                s.wait(ok, 30.0)
            else:
                lat.append(time.perf_counter() - t0)
            time.sleep(rnd.uniform(0.05, 0.25))
        sent, secs = 0, 1.0
        try:
            sent_s, secs_s = stats.read_text().split()
            sent, secs = int(sent_s), float(secs_s)
        except (OSError, ValueError):
            pass
        screen = s.capture()
    finally:
        s.close()
    return {"lat": lat, "missed": missed, "rate": sent / secs / 1e6 if rate > 0 else 0.0, "screen": screen}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rate", type=float, default=50.0, help="MB/s written into the pipe")
    ap.add_argument("--keys", type=int, default=40, help="keys pressed per case")
    ap.add_argument("--show", action="store_true", help="print the last screen of each case")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("tmux is not installed")
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "feed.py").write_text(FEED)
        (folder / "bare.py").write_text(BARE)
        feed_log = make_error_dense_log(folder / "served.log", 16 << 20)
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TRIAGE_NO_TUI", "PYTHONDONTWRITEBYTECODE")}
        env.update(PYTHONPATH=str(ROOT), TEXTUAL_ANIMATIONS="none", TRIAGE_HOME=str(folder / "home"),
                   TERM="xterm-256color")
        floor = measure(folder, "bare", feed_log, 0, args.keys, env, bare=True)
        quiet = measure(folder, "quiet", feed_log, 0, args.keys, env)
        fast = measure(folder, "fast", feed_log, args.rate, args.keys, env)
    print(f"tmux 80x24, `triage --log -` live, keys 2/1 (switch views), {args.keys} keys per case; "
          "latency = send-keys to the view on screen (capture-pane polling)")
    for label, r in (("bare Textual app (the floor)", floor), ("quiet pipe", quiet), (f"{args.rate:g} MB/s asked, {fast['rate']:.1f} MB/s written", fast)):
        lat = [x * 1000 for x in r["lat"]]
        if not lat:
            print(f"{label}: no key answered within 5 s ({r['missed']} missed)")
            continue
        print(f"{label:<36} p50 {statistics.median(lat):5.0f} ms  p90 {percentile(lat, 90):5.0f} ms  "
              f"p99 {percentile(lat, 99):5.0f} ms  max {max(lat):5.0f} ms  over 100 ms: "
              f"{sum(x > 100 for x in lat)}/{len(lat)}" + (f"  missed (>5 s): {r['missed']}" if r["missed"] else ""))
        if args.show:
            print(r["screen"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
