"""Upstream: what GitHub already knows, ranked by subsystem (with each hit's `why`, state and fixing PR),
and whether upgrading vLLM would fix it. `c` copies a hit's URL with OSC 52 (reaches the local
clipboard over SSH)."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Static

from triage.model import Report, UpstreamHit
from triage.tui.markup import escape  # cleaned of terminal control, markup escaped
from triage.tui.text import wrapped

VERDICT_STYLES = {"fixes": "$success", "does-not-fix": "$error", "unknown": "$warning"}
STATE_STYLE = {"open": "green", "merged": "magenta", "closed": "red"}


def _evidence_order(e: str) -> int:
    """What decides the upgrade first (what it needs, its caveats), the sources last."""
    e = e.lower()
    return 0 if e.startswith("needs") else 1 if e.startswith("caveat") else 3 if e.startswith("sources") else 2


def upgrade_markup(report: Report | None, *, busy: str = "", width: int = 0) -> str:
    out = []
    if busy:
        out.append(f"[$accent]{escape(busy)}[/]")
    u = report.upgrade if report is not None else None
    if not u:
        out.append("[b]Upgrade[/] [$text-muted]not assessed yet[/]" if busy else
                   "[b]Upgrade[/] [$text-muted]not assessed (no failure, or upstream lookup not available)[/]")
        return "\n".join(out)
    style = VERDICT_STYLES.get(u.verdict, "$warning")
    target = f" (to {escape(u.target_version)})" if u.target_version else ""
    words = u.verdict_words
    out.append(f"[{style} b]{escape(words[:1].upper() + words[1:])}[/]{target}")
    if u.overwrites:
        out.extend(wrapped("would overwrite: " + ", ".join(u.overwrites), width, style=lambda t: f"[$warning]{t}[/]"))
    for e in sorted(u.evidence, key=_evidence_order):
        out.extend(wrapped(e, width, style=lambda t: f"[$text-muted]{t}[/]"))
    return "\n".join(out)


def hit_markup(h: UpstreamHit | None) -> str:
    if h is None:
        return ""
    kind = "PR" if h.kind == "pr" else "issue"
    out = [f"[b]#{h.number}[/] {escape(h.title)}",
           f"  {kind} · {escape(h.state)} · score {h.score}"
           + (f" · cached {escape(h.age)} ago" if h.age else "")
           + (" · recorded" if h.recorded else ""),
           f"  [b]why[/] {escape(h.why)}"]
    if h.fixed_by:
        fixed_in = f", in vLLM {escape(h.fixed_in)}" if h.fixed_in else ", not in a release yet"
        out.append(f"  [$success b]fixed by[/] {escape(h.fixed_by_repo or '')}#{h.fixed_by}{fixed_in}")
    out.append(f"  {escape(h.url)}  [$text-muted](c copies it)[/]")
    return "\n".join(out)


class UpstreamPane(Vertical):
    BINDINGS = [
        Binding("c", "copy_url", "Copy URL"),
        Binding("s", "research", "Search again", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.hits: list[UpstreamHit] = []

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="upgrade-box"):
            yield Static("", id="upgrade-text")
        yield Static("", id="hits-title")
        yield DataTable(id="hits", cursor_type="row")
        yield Static("", id="hit-detail")

    def show(self, report: Report | None, *, busy: str = "", offline: bool = False) -> None:
        self._shown = (report, busy, offline)
        width = self._wrap_width()
        self.query_one("#upgrade-text", Static).update(upgrade_markup(report, busy=busy, width=width))
        hits = list((report.upstream or []) if report is not None else [])
        queries = getattr(report, "upstream_queries", None) or []
        title = self.query_one("#hits-title", Static)
        if hits:
            recorded = any(h.recorded for h in hits)
            title.update(f"[b]Upstream[/] {len(hits)} hit(s), best first"
                         + (" [$warning]· recorded answers (the demo does not go online)[/]" if recorded else "")
                         + (f" [$text-muted]· {len(queries)} searches[/]" if queries else ""))
        elif report is not None and report.upstream is not None:
            title.update("[b]Upstream[/] no matching issues or pull requests"
                         + (" [$text-muted](offline: only the cache was read)[/]" if offline else ""))
        else:
            title.update("[b]Upstream[/] [$text-muted]" + ("searching…" if busy else "not searched") + "[/]")
        if hits == self.hits and self.query_one("#hits", DataTable).row_count:
            return
        self.hits = hits
        table = self.query_one("#hits", DataTable)
        table.clear(columns=True)
        table.add_columns("#", "kind", "state", "score", "title")
        for h in hits:
            table.add_row(str(h.number), "PR" if h.kind == "pr" else "issue",
                          Text(h.state, style=STATE_STYLE.get(h.state, "")), f"{h.score}", h.title)
        table.display = bool(hits)
        self._detail(0 if hits else None)

    def _wrap_width(self) -> int:
        box = self.query_one("#upgrade-box")
        return box.content_region.width - box.styles.scrollbar_size_vertical - 1  # as if its scrollbar showed

    def on_resize(self) -> None:
        shown = getattr(self, "_shown", None)
        if shown is not None:
            report, busy, _offline = shown
            width = self._wrap_width()
            self.query_one("#upgrade-text", Static).update(upgrade_markup(report, busy=busy, width=width))

    def _detail(self, row: int | None) -> None:
        h = self.hits[row] if row is not None and 0 <= row < len(self.hits) else None
        self.query_one("#hit-detail", Static).update(hit_markup(h))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "hits":
            self._detail(event.cursor_row)

    @property
    def selected(self) -> UpstreamHit | None:
        table = self.query_one("#hits", DataTable)
        if not self.hits:
            return None
        return self.hits[min(max(table.cursor_row, 0), len(self.hits) - 1)]

    def action_copy_url(self) -> None:
        h = self.selected
        if h is None or not h.url:
            self.app.notify("no hit selected", severity="warning")
            return
        self.app.copy_to_clipboard(h.url)
        self.app.notify(f"copied {h.url}", title="Clipboard (OSC 52)")

    def action_research(self) -> None:
        self.app.action_reprobe()  # type: ignore[attr-defined]
