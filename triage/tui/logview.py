"""A log view for the evidence: numbered lines, the evidence marked, a cursor, jumps and search.

Virtualised (Textual's line API) so a view of tens of thousands of lines costs only what is on
screen, as in toolong.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from triage.sanitize import clean
from triage.tui.focus import OwnFocusStyle


class LogView(OwnFocusStyle, ScrollView, can_focus=True):
    COMPONENT_CLASSES = {"logview--evidence", "logview--cursor", "logview--match", "logview--gutter"}
    BINDINGS = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "cursor(-10)", "Page up", show=False),
        Binding("pagedown", "cursor(10)", "Page down", show=False),
        Binding("home,g", "first", "Top", show=False),
        Binding("end,G", "last", "Bottom", show=False),
        Binding("w", "toggle_compact", "Whole lines", show=False),
    ]
    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > .logview--gutter { color: $text-muted; }
    LogView > .logview--evidence { color: $error; text-style: bold; }
    LogView > .logview--match { background: $warning 40%; }
    LogView > .logview--cursor { background: $accent 30%; }
    LogView:focus > .logview--cursor { background: $accent 50%; }
    """

    cursor = reactive(0, always_update=True)

    class CursorMoved(Message):
        """The cursor is on another line (the title shows where)."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.lines: list[tuple[int, str]] = []
        self.evidence: list[int] = []  # original line numbers
        self.query_text = ""
        self._index: dict[int, int] = {}
        self._width = 0
        self.compact = True  # hide vLLM's per-line header (date, source file) to fit 80 columns
        self._compact: dict[int, str] = {}

    # --- data ---

    def set_lines(self, lines: list[tuple[int, str]], evidence: list[int] | None = None) -> None:
        keep = self.lines[self.cursor][0] if self.lines and self.cursor < len(self.lines) else None
        same = lines is self.lines  # new evidence for the same lines (a re-diagnosis) costs no pass over them
        if not same:
            self.lines = lines
            self._index = {no: i for i, (no, _t) in enumerate(lines)}
            gutter = len(str(lines[-1][0])) if lines else 1
            self._compact = {}
            self._width = max((len(t) for _n, t in lines), default=0) + gutter + 2
            self.virtual_size = Size(self._width, len(lines))
        evidence = sorted(no for no in (evidence or []) if no in self._index)
        if same and evidence == self.evidence and keep is not None:
            return
        self.evidence = evidence
        if keep is not None and keep in self._index:
            self.cursor = self._index[keep]
        elif self.evidence:
            self.cursor = self._index[self.evidence[0]]
        else:
            self.cursor = max(0, len(lines) - 1)
        self.refresh()

    @property
    def cursor_line_no(self) -> int | None:
        return self.lines[self.cursor][0] if self.lines else None

    # --- navigation ---

    def watch_cursor(self, value: int) -> None:
        if not self.lines:
            return
        # After the refresh: a new virtual size must be in place before scrolling into it.
        self.call_after_refresh(self._ensure_visible)
        self.refresh()
        self.post_message(self.CursorMoved())

    def _ensure_visible(self, tries: int = 0) -> None:
        height = self.scrollable_content_region.height
        if not self.lines or not height:
            return
        top = self.scroll_offset.y
        if self.cursor < top or self.cursor >= top + height:
            self.scroll_to(y=max(0, self.cursor - height // 3), animate=False, immediate=True)
            if self.scroll_offset.y == top and tries < 20:
                # The new virtual size is not laid out yet: try again shortly.
                self.set_timer(0.02, lambda: self._ensure_visible(tries + 1))

    def on_resize(self) -> None:
        self.call_after_refresh(self._ensure_visible)

    def action_cursor(self, delta: int) -> None:
        if self.lines:
            self.cursor = min(max(0, self.cursor + delta), len(self.lines) - 1)

    def action_toggle_compact(self) -> None:
        self.compact = not self.compact
        self.refresh()
        self.post_message(self.CursorMoved())

    def text_of(self, i: int) -> str:
        no, text = self.lines[i]
        text = clean(text)  # the log's own bytes reach the terminal as segments: no control in them
        if not self.compact:
            return text
        got = self._compact.get(i)
        if got is None:
            from triage.logread.normalize import parse

            ln = parse(no, text)
            proc = ln.proc.split(" pid=")[0]
            got = (f"({proc}) " if proc else "") + (f"{ln.level} " if ln.level else "") + ln.text
            self._compact[i] = got
        return got

    def action_first(self) -> None:
        self.cursor = 0

    def action_last(self) -> None:
        self.cursor = max(0, len(self.lines) - 1)

    def goto_line(self, no: int) -> bool:
        """Move the cursor to original line `no` (or the nearest shown line after it)."""
        if not self.lines:
            return False
        idx = self._index.get(no)
        if idx is None:
            idx = next((i for i, (n, _t) in enumerate(self.lines) if n >= no), len(self.lines) - 1)
        self.cursor = idx
        return True

    def jump_evidence(self, step: int) -> int | None:
        """The next (step=1) or previous (-1) evidence line from the cursor, wrapping around."""
        if not self.evidence:
            return None
        here = self.cursor_line_no or 0
        if step > 0:
            target = next((n for n in self.evidence if n > here), self.evidence[0])
        else:
            target = next((n for n in reversed(self.evidence) if n < here), self.evidence[-1])
        self.goto_line(target)
        return target

    def search(self, text: str, step: int = 1, *, from_cursor: bool = False) -> int | None:
        """Find `text` (case-insensitive) after (step=1) or before (-1) the cursor, wrapping around."""
        self.query_text = text
        self.refresh()
        if not text or not self.lines:
            return None
        needle = text.lower()
        n = len(self.lines)
        start = self.cursor if from_cursor else self.cursor + step
        for k in range(n):
            i = (start + k * step) % n
            if needle in self.text_of(i).lower():
                self.cursor = i
                return self.lines[i][0]
        return None

    # --- rendering ---

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        i = scroll_y + y
        width = self.scrollable_content_region.width
        if i >= len(self.lines):
            return Strip.blank(width, self.rich_style)
        no = self.lines[i][0]
        text = self.text_of(i)
        base = self.rich_style
        gutter_w = len(str(self.lines[-1][0]))
        is_ev = no in self._ev_set()
        line_style = base + (self.get_component_rich_style("logview--evidence") if is_ev else Style())
        gutter_style = base + self.get_component_rich_style("logview--gutter")
        mark = ">" if is_ev else " "
        segs = [Segment(f"{no:>{gutter_w}}", gutter_style), Segment(f"{mark} ", line_style)]
        segs.extend(self._highlight(text, line_style))
        strip = Strip(segs).crop(scroll_x, scroll_x + width)
        strip = strip.extend_cell_length(width, line_style)
        if i == self.cursor:
            strip = strip.apply_style(self.get_component_rich_style("logview--cursor"))
        return strip

    def _ev_set(self) -> set[int]:
        return set(self.evidence)

    def _highlight(self, text: str, style: Style) -> list[Segment]:
        if not self.query_text:
            return [Segment(text, style)]
        low, needle = text.lower(), self.query_text.lower()
        match = style + self.get_component_rich_style("logview--match")
        out: list[Segment] = []
        pos = 0
        while True:
            k = low.find(needle, pos)
            if k < 0:
                break
            out.append(Segment(text[pos:k], style))
            out.append(Segment(text[k:k + len(needle)], match))
            pos = k + len(needle)
        out.append(Segment(text[pos:], style))
        return out
