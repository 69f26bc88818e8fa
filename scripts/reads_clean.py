"""How many guided fixes read clean over a folder of logs.

    python scripts/reads_clean.py tests/logs/unseen [--show] [--jobs N]

Runs `triage fix --log X --dry-run --offline --no-probe` on every *.log / *.log.gz / *.txt under the
folder and prints the share whose output (what a user reads) has no "unknown", "None", unfilled
{placeholder}, condition expression, internal outcome id or traceback (triage.playbooks.wording.leaks).
A log with no failure or no playbook counts as clean when it exits 3 with its one line. `--show` lists
the first problem of each log that does not read clean. Run it on logs nobody here wrote.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.playbooks.wording import leaks  # noqa: E402


def check(log: Path, root: Path = ROOT) -> tuple[Path, list[str], int]:
    env = dict(os.environ, PYTHONPATH=str(root), TRIAGE_NO_TUI="1", COLUMNS="100")
    proc = subprocess.run(
        [sys.executable, "-m", "triage", "fix", "--log", str(log.resolve()), "--dry-run", "--offline", "--no-probe"],
        capture_output=True, text=True, env=env, timeout=300, cwd=str(root),  # -m finds triage in cwd first
    )
    problems = leaks(proc.stdout + proc.stderr)
    if proc.returncode not in (0, 3, 4):
        problems.append(f"exit status {proc.returncode}: {(proc.stderr.strip().splitlines() or [''])[-1][:160]}")
    return log, problems, proc.returncode


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path)
    ap.add_argument("--show", action="store_true", help="list the first problem of each log that does not read clean")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2))
    ap.add_argument("--triage", type=Path, default=ROOT, metavar="CHECKOUT",
                    help="measure the triage of another checkout (before/after), with this checkout's check")
    args = ap.parse_args(argv)
    logs = sorted(p for p in args.folder.rglob("*") if p.is_file() and p.name.endswith((".log", ".log.gz", ".txt")))
    if not logs:
        print(f"no logs under {args.folder}", file=sys.stderr)
        return 2
    with ThreadPoolExecutor(args.jobs) as pool:
        results = list(pool.map(lambda log: check(log, args.triage.resolve()), logs))
    dirty = [(log, problems) for log, problems, _rc in results if problems]
    if args.show:
        for log, problems in dirty:
            print(f"{log.relative_to(args.folder)}: {problems[0]}")
    clean = len(logs) - len(dirty)
    print(f"reads clean: {clean}/{len(logs)} = {100.0 * clean / len(logs):.0f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
