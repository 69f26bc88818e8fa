"""One pass over a log: the selected lines, the exceptions, and the facts the log states.

The result (`Scan`) is what every rule reads. It is bounded whatever the input size: identical
messages are counted, not stored twice, and past MAX_KEPT distinct lines only the head and the
newest lines are kept (a crash is at the end; the launch facts are at the start).
"""

from __future__ import annotations

import collections
import re

from typing import Any, Iterable, Iterator

from triage.logread import extract, unquote
from triage.logread.normalize import Line, parse, paste_indent
from triage.logread.select import MAX_LINE, iter_lines, select
from triage.logread.source import LogSource, chunks, open_source
from triage.logread.traceback import EXC_RE, ExceptionRecord, TracebackAssembler, phase_of
from triage.logread.unwrap import RECORD_STARTS
from triage.record import Record

MAX_HEAD = 15000
MAX_TAIL = 5000
# Lines that differ only in numbers, pids, process tags, timestamps and addresses have one shape: the
# first of a shape is read, the others only counted (a restart loop, eight workers printing the same
# traceback, a warning repeated all day). At most MAX_SHAPES shapes are remembered: memory stays flat.
MAX_SHAPES = 50000
SHAPE_MIN = 24  # shorter lines (a lone "Traceback", blank rows) are cheap to read again
# Two keys: digits alone (bytes.translate: a regex on every line would cost more than reading it), then,
# when that misses, digits and hex letters together with their runs of any length (request ids,
# addresses, pids of another width). Words made only of hex letters
# ("add", "bad") look alike under the second key; the first key is tried first.
_DIGITS = bytes.maketrans(b"0123456789", b"#" * 10)
_HEXITS = bytes.maketrans(b"0123456789abcdefABCDEF", b"#" * 22)
_RUNS = re.compile(rb"#+")  # on a first key's miss only: "pid=4188" and "pid=34048" are one shape
# A traceback's first line is always read: it opens that process's traceback, and a chained exception
# prints the same first line again.
_TB_HEAD = b"Traceback (most recent"
_FRAME_HEAD = b'File "'
_FRAME_LINE = b'", line '
# Lines whose numbers are facts, not noise: the machine's rows (one per GPU, "GPU 0: ...", "GPU 1: ..."),
# the compute capability, and PREFILTER's words with a number in them ("blocks: 0,": the same line with
# another number is no hit). Each different message among them is read (by_text).
_ZERO_WORDS = (b"blocks: 0,", b"blocks: -", b"size: 0 tokens", b"per request: 0")
_GPU_ROW = re.compile(rb"GPU \d+:")


def by_text(raw: bytes) -> bool:
    return (b"NVIDIA" in raw or b"apability" in raw or (b"GPU " in raw and _GPU_ROW.search(raw) is not None)
            or ((b": 0" in raw or b": -" in raw) and any(z in raw for z in _ZERO_WORDS)))
COLLECT_ENV_MARKERS = ("Collecting environment information", "PyTorch version:")
COLLECT_ENV_SPAN = 400
CUT_TB_TAIL = 3  # a traceback whose last frame is this close to the end of the log was cut by it
CUT_INTERLEAVED = 40  # ... or this close, when only other processes' lines follow it
CUT_MIN = 80  # the narrowest terminal: a shorter line was not cut by one
_FENCES = ("```", "~~~")  # a Markdown code block's fence
_FENCE_START = "`~ \t"


