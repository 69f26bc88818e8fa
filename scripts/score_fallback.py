#!/usr/bin/env python3
"""Score the fallback alone (no hand rule) on labelled log sets: how often the mechanisms behind it (the area
map, the mined message catalogue, exception words, the word model) name the right category by themselves.

    python scripts/score_fallback.py tests/logs/dev-*/expected.yaml        # totals per set
    python scripts/score_fallback.py tests/logs/dev-d2/expected.yaml -v    # and every miss
    python scripts/score_fallback.py --loso tests/logs/dev-*/expected.yaml # the word model never saw the set

Every rule that finds a failure is switched off; the harmless rules stay (they mark what is no failure), so
the answer is what triage says of a log no rule knows. In process (no CLI), so it is quick. Healthy logs
(`none`) count as right when nothing is said above the harmless ceiling (0.5), as in score_logs.py.
Never run it with -v on a held-out validation set. The word model (catalogue/wordclass.py) is trained on the dev
logs, so on them this figure is optimistic for the model's part; `--loso` retrains it without each set in turn
before scoring that set, which is the honest figure for logs no rule knows.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from triage import diagnose as dg  # noqa: E402
from triage.catalogue import wordclass  # noqa: E402
from triage.logread import scan_path  # noqa: E402

HARMLESS_CEILING = 0.5


def fallback_only(path: Path):
    """The top diagnosis with only the harmless rules on (None when nothing is said)."""
    keep = [r for r in dg.rules() if r.harmless or r.wrapper]
    saved = dg._RULES
    dg._RULES = keep
    try:
        ds, _ = dg.diagnose(scan_path(str(path)))
    finally:
        dg._RULES = saved
    return ds


def score(index: Path, verbose: bool) -> tuple[int, int]:
    cases = yaml.safe_load(index.read_text()) or {}
    hits = 0
    for name, e in sorted(cases.items()):
        want = e.get("category", "none")
        ds = fallback_only(index.parent / name)
        top = ds[0] if ds else None
        if want == "none":
            ok = not any(d.confidence > HARMLESS_CEILING for d in ds)
        else:
            ok = top is not None and top.category == want
        hits += ok
        if verbose and not ok:
            got = f"{top.category} {top.confidence:.2f} {top.signature}" if top else "nothing"
            if top is not None and top.facts.get("category_guessed_from"):
                got += f" [{str(top.facts['category_guessed_from'])[:90]}]"
            print(f"  {index.parent.name}/{name}: {want} -> {got}")
    return hits, len(cases)


def _training_docs() -> list:
    sys.path.insert(0, str(ROOT / "scripts"))
    import train_wordclass

    return train_wordclass.documents(train_wordclass.labelled())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", nargs="+", help="expected.yaml / index.yaml files")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    ap.add_argument("--loso", action="store_true", help="score each set with a word model trained without it")
    args = ap.parse_args(argv)
    docs = _training_docs() if args.loso else None
    total = [0, 0]
    for p in args.index:
        if docs is not None:
            left_out = Path(p).resolve().parent.name
            wordclass._model = wordclass.train([(c, w) for s, c, _, w in docs if s != left_out])
        h, n = score(Path(p).resolve(), args.verbose)
        total[0] += h
        total[1] += n
        print(f"{Path(p).parent.name:12} {h}/{n}")
    print(f"{'all':12} {total[0]}/{total[1]} ({100.0 * total[0] / max(1, total[1]):.1f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
