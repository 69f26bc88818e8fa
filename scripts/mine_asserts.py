"""Regenerate triage/catalogue/asserts.txt.gz: vLLM's bare `assert` statements (no message), mined
from the Python source of its releases, each with the module it is in and the first and last mined
release that has it.

    python scripts/mine_asserts.py [--src /work/cache/src] [--out FILE]

A bare assert fails as `AssertionError` with an empty message; the traceback still prints the
statement's source line (`assert self.block_quant is None`) under its frame, and a paste often keeps
only that line. The expression is the key: written as `ast.unparse` normalises it, so a log's line
parsed the same way finds it whatever its spacing or quotes. Source trees: <src>/<version>/vllm/ (an
unpacked wheel). Asserts with a message are in messages.json.gz already (their message is printed).

The shipped file (0.6.6, 0.8.5, 0.10.2, 0.16.0, 0.25.1, 0.33.0): 6509 expressions in 1796 modules, 99 KB
gzip, about 30 ms to load on an idle core; triage reads it only for an AssertionError with no message,
so start-up does not change.

Output (gzip text): a JSON header line {"format": 1, "releases": [...], "modules": [...]}, then one
line per expression: `expr<TAB>module,first,last;module,first,last...` (module and release indexes).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import re
import sys
import warnings
from pathlib import Path

SKIP_PARTS = ("/tests/", "/test/", "/benchmarks/", "/examples/")
MIN_EXPR = 8  # `assert x` says nothing a frame does not


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def normalise(expr: str) -> str | None:
    """The expression as ast.unparse writes it; None when it does not parse."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.unparse(ast.parse(expr.strip(), mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return None


def bare_asserts(src: str) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            return []
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assert) and node.msg is None:
            text = ast.unparse(node.test)
            if len(text) >= MIN_EXPR and "\t" not in text and "\n" not in text:
                out.append(text)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--src", type=Path, default=Path("/work/cache/src"))
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent.parent / "triage" / "catalogue" / "asserts.txt.gz")
    args = ap.parse_args()
    releases = sorted((p.name for p in args.src.iterdir() if (p / "vllm").is_dir() and re.match(r"^\d", p.name)),
                      key=_version_key)
    if not releases:
        print(f"no vLLM source trees under {args.src}", file=sys.stderr)
        return 1
    spans: dict[tuple[str, str], list[int]] = {}  # (expr, module) -> [first, last]
    for i, ver in enumerate(releases):
        root = args.src / ver
        n = 0
        for p in sorted((root / "vllm").rglob("*.py")):
            rel = str(p.relative_to(root))
            if any(s in "/" + rel for s in SKIP_PARTS):
                continue
            for expr in set(bare_asserts(p.read_text("utf-8", "replace"))):
                span = spans.setdefault((expr, rel), [i, i])
                span[1] = i
                n += 1
        print(f"vllm {ver}: {n} bare asserts", file=sys.stderr)
    modules = sorted({m for _, m in spans})
    mi = {m: i for i, m in enumerate(modules)}
    by_expr: dict[str, list[str]] = {}
    for (expr, mod), (a, b) in sorted(spans.items()):
        by_expr.setdefault(expr, []).append(f"{mi[mod]},{a},{b}")
    lines = [json.dumps({"format": 1, "releases": releases, "modules": modules}, separators=(",", ":"))]
    lines += [f"{e}\t{';'.join(v)}" for e, v in sorted(by_expr.items())]
    raw = ("\n".join(lines) + "\n").encode()
    args.out.write_bytes(gzip.compress(raw, 9, mtime=0))
    print(f"{len(by_expr)} expressions in {len(modules)} modules; {len(raw)} bytes, "
          f"{args.out.stat().st_size} gzip -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
