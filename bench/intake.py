"""Diagnosing a big log against `grep -c -E 'ERROR|Error|error'` on the same file, and peak memory.

Targets: at most 3x grep's time on a 200 MB log; peak memory under 200 MB whatever the size
(checked at two sizes: it must not grow with the log).

    python bench/intake.py [--mb 200] [--keep]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import make_log, run_timed, triage_cmd


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        rows = []
        for mb in (args.mb // 4, args.mb):
            log = make_log(Path(d) / f"vllm-{mb}mb.log", mb * 1_000_000)
            g_t, _ = run_timed(["grep", "-c", "-E", "ERROR|Error|error", str(log)], args.repeat)
            t_t, t_mem = run_timed(triage_cmd("--log", str(log), "--json", "--offline", "--no-probe"), args.repeat)
            s_t, s_mem = run_timed(["sh", "-c", f"cat {log} | {' '.join(triage_cmd('--log', '-', '--json', '--offline', '--no-probe'))}"], 1)
            rows.append((mb, g_t, t_t, t_mem, s_t, s_mem))
        print(f"{'log':>8} {'grep -c':>9} {'triage':>9} {'ratio':>6} {'peak MB':>8} {'stdin':>8} {'ratio':>6} {'peak MB':>8}")
        for mb, g_t, t_t, t_mem, s_t, s_mem in rows:
            print(f"{mb:>6}MB {g_t:>8.2f}s {t_t:>8.2f}s {t_t / g_t:>5.1f}x {t_mem / 1024:>8.1f} "
                  f"{s_t:>7.2f}s {s_t / g_t:>5.1f}x {s_mem / 1024:>8.1f}")
        big = rows[-1]
        ok_time = big[2] / big[1] <= 3.0
        ok_mem = max(r[3] for r in rows) / 1024 < 200 and max(r[5] for r in rows) / 1024 < 200
        print(f"target file path <= 3x grep: {'met' if ok_time else 'NOT met'}; peak memory < 200 MB: "
              f"{'met' if ok_mem else 'NOT met'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
