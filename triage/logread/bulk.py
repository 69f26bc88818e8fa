"""A log where many lines are worth reading (a restart loop, a server printing an error per request) read
whole, a chunk at a time, with the repeats counted in C.

grep's selection (select.py) pays off when few lines match: it hands each one to Python. When many do,
reading the log here is faster: each chunk is masked (digits and hex letters, bytes.translate), cut into
lines (bytes.split) and counted (collections.Counter), and only a shape not met before is looked at in
Python. A restart loop is counted in blocks: the chunk is cut at a line that comes back start after
start, and only the distinct blocks are cut into lines.

The outcome is grep's selection read by Scanner.feed: a line is selected when it holds a PREFILTER word,
or follows one (or follows a blank line that follows one); the first line of a shape is read (feed),
the later ones counted in its span (times, last line); a line whose numbers are facts (scan.by_text) is
read once per message and counted by feed. The differences: a shape here is masked in one go (digits
and hex letters, where feed tries digits first), and a "Traceback" line is read only before a line of
its traceback that is read (feed reads every one; it starts that process' traceback).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import operator
import os

from typing import Iterable, Iterator

from triage.logread.select import MAX_LINE, PREFILTER_RE, _prefilter_literals
from triage.logread.source import InputError, LogSource

# A log is read here when samples of it hold at least DENSE_HITS PREFILTER words per MiB.
DENSE_MIN_BYTES = 1 << 20
DENSE_HITS = 256
DENSE_SAMPLE = 16 * 1024
CHUNK = 4 << 20
# The first chunk is cut into lines (all its shapes are new); a restart loop's later chunks are counted in
# blocks, cheaper: the first is kept small.
FIRST_CHUNK = 1 << 20
# A chunk is counted in blocks when at most one block in BLOCK_GAIN is distinct; when it is not, the next
# BLOCK_WAIT chunks are cut into lines (a log that does not loop pays for a try once in a while).
BLOCK_GAIN = 16
BLOCK_WAIT = 8
SEP_MIN = 16  # a separator this long at least (a blank line would cut a chunk into lines, not blocks)
MAX_TEXTS = 4096  # texts of the shapes read per text, remembered
HEADS_BACK = 16  # "Traceback" lines read before a line of a traceback, at most (interleaved workers)

_MASK = bytes.maketrans(b"0123456789abcdefABCDEF", b"#" * 22)
_DIGITS = bytes.maketrans(b"0123456789", b"#" * 10)  # feed's first key
_TB_HEAD = b"Traceback (most recent"
_TB_KEY = _TB_HEAD.translate(_MASK)
# Read per text: the machine's rows (one per GPU), and lines a PREFILTER word with a digit may be on.
_TEXT_KEYS = tuple({m.translate(_MASK) for m in (b"NVIDIA", b"apability", b"GPU 0")}
                   | {lit.translate(_MASK) for lit in (_prefilter_literals() or ()) if any(c in b"0123456789" for c in lit)})
_END = b"\n"  # a key no line has: the line after a chunk's last


def dense(path: str) -> bool:
    """Samples of the log (a quarter, half and three quarters in) hold many PREFILTER words. A
    terminal-wrapped paste never is (select.py joins its rows first)."""
    from triage.logread.unwrap import SAMPLE, wrap_width

    lits = _prefilter_literals()
    try:
        size = os.path.getsize(path)
        if size < DENSE_MIN_BYTES or not lits:
            return False
        hits = 0
        with open(path, "rb") as fh:
            for at in (size // 4, size // 2, 3 * size // 4):
                fh.seek(at)
                sample = fh.read(DENSE_SAMPLE)
                hits += sum(map(sample.count, lits))  # bytes.count per literal: C speed, unlike a regex
            if hits * (1 << 20) < DENSE_HITS * 3 * DENSE_SAMPLE:
                return False
            fh.seek(0)
            return not wrap_width(fh.read(SAMPLE))
    except OSError:
        return False  # the usual way says why


def dense_head(head: bytes) -> bool:
    """A stream's head (up to CHUNK bytes) holds many PREFILTER words: the stream is read here. A stream
    cannot be sampled further in, and a fragment or a terminal-wrapped paste never is."""
    from triage.logread.unwrap import SAMPLE, wrap_width

    lits = _prefilter_literals()
    if len(head) < min(DENSE_MIN_BYTES, CHUNK) or not lits:
        return False
    size = len(head)
    samples = [head[at:at + DENSE_SAMPLE] for at in (size // 4, size // 2, 3 * size // 4)]
    hits = sum(sum(map(sample.count, lits)) for sample in samples)
    return hits * (1 << 20) >= DENSE_HITS * 3 * DENSE_SAMPLE and not wrap_width(head[:SAMPLE])


def peek(data: Iterator[bytes]) -> tuple[bytes, Iterator[bytes]]:
    """Up to CHUNK bytes of a stream (less only at its end), and all its chunks again."""
    got: list[bytes] = []
    have = 0
    for b in data:
        got.append(b)
        have += len(b)
        if have >= CHUNK:
            break
    return b"".join(got), itertools.chain(got, data)


def stream_bodies(data: Iterable[bytes], ready=None) -> Iterator[tuple[bytes | None, bool, int]]:
    """file_bodies for a stream (a pipe, a gzip file): chunks gathered to CHUNK bytes, the partial last
    line carried over to the next. `ready()`: whether more is there to read at once; when not, the whole
    lines gathered so far go on without waiting for CHUNK (a live pipe: read as it comes)."""
    parts: list[bytes] = []
    have = 0
    skipping = False
    for chunk in data:
        size = len(chunk)
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                yield None, False, size
                continue
            yield None, False, nl + 1
            chunk = chunk[nl + 1:]
            size = len(chunk)
            skipping = False
        if not chunk:
            continue
        parts.append(chunk)
        have += size
        if have < CHUNK and (ready is None or ready()):
            continue
        buf = b"".join(parts)
        end = buf.rfind(b"\n")
        if end < 0 and have < CHUNK:  # not one whole line yet
            parts = [buf]
            continue
        if end >= 0:
            parts, have = [buf[end + 1:]], len(buf) - end - 1
            yield buf, True, end + 1
        else:  # a line longer than a chunk: its head, the rest skipped
            parts, have = [], 0
            skipping = True
            yield buf[:MAX_LINE + 1], False, len(buf)
    if have:
        buf = b"".join(parts)
        yield (buf[:-1] if buf.endswith(b"\n") else buf), False, len(buf)


def file_bodies(path: str) -> Iterator[tuple[bytes | None, bool, int]]:
    """(a chunk of the log or None, whether its last line is left for the next chunk, the bytes of the
    log it stands for). A chunk is read as it lies in the file: its last, partial line is read again
    at the start of the next (a seek back), so no chunk is copied to be cut or joined. A line longer
    than a chunk is handed on as MAX_LINE + 1 of its bytes (BulkReader.feed cuts it and says so), the
    rest skipped: memory stays flat whatever the log holds."""
    want = FIRST_CHUNK
    try:
        with open(path, "rb", buffering=0) as fh:
            while True:
                buf = fh.read(want)
                if not buf:
                    return
                if len(buf) < want:  # the end of the log
                    yield (buf[:-1] if buf.endswith(b"\n") else buf), False, len(buf)
                    return
                want = CHUNK
                end = buf.rfind(b"\n")
                if end >= 0:
                    fh.seek(end + 1 - len(buf), os.SEEK_CUR)
                    yield buf, True, end + 1
                    continue
                yield buf[:MAX_LINE + 1], False, 0
                skipped = len(buf)
                while True:
                    more = fh.read(CHUNK)
                    nl = more.find(b"\n")
                    if nl >= 0:
                        fh.seek(nl + 1 - len(more), os.SEEK_CUR)
                        skipped += nl + 1
                    else:
                        skipped += len(more)
                    if nl >= 0 or not more:
                        break
                yield None, False, skipped
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None


def scan_whole(src: LogSource, data: Iterator[bytes] | None = None, *, sc=None, live=None):
    """scan_source for a dense regular file (see dense), or a dense stream's chunks (`data`, see
    dense_head). Returns the Scan, the Scanner, and the collect-env blocks kept aside from a stream.

    `live`: a stream still being written, read by the TUI into the Scanner `sc` (it takes snapshots from
    another thread): an object with `ready()` (more to read at once: see stream_bodies), `lock` (held
    while a chunk is fed) and `progress(bytes, lines, new)` (after each chunk; `new`: lines were read)."""
    import contextlib

    from triage.logread.scan import Scanner
    from triage.logread.select import BLOCK_BYTES, BLOCK_MARKER

    sc = Scanner(src.name) if sc is None else sc
    rd = BulkReader(sc)
    hold = live.lock if live is not None else contextlib.nullcontext()
    nbytes = no = 0
    blocks: list[tuple[int, bytes]] = []  # a stream cannot be read twice: a collect-env block, kept
    keep = 0
    if data is None:
        assert src.path is not None
        bodies = file_bodies(src.path)
    else:
        bodies = stream_bodies(data, live.ready if live is not None else None)
    for body, tail, size in bodies:
        nbytes += size
        if body is None:
            continue
        if data is not None and (keep or not blocks):
            stop = body.rfind(b"\n") + 1 if tail else len(body)  # the partial last line comes again
            if keep:
                first, got = blocks[-1]
                blocks[-1] = (first, got + body[:min(keep, stop)])
                keep -= min(keep, stop)
            else:
                at = body.find(BLOCK_MARKER, 0, stop)
                if at >= 0:
                    start = body.rfind(b"\n", 0, at) + 1
                    piece = body[start:min(start + BLOCK_BYTES, stop)]
                    blocks.append((no + body.count(b"\n", 0, start) + 1, piece))
                    keep = BLOCK_BYTES - len(piece)
        with hold:
            read = len(sc.scan.lines) + len(sc._tail)
            no += rd.feed(no, body, tail)
            if live is not None:
                live.progress(nbytes, no, len(sc.scan.lines) + len(sc._tail) != read)
    with hold:
        scan = sc.finish(nbytes, no)
    if rd.cut_lines:
        scan.truncated = True
        scan.warnings.append(f"{rd.cut_lines} line(s) longer than {MAX_LINE >> 10} KiB were cut there")
    return scan, sc, blocks


class BulkReader:
    """Feeds a Scanner from whole chunks of a log (see the module's docstring)."""

    def __init__(self, scanner) -> None:
        from triage.logread.scan import MAX_SHAPES

        self.sc = scanner
        self.max = MAX_SHAPES
        self.shapes: dict[bytes, list] = scanner._shapes  # the scanner's: [times, first, last, Line]
        # Every shape met is in one of: hits (holds a PREFILTER word), ignored (does not, never selected),
        # shapes (selected after a hit, read), quiet (selected and read, but feed keeps no entry for it).
        self.hits: set[bytes] = set()
        self.ignored: set[bytes] = set()
        self.quiet: set[bytes] = set()
        self.texts: set[bytes] = set()  # shapes read once per text
        self.texts_seen: set[bytes] = set()
        self.tb_keys: set[bytes] = set()  # shapes of a traceback's first line
        self.before = [b"", b""]  # the last two shapes of the previous chunk
        self.sep: bytes | None = None  # a shape that cuts a chunk into blocks (_feed_blocks)
        self.sep_wait = 0
        self.block: bytes | None = None  # the most frequent block of the last chunk counted in blocks
        self.tb_pending: tuple[int, bytes] | None = None  # the last "Traceback" line, not read
        self.read_upto = 0  # the number of the last line read
        self.cut_lines = 0

    # ---- a chunk ---------------------------------------------------------------------------

    def feed(self, base: int, chunk: bytes, tail: bool = False) -> int:
        """Whole lines (joined by newlines) numbered base+1 onwards; with `tail`, the part after the last
        newline is no line of it (the next chunk starts there). Returns how many lines."""
        norm = chunk.translate(_MASK)
        if self.sep is not None:
            if self.sep_wait:
                self.sep_wait -= 1
            else:
                n = self._feed_blocks(base, chunk, norm, tail)
                if n:
                    return n
        keys = norm.split(b"\n")
        if tail:
            keys.pop()
        n = len(keys)
        counts = collections.Counter(keys)
        if len(chunk) > MAX_LINE and max(map(len, counts)) > MAX_LINE:
            chunk = self._cut(keys, chunk)
            counts = collections.Counter(keys)
            tail = False
        self.sep = _separator(counts, n)
        self._feed_lines(base, chunk, keys, counts)
        self.before = (self.before + keys[-2:])[-2:]
        if self.tb_keys:
            self._keep_head(base + n, chunk, tail)
        return n

    def _feed_lines(self, base: int, chunk: bytes, keys: list[bytes], counts: collections.Counter) -> None:
        hits, ignored, shapes, quiet = self.hits, self.ignored, self.shapes, self.quiet
        n = len(keys)
        rows = _Rows(chunk, keys)
        search = PREFILTER_RE.search
        new = counts.keys() - hits - ignored - shapes.keys() - quiet
        todo: list[int] = []  # indices of the lines to read
        if new:
            if len(new) * 64 < n:
                first = {k: keys.index(k) for k in new}
            else:
                first = dict(zip(reversed(keys), range(n - 1, -1, -1)))
            rows.fetch(first.values())
            for k in new:
                j = first[k]
                hit = search(rows[j]) is not None
                if any(t in k for t in _TEXT_KEYS):
                    self.texts.add(k)
                elif _TB_KEY in k:
                    self.tb_keys.add(k)
                elif hit:
                    todo.append(j)
                if len(hits) + len(ignored) >= 2 * self.max:
                    self.sc.overflow = True  # not remembered: met as new again in the next chunk
                elif hit:
                    hits.add(k)
                else:
                    ignored.add(k)
        # The lines after hits: those not hits themselves are selected as context.
        ci, ck, at_hits = self._context(keys, counts)
        ctx = collections.Counter(ck)
        for k in ctx.keys() & ignored:
            if k not in self.texts and k not in self.tb_keys:
                todo.append(ci[ck.index(k)])
        texts = counts.keys() & self.texts if self.texts else None
        again: list[int] = []  # lines of a message read before
        if texts:
            at = set(ci)
            seen = self.texts_seen
            js = list(itertools.compress(range(n), map(texts.__contains__, keys)))
            rows.fetch(js)
            for j in js:
                row = rows[j]
                if keys[j] in hits or j in at or search(row) is not None:
                    said = row[row.find(b"] ") + 1:]  # the message, as feed keys it (by_text)
                    if said in seen:
                        again.append(j)
                    else:
                        if len(seen) < MAX_TEXTS:
                            seen.add(said)
                        todo.append(j)
        fresh = self._read(base, keys, rows, todo) if todo else set()
        for j in again:  # feed counts a message it has read
            self.sc.feed(base + j + 1, rows[j])
        known = counts.keys() & shapes.keys()
        if not known:
            return
        hit_last = dict(zip(map(keys.__getitem__, at_hits), at_hits))
        ctx_last = dict(zip(ck, ci)) if ck else {}
        for k in known:
            if k in hits:
                times, no = counts[k], base + 1 + hit_last[k]
            elif k in ctx:
                times, no = ctx[k], base + 1 + ctx_last[k]
            else:
                continue
            e = shapes[k]
            e[0] += times - (k in fresh)
            if no > e[2]:
                e[2] = no

    def _context(self, keys: list[bytes], counts: collections.Counter) -> tuple[list[int], list[bytes], list[int]]:
        """The indices and shapes of the selected lines that are no hits (the line after a hit, and the
        next when that one is blank), in order, and the indices of the hits: found with C-level
        operations."""
        n = len(keys)
        hits = self.hits
        hit = counts.keys() & hits
        p2, p1 = self.before
        keys.append(_END)
        try:
            at_hits = list(itertools.compress(range(n), map(hit.__contains__, keys)))
            s1 = list(map((1).__add__, at_hits))
            if p1 in hits:
                s1.insert(0, 0)
            s1k = list(map(keys.__getitem__, s1))
            blank = {k for k in counts if not k.strip()}
            s2: list[int] = []
            if blank:
                s2 = list(map((1).__add__, itertools.compress(s1, map(blank.__contains__, s1k))))
            if not p1.strip() and p2 in hits:
                s2.insert(0, 0)
            both = s1 + s2
            ci = list(itertools.compress(both, map(operator.not_, map(hit.__contains__, map(keys.__getitem__, both)))))
            ci.sort()
            while ci and ci[-1] >= n:
                ci.pop()
            return ci, list(map(keys.__getitem__, ci)), at_hits
        finally:
            keys.pop()

    def _read(self, base: int, keys: list[bytes], rows: _Rows, todo: list[int]) -> set[bytes]:
        """feed the lines of `todo` in the log's order, each after the "Traceback" lines it may belong to
        when those were not read; return the shapes read."""
        sc, shapes = self.sc, self.shapes
        todo = sorted(set(todo))
        tb = self.tb_keys.intersection(keys) if self.tb_keys else ()
        heads = list(itertools.compress(range(len(keys)), map(tb.__contains__, keys))) if tb else []
        pending, self.tb_pending = self.tb_pending, None
        reads: list[tuple[int, bool]] = []  # (index, whether a line of todo); -1: the pending "Traceback"
        done = -1
        for j in todo:
            # the "Traceback" lines since the last line read (the last few: one per worker at most)
            hi = bisect.bisect_left(heads, j)
            lo = max(bisect.bisect_right(heads, done), hi - HEADS_BACK)
            if done < 0 and lo == hi and pending is not None:
                reads.append((-1, False))  # the chunk before ended inside this line's traceback
            reads += [(h, False) for h in heads[lo:hi]]
            reads.append((j, True))
            done = j
        rows.fetch(j for j, _ in reads if j >= 0)
        fresh: set[bytes] = set()
        for j, mine in reads:
            if j < 0:
                sc.feed(*pending)  # type: ignore[misc]
                continue
            row = rows[j]
            sc.feed(base + j + 1, row)
            if not mine:
                continue
            k = keys[j]
            self.ignored.discard(k)
            if k in self.texts:
                continue  # counted by feed, line by line (see `again`)
            if k not in shapes:
                e = shapes.get(row.translate(_DIGITS))
                if e is not None and len(shapes) < self.max:
                    shapes[k] = e
                elif k not in self.texts and k not in self.hits:
                    self.quiet.add(k)
            fresh.add(k)
        self.read_upto = base + done + 1
        return fresh & shapes.keys()

    # ---- a chunk that repeats itself -----------------------------------------------------------

    def _feed_blocks(self, base: int, chunk: bytes, norm: bytes, tail: bool) -> int:
        """feed for a chunk cut into blocks at the separator shape; only when nothing in it is new and
        no shape is selected for the first time (else 0: feed cuts it into lines)."""
        head = self.sep
        assert head is not None
        parts = norm.split(b"\n" + head)
        if tail:  # the partial last line is no line of this chunk
            cut = parts[-1].rfind(b"\n")
            if cut >= 0:
                parts[-1] = parts[-1][:cut]
            elif len(parts) > 1:
                parts.pop()  # the separator's line is the partial one
            else:
                return 0
        b0 = self.block
        if b0 is not None:
            # One object per distinct block: a block equal to the last chunk's is compared (memcmp), not
            # hashed again (hashing each of a chunk's blocks costs more than reading it).
            parts = [b0 if p == b0 else p for p in parts]
        blocks = collections.Counter(parts[1:])
        if len(parts) < 3 or len(blocks) * BLOCK_GAIN > len(parts):
            self.sep_wait = BLOCK_WAIT  # the blocks differ: not a loop, for now
            return 0
        lines = {b: (head + b).split(b"\n") for b in blocks}
        first = parts[0].split(b"\n")
        counts = collections.Counter(first)
        n = len(first)
        for b, m in blocks.items():
            rows = lines[b]
            n += len(rows) * m
            for k, c in collections.Counter(rows).items():
                counts[k] += c * m
        if max(map(len, counts)) > MAX_LINE:
            return 0
        hits, shapes = self.hits, self.shapes
        if counts.keys() - hits - self.ignored - shapes.keys() - self.quiet:
            return 0
        texts = counts.keys() & self.texts if self.texts else None
        said: list[tuple[list, int, int]] | None = []
        if texts:
            if texts - hits:
                return 0
            said = self._texts_in(chunk, norm, texts, base + n, tail)
            if said is None:
                return 0
        # the selected lines of a block depend on the two lines before it: one look per distinct pair
        Look = tuple[collections.Counter, dict[bytes, int]]
        looks: dict[tuple[bytes, bytes, bytes | None], Look | None] = {}

        def look(p2: bytes, p1: bytes, b: bytes | None) -> Look | None:
            key = (p2, p1, b)
            if key not in looks:
                looks[key] = self._look(p2, p1, first if b is None else lines[b])
            return looks[key]

        ctx: collections.Counter = collections.Counter()
        head_look = look(self.before[0], self.before[1], None)
        if head_look is None:
            return 0
        ctx.update(head_look[0])
        # the last two lines of each part (a part of one line: the line before it, then that line)
        tails = [(first[-2] if len(first) > 1 else self.before[-1], first[-1])]
        ends = {b: (rows[-2], rows[-1]) for b, rows in lines.items() if len(rows) > 1}
        if len(ends) == len(lines):  # every block has two lines at least: its own last two, looked up
            tails += map(ends.__getitem__, parts[1:])
        else:
            for b in parts[1:]:
                rows = lines[b]
                tails.append((rows[-2], rows[-1]) if len(rows) > 1 else (tails[-1][1], rows[-1]))
        pairs = collections.Counter(zip(tails, parts[1:]))
        for ((p2, p1), b), m in pairs.items():
            got = look(p2, p1, b)
            if got is None:
                return 0
            for k, c in got[0].items():
                ctx[k] += c * m
        want = counts.keys() & shapes.keys()
        last: dict[bytes, int] = {}
        end = base + n  # the last line of the part at hand, walking from the chunk's end
        visited: set = set()
        for t in range(len(parts) - 1, 0, -1):
            rows = lines[parts[t]]
            pair = (tails[t - 1], parts[t])
            if pair not in visited:
                visited.add(pair)
                top = end - len(rows) + 1
                seen_here = look(tails[t - 1][0], tails[t - 1][1], parts[t])
                for k, i in (seen_here[1] if seen_here else {}).items():
                    if k in want and k not in last:
                        last[k] = top + i
                if len(last) == len(want) or len(visited) == len(pairs):
                    break
            end -= len(rows)
        if len(last) < len(want):
            for k, i in head_look[1].items():
                if k in want and k not in last:
                    last[k] = base + 1 + i
        for k in want:
            times = counts[k] if k in hits else ctx[k]
            if not times:
                continue
            e = shapes[k]
            e[0] += times
            no = last.get(k, 0)
            if no > e[2]:
                e[2] = no
        for e, times, no in said or ():
            e[0] += times
            if no > e[2]:
                e[2] = no
        self.before = list(tails[-1])
        self.block = max(blocks, key=blocks.__getitem__)
        if self.tb_keys:
            self._keep_head(base + n, chunk, tail)
        return n

    def _texts_in(self, chunk: bytes, norm: bytes, texts: set[bytes], end: int,
                  tail: bool) -> list[tuple[list, int, int]] | None:
        """The lines of the shapes read per message (hits all) in a chunk counted in blocks: (feed's entry,
        times, last line) for each message; None when one was not read before (then the chunk is cut
        into lines and it is read)."""
        stop = norm.rfind(b"\n") if tail else len(norm)
        found: dict[bytes, list[int]] = {}  # message -> [times, offset of its last line]
        for k in texts:
            offs = [0] if norm.startswith(k + b"\n") or (norm == k and not tail) else []
            pat = b"\n" + k + b"\n"
            at = norm.find(pat, 0, stop + 1)
            while at >= 0:
                offs.append(at + 1)
                at = norm.find(pat, at + len(k) + 1, stop + 1)
            if not tail and len(norm) > len(k) and norm.endswith(b"\n" + k):
                offs.append(len(norm) - len(k))
            for o in offs:
                row = chunk[o:o + len(k)]
                msg = row[row.find(b"] ") + 1:]
                f = found.get(msg)
                if f is None:
                    found[msg] = [1, o]
                else:
                    f[0] += 1
                    f[1] = o
        from triage.logread.scan import by_text

        out = []
        for msg, (times, o) in found.items():
            nl = chunk.find(b"\n", o)
            row = chunk[o:nl if nl >= 0 else len(chunk)]
            # the entry feed counts such a line in (Scanner.feed)
            e = self.shapes.get(b"\x00" + msg if by_text(row) else row.translate(_DIGITS))
            if e is None:
                return None
            out.append((e, times, end - norm.count(b"\n", o, stop)))
        return out

    def _look(self, p2: bytes, p1: bytes, rows: list[bytes]) -> tuple[collections.Counter, dict[bytes, int]] | None:
        """For a block after (p2, p1): the counts of its selected lines that are no hits, and the index of
        the last selected line of each shape; None when a line is selected for the first time."""
        hits = self.hits
        ctx: collections.Counter = collections.Counter()
        last: dict[bytes, int] = {}
        for i, k in enumerate(rows):
            if k in hits:
                last[k] = i
            elif p1 in hits or (p2 in hits and not p1.strip()):
                if k in self.ignored:
                    return None
                ctx[k] += 1
                last[k] = i
            p2, p1 = p1, k
        return ctx, last

    # ---- helpers -----------------------------------------------------------------------------

    def _cut(self, keys: list[bytes], chunk: bytes) -> bytes:
        rows = chunk.split(b"\n")[:len(keys)]
        for i, k in enumerate(keys):
            if len(k) > MAX_LINE:
                keys[i], rows[i] = k[:MAX_LINE], rows[i][:MAX_LINE]
                self.cut_lines += 1
        return b"\n".join(rows)

    def _keep_head(self, end: int, chunk: bytes, tail: bool) -> None:
        """The chunk's last "Traceback" line, when nothing after it was read: the next chunk may hold
        new lines of the traceback it opens. `end`: the number of the chunk's last line."""
        stop = len(chunk) if not tail else chunk.rfind(b"\n")
        at = chunk.rfind(_TB_HEAD, 0, stop)
        if at < 0:
            return
        start = chunk.rfind(b"\n", 0, at) + 1
        no = end - chunk.count(b"\n", start, stop)
        if no > self.read_upto:
            stop = chunk.find(b"\n", at)
            self.tb_pending = (no, chunk[start:stop if stop >= 0 else len(chunk)])


def _separator(counts: collections.Counter, n: int) -> bytes | None:
    """The most frequent shape that comes back at most once in BLOCK_GAIN lines."""
    best, most = None, 8
    for k, c in counts.items():
        if c > most and c * BLOCK_GAIN <= n and len(k) >= SEP_MIN:
            best, most = k, c
    return best


class _Rows:
    """A chunk's lines by index, without cutting the whole chunk into lines: a line's offset is the sum of
    the lengths of the (masked, same length) lines before it, added up once for all the lines wanted."""

    def __init__(self, chunk: bytes, keys: list[bytes]) -> None:
        self.chunk, self.keys = chunk, keys
        self.got: dict[int, bytes] = {}

    def fetch(self, js: Iterable[int]) -> None:
        keys, chunk, got = self.keys, self.chunk, self.got
        off = prev = 0
        for j in sorted(set(js)):
            off += sum(map(len, keys[prev:j])) + j - prev
            prev = j
            if j not in got:
                got[j] = chunk[off:off + len(keys[j])]

    def __getitem__(self, j: int) -> bytes:
        if j not in self.got:
            self.fetch((j,))
        return self.got[j]
