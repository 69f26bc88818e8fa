"""Focus that restyles only the focused widget.

Textual restyles a widget and every widget inside it when it gains or loses focus. Nothing in this
app styles a view's contents by the view's focus, so restyling the tables and logs inside a view on
every view switch only costs time (tens of milliseconds a key while a live pipe keeps the CPU busy).
"""

from __future__ import annotations

from typing import Any


class OwnFocusStyle:
    """Mix into a focusable widget whose descendants' styles do not depend on its focus."""

    def watch_has_focus(self, _has_focus: bool) -> None:
        app: Any = getattr(self, "app")
        app.stylesheet.update_nodes([self], animate=True)