class Scan(Record):
    # A plain class, not a dataclass: see triage.record (start-up).
    __slots__ = ("source", "bytes", "lines_total", "lines", "repeats", "exceptions", "facts", "frame_files",
                 "warnings", "complete", "spans", "truncated", "cut_tracebacks", "_joined")
    _fields = __slots__[:-1]

    def __init__(self, source: str, bytes: int = 0, lines_total: int = 0, lines: list[Line] | None = None,
                 repeats: dict[str, int] | None = None, exceptions: list[ExceptionRecord] | None = None,
                 facts: dict[str, Any] | None = None, frame_files: set[str] | None = None,
                 warnings: list[str] | None = None, complete: bool = True,
                 spans: dict[int, tuple[int, int]] | None = None) -> None:
        self.source = source
        self.bytes = bytes
        self.lines_total = lines_total
        self.lines = [] if lines is None else lines  # selected lines, in input order, deduplicated
        self.repeats = {} if repeats is None else repeats  # message text -> times seen (when > 1)
        self.exceptions = [] if exceptions is None else exceptions
        self.facts = {} if facts is None else facts
        self.frame_files = set() if frame_files is None else frame_files
        self.warnings = [] if warnings is None else warnings
        self.complete = complete  # False while a piped log is still being written
        # line number of a shape's first line -> (times the shape was seen, number of its last line)
        self.spans = {} if spans is None else spans
        self.truncated = False  # a line was cut, or the reader stopped before the end
        self.cut_tracebacks: list[ExceptionRecord] = []  # tracebacks the log ends inside (type "", or what an IPython head named)
        self._joined: tuple[int, int, str] | None = None

    def joined_text(self) -> str:
        """Every selected line's text in one string (newline-separated): a literal that is not in
        it is on no line, so a rule pattern that needs it can be skipped without a per-line loop."""
        lines = self.lines
        j = self._joined
        if j is None or j[0] != id(lines) or j[1] != len(lines):
            j = self._joined = (id(lines), len(lines), "\n".join([ln.text for ln in lines]))
        return j[2]

    def repeated(self, no: int) -> tuple[int, int] | None:
        """(times seen, last line) when the line numbered `no` stands for more lines of its shape."""
        return self.spans.get(no)

    def find(self, needle: str) -> Iterator[Line]:
        for ln in self.lines:
            if needle in ln.text:
                yield ln


_PASSING_LEVELS = ("INFO", "WARNING", "DEBUG")
_SEVERE = ("ERROR", "CRITICAL")


