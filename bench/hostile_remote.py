"""A host that floods the probe: `triage probe --host` against a real SSH server on loopback whose
python3 prints one line of N MB, with the peak RSS of triage's whole process tree and its wall time
against a baseline (the same probe of a well-behaved host) measured in the same run.

    python bench/hostile_remote.py [--mb 50 --mb 300] [--timeout 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT
from hostile_memory import TreePeak

sys.path.insert(0, str(ROOT))
from tests.fakes.ssh_server import LoopThread, SSHServer, client_home  # noqa: E402


def probe(home: Path, port: int, timeout: float) -> tuple[int, float, float]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), HOME=str(home), TRIAGE_HOME=str(home / "triage"))
    env.pop("SSH_AUTH_SOCK", None)
    t0 = time.monotonic()
    p = subprocess.Popen([sys.executable, "-m", "triage", "probe", "--host", f"127.0.0.1:{port}", "--json",
                          "--timeout", str(timeout)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    sampler = TreePeak(p.pid)
    code = p.wait()
    return code, time.monotonic() - t0, sampler.stop() / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, action="append")
    ap.add_argument("--timeout", type=float, default=20.0)
    a = ap.parse_args()
    sizes = a.mb or [50, 300]
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        auth = client_home(home)
        loop = LoopThread()
        rows = []
        try:
            for mb in [0] + sizes:
                bindir = Path(tmp) / f"bin{mb}"
                bindir.mkdir()
                for name in ("python3", "python"):
                    f = bindir / name
                    if mb:
                        f.write_text(f"#!/bin/sh\nhead -c {mb << 20} /dev/zero | tr '\\0' A\n")
                    else:
                        f.write_text(f"#!/bin/sh\nexec {sys.executable} \"$@\"\n")
                    f.chmod(0o755)
                srv = SSHServer(loop, authorized_keys=auth, env={"PATH": f"{bindir}:{os.environ['PATH']}"})
                with open(home / ".ssh" / "known_hosts", "a") as fh:
                    fh.write(srv.known_hosts_line())
                rows.append((mb, *probe(home, srv.port, a.timeout)))
                srv.close()
        finally:
            loop.stop()
    base = rows[0][3]
    for mb, code, secs, rss in rows:
        what = "baseline: a well-behaved host" if not mb else f"one line of {mb} MB"
        print(f"{what:30} exit {code}  {secs:5.1f} s (timeout {a.timeout:g} s)  peak tree RSS {rss:6.1f} MB  "
              f"x{rss / base:4.2f} of baseline")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
