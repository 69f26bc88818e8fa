"""Compare vLLM version strings (PEP 440 subset) without depending on `packaging` at run time.

Handles what vLLM ships: 0.11.0, 0.11.1rc6, 0.11.1rc6.dev16+g933cdea44.cu129 (nightly),
0.13.0+faa43dbf.nv26.01 (NGC), 0.5.0.post1, `dev`.
"""

from __future__ import annotations

import re

from triage.lazyre import lazy

_V = lazy(  # compiled on first use (start-up)
    r"^\s*v?(?P<rel>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre>a|b|rc|alpha|beta|c)[-_.]?(?P<pren>\d*))?"
    r"(?:[-_.]?post[-_.]?(?P<post>\d+))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev>\d*))?"
    r"(?:\+(?P<local>[A-Za-z0-9.]+))?\s*$",
    re.I,
)
_PRE_ORDER = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2}


def parse(v: str) -> tuple | None:
    """A sort key, or None when `v` is not a version."""
    m = _V.match(str(v or ""))
    if not m:
        return None
    rel = tuple(int(x) for x in m.group("rel").split("."))
    rel = rel + (0,) * (4 - len(rel)) if len(rel) < 4 else rel
    pre = m.group("pre")
    dev = m.group("dev")
    post = m.group("post")
    # Order: X.devN < X.aN < X.rcN < X < X.postN ; a dev release sorts before what it leads to.
    if pre:
        pre_key = (_PRE_ORDER[pre.lower()], int(m.group("pren") or 0))
    elif dev is not None and post is None:
        pre_key = (-1, 0)
    else:
        pre_key = (3, 0)
    post_key = int(post) if post is not None else -1
    dev_key = int(dev or 0) if dev is not None else float("inf")
    return (rel, pre_key, post_key, dev_key)


def is_prerelease(v: str) -> bool:
    m = _V.match(str(v or ""))
    return bool(m and (m.group("pre") or m.group("dev") is not None))


def base(v: str) -> str:
    """0.11.1rc6.dev16+g933cdea44.cu129 -> 0.11.1"""
    m = _V.match(str(v or ""))
    return m.group("rel") if m else str(v)


def lt(a: str, b: str) -> bool:
    pa, pb = parse(a), parse(b)
    return pa is not None and pb is not None and pa < pb


def ge(a: str, b: str) -> bool:
    pa, pb = parse(a), parse(b)
    return pa is not None and pb is not None and pa >= pb


def sort_versions(vs: list[str]) -> list[str]:
    """Ascending; strings that are not versions are dropped."""
    keyed = [(parse(v), v) for v in vs]
    return [v for k, v in sorted((k, v) for k, v in keyed if k is not None)]


def satisfies(v: str, spec: str) -> bool | None:
    """`v` against a simple specifier list like ">=0.6.14,<0.7"; None when either is unreadable."""
    if parse(v) is None:
        return None
    for part in spec.split(","):
        part = part.strip()
        m = re.match(r"^(>=|<=|==|!=|>|<)\s*(.+)$", part)
        if not m or parse(m.group(2)) is None:
            return None
        op, other = m.group(1), m.group(2)
        a, b = parse(v), parse(other)
        ok = {
            ">=": a >= b, "<=": a <= b, ">": a > b, "<": a < b,
            "==": a == b, "!=": a != b,
        }[op]
        if not ok:
            return False
    return True
