"""Diagnosing big logs against `grep -c -E 'ERROR|Error|error'` on the same file, and peak memory.

Three regimes, each a generated, deterministic log:
- sparse: a served-for-hours log where almost no line says "error" (target: 3x grep);
- error-dense: one line in eight a repeated error or warning that is not the failure (target: 5x grep);
- restart loop: `kubectl logs` of a pod failing the same way start after start (target: 5x grep, and
  one diagnosis with its count).
Peak memory of the whole process tree (triage and its grep children, sampled from /proc in a run of its
own, untimed) under 200 MB in every regime, read from the file and piped, whatever the size.

grep and triage run in turns (each round both meet the same load on a shared machine); the best wall time
of each makes the ratio. "cpu ratio" is the same for CPU time (user + system, children included): less
moved by other jobs on a shared machine (where grep runs beside Python, wall time is the lower one).

    python bench/intake.py [--mb 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
from pathlib import Path

from _common import (ROOT, TreePeak, make_error_dense_log, make_log, make_restart_loop_log, run_pair, run_timed,
                     triage_cmd)

TARGETS = {"sparse": 3.0, "error-dense": 5.0, "restart loop": 5.0}


def tree_peak_mb(argv: list[str]) -> float:
    """Peak RSS of the whole process tree of one run (its grep children included), in MB."""
    with tempfile.TemporaryFile() as sink:
        p = subprocess.Popen(argv, stdout=sink, stderr=subprocess.DEVNULL, cwd=ROOT,
                             env=dict(os.environ, PYTHONPATH=str(ROOT)))
        sampler = TreePeak(p.pid)
        p.wait()
    return sampler.stop() / 1024


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=200)
    ap.add_argument("--loop-mb", type=int, default=58)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        logs = [
            ("sparse", make_log(Path(d) / "sparse.log", args.mb * 1_000_000)),
            ("error-dense", make_error_dense_log(Path(d) / "dense.log", args.mb * 1_000_000)),
            ("restart loop", make_restart_loop_log(Path(d) / "loop.log", args.loop_mb * 1_000_000)),
        ]
        print(f"load average {os.getloadavg()[0]:.1f} (2 cores here: above 2, other jobs share them)")
        print(f"{'log':>13} {'MB':>5} {'grep -c':>9} {'triage':>9} {'ratio':>6} {'target':>6} {'cpu ratio':>9} "
              f"{'tree MB':>8} {'stdin':>8} {'tree MB':>8}")
        ok = True
        for name, log in logs:
            mb = log.stat().st_size / 1e6
            (g_t, g_c), (t_t, t_c, t_mem) = run_pair(["grep", "-c", "-E", "ERROR|Error|error", str(log)],
                                                     triage_cmd("--log", str(log), "--json", "--offline", "--no-probe"),
                                                     args.repeat)
            piped = ["sh", "-c", f"cat {log} | {' '.join(triage_cmd('--log', '-', '--json', '--offline', '--no-probe'))}"]
            s_t, _ = run_timed(piped, 1)
            t_mem = tree_peak_mb(triage_cmd("--log", str(log), "--json", "--offline", "--no-probe")) * 1024
            s_mem = tree_peak_mb(piped) * 1024
            ratio = t_t / g_t
            met = ratio <= TARGETS[name] and max(t_mem, s_mem) / 1024 < 200
            ok &= met
            print(f"{name:>13} {mb:>5.0f} {g_t:>8.2f}s {t_t:>8.2f}s {ratio:>5.1f}x {TARGETS[name]:>5.0f}x {t_c / g_c:>8.1f}x "
                  f"{t_mem / 1024:>8.1f} {s_t:>7.2f}s {s_mem / 1024:>8.1f}  {'met' if met else 'NOT met'}")
            if name == "restart loop":
                out = subprocess.run(triage_cmd("--log", str(log), "--json", "--offline", "--no-probe"),
                                     capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT)})
                rep = json.loads(out.stdout)
                top = rep["diagnoses"][0]
                print(f"{'':>13} restart loop: {len(rep['diagnoses'])} diagnosis(es); first {top['signature']} "
                      f"repeated {top['facts'].get('repeated', {}).get('count', 1)} times")
        print(f"load average {os.getloadavg()[0]:.1f}; " + ("all targets met" if ok else "some targets NOT met"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
