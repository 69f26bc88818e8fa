"""Re-join a log that a terminal hard-wrapped: a copy of a terminal window narrower than the lines.

Such a paste cuts every long line into rows of exactly the terminal's width, and the rows after the
first carry no header: a rule's phrase, a traceback's exception line, even the PREFILTER word that
selects the line, may be cut in two. The width is recognised from the head of the log (two
different rows or more of exactly the same, maximal, length of 80 columns or more, each followed by a
row that does not begin a new record); then a row of that width and the rows continuing it are read
as one line, numbered as its first row. Logs that were not wrapped are left alone. (A log with one
line cut in two gives no width away: the scanner joins such a pair itself, see scan._cut_row.)
"""

from __future__ import annotations

from typing import Iterable, Iterator

from triage.logread.normalize import clean, parse
from triage.logread.traceback import EXC_RE

SAMPLE = 256 * 1024
MIN_WIDTH = 80  # the narrowest terminal in common use; a narrower paste is not worth the risk
MIN_WRAPPED = 2  # distinct rows of the width, each continued, before a log counts as wrapped
# A row beginning like this is a line of its own even after a row of the full width.
RECORD_STARTS = ("Traceback (most recent call last)", 'File "', "During handling of the above", "The above exception",
                 "Collecting environment information")


def _width(raw: bytes) -> int:
    return len(clean(raw))


def starts_record(raw: bytes) -> bool:
    """The row begins a new line of the log: a prefix normalize knows, or a traceback's own line."""
    if not raw.strip():
        return True
    ln = parse(0, raw)
    if ln.proc or ln.level or len(ln.text) != len(ln.shown):
        return True
    # a traceback's source line (indented) follows its frame line: never a cut row
    return ln.text.startswith("  ") or ln.text.lstrip().startswith(RECORD_STARTS)


def _raised_after_source(cur: bytes, row: bytes) -> bool:
    """`row` is an exception's own line ("TypeError: ...") and `cur` a traceback's source line that happened
    to be exactly as wide as the terminal: code continued on the next row never reads "XError: ..."."""
    if b":" not in row:
        return False
    m = EXC_RE.match(parse(0, row).text)
    return m is not None and m.group("msg") is not None and parse(0, cur).text.startswith("    ")


def wrap_width(sample: bytes) -> int | None:
    """The width the log was hard-wrapped at, from its head; None when it was not wrapped."""
    rows = sample.split(b"\n")
    if len(rows) < 3:
        return None
    widths = [len(r) for r in rows[:-1]]  # bytes: an upper bound of the visible width, cheap
    # The visible width (colours and multi-byte characters are not columns) of the longest rows:
    # longest in bytes first, until no row left can be as wide as the widest seen.
    vis: dict[int, int] = {}
    width = 0
    for i in sorted(range(len(widths)), key=widths.__getitem__, reverse=True):
        if widths[i] < max(width, MIN_WIDTH):
            break
        vis[i] = _width(rows[i])
        width = max(width, vis[i])
    at = [i for i, w in vis.items() if w == width and not starts_record(rows[i + 1])]
    distinct = len({rows[i] for i in at})
    return width if width >= MIN_WIDTH and distinct >= MIN_WRAPPED else None


def unwrap_lines(lines: Iterable[tuple[int, bytes]], width: int, max_len: int) -> Iterator[tuple[int, bytes]]:
    """(number, row) -> (number of the first row, the rows of one line joined)."""
    cur_no = 0
    cur: bytes | None = None
    continues = False  # the last row of `cur` was of the full width
    for no, row in lines:
        if cur is not None and continues and not starts_record(row) and len(cur) < max_len \
                and not _raised_after_source(cur, row):
            cur = (cur.rstrip(b"\r") + row)[:max_len]
        else:
            if cur is not None:
                yield cur_no, cur
            cur_no, cur = no, row
        continues = len(row) >= width and _width(row) == width
    if cur is not None:
        yield cur_no, cur
