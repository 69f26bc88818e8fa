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
