"""What literal text every match of a regular expression must contain.

Compiling a pattern costs far more than looking for a few words, and most patterns never meet a
text that could match. A pattern's literals let a caller skip it (triage.lazyre, the rules in
triage.rules.base) without compiling it.

Conservative by construction: a character followed by a quantifier, a class, an escape class,
a quantified group, a lookaround or anything under inline flags contributes nothing, so what is
returned is always necessary for a match (tests check it against every fixture line).
"""

from __future__ import annotations

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


def derived(pattern: str, min_len: int = 4) -> tuple[str | None, tuple[tuple[str, ...], ...]]:
    """(guard, required_clauses(pattern)): the guard is the longest literal that is a clause on its own
    (every match contains it), found without a second pass over the pattern; None when there is none
    of min_len characters."""
    clauses = tuple(required_clauses(pattern))
    singles = [c[0] for c in clauses if len(c) == 1 and len(c[0]) >= min_len]
    return max(singles, key=len, default=None), clauses
