"""Train triage/catalogue/wordclass.json.gz, the fallback's word model, from the project's labelled logs.

    python scripts/train_wordclass.py            # write the model
    python scripts/train_wordclass.py --eval     # leave one set out: how it guesses logs it was not trained on

Training logs: every tests/logs/<set>/expected*.yaml set (dev sets of real thread logs, fixtures) and the
flat fixtures tests/logs/<signature>.log (their rule's category; harmless.* are "none"). Never the held-out
tests/logs/validation*/ sets: the model must not have seen what the project is measured on.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections import Counter
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage.catalogue import wordclass  # noqa: E402
from triage.logread import scan_path  # noqa: E402
from triage.rules import all_rules  # noqa: E402

LOGS = ROOT / "tests" / "logs"


def labelled() -> list[tuple[str, str, Path]]:
    """(set, category, file) for every labelled log outside the held-out sets."""
    out: list[tuple[str, str, Path]] = []
    by_sig = {r.signature: r.category for r in all_rules()}
    for f in sorted(LOGS.glob("*.log")):
        sig = f.name[:-len(".log")].split("--", 1)[0]
        cat = "none" if sig.startswith("harmless.") else by_sig.get(sig)
        if cat:
            out.append(("fixtures", cat, f))
    for d in sorted(p for p in LOGS.iterdir() if p.is_dir()):
        if d.name.startswith("validation"):
            continue
        for idx in sorted(d.glob("expected*.yaml")):
            for name, case in (yaml.safe_load(idx.read_text()) or {}).items():
                if (d / name).exists():
                    out.append((d.name, (case or {}).get("category", "none"), d / name))
    return out


def documents(items: list[tuple[str, str, Path]]) -> list[tuple[str, str, Path, set[str]]]:
    return [(s, c, f, wordclass.words(wordclass.failure_text(scan_path(str(f))))) for s, c, f in items]


def evaluate(docs: list[tuple[str, str, Path, set[str]]], threshold: float) -> None:
    """Leave each set of real thread logs out in turn; train on the rest; guess the left-out logs."""
    held = sorted({s for s, *_ in docs if s.startswith("dev-")})
    right = answered = total = 0
    for s in held:
        model = wordclass.train([(c, w) for s2, c, _, w in docs if s2 != s])
        r = a = n = 0
        for s2, c, f, w in docs:
            if s2 != s or c == "none":
                continue
            n += 1
            ranked = wordclass.classify(" ".join(w), model)
            if ranked and ranked[0][1] >= threshold and ranked[0][0] != "none":
                a += 1
                r += ranked[0][0] == c
        print(f"{s:10} answered {a}/{n}, right {r}/{a}")
        right, answered, total = right + r, answered + a, total + n
    print(f"all        answered {answered}/{total}, right {right}/{answered} ({100 * right / max(answered, 1):.0f}%)")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--threshold", type=float, default=0.8)
    args = ap.parse_args()
    docs = documents(labelled())
    print(f"{len(docs)} labelled logs: " + ", ".join(f"{c} {n}" for c, n in Counter(c for _, c, *_ in docs).most_common()))
    if args.eval:
        evaluate(docs, args.threshold)
        return 0
    model = wordclass.train([(c, w) for _, c, _, w in docs])
    with gzip.open(wordclass.DATA, "wt", encoding="utf-8", compresslevel=9) as f:
        json.dump(model, f, separators=(",", ":"), sort_keys=True)
    print(f"{len(model['counts'])} words, {Path(wordclass.DATA).stat().st_size // 1024} KB -> {wordclass.DATA}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
