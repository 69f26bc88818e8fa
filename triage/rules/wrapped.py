"""A message a paste wrapped over several lines, read whole: people copy an exception out of a terminal or a
web page that breaks it (at a width, at a parenthesis, over blank lines), and a rule's pattern spans the break."""

from __future__ import annotations

from typing import Iterator

from triage.logread.normalize import Line
from triage.logread.scan import Scan

WRAP_LINES = 8  # how far a wrapped message may run on after its first line (a paste's blank lines included)
ENDS = ("File ", "Traceback", "During handling", "The above exception")


def wrapped_texts(scan: Scan, needle: str) -> Iterator[tuple[Line, str]]:
    """(line, message) for each line holding `needle`, with the lines that follow it joined by single spaces.
    A frame or a traceback's start ends it."""
    lines = scan.lines
    for i, ln in enumerate(lines):
        if needle not in ln.text:
            continue
        parts = [ln.text.strip()]
        for nxt in lines[i + 1:]:
            t = nxt.text.strip()
            if nxt.no > ln.no + WRAP_LINES or t.startswith(ENDS):
                break
            parts.append(t)
        yield ln, " ".join(" ".join(parts).split())


MAX_WRAPPED_EXCEPTIONS = 20  # a restart loop repeats its exceptions: the first ones are enough


def exception_texts(scan: Scan) -> list[tuple[Line, str]]:
    """(line, message) of the exceptions whose message runs on over continuation lines (the traceback reader
    keeps them), joined: what a rule's pattern may need when a paste broke the message."""
    return _texts(scan) if any(e.extra for e in scan.exceptions) else []


def _texts(scan: Scan) -> list[tuple[Line, str]]:
    out = []
    for exc in scan.exceptions:
        if exc.extra:
            extra = " ".join(x.text.strip() for x in exc.extra)
            out.append((exc.line, " ".join(f"{exc.message} {extra}".split())))
            # the rows as printed: a reader that re-joined a wrapped row may have glued two words together
            at = exc.line.shown.find(exc.type)
            if at >= 0:
                out.append((exc.line, " ".join(f"{exc.line.shown[at:]} {extra}".split())))
            if len(out) >= MAX_WRAPPED_EXCEPTIONS:
                break
    return out


def reading_wrapped(rule):
    """A check for a pattern rule: its patterns on each line as usual, else on each exception's message joined
    over the lines a paste wrapped it onto."""
    def check(scan: Scan, env) -> "object | None":
        d = rule.match_lines(scan)
        if d is not None:
            return d
        texts = exception_texts(scan) if scan.exceptions else []
        for ln, text in texts:
            for i in range(len(rule.patterns)):
                m = rule._search(i, text)  # the rule's own literal check and compiled pattern, shared with match_lines
                if m is not None:
                    return rule.diagnosis(scan, [(ln, m)])
        return _prose_wrapped(rule, scan)
    return check


_FLAT: list = [None, ""]  # the last scan's lines joined by single spaces (every rule of one run reads the same scan)


def _flat(scan: Scan) -> str:
    if _FLAT[0] is not scan:
        _FLAT[0], _FLAT[1] = scan, " ".join(" ".join(ln.text.split()) for ln in scan.lines)
    return _FLAT[1]


def _prose_wrapped(rule, scan: Scan) -> "object | None":
    """A message quoted in prose or a code block and broken at a width (no exception line to hang it on): when a
    pattern's literal only appears with the line breaks taken out, the pattern is read over each line joined
    with the rows after it, and counts when its match starts on that line and runs on past it."""
    joined = scan.joined_text()
    for i, guard in enumerate(rule._guards):
        if not guard or "\n" in guard or guard in joined or guard not in _flat(scan):
            continue  # no literal to look for, or it is whole on some line (match_lines read that)
        lines = scan.lines
        for k, ln in enumerate(lines):
            parts = [" ".join(ln.text.split())]
            for nxt in lines[k + 1:]:
                t = nxt.text.strip()
                if nxt.no > ln.no + WRAP_LINES or t.startswith(ENDS):
                    break
                parts.append(" ".join(t.split()))
            text = " ".join(parts)
            if guard not in text:
                continue
            m = rule._search(i, text)
            if m is not None and m.start() < len(parts[0]) < m.end():
                return rule.diagnosis(scan, [(ln, m)])
    return None


def read_wrapped_messages(rules: list) -> None:
    """Every plain pattern rule of `rules` also reads messages a paste wrapped (see reading_wrapped)."""
    for r in rules:
        if r.check is None and r.patterns and not r.harmless and not r.wrapper:
            r.check = reading_wrapped(r)
