"""Diagnosis: the root cause, its confidence and facts, the other findings, and the evidence in the log."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from triage.model import Diagnosis, Report
from triage.playbooks.wording import human_value
from triage.tui.logview import LogView
from triage.tui.markup import escape, set_text  # cleaned of terminal control, markup escaped
from triage.tui.text import wrapped


def _fact_value(v: Any) -> str:
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_fact_value(x)}" for k, x in v.items()) if v else "none"
    return str(v)


def diagnosis_markup(report: Report | None, index: int, *, live: bool, width: int = 0) -> str:
    """The text of the upper part: the chosen diagnosis, then the others, then harmless notes."""
    if report is None:
        return "[$text-muted]Reading the log…[/]"
    if not report.diagnoses:
        note = ("No failure found so far; vLLM is still writing, so this may change." if live
                else "No failure found in this log.")
        out = [f"[$success b]{note}[/]"]
        if report.notes:
            out.append("Recognised, harmless: " + "; ".join(escape(n.title) for n in report.notes))
        return "\n".join(out)
    index = max(0, min(index, len(report.diagnoses) - 1))
    d: Diagnosis = report.diagnoses[index]
    if live and index == 0 and d.signature == "generic.root_cause_missing":
        # The wrapper lines come first; the worker's own traceback usually follows them.
        return ("[$warning b]vLLM reported a failure; waiting for its cause[/]\n"
                "The error that caused it usually follows in the next lines of the log (a traceback may still be "
                "arriving). The diagnosis updates as vLLM writes.")
    head = "ROOT CAUSE" if index == 0 else f"ALSO FOUND ({index + 1} of {len(report.diagnoses)})"
    style = "$error" if index == 0 else "$warning"
    out = [f"[{style} b]{head}[/]  [$text-muted]{escape(d.category)} · {escape(d.signature)} · "
           f"confidence {d.confidence:.0%}[/]",
           f"[b]{escape(d.title)}[/]"]
    # The fix first: on an 80x24 screen it must show without scrolling; the why follows.
    if d.fix.summary:
        out.append(f"[$success b]Fix[/] {escape(d.fix.summary)}")
    if d.fix.playbook and index == 0:
        out.append(f"[$success b]Guided fix[/] press [b]4[/] (playbook {escape(d.fix.playbook)})")
    if d.explanation:
        out.append("[b]Why[/]")
        for line in d.explanation:
            out.extend(wrapped(line, width))
    facts = {k: human_value(k, v) for k, v in d.facts.items() if k != "explanation" and v not in (None, "", [], {})}
    if "cuda_driver_version" in facts:
        facts.pop("found", None)  # torch's raw form of the same number (12020 for 12.2)
    if facts:
        out.append("[b]Facts[/]")
        width = min(24, max(len(k) for k in facts))
        for k, v in facts.items():
            val = _fact_value(v)
            if len(val) > 300:
                val = val[:300] + " …"
            out.append(f"  [$text-muted]{escape(k):<{width}}[/] {escape(val)}")
    others = [(i, o) for i, o in enumerate(report.diagnoses) if i != index]
    if others:
        out.append("[b]Other findings[/] ([b]][/] / [b][[/] to show)")
        for i, o in others:
            tag = "root cause" if i == 0 else f"{o.confidence:.0%}"
            out.append(f"  {i + 1}. {escape(o.title)} [$text-muted]({escape(o.category)}, {tag})[/]")
    if report.notes:
        out.append("[b]Harmless[/] (recognised, not the cause): " + "; ".join(escape(n.title) for n in report.notes))
    for w in report.warnings:
        out.append(f"[$text-muted]note: {escape(w)}[/]")
    return "\n".join(out)


class DiagnosisPane(Vertical):
    BINDINGS = [
        Binding("e", "evidence(1)", "Next evidence"),
        Binding("E", "evidence(-1)", "Prev evidence", show=False),
        Binding("slash", "search", "Search"),
        Binding("n", "search_again(1)", "Next match", show=False),
        Binding("N", "search_again(-1)", "Prev match", show=False),
        Binding("right_square_bracket", "finding(1)", "Next finding", show=False),
        Binding("left_square_bracket", "finding(-1)", "Prev finding", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.report: Report | None = None
        self.index = 0
        self.live = False
        self.last_search = ""
        self.total_lines: int | None = None
        self._rendered: tuple[int, int, bool, int] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diag-body"):
            yield Static(diagnosis_markup(None, 0, live=False), id="diag-text")
        yield Static("", id="log-title")
        yield LogView(id="log")

    @property
    def log_view(self) -> LogView:
        return self.query_one(LogView)

    def show(self, report: Report | None, *, live: bool) -> None:
        same_top = (self.report is not None and report is not None and self.report.diagnoses and report.diagnoses
                    and self.report.diagnoses[0].signature == report.diagnoses[0].signature)
        if not same_top:
            self.index = 0
        self.report, self.live = report, live
        self._render_text()
        self._mark_evidence()

    def set_log_lines(self, lines: list[tuple[int, str]], total: int | None = None) -> None:
        """`total`: how many lines the log has; fewer held means the view is partial and says so."""
        self.total_lines = total
        self.log_view.set_lines(lines, self._evidence_lines())
        self._title()

    def _evidence_lines(self) -> list[int]:
        if self.report is None or not self.report.diagnoses:
            return []
        d = self.report.diagnoses[min(self.index, len(self.report.diagnoses) - 1)]
        return [e.line for e in d.evidence]

    def _mark_evidence(self) -> None:
        lv = self.log_view
        had = bool(lv.evidence)
        lv.set_lines(lv.lines, self._evidence_lines())
        if not had and lv.evidence:
            lv.goto_line(lv.evidence[0])
        self._title()

    def _render_text(self) -> None:
        body = self.query_one("#diag-body")
        width = body.content_region.width - body.styles.scrollbar_size_vertical  # as if its scrollbar showed
        key = (id(self.report), self.index, self.live, width)
        if key == self._rendered:
            return  # a view switch resizes the pane: the same text need not be wrapped again
        self._rendered = key
        set_text(self.query_one("#diag-text", Static), diagnosis_markup(self.report, self.index, live=self.live,
                                                                        width=width))

    def on_resize(self) -> None:
        self._render_text()

    def _title(self) -> None:
        lv = self.log_view
        if not lv.lines:
            set_text(self.query_one("#log-title", Static), "[b]Log[/]", layout=False)
            return
        no = lv.cursor_line_no
        ev = lv.evidence
        pos = f" · evidence {ev.index(no) + 1}/{len(ev)}" if no in ev else (f" · {len(ev)} evidence" if ev else "")
        search = f" · search: {escape(lv.query_text)}" if lv.query_text else ""
        held, total = len(lv.lines), self.total_lines
        partial = ""
        if total and held < total:
            partial = (f" · [$warning]error-like lines only ({held:,} of {total:,})"
                       + (" until the input ends" if self.live else "") + "[/]")
        set_text(self.query_one("#log-title", Static),
                 f"[b]Log[/] line {no}{pos}{search}{partial}  [$text-muted]e/E evidence · / search · w "
                 + ("whole lines" if lv.compact else "short lines") + "[/]", layout=False)

    def on_log_view_cursor_moved(self, _msg: LogView.CursorMoved) -> None:
        self._title()

    # --- actions ---

    def action_evidence(self, step: int) -> None:
        if self.log_view.jump_evidence(step) is None:
            self.app.notify("no evidence lines for this finding", severity="warning")
        self._title()

    def action_search(self) -> None:
        from triage.tui.dialogs import PromptScreen

        def done(text: str | None) -> None:
            if text:
                self.last_search = text
                if self.log_view.search(text, 1, from_cursor=True) is None:
                    self.app.notify(f"not found: {text}" + self._partial_note(), severity="warning")
                self._title()

        self.app.push_screen(PromptScreen("Search the log", "text to find (case-insensitive)", self.last_search), done)

    def action_search_again(self, step: int) -> None:
        if not self.last_search:
            self.action_search()
            return
        if self.log_view.search(self.last_search, step) is None:
            self.app.notify(f"not found: {self.last_search}" + self._partial_note(), severity="warning")
        self._title()

    def _partial_note(self) -> str:
        total = self.total_lines
        if total and len(self.log_view.lines) < total:
            return f" (in the {len(self.log_view.lines):,} error-like lines held of {total:,})"
        return ""

    def action_finding(self, step: int) -> None:
        if self.report is None or len(self.report.diagnoses) < 2:
            self.app.notify("there is only one finding", severity="information")
            return
        self.index = (self.index + step) % len(self.report.diagnoses)
        self._render_text()
        lv = self.log_view
        lv.set_lines(lv.lines, self._evidence_lines())
        if lv.evidence:
            lv.goto_line(lv.evidence[0])
        self.query_one("#diag-body").scroll_home(animate=False)
        self._title()
