"""The keys of the focused view on one line, at the bottom.

Textual's Footer builds a widget per key and rebuilds them all whenever the bindings change (every
focus change, every view switch): tens of milliseconds of styling and layout on each key press. This
line is one Static, rewritten only when the text changes; a key is still clickable (it simulates the
key press).
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Static

from triage.tui.markup import escape


class KeysLine(Horizontal):
    DEFAULT_CSS = """
    KeysLine {
        dock: bottom;
        height: 1;
        background: $footer-background;
    }
    KeysLine > Static {
        link-style: bold; link-color: $footer-key-foreground; link-background: $footer-background;
        link-style-hover: bold reverse; link-color-hover: $footer-key-foreground;
        link-background-hover: $footer-background;
    }
    KeysLine > #keys { width: 1fr; height: 1; color: $footer-description-foreground; }
    KeysLine > #palette-key {
        width: auto; height: 1; padding: 0 1 0 0;
        border-left: vkey $foreground 20%;
        color: $footer-description-foreground;
    }
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._shown = ""

    def compose(self) -> ComposeResult:
        yield Static("", id="keys")
        yield Static("", id="palette-key")

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        app = self.app
        if app.ENABLE_COMMAND_PALETTE:
            key = app.COMMAND_PALETTE_DISPLAY or app.get_key_display(_palette_binding(app))
            self.query_one("#palette-key", Static).update(
                f"[@click=app.command_palette]{escape(key)}[/] palette")
        else:
            self.query_one("#palette-key", Static).display = False

    def _bindings_changed(self, screen: Any) -> None:
        if screen is not self.screen:
            return
        seen: set[str] = set()
        parts = []
        for _node, binding, enabled, _tooltip in screen.active_bindings.values():
            if not binding.show or binding.action in seen or binding.key == self.app.COMMAND_PALETTE_BINDING:
                continue
            seen.add(binding.action)
            key = self.app.get_key_display(binding)
            if enabled:  # the key is a link: a click presses it
                key_markup = f"[@click=app.simulate_key({binding.key.split(',')[0]!r})]{escape(key)}[/]"
            else:
                key_markup = f"[$text-disabled]{escape(key)}[/]"
            parts.append(f"{key_markup} {escape(binding.description)}")
        text = " " + "  ".join(parts)
        if text != self._shown:
            self._shown = text
            self.query_one("#keys", Static).update(text)


def _palette_binding(app: Any) -> Any:
    from textual.binding import Binding

    return Binding(app.COMMAND_PALETTE_BINDING, "command_palette", "palette")
