"""The mined message catalogue: its size, the time to load it (paid only when no hand rule knows a
failure), and matching speed, against `python -c pass` measured in the same run.

    python bench/catalogue.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

from _common import ROOT, run_timed


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from triage.catalogue import store

    size = os.path.getsize(store.DATA)
    base, _ = run_timed([sys.executable, "-c", "pass"], args.repeat)
    load_t, load_mem = run_timed([sys.executable, "-c", "from triage.catalogue.store import load; assert load()"],
                                 args.repeat)
    best = float("inf")
    for _ in range(args.repeat):
        store._CATALOGUE = None
        t = time.perf_counter()
        cat = store.load()
        best = min(best, time.perf_counter() - t)
    lines = [
        "ValueError: Total number of attention heads (40) must be divisible by tensor parallel size (3).",
        "(APIServer pid=2114) INFO 02-14 10:00:00 [loggers.py:127] Engine 000: Avg prompt throughput: 1.0 tokens/s",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ] * 300
    t = time.perf_counter()
    for ln in lines:
        cat.match(ln)
    per_line = (time.perf_counter() - t) / len(lines)
    print(f"data: {size / 1e6:.2f} MB gzip, {len(cat)} templates, {len(cat.index)} index words")
    print(f"load in-process: {best * 1000:.0f} ms; python -c pass: {base * 1000:.1f} ms; "
          f"python -c load(): {load_t * 1000:.0f} ms, peak {load_mem / 1024:.0f} MB")
    print(f"match: {per_line * 1e6:.0f} us per line")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
