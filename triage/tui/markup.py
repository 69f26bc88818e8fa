"""Values for Textual markup templates: cleaned of terminal control (triage.sanitize), markup escaped."""

from __future__ import annotations

import re
from typing import Any

from triage.sanitize import clean


def escape(value: Any) -> str:
    """Every `[` escaped: Textual's own escape lets `[Bug]` through, and its parser then eats it as a tag."""
    return _BRACKET.sub(lambda m: m.group(1) * 2 + "\\[", clean(str(value)))


_BRACKET = re.compile(r"(\\*)\[")  # backslashes right before a bracket are doubled, as Textual reads them
