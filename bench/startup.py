"""`triage --log small.log --json --offline --no-probe` against a bare `python -c pass`.

Target: at most 12x. Both are measured here, in the same run, as the median of N runs each
(interleaved, so a busy machine slows both alike), through the `triage` console script when it is
installed next to this Python (what users run), else `python -m triage`.

    python bench/startup.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from _common import ROOT, run_timed, triage_cmd

TARGET = 12.0


def _one(argv: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=False)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    log = str(ROOT / "triage" / "demo" / "glm5_sm120.log")
    script = os.path.join(os.path.dirname(sys.executable), "triage")
    head = [script] if os.path.exists(script) else triage_cmd()
    cmd = [*head, "--log", log, "--json", "--offline", "--no-probe"]
    base_cmd = [sys.executable, "-c", "pass"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode compiled, as after pip install
    _one(cmd, env), _one(base_cmd, env)  # the first runs write bytecode caches: not counted
    base, t = [], []
    for _ in range(args.repeat):
        base.append(_one(base_cmd, env))
        t.append(_one(cmd, env))
    b, m = statistics.median(base), statistics.median(t)
    _, mem = run_timed(cmd, 1)
    print(f"python -c pass: {b * 1000:.1f} ms (median of {args.repeat})")
    print(f"{os.path.basename(head[0])} --json --offline --no-probe (98-line log): {m * 1000:.1f} ms, peak {mem / 1024:.1f} MB")
    print(f"ratio: {m / b:.1f}x (target <= {TARGET:g}x: {'met' if m / b <= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
