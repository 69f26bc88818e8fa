"""The mined message catalogue (messages.json.gz, made by scripts/mine_messages.py): loaded on first
use only, and looked up by the words of a log line.

Each template is filed under its rarest whole word; a line's words pick the few templates that can
match it, and a template matches when its literal pieces occur in the line in order (the holes take
any value). A line cut short (a fragment, a terminal row) still matches on most of its pieces.
"""

from __future__ import annotations

import os
import re

from triage.record import Record

if False:  # for type checkers only (importing typing costs start-up time)
    from typing import Any

DATA = os.path.join(os.path.dirname(__file__), "messages.json.gz")
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
SPACE_RE = re.compile(r"\s+")
SHORT_PIECE = 3  # pieces this short (", ", ".") are found anywhere: they prove nothing
MIN_MATCHED = 14  # literal characters a match must cover
PARTIAL_SHARE = 0.6  # of the template's literal characters, for a match that misses pieces
MAX_CANDIDATES = 400


class Template(Record):
    __slots__ = ("package", "module", "kind", "text", "first", "last", "newest", "pieces", "literal")
    _fields = __slots__

    def __init__(self, package: str, module: str, kind: str, text: str, first: str, last: str, newest: str,
                 hole: str) -> None:
        self.package = package
        self.module = module
        self.kind = kind  # the exception type raised, or the log level ("ERROR", "WARNING")
        self.text = text
        self.first = first  # the first and last mined release of `package` that contain it
        self.last = last
        self.newest = newest  # the newest mined release of `package`
        self.pieces = [p for p in (q.strip() for q in text.split(hole)) if p]
        self.literal = sum(len(p) for p in self.pieces if len(p) >= SHORT_PIECE)

    @property
    def logged(self) -> bool:
        return self.kind in ("ERROR", "WARNING", "CRITICAL")

    @property
    def still_in_newest(self) -> bool:
        return self.last == self.newest

    def shown(self, hole: str = "…") -> str:
        return hole.join(self.pieces) if self.pieces else self.text


class Match(Record):
    __slots__ = ("template", "matched", "share")
    _fields = __slots__

    def __init__(self, template: Template, matched: int, share: float) -> None:
        self.template = template
        self.matched = matched  # literal characters of the template found in the line
        self.share = share  # matched / the template's literal characters


class Catalogue:
    def __init__(self, data: dict[str, Any]) -> None:
        self.hole: str = data["hole"]
        self.packages: list[str] = data["packages"]
        self.releases: list[list[str]] = data["releases"]
        self.modules: list[str] = data["modules"]
        self.kinds: list[str] = data["kinds"]
        self.rows: list[list[Any]] = data["entries"]
        self.index: dict[str, list[int]] = data["index"]
        self._made: dict[int, Template] = {}

    def __len__(self) -> int:
        return len(self.rows)

    def template(self, i: int) -> Template:
        t = self._made.get(i)
        if t is None:
            p, m, k, text, a, b = self.rows[i]
            rels = self.releases[p]
            t = self._made[i] = Template(self.packages[p], self.modules[m], self.kinds[k], text, rels[a], rels[b],
                                         rels[-1], self.hole)
        return t

    def newest(self, package: str) -> str | None:
        try:
            return self.releases[self.packages.index(package)][-1]
        except ValueError:
            return None

    def candidates(self, text: str) -> list[int]:
        out: list[int] = []
        seen: set[str] = set()
        for w in WORD_RE.findall(text):
            w = w.lower()
            if w in seen:
                continue
            seen.add(w)
            ids = self.index.get(w)
            if ids:
                out.extend(ids)
                if len(out) > MAX_CANDIDATES:
                    break
        return out

    def match(self, text: str) -> list[Match]:
        """Every template the line matches, the best (most literal text covered) first."""
        flat = SPACE_RE.sub(" ", text)
        found: list[Match] = []
        for i in self.candidates(flat):
            t = self.template(i)
            m = _match(t, flat)
            if m is not None:
                found.append(m)
        found.sort(key=lambda m: (-m.matched, -m.share, m.template.package != "vllm", m.template.module))
        return found


def _match(t: Template, line: str) -> Match | None:
    if t.literal <= 0:
        return None
    pos = 0
    matched = 0
    first_found = -1
    for piece in t.pieces:
        j = line.find(piece, pos)
        if j < 0:
            continue  # cut off, or the hole before it took more than one piece's place
        if first_found < 0:
            first_found = j
        pos = j + len(piece)
        if len(piece) >= SHORT_PIECE:
            matched += len(piece)
    share = matched / t.literal
    if matched < MIN_MATCHED or share < PARTIAL_SHARE:
        return None
    return Match(t, matched, share)


_CATALOGUE: Catalogue | None = None
_FAILED = False


def load(path: str = DATA) -> Catalogue | None:
    """The catalogue, read once; None when the data file is missing or unreadable (a partial install
    loses this fallback only)."""
    global _CATALOGUE, _FAILED
    if _CATALOGUE is not None and path == DATA:
        return _CATALOGUE
    if _FAILED and path == DATA:
        return None
    import gzip
    import json

    try:
        with open(path, "rb") as fh:
            data = json.loads(gzip.decompress(fh.read()))
        cat = Catalogue(data)
    except (OSError, ValueError, KeyError, TypeError):
        if path == DATA:
            _FAILED = True
        return None
    if path == DATA:
        _CATALOGUE = cat
    return cat
