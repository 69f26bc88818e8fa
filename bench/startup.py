"""`triage --log small.log --json --offline --no-probe` against a bare `python -c pass`.

Target (issue 2): at most 6x. Both are measured here, in the same run, best of N.

    python bench/startup.py [--repeat 15]
"""

from __future__ import annotations

import argparse
import sys

from _common import ROOT, run_timed, triage_cmd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=15)
    args = ap.parse_args()
    log = ROOT / "triage" / "demo" / "glm5_sm120.log"
    base, _ = run_timed([sys.executable, "-c", "pass"], args.repeat)
    t, mem = run_timed(triage_cmd("--log", str(log), "--json", "--offline", "--no-probe"), args.repeat)
    print(f"python -c pass: {base * 1000:.1f} ms")
    print(f"triage --json --offline --no-probe (98-line log): {t * 1000:.1f} ms, peak {mem / 1024:.1f} MB")
    print(f"ratio: {t / base:.1f}x (target <= 6x: {'met' if t / base <= 6 else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
