"""Values for Textual markup templates: cleaned of terminal control (triage.sanitize), markup escaped."""

from __future__ import annotations

from typing import Any

from textual.markup import escape as _escape

from triage.sanitize import clean


def escape(value: Any) -> str:
    return _escape(clean(str(value)))
