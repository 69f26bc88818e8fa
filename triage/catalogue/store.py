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

DATA = os.path.join(os.path.dirname(__file__), "messages.json.gz")
WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")
SPACE_RE = re.compile(r"\s+")
SHORT_PIECE = 3  # pieces this short (", ", ".") are found anywhere: they prove nothing
MIN_MATCHED = 14  # literal characters a match must cover
PARTIAL_SHARE = 0.6  # of the template's literal characters, for a match that misses pieces
LONG_ENOUGH = 40  # ... unless this much verbatim text matched (the first line of a long banner)
LINE_SHARE = 0.5  # of the line's own text the match must cover, unless it is LONG_ENOUGH
MIN_SPECIFIC = 12  # matched characters outside the phrases every library (and Python itself) prints
MIN_SPECIFIC_AT_START = 4
# Python's own exception messages: a library that happens to raise one names nothing. Checked first, so
# that a shorter phrase ("got ") does not take their words.
PYTHON_OWN = ("list index out of range", "tuple index out of range", "string index out of range", "out of range",
              "got an unexpected keyword argument", "got multiple values for argument", "required positional argument",
              "positional arguments but", "were given", "object is not subscriptable", "object is not callable",
              "object is not iterable", "unsupported operand type", "values to unpack", "division by zero",
              "maximum recursion depth exceeded", "can only concatenate", "NoneType", "must be str, not",
              ".__init__()", "__init__()")
# Phrases that say nothing about which code printed them: "'X' object has no attribute 'y'" is Python's
# own; "{} is not supported yet." is in a hundred modules.
GENERIC = PYTHON_OWN + ("object has no attribute", "has no attribute", "No such file or directory", "cannot open shared object file",
           "Could not find", "could not find", "is not supported yet", "is not supported", "not supported yet",
           "not supported", "does not support", "is not a valid", "is not available", "not available",
           "is required", "must be", "not found", "Failed to", "failed to", "failed with", "Failed with", "Unsupported", "unsupported", "Invalid",
           "invalid", "Unknown", "unknown", "Expected", "expected", "got ", "Cannot", "cannot", "Please", "please",
           "No module named", "cannot import name", "CUDA error", "Error", "error")
MAX_CANDIDATES = 400
HEAD_SPAN = 40  # a message's first characters, where a paste or a terminal usually cuts it
CUT_MIN_CHARS = 30  # a shorter line is too little of a message to look it up by its first words
ENDS = (".", "!", "?")  # a line ending a sentence was not cut in the middle of one


class Template(Record):
    __slots__ = ("package", "module", "kind", "text", "first", "last", "newest", "pieces", "literal", "anchored",
                 "longest", "open_end")
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
        self.longest = max(self.pieces, key=len) if self.pieces else ""
        # the message begins with its own words (not a value, nor a lone quote before one)
        self.anchored = not text.startswith(hole) and bool(self.pieces) and len(self.pieces[0].strip("'\"` ")) >= 4
        # the message ends with a value (`"Failed to import from vllm._C with %r"`): whatever follows its
        # last piece on the line is that value, however long (a quoted exception, a path)
        self.open_end = text.rstrip(" ").endswith(hole)  # (not rstrip(): it takes the hole for white space)

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
    def __init__(self, text: str) -> None:
        lines = text.split("\n")
        import json

        head = json.loads(lines[0])
        if head.get("format") != 2:
            raise ValueError(f"catalogue format {head.get('format')!r}")
        self.hole: str = head["hole"]
        self.packages: list[str] = head["packages"]
        self.releases: list[list[str]] = head["releases"]
        self.modules: list[str] = head["modules"]
        self.kinds: list[str] = head["kinds"]
        n = head["entries"]
        self._rows: list[str] = lines[1:1 + n]  # parsed on first use (row())
        # word -> "id id id", split when a line holds the word
        self.index: dict[str, str] = dict(ln.split("\t", 1) for ln in lines[1 + n:1 + n + head["index"]])
        if len(self._rows) != n or len(self.index) != head["index"]:
            raise ValueError("catalogue truncated")
        self._made: dict[int, Template] = {}
        self._heads: dict[str, list[int]] | None = None  # built on first use: see head_candidates

    def ids(self, word: str) -> list[int]:
        return [int(i) for i in self.index.get(word, "").split()]

    def row(self, i: int) -> tuple[int, int, int, int, int, str]:
        p, m, k, a, b, text = self._rows[i].split("\t", 5)
        return int(p), int(m), int(k), int(a), int(b), text

    def __len__(self) -> int:
        return len(self._rows)

    def template(self, i: int) -> Template:
        t = self._made.get(i)
        if t is None:
            p, m, k, a, b, text = self.row(i)
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
        out: dict[int, None] = {}  # ordered, and a template filed under two of the line's words once
        seen: set[str] = set()
        for w in WORD_RE.findall(text):
            w = w.lower()
            if w in seen:
                continue
            seen.add(w)
            ids = self.index.get(w)
            if ids:
                out.update(dict.fromkeys(map(int, ids.split())))
                if len(out) > MAX_CANDIDATES:
                    break
        return list(out)

    def head_candidates(self, text: str) -> list[int]:
        """Templates whose message begins with words of the line: a message cut before the word it is filed
        under (index) is still found by its first words. The table of first words is built on first use."""
        heads = self._heads
        if heads is None:
            heads = self._heads = {}
            for i, row in enumerate(self._rows):
                start = row.split("\t", 5)[5].split(self.hole, 1)[0][:HEAD_SPAN]
                for w in {w.lower() for w in WORD_RE.findall(start)}:
                    heads.setdefault(w, []).append(i)
        words = sorted({w.lower() for w in WORD_RE.findall(text[:HEAD_SPAN + 40])}, key=lambda w: len(heads.get(w, ())))
        out: dict[int, None] = {}
        for w in words:
            ids = heads.get(w)
            if not ids:
                continue
            if len(ids) > MAX_CANDIDATES:
                break  # the rarest words are taken first: the rest are common to too many messages
            out.update(dict.fromkeys(ids))
            if len(out) > MAX_CANDIDATES:
                break
        return list(out)

    def match(self, text: str) -> list[Match]:
        """Every template the line matches, the best (most literal text covered) first."""
        flat = SPACE_RE.sub(" ", text)
        found = self._matches(flat, self.candidates(flat))
        stripped = flat.rstrip()
        if not found and len(stripped) >= CUT_MIN_CHARS and not stripped.endswith(ENDS):
            # a line that stops mid-sentence: a message cut before the word it is filed under
            found = self._matches(flat, self.head_candidates(flat))
        return found

    def _matches(self, flat: str, ids: list[int]) -> list[Match]:
        found: list[Match] = []
        for i in ids:
            m = _match(self.template(i), flat)
            if m is not None:
                found.append(m)
        found.sort(key=lambda m: (-m.matched, -m.share, m.template.package != "vllm", m.template.module))
        return found