class Scanner:
    """Incremental: feed raw (number, bytes) lines as they come (the TUI streams a live pipe)."""

    def __init__(self, source: str = "-") -> None:
        self.scan = Scan(source)
        self._tb = TracebackAssembler()
        self._seen: dict[str, int] = {}
        self._passing: set[str] = set()  # texts seen so far only on INFO/WARNING/DEBUG rows
        self._tail: collections.deque[Line] = collections.deque(maxlen=MAX_TAIL)
        self._collect_env_at: list[int] = []
        self._indent = 0  # a pasted log's indentation, learnt from its prefixed lines
        self._prev: Line | None = None  # the line fed last, and the exception it raised (if any)
        self._prev_exc: ExceptionRecord | None = None
        self._prev_row = -2  # the number of the row fed last (a cut line's rows share the first's number)
        self._prev_full = True  # that row may have been cut at its end
        self._shapes: dict[bytes, list] = {}  # shape -> [times, first no, last no, first Line]
        self.overflow = False  # a shape was not remembered (MAX_SHAPES): its lines are read again
        self._fences: list[int] = []  # lines that close (or open) a pasted code block: a paste's end

    def feed(self, no: int, raw: bytes | str) -> Line:
        shapes = self._shapes
        key: bytes | None = None
        key2: bytes | None = None
        if isinstance(raw, bytes) and len(raw) >= SHAPE_MIN:
            if by_text(raw):
                # its numbers matter (which GPU, which capability): repeats are the same message, whatever
                # the prefix (timestamps, pids) says
                key = b"\x00" + raw[raw.find(b"] ") + 1:]
                seen = shapes.get(key)
                if seen is not None:
                    seen[0] += 1
                    seen[2] = no
                    return seen[3]
                ln = self._read(no, raw)
                if len(shapes) < MAX_SHAPES:
                    shapes[key] = [1, no, no, ln]
                return ln
            key = raw.translate(_DIGITS)
            seen = shapes.get(key)  # only shapes that may repeat are ever stored: a hit is a repeat
            if seen is not None:
                seen[0] += 1
                seen[2] = no
                if _FRAME_HEAD in raw and _FRAME_LINE in raw:
                    # the same frame (another line of the same file) in another traceback: that traceback
                    # needs it too, or its exception is left without the frames that say who raised it (a
                    # whole frame row only: a wrapped row's first half is the same in many frames)
                    self._tb.feed(seen[3])
                return seen[3]
            if _TB_HEAD in raw:
                key = None
            else:
                key2 = _RUNS.sub(b"#", raw.translate(_HEXITS))
                seen = shapes.get(key2)
                if seen is not None:
                    if len(shapes) < MAX_SHAPES:
                        shapes[key] = seen
                    seen[0] += 1
                    seen[2] = no
                    return seen[3]
        ln = self._read(no, raw)
        if key is not None and key2 is not None and len(shapes) < MAX_SHAPES:
            shapes[key] = shapes[key2] = [1, no, no, ln]
        return ln

    def _read(self, no: int, raw: bytes | str) -> Line:
        ln = parse(no, raw, self._indent)
        if ln.text[:1] in _FENCE_START and ln.text.lstrip().startswith(_FENCES):
            self._fences.append(no)
        if ln.shown[:1] == " ":
            self._indent = paste_indent(ln) or self._indent
        # A message quoted in a tuple of pieces, an HTTP error body, an escaped string, an exception
        # between backticks in prose: read as the lines it stands for (numbered as the line that holds
        # them), so the rules see them plainly.
        got = unquote.expand(ln.text) if unquote.may_quote(ln.text) else None
        if got is None and "`" in ln.text and ln.level not in ("INFO", "WARNING", "DEBUG"):
            quoted = unquote.ticked(ln.text)
            got = (False, quoted) if quoted else None
        if got is None:
            return self._take(ln)
        replace, parts = got
        first = None
        if not replace:
            first = self._take(ln)
        for part in parts:
            sub = parse(no, part)  # its own header, when it has one (a Docker json-file line)
            if not replace:
                sub.shown = ln.shown
            sub.proc = sub.proc or ln.proc
            sub.level = sub.level or ln.level
            sub.src = sub.src or ln.src
            sub = self._take(sub)
            first = first or sub
        return first or self._take(ln)

    def _take(self, ln: Line) -> Line:
        no = ln.no
        key = f"{ln.proc}\x00{ln.text}" if ln.text.startswith((" ", "\t")) else ln.text
        prev, prev_exc = self._prev, self._prev_exc
        follows = prev is not None and no == self._prev_row + 1
        joined = follows and self._prev_full and _cut_row(prev, ln, prev_exc is not None)  # type: ignore[arg-type]
        if joined:
            # A terminal cut the line in two (see unwrap.py): the message gets its rest back.
            prev.text += ln.text  # type: ignore[union-attr]
            if prev_exc is not None:
                prev_exc.message += ln.text
        elif follows and prev_exc is not None and _open_row(prev, ln):  # type: ignore[arg-type]
            # The writer broke the message between two words: the rest, after a space.
            joined = True
            prev.text += " " + ln.text  # type: ignore[union-attr]
            prev_exc.message += " " + ln.text
        # Traceback frames must reach the assembler every time (each process has its own).
        rec = self._tb.feed(ln)
        if not joined:
            self._prev, self._prev_exc = ln, rec
        # a row as wide as the cut one may itself have been cut again: a message over three rows
        self._prev_row, self._prev_full = no, len(ln.shown) >= CUT_MIN or not joined
        extract.extract(ln, self.scan.facts)
        if any(m in ln.text for m in COLLECT_ENV_MARKERS):
            self._collect_env_at.append(no)
        count = self._seen.get(key)
        if count is not None:
            self._seen[key] = count + 1
            # the same words logged in passing first (an import's warning) and then as the error they became
            # (NixlConnector's "NIXL is not available"): the error row is kept too, or the rules see a warning only
            if not (ln.level in _SEVERE and key in self._passing):
                return ln
            self._passing.discard(key)
        elif len(self._seen) < 4 * (MAX_HEAD + MAX_TAIL):
            self._seen[key] = 1
            if ln.level in _PASSING_LEVELS:
                self._passing.add(key)
        if len(self.scan.lines) < MAX_HEAD:
            self.scan.lines.append(ln)
        else:
            self._tail.append(ln)
        return ln

    def finish(self, nbytes: int, nlines: int) -> Scan:
        s = self.scan
        if self._tail:
            s.warnings.append(
                f"the log has more than {MAX_HEAD + MAX_TAIL} distinct error-like lines; "
                f"read the first {MAX_HEAD} and the last {len(self._tail)}")
            s.lines.extend(self._tail)
            self._tail.clear()
        if self.overflow or len(self._shapes) >= MAX_SHAPES:
            s.warnings.append(f"the log has more than {MAX_SHAPES} distinct message shapes: the lines of "
                              "those past them were read again, not counted as repeats")
        s.repeats = {k.split("\x00")[-1]: v for k, v in self._seen.items() if v > 1}
        for times, first, last, ln in {id(v): v for v in self._shapes.values()}.values():
            if times > 1:
                s.spans[first] = (times, last)
                s.repeats[ln.text] = s.repeats.get(ln.text, 1) + times - 1
        s.exceptions = list(self._tb.records)
        # Only where the log (or the paste) ends inside it: elsewhere its exception line was merely
        # not selected, or another process' lines came in between.
        end = max(nlines, s.lines[-1].no if s.lines else 0)
        # Workers' tracebacks interleave: one cut by the paste's end is followed only by the other
        # workers' lines, so what counts is how many lines its own process printed after its last frame
        # (the frame's source and caret lines at most), near the end.
        tail = s.lines[-CUT_INTERLEAVED:]

        def printed_after(t: ExceptionRecord) -> int:  # a repeated line counts every time it was printed
            return sum(s.spans.get(ln.no, (1, 0))[0] for ln in tail if ln.proc == t.line.proc and ln.no > t.line.no)

        # A code block closed right after its last frame ends the paste there: what follows is the ticket's prose.
        fenced = self._fences

        def block_ends(t: ExceptionRecord) -> bool:
            return any(t.line.no < f <= t.line.no + CUT_TB_TAIL for f in fenced)

        s.cut_tracebacks = [t for t in self._tb.cut() if t.line.no + CUT_TB_TAIL >= end or (
            t.line.proc and end - t.line.no <= CUT_INTERLEAVED and printed_after(t) <= CUT_TB_TAIL)
            or (fenced and block_ends(t))]
        # The step start-up died in, for every rule: from the first traceback whose frames say.
        phase = next((p for e in s.exceptions + s.cut_tracebacks if e.frames for p in [phase_of(e.frames)] if p), None)
        if phase:
            s.facts["phase"] = phase
        s.frame_files = set(self._tb.frame_files)
        s.bytes, s.lines_total = nbytes, max(nlines, s.lines[-1].no if s.lines else 0)
        extract.finish(s.facts)
        return s

    def snapshot(self, nbytes: int = 0, nlines: int = 0) -> Scan:
        """A finished Scan of what was fed so far, leaving this scanner able to go on (live pipes)."""
        import copy

        clone = Scanner(self.scan.source)
        clone.scan = Scan(self.scan.source, lines=list(self.scan.lines), facts=copy.deepcopy(self.scan.facts),
                          warnings=list(self.scan.warnings))
        clone._tb = self._tb
        clone._seen = dict(self._seen)
        clone._tail = collections.deque(self._tail, maxlen=MAX_TAIL)
        clone._shapes = {}
        copies: dict[int, list] = {}
        for k, v in self._shapes.items():
            if v[0] > 1:
                clone._shapes[k] = copies.setdefault(id(v), list(v))
        snap = clone.finish(nbytes, nlines)
        snap.complete = False
        snap.cut_tracebacks = []  # a traceback at the end of a live pipe is still being written
        return snap

    @property
    def collect_env_lines(self) -> list[int]:
        return self._collect_env_at


