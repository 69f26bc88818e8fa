"""The Textual application: one main screen with four views (Diagnosis, Machine, Upstream, Fix),
a status line (input state, work in progress) and the keys of the view (triage.tui.keysline); help
and prompts are modal screens.

Data flow: the log is read in a thread (triage.tui.intake.Reader, started by the launcher before
Textual is imported); each new piece of a live pipe is diagnosed again from a snapshot (quick stage:
log and saved snapshot only); once the input ends (or goes quiet with a failure in it) the full stage
probes and searches upstream. Results come back to the UI thread with call_from_thread and every view
re-renders from the latest Report.

The first frame holds the diagnosis and nothing else costly: when the reader is done by mount time its
report is shown before the first paint; the other views, the log view's lines and the full stage
(probes, upstream, their imports) come after that paint.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from typing import Any, Callable, Iterable

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Static

from triage.logread import Scan
from triage.logread.source import InputError
from triage.model import Report
from triage.tui import intake
from triage.tui.intake import LiveLog, Options, Reader
from triage.tui.keysline import KeysLine
from triage.tui.markup import escape, set_text  # cleaned of terminal control, markup escaped
from triage.tui.panes.diagnosis import DiagnosisPane

VIEWS = [("diagnosis", "Diagnosis"), ("machine", "Machine"), ("upstream", "Upstream"), ("fix", "Fix")]
TICK_S = 0.25  # how often a live pipe is re-diagnosed (at most)
QUIET_S = 3.0  # a live pipe silent this long, with a failure in it: probe and search anyway


class TriageApp(App[int]):
    CSS_PATH = "app.tcss"
    TITLE = "triage"
    BINDINGS = [
        Binding("1", "view('diagnosis')", "Diagnosis", show=False),
        Binding("2", "view('machine')", "Machine", show=False),
        Binding("3", "view('upstream')", "Upstream", show=False),
        Binding("4", "view('fix')", "Fix", show=False),
        Binding("question_mark,f1", "help", "Help"),
        Binding("P", "preflight", "Preflight", show=False),
        Binding("q", "quit", "Quit"),
        # Ctrl+C and Ctrl+Q quit too, as in nvitop, htop and lazygit (Textual would only say "press ctrl+q").
        Binding("ctrl+c,ctrl+q", "quit", "Quit", show=False, priority=True),
    ]
    QUIT_AGAIN_S = 3.0  # while vLLM writes, a second quit key within this many seconds quits

    def __init__(
        self,
        opts: Options,
        *,
        pipe_fd: int | None = None,
        quick: Callable[[Options, Scan], Report] = intake.quick_report,
        full: Callable[[Options, Scan], Report] = intake.full_report,
        probe_host: Callable[[str], Any] | None = None,
        finder: Callable[[], list[Any]] | None = None,
        hosts: list[Any] | None = None,
        reader: Reader | None = None,
    ) -> None:
        super().__init__()
        self._reader = reader  # already reading (the launcher starts it before Textual is imported)
        self.opts = opts
        self.pipe_fd = pipe_fd
        self._quick_fn, self._full_fn = quick, full
        self._probe_host = probe_host
        self._finder = finder
        self.live: LiveLog | None = None
        self.report: Report | None = None
        self.full: Report | None = None
        self.hosts: list[Any] = list(hosts if hosts is not None else intake.load_hosts(opts.snapshot))
        self.busy: dict[str, str] = {}
        self.error: str | None = None
        self.first_diagnosis_at: float | None = None
        self.started_at = time.monotonic()
        self._fed_seen = -1
        self._last_feed_at = time.monotonic()
        self._full_started = False
        self._quick_running = False
        self._timer: Any = None
        self.current_view = "diagnosis"
        self._rest: asyncio.Event | None = None  # set once the views other than the diagnosis are mounted
        self._stale: set[str] = set()  # views not brought up to date with the latest report yet

    # --- layout ---

    def compose(self) -> ComposeResult:
        with Horizontal(id="nav-bar"):
            yield Static(self._nav_markup(), id="nav")
        with ContentSwitcher(initial="diagnosis", id="views"):
            yield DiagnosisPane(id="diagnosis")  # the other views are mounted after the first frame
        yield Static("", id="status")
        yield KeysLine()

    def _nav_markup(self) -> str:
        parts = []
        for i, (vid, label) in enumerate(VIEWS, 1):
            if vid == self.current_view:
                parts.append(f"[reverse b] {i} {label} [/]")
            else:
                parts.append(f" [b]{i}[/] {label} ")
        return "[b $accent]triage[/] " + "".join(parts)

    @property
    def log_path(self) -> str | None:
        src = self.opts.source
        return src if src and src != "-" else None

    def on_mount(self) -> None:
        self.query_one(DiagnosisPane).log_view.focus()
        self._status()
        self.call_after_refresh(self._after_first_frame)
        if self.opts.source is None:
            from triage.tui.dialogs import OpenLogScreen

            self.push_screen(OpenLogScreen(self._finder), self._opened)
        else:
            self._begin()

    def _after_first_frame(self) -> None:
        self.run_worker(self.mount_views(), group="views")

    async def mount_views(self) -> None:
        """Mount the Machine, Upstream and Fix views (once; callers wait until they are in)."""
        if self._rest is not None:
            await self._rest.wait()
            return
        self._rest = asyncio.Event()
        from triage.tui.panes.fix import FixPane
        from triage.tui.panes.machine import MachinePane
        from triage.tui.panes.upstream import UpstreamPane

        panes = [MachinePane(id="machine"), UpstreamPane(id="upstream"), FixPane(id="fix")]
        for pane in panes:
            pane.display = False  # the switcher hides only the children it had at its own mount
        try:
            await self.query_one("#views", ContentSwitcher).mount(*panes)
            self._rest.set()
            self._refresh_views()
        except NoMatches:  # the app closed while they were being mounted
            self._rest.set()
            return
        # Everything loaded so far lives as long as the app: out of the collector's full passes, which
        # would otherwise walk it all again (tens of milliseconds, every thread stopped) while a pipe streams.
        gc.freeze()

    @property
    def views_mounted(self) -> bool:
        return self._rest is not None and self._rest.is_set()

    def _opened(self, path: str | None) -> None:
        if not path:
            self.exit(0)
            return
        self.opts.source = path
        self._begin()

    def action_open_log(self) -> None:
        """Read another log in place of this one (the palette's "Open another log")."""
        if self.live is not None and self.live.is_pipe and not self.live.ended:
            self.notify("vLLM is still writing into the pipe: quit first to read another log", severity="warning")
            return
        from triage.tui.dialogs import OpenLogScreen

        def opened(path: str | None) -> None:
            if not path:
                return
            if self._timer is not None:
                self._timer.stop()
                self._timer = None
            self.opts.source, self.opts.demo = path, False
            self.live, self.report, self.full, self.error = None, None, None, None
            self._reader = None
            self._full_started, self._fed_seen, self.first_diagnosis_at = False, -1, None
            self.query_one(DiagnosisPane).set_log_lines([])
            self._refresh_views()
            self._begin()

        self.push_screen(OpenLogScreen(self._finder), opened)

    # --- reading the log ---

    def _begin(self) -> None:
        assert self.opts.source is not None
        reader, self._reader = self._reader, None
        if reader is None or reader.opts.source != self.opts.source:
            try:
                reader = Reader(self.opts, self.pipe_fd if self.opts.source == "-" else None, self._quick_fn)
            except InputError as exc:
                self.error = str(exc)
                self._status()
                self.query_one("#diag-text", Static).update(f"[$error b]Cannot read the log[/]: {escape(str(exc))}")
                return
        self.live = reader.live
        if reader.result is not None:
            self._input_ended(*reader.result)  # before the first paint: the first frame holds the diagnosis
        else:
            if self.live.is_pipe:
                self._timer = self.set_interval(TICK_S, self._tick)
            live = self.live
            reader.when_done(lambda *done: self._post(self._input_ended, *done) if self.live is live else None)
        self._status()

    # Work that may block for long (a pipe that never ends, an SSH probe) runs in daemon threads, not
    # in Textual's executor: quitting must never wait for it.
    def _daemon(self, fn: Callable[..., None], *args: Any) -> None:
        threading.Thread(target=fn, args=args, daemon=True).start()

    def _post(self, callback: Callable[..., Any], *args: Any) -> None:
        if not self.is_running:
            return
        try:
            self.call_from_thread(callback, *args)
        except RuntimeError:  # the app is closing
            pass

    def _tick(self) -> None:
        live = self.live
        if live is None or live.ended:
            return
        self._status()
        if live.fed != self._fed_seen:
            self._last_feed_at = time.monotonic()
            if not self._quick_running:
                self._fed_seen = live.fed
                self._quick_running = True
                self._quick(None)
        elif (not self._full_started and self.opts.needs_full_stage and self.report is not None
              and self.report.diagnoses and time.monotonic() - self._last_feed_at > QUIET_S):
            self._start_full(live.snapshot())

    def _input_ended(self, scan: Scan, report: Report | None, error: str | None) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if report is not None:
            self._quick_done(report, scan, True, None)
        else:
            self.error = f"the diagnosis failed: {error}"
            self._status()
        # The log view's lines (the whole file, read again) after the frame that shows the diagnosis.
        self.call_after_refresh(self._log_lines, scan)

    @work(thread=True, exclusive=True, group="quick", exit_on_error=False)
    def _quick(self, scan: Scan | None, final: bool = False) -> None:
        assert self.live is not None
        snap = scan if scan is not None else self.live.snapshot()
        report = self._quick_fn(self.opts, snap)
        lines = [(ln.no, ln.shown) for ln in snap.lines] if (self.live.is_pipe and not final) else None
        self.call_from_thread(self._quick_done, report, snap, final, lines)

    def _quick_done(self, report: Report, scan: Scan, final: bool, lines: list[tuple[int, str]] | None) -> None:
        self._quick_running = False
        if not final and self.live is not None and self.live.ended:
            return  # a live snapshot's report that came back after the final one
        if lines is not None:
            pane = self.query_one(DiagnosisPane)
            held = pane.log_view.lines
            if (len(held), held[-1][0] if held else None) != (len(lines), lines[-1][0] if lines else None):
                pane.set_log_lines(lines, scan.lines_total)
            else:
                pane.total_lines = scan.lines_total
        self._show(report)
        if final and self.opts.needs_full_stage:
            # Probes and the upstream search (and their imports) wait for the frame with the diagnosis.
            self.call_after_refresh(self._start_full, scan, True)

    @work(thread=True, exclusive=True, group="lines", exit_on_error=False)
    def _log_lines(self, scan: Scan) -> None:
        spool = self.live.spool_path if self.live is not None else None
        lines = intake.view_lines(scan, self.log_path or spool)
        self.call_from_thread(self.query_one(DiagnosisPane).set_log_lines, lines, scan.lines_total)

    # --- the full stage: probes and upstream ---

    def _start_full(self, scan: Scan, force: bool = False) -> None:
        if self._full_started and not force:
            return
        self._full_started = True
        what = []
        if self.opts.probe:
            what.append(f"probing {self.opts.host or 'this machine'}")
        if not self.opts.offline:
            what.append("searching upstream")
        self.busy["full"] = " and ".join(what) + "…"
        self._status()
        self._refresh_views()
        self._daemon(self._full, scan)

    def _full(self, scan: Scan) -> None:
        try:
            report = self._full_fn(self.opts, scan)
        except Exception as exc:  # probes and the network fail in many ways; the diagnosis stays
            self._post(self._full_failed, f"{type(exc).__name__}: {exc}")
            return
        self._post(self._full_done, report)

    def _full_failed(self, why: str) -> None:
        self.busy.pop("full", None)
        self.notify(f"probe/upstream failed: {why}", severity="error")
        self._status()
        self._refresh_views()

    def _full_done(self, report: Report) -> None:
        self.busy.pop("full", None)
        self.full = report
        self._show(report)
        host = report.environment.get("probed_host")
        if host and not any(getattr(h, "host", None) == host for h in self.hosts):
            from triage.probes import HostProbe

            self.hosts.insert(0, HostProbe(host=str(host), ok=True, facts=dict(report.environment)))
            self._refresh_views()

    # --- showing ---

    def _show(self, report: Report) -> None:
        full = self.full
        if full is not None and report is not full and not report.environment.get("probed_host"):
            # A live re-diagnosis after the full stage: keep what the probes and upstream found.
            report.environment = {**report.environment, **{k: v for k, v in full.environment.items()
                                                            if k not in report.environment or k == "probed_host"}}
            report.upstream = report.upstream if report.upstream else full.upstream
            report.upgrade = report.upgrade or full.upgrade
        self.report = report
        if report.diagnoses and self.first_diagnosis_at is None:
            self.first_diagnosis_at = time.monotonic()
        self._refresh_views()
        self._status()

    def _refresh_views(self) -> None:
        """Show the latest report in the view on screen; the others are brought up to date when shown
        (a live pipe re-diagnoses several times a second: hidden views need not follow each time)."""
        self._stale = {vid for vid, _label in VIEWS}
        self._refresh_view(self.current_view)

    def _refresh_view(self, name: str) -> None:
        if name not in self._stale:
            return
        live = not (self.live is not None and self.live.ended)
        busy = self.busy.get("full", "")
        if name == "diagnosis":
            self.query_one(DiagnosisPane).show(self.report, live=live)
        elif not self.views_mounted:
            return  # shown from the latest report once mounted
        elif name == "machine":
            self.query_one("#machine").show(self.report, self.hosts, busy=busy if self.opts.probe else "")
        elif name == "upstream":
            self.query_one("#upstream").show(self.report, busy=busy if not self.opts.offline else "",
                                             offline=self.opts.offline)
        elif name == "fix":
            self.query_one("#fix").show(self.report)
        self._stale.discard(name)

    def _status(self) -> None:
        parts = []
        live = self.live
        if self.error:
            parts.append(f"[$error]{escape(self.error)}[/]")
        elif live is not None:
            name = "standard input" if live.src.name == "-" else live.src.name
            nbytes, nlines = live.totals()
            parts.append(escape(name) + (f" · {nlines:,} lines · {nbytes:,} bytes" if live.ended or nlines else ""))
            if live.is_pipe:
                parts.append("[$success]input ended[/]" if live.ended else
                             "[$warning b]● vLLM still writing[/] (findings update live)")
        elif self.opts.source is None:
            parts.append("no log yet")
        for what in self.busy.values():
            parts.append(f"[$accent]⟳ {escape(what)}[/]")
        set_text(self.query_one("#status", Static), " · ".join(parts), layout=False)

    # --- actions ---

    async def action_view(self, name: str) -> None:
        if name != "diagnosis":
            await self.mount_views()
        self.current_view = name
        self._refresh_view(name)
        self.query_one("#views", ContentSwitcher).current = name
        set_text(self.query_one("#nav", Static), self._nav_markup(), layout=False)
        pane = self.query_one(f"#{name}")
        if name == "diagnosis":
            self.query_one(DiagnosisPane).log_view.focus()
        elif name == "upstream":
            self.query_one("#hits").focus()
        else:
            pane.focus()
        self.refresh_bindings()

    async def action_quit(self) -> None:
        """Quit; while vLLM is still writing into the pipe, ask for the key again first (quitting then
        leaves vLLM running, its output drained in the background)."""
        live = self.live
        if live is not None and live.is_pipe and not live.ended:
            now = time.monotonic()
            if now - getattr(self, "_quit_asked_at", -1e9) > self.QUIT_AGAIN_S:
                self._quit_asked_at = now
                self.notify("vLLM is still writing. Press q (or ctrl+c) again to quit: vLLM keeps running and "
                            "its output keeps going to your tee'd file.", title="Quit?", timeout=self.QUIT_AGAIN_S)
                return
        self.exit(self.return_code or 0)

    def action_preflight(self) -> None:
        from triage.tui.preflight import PreflightScreen

        self.push_screen(PreflightScreen(getattr(self, "preflight_machine", None)))

    def action_help(self) -> None:
        from triage.tui.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_add_host(self) -> None:
        from triage.tui.dialogs import PromptScreen

        def got(host: str | None) -> None:
            if host:
                self.busy[f"host:{host}"] = f"probing {host}…"
                self._status()
                self._daemon(self._probe_other, host)

        self.push_screen(PromptScreen("Add a host to compare", "[user@]host[:port] or an ssh alias"), got)

    def _probe_other(self, host: str) -> None:
        try:
            if self._probe_host is not None:
                hp = self._probe_host(host)
            else:
                from triage.probes import gather

                hp = gather(host=host, python=self.opts.python)
        except Exception as exc:
            from triage.probes import HostProbe

            hp = HostProbe(host=host, ok=False, error=f"{type(exc).__name__}: {exc}")
        self._post(self._host_probed, host, hp)

    def _host_probed(self, host: str, hp: Any) -> None:
        self.busy.pop(f"host:{host}", None)
        self.hosts = [h for h in self.hosts if h.host != hp.host] + [hp]
        if not hp.ok:
            self.notify(f"{host}: {hp.error}", severity="error")
        self._status()
        self._refresh_views()

    def action_reprobe(self) -> None:
        if self.live is None or not self.live.ended or self.live.scan is None:
            self.notify("the log is still being read", severity="warning")
            return
        if "full" in self.busy:
            return
        if not self.opts.needs_full_stage:
            self.notify("nothing to probe or search: --no-probe and --offline (or --demo) are set",
                        severity="warning")
            return
        self._start_full(self.live.scan, force=True)

    def _in_view(self, view: str, do: Callable[[Any], Any]) -> Callable[[], Any]:
        """A palette command: show `view` (mounting it if need be), then `do(its pane)`."""
        async def go() -> None:
            await self.action_view(view)
            do(self.query_one(f"#{view}"))

        return go

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for i, (vid, label) in enumerate(VIEWS, 1):
            yield SystemCommand(f"View: {label}", f"show the {label} view (key {i})", self._in_view(vid, lambda _p: None))
        yield SystemCommand("Help: keys", "every key of every view (? or f1)", self.action_help)
        yield SystemCommand("Preflight: will a launch fail here?",
                            "type a `vllm serve ...` and see what would stop it, before it starts (P)",
                            self.action_preflight)
        yield SystemCommand("Open another log", "type a path or pick a vLLM log found on this machine",
                            self.action_open_log)
        yield SystemCommand("Diagnosis: next evidence line", "jump the log to the next evidence line (e)",
                            self._in_view("diagnosis", lambda p: p.action_evidence(1)))
        yield SystemCommand("Diagnosis: search the log", "find text in the log (/)",
                            self._in_view("diagnosis", lambda p: p.action_search()))
        yield SystemCommand("Diagnosis: next finding", "show the next finding (])",
                            self._in_view("diagnosis", lambda p: p.action_finding(1)))
        yield SystemCommand("Machine: add a host", "probe another host over SSH and compare (a)",
                            self._in_view("machine", lambda _p: self.action_add_host()))
        yield SystemCommand("Machine: probe again", "run the probes and the upstream search again (r)",
                            self.action_reprobe)
        yield SystemCommand("Upstream: copy URL", "copy the selected hit's URL with OSC 52 (c)",
                            self._in_view("upstream", lambda p: p.action_copy_url()))
        yield SystemCommand("Fix: start the guided fix", "walk the playbook step by step (4, enter)",
                            self._in_view("fix", lambda p: p.action_go()))
        yield SystemCommand("Fix: dry run", "show every step and command, run nothing (D)",
                            self._in_view("fix", lambda p: p.action_dry_run()))
        yield SystemCommand("Fix: choose another playbook", "pick any playbook (p)",
                            self._in_view("fix", lambda p: p.action_pick()))
        yield SystemCommand("Fix: undo the last playbook", "revert what it changed (u)",
                            self._in_view("fix", lambda p: p.action_undo()))
