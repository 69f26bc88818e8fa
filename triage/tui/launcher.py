"""TUI or plain report? And, for the TUI, a terminal to read keys from even when the log is piped in.

`run()` is what triage.cli calls for the interactive mode. It returns None for "print the plain
report instead" (no controlling terminal: cron, `ssh host cmd` without -t, CI; or output redirected to
a file or a pipe), an exit status otherwise.

Piped logs: Textual reads keys from fd 0 and draws on fd 2. So before Textual is imported, the pipe is
kept on another descriptor (`os.dup(0)`) and /dev/tty is put on fd 0 (and on fd 2 when that is not a
terminal); the app then reads the log from the kept descriptor in a thread. Signals stay off (Textual's
raw mode): Ctrl+C reaches the app as a key and never the process group that vLLM runs in.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from triage.model import EXIT_USAGE


def _open_tty() -> int | None:
    try:
        return os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:
        return None


def wants_tui(stdout_fd: int = 1) -> bool:
    """A report sent to a file or a pipe is for reading later: plain text, not a screen."""
    try:
        return os.isatty(stdout_fd)
    except OSError:
        return False


def run(args: Any, *, source: str | None, snapshot: str | None, offline: bool, probe: bool) -> int | None:
    if os.environ.get("TRIAGE_NO_TUI") or importlib.util.find_spec("textual") is None:
        return None
    if not wants_tui():
        return None
    tty = _open_tty()
    if tty is None:
        return None
    if source is not None and source != "-":
        # A wrong path is the plain one-line error of the headless path, not a screen.
        from triage.logread.source import InputError, open_source

        try:
            open_source(source)
        except InputError:
            os.close(tty)
            return None
    pipe_fd = None
    if source == "-":
        if os.isatty(0):
            os.close(tty)
            print("triage: --log - reads a log from a pipe, but standard input is a terminal "
                  "(try: vllm serve ... 2>&1 | tee vllm.log | triage --log -)", file=sys.stderr)
            return EXIT_USAGE
        pipe_fd = os.dup(0)
    if not os.isatty(0):
        os.dup2(tty, 0)
    if not os.isatty(2):
        os.dup2(tty, 2)
    os.close(tty)

    from triage.tui.intake import Options, Reader

    opts = Options(source=source, snapshot=snapshot, offline=offline, probe=probe,
                   host=getattr(args, "host", None), python=getattr(args, "python", None),
                   demo=bool(getattr(args, "demo", False)))
    reader = None
    if source is not None:  # read and diagnose while Textual loads: the first frame can hold the diagnosis
        from triage.logread.source import InputError
        from triage.tui.intake import EarlyReport

        early = EarlyReport.start(opts, piped=source == "-")  # it forks: before any thread is started
        try:
            reader = Reader(opts, pipe_fd if source == "-" else None, early=early)
        except InputError:
            if early is not None:
                early.stop()
                early.result()
            # the app says why on its screen

    from triage.tui.app import TriageApp  # Textual is imported only now, with a terminal on fd 0

    app = TriageApp(opts, pipe_fd=pipe_fd, reader=reader)
    code = app.run(mouse=bool(getattr(args, "mouse", False)))
    if pipe_fd is not None and not (app.live is not None and app.live.ended):
        _drain_in_background(pipe_fd)
        # The shell waits for the whole pipeline: say why the prompt does not come back yet.
        print("triage: quit. vLLM is still running and writing; its output is drained in the background "
              "(and still goes to the file tee writes). This terminal returns when vLLM exits; Ctrl+C here "
              "stops vLLM.", file=sys.stderr)
    return int(code or 0)


def _drain_in_background(fd: int) -> None:
    """The user quit while vLLM is still writing into the pipe. Closing our end would make the writer
    (tee, then vLLM) die of SIGPIPE on its next write; a small child keeps reading until it ends."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid == 0:  # the child: read and discard until the writer closes its end
        try:
            os.setsid()
            for other in (0, 1, 2):
                try:
                    os.close(other)
                except OSError:
                    pass
            while os.read(fd, 1 << 16):
                pass
        finally:
            os._exit(0)
    os.close(fd)