def _cut_row(prev: Line, ln: Line, prev_is_exc: bool) -> bool:
    """`ln` looks like the rest of `prev` cut off by a terminal narrower than `prev`: a row with no
    prefix at all (nor a traceback's own shape) right after a long exception line or warning/error
    message that does not end a sentence (a cut falls anywhere; a message that ends with a full stop
    was not cut there). A cut that falls just before a word leaves one space at the row's head; a
    traceback's own rows are indented by two or more."""
    t = ln.text
    return ((prev_is_exc or prev.level in ("WARNING", "ERROR", "CRITICAL")) and len(prev.shown) >= CUT_MIN
            and not prev.shown.endswith((".", ":")) and bool(t.strip())
            and not t[:2].isspace() and not ln.proc and not ln.level and len(t) == len(ln.shown)
            and not t.startswith(RECORD_STARTS) and EXC_RE.match(t) is None)


# The last word of a sentence that goes on: an exception message ending in it was broken there by whoever pasted it
# (a wrapped code block, an editor), whatever the row's width.
OPEN_END_RE = re.compile(r"\b(?:a|an|the|of|on|in|for|to|with|by|from|at|and|or|than|is|are|be|not|must|requires?)$")


def _open_row(prev: Line, ln: Line) -> bool:
    """`ln` is the rest of the exception line `prev`, broken after a word that cannot end it ("... backend on" /
    "Quadro RTX 8000 (compute capability 7.5); ..."): a plain row (no header, not indented, no exception or
    traceback line of its own, no markdown)."""
    t = ln.text
    return (OPEN_END_RE.search(prev.text.rstrip()) is not None and prev.text[-1:] != " " and bool(t.strip())
            and not t[:1].isspace() and t[:1] not in "`#>|*-" and not ln.proc and not ln.level
            and len(t) == len(ln.shown) and not t.startswith(RECORD_STARTS) and EXC_RE.match(t) is None)


