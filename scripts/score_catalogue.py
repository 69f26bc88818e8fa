#!/usr/bin/env python3
"""Score the catalogue's categories on mined templates no hand rule claims (tests/catalogue/labelled.yaml): each
labelled template becomes the short log a user would paste, and triage's top diagnosis is compared with the
category a maintainer would file it under.

    python scripts/score_catalogue.py                  # both halves, per package
    python scripts/score_catalogue.py --half tune -v   # the tune half and its misses

A raised message becomes a traceback tail whose innermost frame is the raising module (as Python prints it); a
logged one becomes vLLM's log line at its level (the form the unclaimed-template survey used). The holes
of a template are filled with a placeholder value. The test half is for a before/after figure only: never list its
misses while changing a mechanism (-v refuses it).
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage import diagnose as dg  # noqa: E402
from triage.logread.scan import scan_text  # noqa: E402

LABELS = ROOT / "tests" / "catalogue" / "labelled.yaml"
RAISED = ("Error", "Exception", "Exit", "Interrupt")


def load(half: str = "all") -> list[dict]:
    rows = yaml.safe_load(LABELS.read_text())
    return [r for r in rows if half == "all" or r["half"] == half]


def log_of(row: dict) -> str:
    kind, text = row["kind"], row["text"]
    if kind.endswith(RAISED):
        return ("Traceback (most recent call last):\n"
                f'  File "/usr/lib/python3/site-packages/{row["module"]}", line 10, in f\n'
                f"    raise {kind}(msg)\n{kind}: {text}\n")
    return f"{kind} 01-01 00:00:00 [{row['module'].rsplit('/', 1)[-1]}:1] {text}\n"


def answer(row: dict) -> tuple[str, str]:
    """(category, signature) of triage's top diagnosis; ("", "") when it says nothing."""
    ds, _ = dg.diagnose(scan_text(log_of(row)))
    return (ds[0].category, ds[0].signature) if ds else ("", "")


def score(rows: list[dict], verbose: bool = False) -> tuple[int, int]:
    hits = 0
    per: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for r in rows:
        got, sig = answer(r)
        ok = got == r["category"]
        hits += ok
        group = r["pkg"] if r["pkg"] != "vllm" else "vllm/" + r["module"].split("/")[1].removesuffix(".py")
        per[group][0] += ok
        per[group][1] += 1
        if verbose and not ok:
            print(f"  {r['category']:24} <- {got or 'nothing':24} {sig[:40]:40} {r['module']}: {r['text'][:90]}")
    if verbose:
        for g, (h, n) in sorted(per.items()):
            print(f"    {g:28} {h}/{n}")
    return hits, len(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--half", choices=("tune", "test", "all"), default=None)
    ap.add_argument("-v", "--verbose", action="store_true", help="list the misses (tune half only)")
    args = ap.parse_args(argv)
    if args.verbose and args.half != "tune":
        ap.error("-v lists misses of the tune half only (--half tune)")
    halves = [args.half] if args.half else ["tune", "test"]
    for half in halves:
        rows = load(half)
        for pkg_group, sub in (("vllm", [r for r in rows if r["pkg"] == "vllm"]),
                               ("libraries", [r for r in rows if r["pkg"] != "vllm"])):
            h, n = score(sub, args.verbose)
            print(f"{half:5} {pkg_group:10} {h}/{n} ({100.0 * h / max(1, n):.1f}%)")
        h, n = score(rows)
        print(f"{half:5} {'all':10} {h}/{n} ({100.0 * h / max(1, n):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
