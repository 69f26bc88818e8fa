"""Values for Textual markup templates: cleaned of terminal control (triage.sanitize), markup escaped."""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.sanitize import clean


def escape(value: Any) -> str:
    """Every `[` escaped: Textual's own escape lets `[Bug]` through, and its parser then eats it as a tag."""
    return _BRACKET.sub(lambda m: m.group(1) * 2 + "\\[", clean(str(value)))


_BRACKET = lazy(r"(\\*)\[")  # backslashes right before a bracket are doubled, as Textual reads them


def set_text(widget: Any, text: str, *, layout: bool = True) -> None:
    """Update a Static only when its text changes. A fixed-size line (the status, a title) is
    updated with layout=False: re-laying out the whole screen on every tick of a live pipe would
    cost more than drawing it."""
    if getattr(widget, "_triage_text", None) == text:
        return
    widget._triage_text = text
    widget.update(text, layout=layout)
