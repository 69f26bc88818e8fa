"""Fix: the playbook of the diagnosis, step by step.

Each command is shown in full before it runs; the operator confirms (y / Enter) or skips (s); output
streams into the pane; commands that need the terminal (sudo, editors, or `t` on any command) run with
the app suspended; check results and the outcome are shown; `u` offers to undo what was applied.
The engine (triage.playbooks, through triage.tui.fixflow) does the walking; this pane only shows and
answers. Every engine call that may run a command happens in a thread worker.
"""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Log, OptionList, Static
from textual.widgets.option_list import Option

from triage.tui import fixflow
from triage.playbooks.wording import outcome_words, status_words
from triage.tui.focus import OwnFocusStyle
from triage.tui.markup import escape  # cleaned of terminal control, markup escaped
from triage.tui.text import wrapped

class _Split:
    """Writes a first line to the head and the rest to the intro area below it."""

    def __init__(self, head: Static, body: Static) -> None:
        self.head, self.body = head, body

    def update(self, text: str) -> None:
        first, _, rest = text.partition("\n")
        self.head.update(first)
        self.body.update(rest)


RESULT_STYLE = {"pass": "$success", "success": "$success", "fail": "$error", "failure": "$error",
                "unknown": "$warning", "declined": "$warning", "not-run": "$text-muted"}


def view_markup(v: Any, n: int, width: int = 0) -> str:
    """One step as the operator reads it: title, text, the exact command, the change, the result;
    wrapped to `width` at word boundaries, continuation lines under their own indent."""
    ind = "   "
    out = [f"[b]{n}. {escape(v.title)}[/]"]
    for line in (v.text or "").splitlines():
        out.extend(wrapped(line, width, indent=ind, hang="  " if line.lstrip().startswith("- ") else ""))
    accent = lambda t: f"[$accent b]{t}[/]"  # noqa: E731
    if v.argv:
        where = f" (on {v.where})" if v.where != "this machine" else ""
        out.extend(wrapped("$ " + fixflow.show_argv(v.argv) + where, width, indent=ind, style=accent))
    for line in v.lines:
        out.extend(wrapped(line, width, indent=ind))
    for cmd in v.commands:
        out.extend(wrapped("$ " + fixflow.show_argv(cmd), width, indent=ind, style=accent))
    for line in (v.diff or "").rstrip("\n").splitlines():
        style = "$success" if line.startswith("+") else "$error" if line.startswith("-") else "$text-muted"
        out.append(f"{ind}[{style}]{escape(line)}[/]")
    r = v.result
    if r is not None:
        head = r.message if getattr(r, "said", False) and r.message else status_words(r.status) + (f": {r.message}" if r.message else "")
        colour = RESULT_STYLE.get(r.status, "$text-muted")
        got = wrapped(head, width - 2, indent="", hang="  ")
        out.append(f"{ind}[{colour} b]→[/] {got[0]}")
        out.extend(f"{ind}  {g}" for g in got[1:])
        tail = ((r.stdout or "") + (r.stderr or "")).strip().splitlines()[-6:]
        out.extend(f"     [$text-muted]{escape(t)}[/]" for t in tail)
    if v.error:
        out.append(f"{ind}[$error]! {escape(v.error)}[/]")
    return "\n".join(out)


HINTS = {
    "ack": "[b]enter[/] continue",
    "confirm": "[b]y[/]/[b]enter[/] run it · [b]s[/] skip · [b]t[/] run in the terminal (app suspended)",
    "choice": "[b]↑↓[/] choose · [b]enter[/] select",
    "input": "type, then [b]enter[/]",
}