def scan_source(src: LogSource, *, use_grep: bool | None = None) -> Scan:
    # A log with many lines to read (a restart loop, an error per request) is read whole, its repeats
    # counted a chunk at a time (logread.bulk); grep's selection pays off when few lines match.
    data = None
    if use_grep is None and src.is_plain_file and _size(src.path) >= 1 << 20:
        from triage.logread import bulk

        if bulk.dense(src.path):  # type: ignore[arg-type]
            scan, sc, blocks = bulk.scan_whole(src)
            return finish_source(src, scan, sc, blocks)
    elif use_grep is None and not src.is_plain_file:
        from triage.logread import bulk

        head, data = bulk.peek(chunks(src))  # a stream is judged by its head
        if bulk.dense_head(head):
            scan, sc, blocks = bulk.scan_whole(src, data)
            return finish_source(src, scan, sc, blocks)
    sel = select(src, use_grep=use_grep, data=data)
    sc = Scanner(src.name)
    for no, raw in sel.lines:
        sc.feed(no, raw)
    nbytes, nlines = sel.totals()
    scan = sc.finish(nbytes, nlines)
    scan.warnings.extend(sel.warnings)
    scan.truncated = sel.truncated
    return finish_source(src, scan, sc, sel.blocks)


def finish_source(src: LogSource, scan: Scan, sc: Scanner, blocks: list[tuple[int, bytes]]) -> Scan:
    """The facts of a pasted `vllm collect-env` block (few selectable words in it), read again from a file,
    or from the copy a stream's reader kept aside (`blocks`): every reader ends here, the TUI's too."""
    if sc.collect_env_lines and src.path is not None:
        _read_collect_env(src, sc.collect_env_lines[0], scan)
    for first, data in blocks:  # the same block, kept aside while a stream went by
        for i, raw in enumerate(iter_lines([data]), first):
            extract.extract(parse(i, raw), scan.facts)
        extract.finish(scan.facts)
    return scan


def _size(path: str | None) -> int:
    import os

    try:
        return os.path.getsize(path)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return -1


def scan_path(name: str, **kw: Any) -> Scan:
    return scan_source(open_source(name), **kw)


def scan_text(text: str | bytes, source: str = "<text>") -> Scan:
    """Scan an in-memory log (tests, the demo); the same selection rules as a file."""
    from triage.logread.select import PREFILTER_RE, is_fragment

    from triage.logread.unwrap import SAMPLE, unwrap_lines, wrap_width

    data = text.encode() if isinstance(text, str) else text
    sc = Scanner(source)
    lines = list(iter_lines([data]))
    numbered: Iterable[tuple[int, bytes]] = enumerate(lines, 1)
    width = wrap_width(data[:SAMPLE])
    if width:  # a terminal hard-wrapped it: rows re-joined into lines
        numbered = unwrap_lines(numbered, width, MAX_LINE)
    want = 0
    env_until = 0
    whole = is_fragment(data)
    for i, raw in numbered:
        hit = whole or PREFILTER_RE.search(raw) is not None
        if hit or want or i <= env_until:
            ln = sc.feed(i, raw)
            if any(m in ln.text for m in COLLECT_ENV_MARKERS):
                env_until = i + COLLECT_ENV_SPAN
        # the line after a hit; when that one is blank, the next too (a paste with blank lines in between)
        want = 2 if hit else 1 if want == 2 and not raw.strip() else 0
    return sc.finish(len(data), len(lines))


def _read_collect_env(src: LogSource, start: int, scan: Scan) -> None:
    """A pasted `vllm collect-env` block has few selectable words: read its lines again, whole."""
    facts = scan.facts
    end = start + COLLECT_ENV_SPAN
    for no, raw in _lines_between(chunks(src), start, end):
        extract.extract(parse(no, raw), facts)
    extract.finish(facts)


def _lines_between(data: Iterable[bytes], start: int, end: int) -> Iterator[tuple[int, bytes]]:
    no = 0
    for chunk in data:
        n = chunk.count(b"\n")
        if no + n < start - 1:
            no += n
            continue
        # The wanted region begins in (or spans) this chunk; from here on go line by line.
        for no2, line in enumerate(iter_lines(_prepend(chunk, data), MAX_LINE), no + 1):
            if no2 >= start:
                yield no2, line
            if no2 >= end:
                return
        return


def _prepend(first: bytes, rest: Iterable[bytes]) -> Iterator[bytes]:
    yield first
    yield from rest
