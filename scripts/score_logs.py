#!/usr/bin/env python3
"""Score triage on labelled log sets through the real CLI, fixtures and held-out validation side by side.

    python scripts/score_logs.py                      # every known set
    python scripts/score_logs.py tests/logs/validation2/index.yaml --fix
    python scripts/score_logs.py --json               # one JSON object, for scripts

A set is an index file: a YAML mapping from a log's file name (beside the index) to at least
`category` (a spec category, or `none` for a healthy / harmless-warning-only log); `cause_keywords`
(any-of, case-insensitive) is optional. Each log goes through

    python -m triage --log F --json --offline --no-probe

and, with --fix, `python -m triage fix --log F --dry-run --offline --no-probe`. Printed per set:
top-1 category accuracy (overall and per expected category), crashes (exit 1 or a traceback),
harmless/healthy logs given a diagnosis above confidence 0.5, how many top diagnoses mention a cause
keyword, and with --fix the share of walk-throughs that read clean (no "unknown", "None", `{fact}`
placeholders, expression text such as `==` / `not in [`, or a traceback outside quoted log text).

The numbers are a measurement, not a target: never change a rule because of a validation log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
LOGS = ROOT / "tests" / "logs"
def is_held_out(folder: Path) -> bool:
    """Every tests/logs/validation*/ folder is a held-out set, never a fixture."""
    return folder.name.startswith("validation")


def default_sets() -> dict[str, list[Path]]:
    """Every fixture folder with expected*.yaml (tests/logs/<dir>/), then each held-out validation* set."""
    folders = sorted(p for p in LOGS.iterdir() if p.is_dir())
    sets = {f"fixtures: {d.name}": sorted(d.glob("expected*.yaml"))
            for d in folders if not is_held_out(d) and any(d.glob("expected*.yaml"))}
    for d in folders:
        if is_held_out(d) and (d / "index.yaml").exists():
            sets[f"{d.name} (held out)"] = [d / "index.yaml"]
    return sets


HARMLESS_CEILING = 0.5

# What a user must never read in a guided fix: unfilled facts, placeholders, internal expressions.
UNCLEAN = [
    ("unknown", re.compile(r"\bunknown\b")),
    ("None", re.compile(r"\bNone\b")),
    ("placeholder", re.compile(r"\{[*A-Za-z_][A-Za-z0-9_.]*\}")),
    ("expression", re.compile(r"\s(?:==|!=)\s|\bnot in \[|\bis (?:not )?known\b")),
    ("traceback", re.compile(r"Traceback \(most recent call last\)")),
]


def load_set(paths: list[Path]) -> list[dict]:
    cases = []
    for index in paths:
        if not index.exists():
            continue
        for name, e in (yaml.safe_load(index.read_text()) or {}).items():
            cases.append({"file": index.parent / name, "name": name, "category": e.get("category", "none"),
                          "keywords": [str(k).lower() for k in e.get("cause_keywords") or []],
                          "source": e.get("source")})
    return cases


def _env(home: str) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["TRIAGE_HOME"] = home
    env["TRIAGE_GITHUB_API"] = "http://127.0.0.1:9"  # closed port: nothing leaves the machine
    env.pop("GITHUB_TOKEN", None)
    env.pop("GH_TOKEN", None)
    return env


def run_cli(args: list[str], home: str, timeout: int = 180) -> subprocess.CompletedProcess:
    try:
        return subprocess.run([sys.executable, "-m", "triage", *args], capture_output=True, text=True,
                              env=_env(home), cwd=str(ROOT), timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return subprocess.CompletedProcess(e.cmd, 124, e.stdout or "", f"timed out after {timeout}s")


def _quoted(log_text: str, line: str, start: int, end: int) -> bool:
    """Whether the flagged text sits inside a piece of the log the output quotes verbatim."""
    for pad in (40, 20, 8):
        window = line[max(0, start - pad):end + pad].strip()
        if len(window) >= 12 and window in log_text:
            return True
    return False


def unclean_marks(output: str, log_text: str) -> list[str]:
    marks = []
    for line in output.splitlines():
        for label, pattern in UNCLEAN:
            for m in pattern.finditer(line):
                if not _quoted(log_text, line, m.start(), m.end()):
                    marks.append(f"{label}: {line.strip()[:160]}")
                    break
    return marks


def score_case(case: dict, with_fix: bool) -> dict:
    out = {"name": case["name"], "expected": case["category"], "source": case["source"]}
    with tempfile.TemporaryDirectory(prefix="score-home-") as home:
        p = run_cli(["--log", str(case["file"]), "--json", "--offline", "--no-probe"], home)
        out["rc"] = p.returncode
        out["crash"] = p.returncode not in (0, 3) or "Traceback (most recent call last)" in p.stderr
        try:
            report = json.loads(p.stdout)
        except ValueError:
            report = {"diagnoses": []}
            out["crash"] = True
        diags = report.get("diagnoses") or []
        top = diags[0] if diags else None
        out["got"] = top["category"] if top else "none"
        out["confidence"] = top["confidence"] if top else 0.0
        out["signature"] = top["signature"] if top else None
        out["title"] = top["title"] if top else ""
        if case["category"] == "none":
            out["hit"] = not any(d["confidence"] > HARMLESS_CEILING for d in diags)
            out["harmless_raised"] = not out["hit"]
        else:
            out["hit"] = bool(top) and top["category"] == case["category"]
            out["harmless_raised"] = False
        if case["keywords"] and top:
            facts = top.get("facts") or {}
            expl = facts.get("explanation") or []
            text = " ".join([top.get("title", ""), (top.get("fix") or {}).get("summary", ""),
                             *(expl if isinstance(expl, list) else [str(expl)])]).lower()
            log_text = case["file"].read_text(errors="replace").lower()
            # A keyword counts only where the diagnosis says it in its own words, not where it
            # quotes the log (an "Unrecognised failure: <message>" title names nothing).
            out["keyword_hit"] = any(not _quoted(log_text, text, m.start(), m.end())
                                     for k in case["keywords"]
                                     for m in re.finditer(r"(?<![a-z0-9])" + re.escape(k) + r"(?![a-z0-9])", text))
        elif case["keywords"]:
            out["keyword_hit"] = False
        if with_fix and top:
            f = run_cli(["fix", "--log", str(case["file"]), "--dry-run", "--offline", "--no-probe"], home)
            log_text = case["file"].read_text(errors="replace")
            marks = unclean_marks(f.stdout + f.stderr, log_text)
            if f.returncode == 1 or "Traceback (most recent call last)" in f.stderr:
                marks.append("traceback: the fix command crashed")
            out["fix_clean"] = not marks
            out["fix_marks"] = marks[:4]
    return out


def score_set(cases: list[dict], with_fix: bool, jobs: int) -> list[dict]:
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(lambda c: score_case(c, with_fix), cases))


def summarise(results: list[dict]) -> dict:
    n = len(results)
    per = defaultdict(lambda: [0, 0])
    for r in results:
        per[r["expected"]][1] += 1
        per[r["expected"]][0] += r["hit"]
    kw = [r for r in results if "keyword_hit" in r]
    fx = [r for r in results if "fix_clean" in r]
    return {
        "logs": n,
        "top1": sum(r["hit"] for r in results),
        "per_category": {k: {"hit": v[0], "total": v[1]} for k, v in sorted(per.items())},
        "crashes": [r["name"] for r in results if r["crash"]],
        "harmless_raised": [r["name"] for r in results if r["harmless_raised"]],
        "keyword_hits": sum(r["keyword_hit"] for r in kw), "keyword_total": len(kw),
        "fix_clean": sum(r["fix_clean"] for r in fx), "fix_total": len(fx),
        "misses": [{k: r[k] for k in ("name", "expected", "got", "confidence", "title")}
                   for r in results if not r["hit"]],
    }


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100.0 * a / b:.0f}%)" if b else "-"


def print_side_by_side(summaries: dict[str, dict], verbose: bool) -> None:
    names = list(summaries)
    width = max(24, *(len(n) for n in names))
    cats = sorted({c for s in summaries.values() for c in s["per_category"]})
    print(f"{'':24} " + " ".join(f"{n:>{width}}" for n in names))

    def row(label, cells):
        print(f"{label:24} " + " ".join(f"{c:>{width}}" for c in cells))

    row("top-1 category", [pct(s["top1"], s["logs"]) for s in summaries.values()])
    row("crashes", [str(len(s["crashes"])) for s in summaries.values()])
    row("harmless raised > 0.5", [str(len(s["harmless_raised"])) for s in summaries.values()])
    row("cause keywords named", [pct(s["keyword_hits"], s["keyword_total"]) for s in summaries.values()])
    if any(s["fix_total"] for s in summaries.values()):
        row("fix reads clean", [pct(s["fix_clean"], s["fix_total"]) for s in summaries.values()])
    print()
    for c in cats:
        cells = []
        for s in summaries.values():
            v = s["per_category"].get(c)
            cells.append(pct(v["hit"], v["total"]) if v else "")
        row(f"  {c}", cells)
    for name, s in summaries.items():
        if s["crashes"]:
            print(f"\n{name}: crashes: {', '.join(s['crashes'])}")
        if s["harmless_raised"]:
            print(f"{name}: harmless/healthy raised above {HARMLESS_CEILING}: {', '.join(s['harmless_raised'])}")
        if verbose and s["misses"]:
            print(f"\n{name}: misses (expected -> got, confidence, title)")
            for m in s["misses"]:
                print(f"  {m['name']}: {m['expected']} -> {m['got']} {m['confidence']:.2f}  {m['title'][:90]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("index", nargs="*", help="index files to score (default: fixtures and every validation* set)")
    ap.add_argument("--fix", action="store_true", help="also score `triage fix --dry-run` for reading clean")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    ap.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="logs scored at once (default 2)")
    args = ap.parse_args(argv)

    sets = ({str(Path(p)): [Path(p).resolve()] for p in args.index} if args.index else default_sets())
    summaries, details = {}, {}
    for name, paths in sets.items():
        missing = [p for p in paths if not p.exists()]
        if args.index and missing:
            print(f"score_logs: no such index file: {missing[0]}", file=sys.stderr)
            return 2
        cases = load_set(paths)
        if not cases:
            continue
        results = score_set(cases, args.fix, max(1, args.jobs))
        summaries[name] = summarise(results)
        details[name] = results
    if args.json:
        print(json.dumps({"sets": summaries, "results": details}, indent=1))
    else:
        print_side_by_side(summaries, args.verbose)
    return 0


if __name__ == "__main__":
    sys.exit(main())