class FixPane(OwnFocusStyle, Vertical, can_focus=True):
    BINDINGS = [
        Binding("enter", "go", "Start / continue", show=True),
        Binding("y", "confirm", "Yes, run", show=False),
        Binding("s", "skip", "Skip", show=False),
        Binding("t", "terminal", "Run in terminal", show=False),
        Binding("D", "dry_run", "Dry run", show=False),
        Binding("p", "pick", "Other playbook", show=False),
        Binding("u", "undo", "Undo", show=False),
    ]

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.report: Any = None
        self.plan: fixflow.Plan | None = None
        self.view: Any = None
        self.n = 0
        self.running = False
        self.finished = False
        self.playbook_id: str | None = None
        self.dry_run = False

    def compose(self) -> ComposeResult:
        yield Static("", id="fix-head")
        with VerticalScroll(id="fix-steps"):
            yield Static("", id="fix-intro")
        yield OptionList(id="fix-choices")
        yield Input(id="fix-input")
        yield Log(id="fix-output", max_lines=2000)
        yield Static("", id="fix-keys")

    def on_mount(self) -> None:
        for wid in ("#fix-choices", "#fix-input", "#fix-output"):
            self.query_one(wid).display = False
        self._intro()

    # --- showing ---

    def show(self, report: Any) -> None:
        self.report = report
        if self.plan is None and not self.running:
            self._intro()

    def _intro(self) -> None:
        head = _Split(self.query_one("#fix-head", Static), self.query_one("#fix-intro", Static))
        r = self.report
        if r is None:
            head.update("[b]Guided fix[/] [$text-muted]waiting for the diagnosis…[/]")
            self._keys("")
            return
        if not r.diagnoses and not self.playbook_id:
            head.update("[b]Guided fix[/] nothing to fix: no failure was found ([b]p[/] picks a playbook anyway)")
            self._keys("[b]p[/] pick a playbook")
            return
        d = r.diagnoses[0] if r.diagnoses else None
        pid = self.playbook_id or (d.fix.playbook if d else None) or "the playbook for this category"
        live = "" if getattr(r, "input_complete", True) else \
            "\n[$warning]The input has not ended: the diagnosis may still change.[/]"
        head.update(f"[b]Guided fix[/] playbook [b]{escape(str(pid))}[/]"
                    + (f"\nfor: {escape(d.title)}" if d else "")
                    + "\nEvery command is shown in full before it runs, and runs only when you say so. "
                    "Changes are recorded so that they can be undone." + live)
        self._keys("[b]enter[/] start · [b]D[/] dry run (runs nothing) · [b]p[/] other playbook")

    def _keys(self, text: str) -> None:
        self.query_one("#fix-keys", Static).update(text)

    def _add_step(self, v: Any) -> None:
        self.n += 1
        box = self.query_one("#fix-steps", VerticalScroll)
        # As if the scrollbar showed already: it appears as steps accumulate, and a step wrapped
        # before that would then overflow.
        width = box.content_region.width - box.styles.scrollbar_size_vertical - 1
        box.mount(Static(view_markup(v, self.n, width), classes="fix-step"))
        box.scroll_end(animate=False)

    def _present(self, v: Any) -> None:
        """The view waiting for an answer (None: the playbook ended)."""
        self.view = v
        self.running = False
        choices = self.query_one("#fix-choices", OptionList)
        inp = self.query_one("#fix-input", Input)
        choices.display = False
        inp.display = False
        if v is None:
            self._finished()
            return
        self._add_step(v)
        if v.needs == "choice":
            choices.clear_options()
            choices.add_options([Option(f"{label}" + ("  (default)" if key == v.default else ""), id=key)
                                 for key, label in v.choices])
            keys = [k for k, _l in v.choices]
            choices.highlighted = keys.index(v.default) if v.default in keys else 0
            choices.display = True
            choices.focus()
        elif v.needs == "input":
            inp.value = str(v.default or "")
            inp.placeholder = "your answer"
            inp.display = True
            inp.focus()
        else:
            self.focus()
        hint = HINTS.get(v.needs or "", "")
        if v.needs == "confirm" and fixflow.needs_terminal(v.argv):
            hint += " · [$warning]this command needs the terminal: it will run with the app suspended[/]"
        self._keys(hint)

    def _finished(self) -> None:
        self.finished = True
        s = self.plan.session if self.plan else None
        outcome = getattr(s, "outcome", None)
        hint = s.outcome_hint() if s is not None and hasattr(s, "outcome_hint") else ""
        rec = getattr(s, "recorder", None)
        root = getattr(rec, "root", None)
        changed = getattr(rec, "changed_anything", None)
        changed = changed() if callable(changed) else bool(changed)
        style = "$warning" if str(outcome).startswith("manual:") else "$success"
        lines = [f"[{style} b]Result: {escape(outcome_words(outcome))}[/]"]
        if hint:
            lines.append(escape(hint))
        if root:
            lines.append(f"[$text-muted]transcript: {escape(str(root))}[/]")
        if changed:
            lines.append("Changes were made: press [b]u[/] to undo them (`triage undo` does the same).")
        box = self.query_one("#fix-steps", VerticalScroll)
        box.mount(Static("\n".join(lines), classes="fix-outcome"))
        box.scroll_end(animate=False)
        self._keys(("[b]u[/] undo · " if changed else "") + "[b]enter[/] start again · [b]p[/] other playbook")
        self.app.refresh_bindings()

    # --- the walk (engine calls happen in a thread) ---

    def _start(self, *, dry_run: bool) -> None:
        if self.running:
            return
        # The demo's machine is a recording: walking its fix for real would change this machine.
        self.dry_run = dry_run or getattr(self.app.opts, "demo", False)
        self.finished = False
        self.n = 0
        self.query_one("#fix-steps", VerticalScroll).remove_children(".fix-step, .fix-answer, .fix-outcome")
        self.query_one("#fix-intro", Static).update("")
        out = self.query_one("#fix-output", Log)
        out.clear()
        out.display = False
        self.running = True
        self._keys("[$accent]working…[/]")
        self._walk(None, first=True)

    def _line(self, line: str) -> None:
        out = self.query_one("#fix-output", Log)
        out.display = True
        out.write_line(line)

    @work(thread=True, exclusive=True, group="fix", exit_on_error=False)
    def _walk(self, answer: Any, first: bool = False) -> None:
        app = self.app
        try:
            if first:
                opts = app.opts  # type: ignore[attr-defined]
                self.plan = fixflow.plan(
                    self.report, playbook_id=self.playbook_id, log_path=app.log_path,  # type: ignore[attr-defined]
                    host=opts.host, python=opts.python, offline=opts.offline, dry_run=self.dry_run,
                    on_line=lambda line: app.call_from_thread(self._line, line))
                title = f"[b]Guided fix[/]: {escape(self.plan.title)} [$text-muted](playbook {escape(self.plan.playbook_id)})[/]" + (
                    "  [$warning]dry run: nothing is run or changed[/]" if self.dry_run else "")
                app.call_from_thread(self.query_one("#fix-head", Static).update, title)
                view = self.plan.session.start()
            else:
                assert self.plan is not None
                view = self.plan.session.advance(answer)
            view = self._auto(view)
        except fixflow.Unavailable as exc:
            app.call_from_thread(self._unavailable, str(exc))
            return
        app.call_from_thread(self._present, view)

    def _auto(self, view: Any) -> Any:
        """Views that need no answer are shown and passed (check results, outcomes of runs)."""
        assert self.plan is not None
        guard = 0
        while view is not None and view.needs is None and guard < 500:
            self.app.call_from_thread(self._add_step, view)
            view = self.plan.session.advance(None)
            guard += 1
        return view

    def _unavailable(self, why: str) -> None:
        self.running = False
        self.plan = None
        self.query_one("#fix-head", Static).update("[b]Guided fix[/]")
        self.query_one("#fix-intro", Static).update(f"[$warning]{escape(why)}[/]")
        self._keys("[b]p[/] pick a playbook")

    def _answer(self, answer: Any) -> None:
        if self.running or self.view is None:
            return
        v = self.view
        echo = None
        if v.needs == "choice":
            echo = next((label for key, label in v.choices if key == answer), str(answer))
        elif v.needs == "confirm":
            echo = "yes, run it" if answer else "skipped"
        elif v.needs == "input":
            echo = str(answer) if answer else "(no answer)"
        if echo:
            box = self.query_one("#fix-steps", VerticalScroll)
            box.mount(Static(f"   [$accent]you: {escape(echo)}[/]", classes="fix-answer"))
            box.scroll_end(animate=False)
        self.running = True
        self._keys("[$accent]working…[/]")
        self.query_one("#fix-choices", OptionList).display = False
        self.query_one("#fix-input", Input).display = False
        self._walk(answer)

    # --- keys ---

    def action_go(self) -> None:
        if self.running:
            return
        if self.plan is None or self.finished:
            self._start(dry_run=False)
            return
        v = self.view
        if v is None:
            return
        if v.needs == "confirm":
            self.action_confirm()
        elif v.needs == "ack":
            self._answer(None)
        elif v.needs == "choice":
            ol = self.query_one("#fix-choices", OptionList)
            if ol.highlighted is not None:
                self._answer(ol.get_option_at_index(ol.highlighted).id)

    def action_confirm(self) -> None:
        v = self.view
        if self.running or v is None or v.needs != "confirm":
            return
        if fixflow.needs_terminal(v.argv):
            self.action_terminal()
            return
        self._answer(True)

    def action_skip(self) -> None:
        v = self.view
        if self.running or v is None:
            return
        if v.needs == "confirm":
            self._answer(False)
        elif v.needs in ("ack", "input"):
            self._answer(None if v.needs == "ack" else "")

    def action_terminal(self) -> None:
        """Run the confirmed command with the terminal handed to it (password prompts, pagers)."""
        v = self.view
        if self.running or v is None or v.needs != "confirm" or self.plan is None:
            return
        runner = self.plan.runner
        if not runner.local:
            self.app.notify("steps on a remote host cannot take over this terminal; use y", severity="warning")
            return
        self.running = True
        runner.terminal = True
        try:
            with self.app.suspend():
                print(f"\n$ {fixflow.show_argv(v.argv or [])}\n(triage: the app is suspended while this runs)\n",
                      flush=True)
                view = self.plan.session.advance(True)
        except Exception as exc:  # SuspendNotSupported (textual-web, tests): run it the streaming way
            runner.terminal = False
            self.running = False
            self.app.notify(f"cannot hand over the terminal here ({type(exc).__name__}); running it in the pane")
            self._answer(True)
            return
        finally:
            runner.terminal = False
        self._continue(view)

    @work(thread=True, exclusive=True, group="fix", exit_on_error=False)
    def _continue(self, view: Any) -> None:
        view = self._auto(view)
        self.app.call_from_thread(self._present, view)

    def action_dry_run(self) -> None:
        if not self.running:
            self._start(dry_run=True)

    def action_pick(self) -> None:
        from triage.tui.dialogs import PickScreen

        items = fixflow.playbooks()
        if not items:
            self.app.notify("no playbooks available", severity="warning")
            return

        def chosen(pid: str | None) -> None:
            if pid:
                self.playbook_id = pid
                self.plan = None
                self._start(dry_run=False)

        self.app.push_screen(PickScreen("Choose a playbook", items), chosen)

    def action_undo(self) -> None:
        if self.running:
            return
        self._undo()

    @work(thread=True, exclusive=True, group="fix", exit_on_error=False)
    def _undo(self) -> None:
        ok, lines = fixflow.undo_last()
        text = ("[$success b]Undone[/]" if ok else "[$warning b]Undo[/]") + "\n" + "\n".join(
            f"  {escape(x)}" for x in lines)

        def show() -> None:
            box = self.query_one("#fix-steps", VerticalScroll)
            box.mount(Static(text, classes="fix-step"))
            box.scroll_end(animate=False)

        self.app.call_from_thread(show)

    def on_unmount(self) -> None:
        # Quitting mid-command: stop it, so that leaving the app never waits for a long install.
        proc = self.plan.runner.proc if self.plan is not None else None
        if proc is not None and proc.poll() is None:
            proc.kill()

    # --- widgets' own events ---

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list.id == "fix-choices":
            event.stop()
            self._answer(event.option.id)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "fix-input":
            event.stop()
            self._answer(event.value)
