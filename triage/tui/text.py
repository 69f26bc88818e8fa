"""Wrapping for the TUI's markup at word boundaries with a hanging indent (Static wraps at the widget's
edge back to column 0); each piece escaped by triage.tui.markup."""

from __future__ import annotations

import textwrap
from typing import Callable

from triage.tui.markup import escape


def wrapped(text: str, width: int, indent: str = "  ", hang: str = "  ",
            style: Callable[[str], str] = lambda s: s) -> list[str]:
    """`text` wrapped to `width` columns (no wrapping when width is not known yet), each piece escaped
    and passed through `style`; continuation lines indented by indent + hang. Words are never split."""
    if width <= len(indent) + len(hang) + 10:
        return [indent + style(escape(text))]
    pieces = textwrap.wrap(str(text), width=width - 1 - len(indent), break_long_words=False,
                           break_on_hyphens=False) or [""]
    out = [indent + style(escape(pieces[0]))]
    rest = " ".join(pieces[1:])
    if rest:
        for p in textwrap.wrap(rest, width=width - 1 - len(indent) - len(hang), break_long_words=False,
                               break_on_hyphens=False):
            out.append(indent + hang + style(escape(p)))
    return out