def _match(t: Template, line: str) -> Match | None:
    if t.literal <= 0 or (t.pieces[0] not in line and t.longest not in line and t.pieces[0][:8] not in line):
        return None  # cheap test first: a match holds its first piece, or its longest, or a cut start
    pos = 0
    matched = 0
    generic = 0
    first_found = -1
    starts = False
    whole = True  # every piece found whole, in order
    for piece in t.pieces:
        j = line.find(piece, pos)
        if j < 0:
            whole = False
            # The line may end inside this piece (cut by a terminal or a paste, or the first line of a
            # message printed over several).
            tail = line[pos:].rstrip()
            k = _cut_prefix(piece, tail)
            if k >= SHORT_PIECE:
                matched += k
                generic += _generic_chars(piece[:k])
                break
            continue
        if first_found < 0:
            first_found = j
            starts = piece is t.pieces[0] and t.anchored and _message_start(line, j)
        pos = j + len(piece)
        if len(piece) >= SHORT_PIECE:
            matched += len(piece)
            generic += _generic_chars(piece)
    share = min(1.0, matched / t.literal)
    # A message that begins the line with its own first words ("NIXL is not available") needs less
    # of its own text than one found somewhere inside a longer line.
    if matched < MIN_MATCHED or matched - generic < (MIN_SPECIFIC_AT_START if starts else MIN_SPECIFIC):
        return None
    end = pos if t.open_end and whole else len(line)  # an open end's value is not text the match must cover
    if matched < LONG_ENOUGH and (share < PARTIAL_SHARE or matched < LINE_SHARE * len(line[first_found:end].strip())):
        return None
    return Match(t, matched, share)


def _message_start(line: str, j: int) -> bool:
    """Whether a message starts at j: the line's start, or after a log prefix, an exception type, a
    quote."""
    return j == 0 or line[j - 1] in "'\"(>[" or line[max(0, j - 2):j] in (": ", "] ", "> ")


def _generic_chars(piece: str) -> int:
    n = 0
    for g in GENERIC:
        if g in piece:
            n += len(g)
            piece = piece.replace(g, "")
    return n


def _cut_prefix(piece: str, tail: str) -> int:
    """How much of `piece` the end of the line holds, when the line stops inside it."""
    seg = tail[-len(piece):]
    for i in range(len(seg) - SHORT_PIECE + 1):  # the longest end of the line that starts the piece
        if piece.startswith(seg[i:]):
            return len(seg) - i
    return 0


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

    try:
        with open(path, "rb") as fh:
            cat = Catalogue(gzip.decompress(fh.read()).decode("utf-8"))
    except (OSError, ValueError, KeyError, TypeError, EOFError):
        if path == DATA:
            _FAILED = True
        return None
    if path == DATA:
        _CATALOGUE = cat
    return cat
