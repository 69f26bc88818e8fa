"""Modal screens: help, a one-line prompt, a picker, and the "which log?" screen of a bare `triage`."""

from __future__ import annotations

from typing import Any

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Markdown, OptionList, Static
from textual.widgets.option_list import Option

from triage.tui.markup import escape  # cleaned of terminal control, markup escaped


HELP = """\
**triage: keys** · everything is reachable from the keyboard · **ctrl+p** opens the command palette

| key | does |
|---|---|
| **1** **2** **3** **4** | Diagnosis · Machine · Upstream · Fix |
| **tab** / **shift+tab** | move between parts of a view |
| **?** or **f1** | this help (**escape** closes it) |
| **q** **ctrl+c** **ctrl+q** | quit (press it twice while vLLM is still writing to the pipe) |
| **ctrl+p** | command palette (also: open another log) |
| **P** | preflight: will a `vllm serve ...` you type fail on this machine? (before launch) |

**Diagnosis**: **e** / **E** next / previous evidence line · **/** search the log · **n** / **N** next /
previous match · **]** / **[** next / previous finding · **w** whole / short lines · **↑↓ j k g G**
move in the log.

**Machine**: **a** add a host (probe it over SSH and compare) · **r** probe again.

**Upstream**: **↑↓** choose a hit · **c** copy its URL (OSC 52: reaches your local clipboard over SSH) ·
**s** search again.

**Fix**: **enter** start / continue · **y** run the shown command · **s** skip it · **t** run it in
the terminal with the app suspended (password prompts) · **D** dry run (shows every step, runs
nothing) · **p** another playbook · **u** undo what the playbook changed.

The mouse is off so that your terminal's own selection and copy work (`--mouse` turns it on).
Ctrl+C quits triage only: it never reaches vLLM's process group. `NO_COLOR=1` turns colours off.
"""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Markdown(HELP)

    def action_dismiss(self) -> None:  # type: ignore[override]
        self.dismiss(None)


class PromptScreen(ModalScreen[str | None]):
    """One line of input; Enter gives it, Escape gives None."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, placeholder: str = "", value: str = "") -> None:
        super().__init__()
        self.title_text, self.placeholder, self.value = title, placeholder, value

    def compose(self) -> ComposeResult:
        with Vertical(id="prompt-box"):
            yield Static(f"[b]{escape(self.title_text)}[/]")
            yield Input(value=self.value, placeholder=self.placeholder, id="prompt-input")
            yield Static("[$text-muted]enter: ok · escape: cancel[/]")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value.strip() or None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class PickScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, items: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text, self.items = title, items

    def compose(self) -> ComposeResult:
        with Vertical(id="pick-box"):
            yield Static(f"[b]{escape(self.title_text)}[/]")
            yield OptionList(*[Option(f"{escape(k)}  [$text-muted]{escape(t)}[/]", id=k) for k, t in self.items],
                             id="pick-list")

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


class OpenLogScreen(ModalScreen[str | None]):
    """`triage` with no log: type a path, or take one of the vLLM logs found on this machine
    (containers' logs, common files). Finding them runs in a worker."""

    BINDINGS = [Binding("escape", "cancel", "Quit")]

    def __init__(self, finder: Any = None) -> None:
        super().__init__()
        self.finder = finder
        self.found: list[Any] = []
        self.status_text = ""

    def compose(self) -> ComposeResult:
        with Vertical(id="open-box"):
            yield Static("[b]Which vLLM log?[/] Type its path, or pick one found on this machine.")
            yield Input(placeholder="/path/to/vllm.log", id="open-path")
            yield Static("[$text-muted]looking for vLLM logs (docker containers, common files)…[/]", id="open-status")
            yield OptionList(id="open-list")
            yield Static("[$text-muted]enter: open · tab: the list · escape: quit[/]")

    def on_mount(self) -> None:
        self.query_one("#open-list", OptionList).display = False
        self._find()

    @work(thread=True, exclusive=True, group="find-logs", exit_on_error=False)
    def _find(self) -> None:
        from triage.tui import findlogs

        try:
            found = (self.finder or findlogs.find)()
        except Exception as exc:  # finding candidates is a convenience; never fatal
            found = []
            self.app.call_from_thread(self._status, f"could not look for logs: {exc}")
        self.app.call_from_thread(self._show, found)

    def _status(self, text: str) -> None:
        self.query_one("#open-status", Static).update(f"[$text-muted]{escape(text)}[/]")
        self.status_text = text

    def _show(self, found: list[Any]) -> None:
        self.found = found
        ol = self.query_one("#open-list", OptionList)
        ol.clear_options()
        if not found:
            self._status("no vLLM log found here; type a path")
            return
        ol.add_options([Option(f"{escape(c.label)}  [$text-muted]{escape(c.detail)}[/]", id=str(i))
                        for i, c in enumerate(found)])
        ol.highlighted = 0
        ol.display = True
        self._status(f"{len(found)} found, newest first")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        path = event.value.strip()
        if path:
            # A typo keeps the dialog open with what is wrong; only a readable log closes it.
            import os

            from triage.logread.check import input_problem

            full = os.path.expanduser(path)
            if os.path.isdir(full):
                self._status(f"{path} is a folder: type the path of a log file")
            elif not os.path.isfile(full):
                self._status(f"no such file: {path}")
            elif not os.access(full, os.R_OK):
                self._status(f"cannot read {path}: permission denied")
            else:
                problem = input_problem(full)
                if problem:
                    self._status(problem)
                else:
                    self.dismiss(full)
        elif self.found:
            self._take(0)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._take(int(event.option.id or 0))

    def _take(self, i: int) -> None:
        cand = self.found[i]
        self._status(f"reading {cand.label}…")
        self._materialise(cand)

    @work(thread=True, exclusive=True, group="find-logs", exit_on_error=False)
    def _materialise(self, cand: Any) -> None:
        try:
            path = cand.fetch()
        except (OSError, RuntimeError) as exc:
            self.app.call_from_thread(self._status, f"cannot read {cand.label}: {exc}")
            return
        self.app.call_from_thread(self.dismiss, path)

    def action_cancel(self) -> None:
        self.dismiss(None)
