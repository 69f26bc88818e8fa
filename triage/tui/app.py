"""The Textual application: one main screen with four views (Diagnosis, Machine, Upstream, Fix),
a status line (input state, work in progress) and the footer; help and prompts are modal screens.

Data flow: the log is read in a thread (triage.tui.intake.LiveLog); each new piece of a live pipe is
diagnosed again from a snapshot (quick stage: log and saved snapshot only); once the input ends
(or goes quiet with a failure in it) the full stage probes and searches upstream. Results come back
to the UI thread with call_from_thread and every view re-renders from the latest Report.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterable

from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Static

from triage.logread import Scan
from triage.logread.source import InputError
from triage.model import Report
from triage.tui import intake
from triage.tui.intake import LiveLog, Options
from triage.tui.markup import escape  # cleaned of terminal control, markup escaped
from triage.tui.panes.diagnosis import DiagnosisPane
from triage.tui.panes.fix import FixPane
from triage.tui.panes.machine import MachinePane
from triage.tui.panes.upstream import UpstreamPane

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
    ) -> None:
        super().__init__()
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

    # --- layout ---

    def compose(self) -> ComposeResult:
        with Horizontal(id="nav-bar"):
            yield Static(self._nav_markup(), id="nav")
        with ContentSwitcher(initial="diagnosis", id="views"):
            yield DiagnosisPane(id="diagnosis")
            yield MachinePane(id="machine")
            yield UpstreamPane(id="upstream")
            yield FixPane(id="fix")
        yield Static("", id="status")
        yield Footer()

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
        if self.opts.source is None:
            from triage.tui.dialogs import OpenLogScreen

            self.push_screen(OpenLogScreen(self._finder), self._opened)
        else:
            self._begin()

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
            self._full_started, self._fed_seen, self.first_diagnosis_at = False, -1, None
            self.query_one(DiagnosisPane).set_log_lines([])
            self._refresh_views()
            self._begin()

        self.push_screen(OpenLogScreen(self._finder), opened)

    # --- reading the log ---

    def _begin(self) -> None:
        assert self.opts.source is not None
        try:
            self.live = LiveLog(self.opts.source, self.pipe_fd if self.opts.source == "-" else None)
        except InputError as exc:
            self.error = str(exc)
            self._status()
            self.query_one("#diag-text", Static).update(f"[$error b]Cannot read the log[/]: {escape(str(exc))}")
            return
        self._read()
        if self.live.is_pipe:
            self._timer = self.set_interval(TICK_S, self._tick)
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

    def _read(self) -> None:
        def read() -> None:
            assert self.live is not None
            scan = self.live.run()
            self._post(self._input_ended, scan)

        self._daemon(read)

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

    def _input_ended(self, scan: Scan) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._status()
        self._quick(scan, final=True)
        self._log_lines(scan)

    @work(thread=True, exclusive=True, group="quick", exit_on_error=False)
    def _quick(self, scan: Scan | None, final: bool = False) -> None:
        assert self.live is not None
        snap = scan if scan is not None else self.live.snapshot()
        report = self._quick_fn(self.opts, snap)
        lines = [(ln.no, ln.shown) for ln in snap.lines] if (self.live.is_pipe and not final) else None
        self.call_from_thread(self._quick_done, report, snap, final, lines)

    def _quick_done(self, report: Report, scan: Scan, final: bool, lines: list[tuple[int, str]] | None) -> None:
        self._quick_running = False
        if lines is not None:
            self.query_one(DiagnosisPane).set_log_lines(lines, scan.lines_total)
        self._show(report)
        if final and self.opts.needs_full_stage:
            self._start_full(scan, force=True)

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
        live = not (self.live is not None and self.live.ended)
        busy = self.busy.get("full", "")
        self.query_one(DiagnosisPane).show(self.report, live=live)
        self.query_one(MachinePane).show(self.report, self.hosts, busy=busy if self.opts.probe else "")
        self.query_one(UpstreamPane).show(self.report, busy=busy if not self.opts.offline else "",
                                          offline=self.opts.offline)
        self.query_one(FixPane).show(self.report)

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
        self.query_one("#status", Static).update(" · ".join(parts))

    # --- actions ---

    def action_view(self, name: str) -> None:
        self.current_view = name
        self.query_one("#views", ContentSwitcher).current = name
        self.query_one("#nav", Static).update(self._nav_markup())
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

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for i, (vid, label) in enumerate(VIEWS, 1):
            yield SystemCommand(f"View: {label}", f"show the {label} view (key {i})",
                                lambda vid=vid: self.action_view(vid))
        yield SystemCommand("Help: keys", "every key of every view (? or f1)", self.action_help)
        yield SystemCommand("Preflight: will a launch fail here?",
                            "type a `vllm serve ...` and see what would stop it, before it starts (P)",
                            self.action_preflight)
        yield SystemCommand("Open another log", "type a path or pick a vLLM log found on this machine",
                            self.action_open_log)
        diag = self.query_one(DiagnosisPane)
        yield SystemCommand("Diagnosis: next evidence line", "jump the log to the next evidence line (e)",
                            lambda: (self.action_view("diagnosis"), diag.action_evidence(1)))
        yield SystemCommand("Diagnosis: search the log", "find text in the log (/)",
                            lambda: (self.action_view("diagnosis"), diag.action_search()))
        yield SystemCommand("Diagnosis: next finding", "show the next finding (])",
                            lambda: (self.action_view("diagnosis"), diag.action_finding(1)))
        yield SystemCommand("Machine: add a host", "probe another host over SSH and compare (a)",
                            lambda: (self.action_view("machine"), self.action_add_host()))
        yield SystemCommand("Machine: probe again", "run the probes and the upstream search again (r)",
                            self.action_reprobe)
        up = self.query_one(UpstreamPane)
        yield SystemCommand("Upstream: copy URL", "copy the selected hit's URL with OSC 52 (c)",
                            lambda: (self.action_view("upstream"), up.action_copy_url()))
        fix = self.query_one(FixPane)
        yield SystemCommand("Fix: start the guided fix", "walk the playbook step by step (4, enter)",
                            lambda: (self.action_view("fix"), fix.action_go()))
        yield SystemCommand("Fix: dry run", "show every step and command, run nothing (D)",
                            lambda: (self.action_view("fix"), fix.action_dry_run()))
        yield SystemCommand("Fix: choose another playbook", "pick any playbook (p)",
                            lambda: (self.action_view("fix"), fix.action_pick()))
        yield SystemCommand("Fix: undo the last playbook", "revert what it changed (u)",
                            lambda: (self.action_view("fix"), fix.action_undo()))
