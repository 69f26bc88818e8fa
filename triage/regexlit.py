"""What literal text every match of a regular expression must contain.

Compiling a pattern costs far more than looking for a few words, and most patterns never meet a
text that could match. A pattern's literals let a caller skip it (triage.lazyre, the rules in
triage.rules.base) without compiling it.

Conservative by construction: a character followed by a quantifier, a class, an escape class,
a quantified group, a lookaround or anything under inline flags contributes nothing, so what is
returned is always necessary for a match (tests check it against every fixture line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TypeAlias

    Derived: TypeAlias = "tuple[str | None, tuple[tuple[str, ...], ...]]"

_ESCAPED_CLASSES = set("dDwWsSbBAZ0123456789")
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}


def _class_end(p: str, i: int) -> int:
    """Index just past the ']' closing the '[' at p[i]."""
    n = len(p)
    j = i + 1
    if j < n and p[j] == "^":
        j += 1
    if j < n and p[j] == "]":
        j += 1
    while j < n and p[j] != "]":
        j += 2 if p[j] == "\\" else 1
    return j + 1


def _structure(p: str, i: int = 0):
    """(index, char) of each '(', ')' and '|' of `p` from i on, outside escapes and character classes."""
    n = len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            i = _class_end(p, i)
            continue
        if c in "()|":
            yield i, c
        i += 1


def _group_end(p: str, i: int) -> int:
    """Index of the ')' closing the '(' at p[i], or -1."""
    depth = 0
    for j, c in _structure(p, i):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    return -1


def _tokens(p: str):
    """("c", char) a literal character, ("x",) something else that matches one thing, ("q",) a
    quantifier, ("g", body or None, quantified) a group, ("|",) an alternation bar, ("u",) an
    unbalanced group (stop there)."""
    i, n = 0, len(p)
    while i < n:
        c = p[i]
        if c == "\\" and i + 1 < n:
            nxt = p[i + 1]
            i += 2
            if nxt in _HEX_ESCAPES:
                i += _HEX_ESCAPES[nxt]
                yield ("x",)
            elif nxt == "N" and i < n and p[i] == "{":
                i = p.find("}", i) + 1 or n
                yield ("x",)
            elif nxt.isdigit():
                while i < n and p[i].isdigit():  # a back-reference or an octal escape
                    i += 1
                yield ("x",)
            elif nxt in _ESCAPED_CLASSES or nxt.isalpha():
                yield ("x",)
            else:
                yield ("c", nxt)
            continue
        if c == "[":
            i = _class_end(p, i)
            yield ("x",)
            continue
        if c == "(":
            end = _group_end(p, i)
            if end < 0:
                yield ("u",)
                return
            inner = p[i + 1:end]
            quantified = end + 1 < n and p[end + 1] in "?*{"
            body: str | None = inner
            if inner.startswith("?P<"):
                body = inner[inner.index(">") + 1:]
            elif inner.startswith("?:"):
                body = inner[2:]
            elif inner.startswith("?"):
                body = None  # lookaround, comment, flags: says nothing about what is matched
            yield ("g", body, quantified)
            i = end + 1
            continue
        if c == "|":
            yield ("|",)
        elif c in "?*+{":
            if c == "{":
                while i < n and p[i] != "}":
                    i += 1
            yield ("q",)
        elif c in ".^$":
            yield ("x",)
        else:
            yield ("c", c)
        i += 1


def _has_inline_flags(pattern: str) -> bool:
    return pattern.startswith("(?") and not pattern.startswith(("(?:", "(?P", "(?=", "(?!", "(?<"))


def required_literal(pattern: str, min_len: int = 4) -> str | None:
    """The longest run of plain characters that every match of `pattern` contains, or None.

    Groups are looked into when they are neither alternations nor quantified nor lookarounds;
    a top-level `|` means no literal is required. A character followed by a quantifier is dropped.
    """
    if _has_inline_flags(pattern):
        return None  # inline flags such as (?i) change what a literal means
    runs = _required_runs(pattern)
    if runs is None:
        return None
    best = max(runs, key=len, default="")
    return best if len(best) >= min_len else None


def _required_runs(pattern: str) -> list[str] | None:
    """Literal runs every match contains; None when the pattern is a top-level alternation."""
    runs: list[str] = []
    cur: list[str] = []
    for tok in _tokens(pattern):
        kind = tok[0]
        if kind == "c":
            cur.append(tok[1])
            continue
        if kind == "q" and cur:
            cur.pop()  # the quantified character may be absent (or repeated)
        if cur:
            runs.append("".join(cur))
            cur.clear()
        if kind == "|":
            return None
        if kind == "u":
            return runs  # unbalanced: what was seen so far still holds
        if kind == "g" and tok[1] is not None and not tok[2]:
            inner = _required_runs(tok[1])
            if inner:
                runs.extend(inner)
    if cur:
        runs.append("".join(cur))
    return runs


def required_clauses(pattern: str, min_len: int = 3) -> list[tuple[str, ...]]:
    """Clauses every match satisfies: the matched text contains, for each clause, at least one of
    its literals. [] when nothing is known. Unlike required_literal this sees through
    alternations: `(?P<k>NVFP4|MXFP4) not supported` gives [("NVFP4", "MXFP4"), (" not supported",)]."""
    if _has_inline_flags(pattern):
        return []
    return _clauses(pattern, min_len)


def best_clause(clauses: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The most selective clause: longest shortest literal, then fewest literals."""
    if not clauses:
        return None
    return max(clauses, key=lambda c: (min(len(x) for x in c), -len(c)))


