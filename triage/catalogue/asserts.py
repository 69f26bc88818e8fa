"""vLLM's bare `assert` statements (asserts.txt.gz, made by scripts/mine_asserts.py): loaded on first
use only, looked up by the expression a traceback prints under its last frame.

A bare assert fails with an empty `AssertionError`: the statement's source line (`assert
self.block_quant is None`) is all that says what was checked, and the module it is in says which part
of vLLM checked it. Expressions are compared as `ast.unparse` writes them, so spacing, quotes and a
line cut after `, \\` do not matter.
"""

from __future__ import annotations

import os

from triage.record import Record

DATA = os.path.join(os.path.dirname(__file__), "asserts.txt.gz")


class AssertSite(Record):
    __slots__ = ("module", "first", "last", "newest")
    _fields = __slots__

    def __init__(self, module: str, first: str, last: str, newest: str) -> None:
        self.module = module  # package-relative: "vllm/lora/ops/triton_ops/lora_shrink_op.py"
        self.first = first  # the first and last mined vLLM release holding it
        self.last = last
        self.newest = newest


class Asserts:
    def __init__(self, text: str) -> None:
        import json

        head, _, rest = text.partition("\n")
        meta = json.loads(head)
        if meta.get("format") != 1:
            raise ValueError(f"asserts format {meta.get('format')!r}")
        self.releases: list[str] = meta["releases"]
        self.modules: list[str] = meta["modules"]
        # expression -> "module,first,last;..." (split when looked up)
        self._rows: dict[str, str] = dict(ln.split("\t", 1) for ln in rest.split("\n") if "\t" in ln)

    def sites(self, expr: str) -> list[AssertSite]:
        row = self._rows.get(expr)
        if row is None:
            return []
        out = []
        for part in row.split(";"):
            m, a, b = (int(x) for x in part.split(","))
            out.append(AssertSite(self.modules[m], self.releases[a], self.releases[b], self.releases[-1]))
        return out


def expression(line: str) -> str | None:
    """The asserted expression of a source line (`assert x % y == 0, \\`), normalised; None when the
    line is no assert or its expression does not parse (cut mid-way)."""
    import ast
    import warnings

    t = line.strip()
    if not t.startswith("assert ") and not t.startswith("assert("):
        return None
    t = t[len("assert"):].strip().rstrip("\\").strip()
    # the whole statement's tail may hold a message: try the longest prefix that parses, the whole first
    cuts = [len(t)] + [i for i in range(len(t) - 1, 0, -1) if t[i] == ","]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in cuts[:12]:
            try:
                node = ast.parse(t[:i].strip().rstrip(","), mode="eval").body
            except (SyntaxError, ValueError, RecursionError):
                continue
            if not isinstance(node, ast.Tuple):  # "cond, msg" parses as a tuple: the message is after the comma
                return ast.unparse(node)
    return None


_ASSERTS: Asserts | None = None
_FAILED = False


def load(path: str = DATA) -> Asserts | None:
    """The table, read once; None when the data file is missing or unreadable."""
    global _ASSERTS, _FAILED
    if path == DATA and (_ASSERTS is not None or _FAILED):
        return _ASSERTS
    import gzip

    try:
        with open(path, "rb") as fh:
            table = Asserts(gzip.decompress(fh.read()).decode("utf-8"))
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        if path == DATA:
            _FAILED = True
        return None
    if path == DATA:
        _ASSERTS = table
    return table