def _split_top(p: str) -> list[str]:
    """The top-level alternatives of `p` (one when it has no top-level `|`)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, c in _structure(p):
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth == 0:
            parts.append(p[start:i])
            start = i + 1
    parts.append(p[start:])
    return parts


def _clauses(p: str, min_len: int) -> list[tuple[str, ...]]:
    branches = _split_top(p)
    if len(branches) > 1:
        alts: list[str] = []
        for b in branches:
            best = best_clause(_clauses(b, min_len))
            if best is None:
                return []  # a branch that needs nothing: the whole needs nothing
            alts.extend(best)
        return [tuple(dict.fromkeys(alts))]
    out: list[tuple[str, ...]] = []
    cur: list[str] = []

    def flush() -> None:
        if len(cur) >= min_len:
            out.append(("".join(cur),))
        cur.clear()

    for tok in _tokens(p):
        kind = tok[0]
        if kind == "c":
            cur.append(tok[1])
            continue
        if kind == "q" and cur:
            cur.pop()
        flush()
        if kind == "u" or kind == "|":
            break
        if kind == "g" and tok[1] is not None and not tok[2]:
            out.extend(_clauses(tok[1], min_len))
    flush()
    return out


def derived(pattern: str, min_len: int = 4) -> Derived:
    """(guard, required_clauses(pattern)): the guard is the longest literal that is a clause on its own
    (every match contains it), found without a second pass over the pattern; None when there is none
    of min_len characters. Taken from the cache of earlier runs when it holds the pattern (see _load)."""
    global _added
    if min_len != 4:
        return _derive(pattern, min_len)
    known = _known if _known is not None else _load()
    got = known.get(pattern)
    if got is None:
        got = known[pattern] = _derive(pattern, 4)
        _added = True
    _used.add(pattern)
    return got


def _derive(pattern: str, min_len: int) -> Derived:
    clauses = tuple(required_clauses(pattern))
    singles = [c[0] for c in clauses if len(c) == 1 and len(c[0]) >= min_len]
    return max(singles, key=len, default=None), clauses


# What derived() returns is a pure function of the pattern's text and of this module's code, and deriving
# the rules' ~570 patterns costs ~15 ms, as much as the rest of loading them: a run keeps what it derived on
# disk, keyed by each pattern's whole text, in a file named for a checksum of this module's code (and the
# Python version, marshal's format). A rule whose pattern changes is a new key; a change here is a new
# file. The file carries a checksum of its contents; one that fails it, or holds anything but patterns
# and their literals, is not used.
_known: dict[str, Derived] | None = None
_used: set[str] = set()
_added = False
_path: str | None = None
_MAGIC = b"triage-regexlit 1\n"


def _cache_file() -> str | None:
    import sys
    import zlib

    from triage.paths import cache_dir_str

    try:
        with open(__file__, "rb") as fh:
            code = zlib.crc32(fh.read())
        return f"{cache_dir_str()}/regexlit-{sys.version_info[0]}.{sys.version_info[1]}-{code:08x}.bin"
    except (OSError, RuntimeError, TypeError):
        return None


def _load() -> dict[str, Derived]:
    global _known, _path
    _known = {}
    path = _path = _cache_file()
    if path is None:
        return _known
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError:
        return _known
    got = _decode(data)
    if got is not None:
        _known = got
    return _known


def _decode(data: bytes) -> dict[str, Derived] | None:
    import marshal
    import zlib

    head = len(_MAGIC) + 8
    if not data.startswith(_MAGIC) or data[len(_MAGIC):head] != b"%08x" % zlib.crc32(data[head:]):
        return None
    try:
        table = marshal.loads(data[head:])
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(table, dict):
        return None
    for k, v in table.items():  # plain loops: generators would cost this check twice as much
        if type(k) is not str or type(v) is not tuple or len(v) != 2:
            return None
        guard, clauses = v
        if (guard is not None and type(guard) is not str) or type(clauses) is not tuple:
            return None
        for c in clauses:
            if type(c) is not tuple or not c:
                return None
            for x in c:
                if type(x) is not str:
                    return None
    return table


def _encode(table: dict[str, Derived]) -> bytes:
    import marshal
    import zlib

    body = marshal.dumps(table)
    return _MAGIC + b"%08x" % zlib.crc32(body) + body


def save_derived() -> None:
    """Write the cache when this run derived a pattern it did not hold (after the rules are loaded). Patterns
    this run never used are dropped when they outnumber the ones it used (rules edited again and again).
    Never fails: a cache that cannot be written only costs the next run the derivation."""
    import os

    global _added
    path = _path
    if not _added or _known is None or path is None:
        return
    _added = False
    table = _known if len(_known) <= 2 * len(_used) else {k: _known[k] for k in _used}
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(_encode(table))
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
