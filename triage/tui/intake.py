"""Reading the log for the TUI, and building reports in two stages. No Textual here.

A regular file is scanned in one go (grep, like the headless report). A pipe is read line by line
into an incremental Scanner so that findings can be shown while vLLM is still writing: a snapshot of
what was fed so far can be diagnosed at any time from another thread.

Reports are built by the one pipeline (triage.pipeline.build_report), in two stages so that the
diagnosis is on screen at once: `quick` (the log, plus a saved snapshot when given; no probing, no
network) and then `full` (probes and upstream, which can take seconds).
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any, Callable

from triage.logread import Scan, Scanner, scan_source
from triage.logread.scan import finish_source
from triage.logread.source import InputError, LogSource, open_source
from triage.model import Report

# Above this size a file's log view shows only the selected (error-like) lines, not every line.
FULL_VIEW_LIMIT = 16 << 20
# A log up to this size that ends within this many seconds is diagnosed by a forked child (EarlyReport).
EARLY_LIMIT = 8 << 20
EARLY_WAIT_S = 5


@dataclass
class Options:
    """What the user asked for on the command line."""

    source: str | None
    snapshot: str | None = None
    offline: bool = False
    probe: bool = True
    host: str | None = None
    python: str | None = None
    demo: bool = False  # the bundled example: its machine is a recording, so fixes are dry runs only

    @property
    def needs_full_stage(self) -> bool:
        return self.probe or not self.offline or self.demo


class LiveLog:
    """The log as it arrives. `run()` blocks (call it in a thread); `snapshot()` may be called
    from any other thread while it runs; `scan` is the finished Scan once `ended` is set."""

    def __init__(self, source: str, fd: int | None = None, *, spool: bool = True,
                 tee: "EarlyReport | None" = None):
        self.spool_path: str | None = None
        if fd is not None and spool:
            fd, self.spool_path = _spooled(fd, tee)
        self.src: LogSource = open_source(source, fd)
        self.scanner = Scanner(self.src.name)
        self.lock = threading.Lock()
        self.ended = False
        self.error: str | None = None
        self.fed = 0  # selected lines fed so far (changes mean: worth diagnosing again)
        self.scan: Scan | None = None
        self._totals: Callable[[], tuple[int, int]] = lambda: (0, 0)
        self._blocks: list[tuple[int, bytes]] = []  # collect-env blocks kept aside by a pipe's selection
        self._bumped = 0.0  # when `fed` last changed for counts alone (bulk reading)

    @property
    def is_pipe(self) -> bool:
        return self.src.fd is not None

    def totals(self) -> tuple[int, int]:
        """(bytes, lines) read so far."""
        try:
            return self._totals()
        except Exception:  # the selection's counters are plain ints; never let a display read fail
            return (0, 0)

    def run(self) -> Scan:
        try:
            if not self.is_pipe:
                scan = scan_source(self.src)
            else:
                from triage.logread import bulk
                from triage.logread.select import select
                from triage.logread.source import chunks

                head, data = self._head(chunks(self.src))
                if bulk.dense_head(head):
                    # Many lines worth reading, arriving fast (a server printing an error per request): read
                    # in whole chunks with the repeats counted in C, as the headless reader does, a third
                    # of the CPU time of a line at a time through grep, which the keys need.
                    scan, sc, blocks = bulk.scan_whole(self.src, data, sc=self.scanner, live=self)
                    scan = finish_source(self.src, scan, sc, blocks)
                else:
                    sel = select(self.src, data=data)
                    self._totals = sel.totals
                    self._blocks = sel.blocks
                    for no, raw in sel.lines:
                        with self.lock:
                            self.scanner.feed(no, raw)
                            self.fed += 1
                    with self.lock:
                        scan = self.scanner.finish(*sel.totals())
                        scan.warnings.extend(sel.warnings)
                        scan.truncated = sel.truncated
                        # the collect-env block the selection kept aside: the headless reader's facts
                        scan = finish_source(self.src, scan, self.scanner, sel.blocks)
        except InputError as exc:
            self.error = str(exc)
            with self.lock:
                scan = self.scanner.finish(*self.totals())
            scan.warnings.append(f"reading the log stopped: {exc}")
        self.scan = scan
        self._totals = lambda: (scan.bytes, scan.lines_total)
        self.ended = True
        return scan

    # A pipe is read in whole chunks (bulk) when its first MiB, arrived within HEAD_WAIT_S, is dense; a slow
    # one (vLLM starting, writing a line now and then) goes line by line through grep.
    HEAD_WAIT_S = 0.5

    def _head(self, data):
        """Up to a MiB of the pipe, gathered while it comes at once, and every chunk again."""
        import itertools
        import select as _select
        import time

        from triage.logread.bulk import DENSE_MIN_BYTES

        got: list[bytes] = []
        have = 0
        end = time.monotonic() + self.HEAD_WAIT_S
        while have < DENSE_MIN_BYTES:
            left = end - time.monotonic()
            try:
                ready = left > 0 and _select.select([self.src.fd], [], [], left)[0]
            except (OSError, ValueError):
                ready = []
            if not ready:
                break
            b = next(data, None)
            if b is None:
                break
            got.append(b)
            have += len(b)
        return b"".join(got), itertools.chain(got, data)

    def ready(self) -> bool:
        """More of the pipe to read at once (bulk.stream_bodies)."""
        import select as _select

        try:
            return bool(_select.select([self.src.fd], [], [], 0)[0])
        except (OSError, ValueError):
            return False

    def progress(self, nbytes: int, nlines: int, new: bool) -> None:
        """After each chunk read in bulk (the lock held): the totals, and whether to diagnose again (new
        lines read; or, at most once a second, counts that grew)."""
        import time

        self._totals = lambda: (nbytes, nlines)
        now = time.monotonic()
        if new or now - self._bumped >= 1.0:
            self.fed += 1
            self._bumped = now

    def snapshot(self) -> Scan:
        """What was read so far, finished (complete=False while the input has not ended)."""
        if self.scan is not None:
            return self.scan
        nbytes, nlines = self.totals()
        with self.lock:
            snap = self.scanner.snapshot(nbytes, nlines)
        if self._blocks:  # (rare: a pasted collect-env block) its facts, as the finished scan will have them
            snap = finish_source(self.src, snap, self.scanner, list(self._blocks))
        return snap


class Reader:
    """A LiveLog read in a daemon thread from the moment it is made. The launcher makes it before
    Textual is imported, so reading and diagnosing overlap Textual's start-up; when the input ends the
    quick report is built in the same thread, so a small log's diagnosis is ready for the first frame.

    `when_done(callback)` calls back (from the reading thread, or at once when already done) with
    (scan, report, error): `report` is None and `error` says why when the quick stage failed."""

    def __init__(self, opts: Options, fd: int | None = None,
                 quick: Callable[[Options, Scan], Report] | None = None, early: "EarlyReport | None" = None):
        assert opts.source is not None
        self.opts = opts
        self._early = early
        self.live = LiveLog(opts.source, fd, tee=early)
        self._quick = quick or quick_report
        self._lock = threading.Lock()
        self._done: tuple[Scan, Report | None, str | None] | None = None
        self._listener: Callable[[Scan, Report | None, str | None], None] | None = None
        threading.Thread(target=self._run, daemon=True, name="triage-read").start()

    def _run(self) -> None:
        scan = self.live.run()
        report, error = None, None
        if self._early is not None:
            report = self._early.result()
        try:
            if report is None:
                report = self._quick(self.opts, scan)
        except Exception as exc:  # the diagnosis of a bad input must not take the app down
            error = f"{type(exc).__name__}: {exc}"
        with self._lock:
            self._done = (scan, report, error)
            listener = self._listener
        if listener is not None:
            listener(scan, report, error)

    @property
    def result(self) -> tuple[Scan, Report | None, str | None] | None:
        return self._done

    def when_done(self, callback: Callable[[Scan, Report | None, str | None], None]) -> None:
        with self._lock:
            done = self._done
            if done is None:
                self._listener = callback
                return
        callback(*done)


class EarlyReport:
    """The quick report of a log that ends at once (a file, a finished `cat`), built in a forked child
    while the parent loads Textual: on two cores the diagnosis is ready when the first frame is drawn,
    instead of taking its turn with Textual's start-up in one interpreter.

    `start` forks before any thread exists. A file is read by the child itself; a pipe's bytes reach it
    through `feed` (the parent's pump tees them). A log past EARLY_LIMIT, or one still being written
    after EARLY_WAIT_S, is left to the parent (the child is stopped); so is any failure: `result()`
    is then None and the parent diagnoses in its own thread as before."""

    def __init__(self, pid: int, answer: int, feed: int | None):
        self.pid, self._answer, self._feed = pid, answer, feed
        self._fed = 0
        self._done = False
        self._stopped = False

    @classmethod
    def start(cls, opts: Options, piped: bool) -> "EarlyReport | None":
        import signal

        if opts.source is None or not hasattr(os, "fork") or not _spare_core():
            return None
        if not piped:  # a regular file, small, not compressed (a device or a named pipe may never end)
            try:
                if (not os.path.isfile(opts.source) or os.path.getsize(opts.source) > EARLY_LIMIT
                        or opts.source.endswith(".gz")):
                    return None
            except OSError:
                return None
        answer_r, answer_w = os.pipe()
        feed_r, feed_w = os.pipe() if piped else (-1, -1)
        try:
            pid = os.fork()
        except OSError:
            for fd in (answer_r, answer_w, feed_r, feed_w):
                if fd >= 0:
                    os.close(fd)
            return None
        if pid == 0:  # the child: diagnose, answer, and leave without running the parent's exit handlers
            try:
                signal.alarm(EARLY_WAIT_S)  # a log still being written is the parent's to follow
                os.close(answer_r)
                if feed_w >= 0:
                    os.close(feed_w)
                live = LiveLog(opts.source, feed_r if piped else None, spool=False)
                scan = live.run()
                report = quick_report(opts, scan)
                import pickle

                data = pickle.dumps(report)
                view = memoryview(data)
                while view:
                    view = view[os.write(answer_w, view):]
            finally:
                os._exit(0)
        os.close(answer_w)
        if feed_r >= 0:
            os.close(feed_r)
        return cls(pid, answer_r, feed_w if piped else None)

    def feed(self, chunk: bytes) -> None:
        """The next bytes of the pipe (from the pump's thread)."""
        if self._feed is None:
            return
        self._fed += len(chunk)
        if self._fed > EARLY_LIMIT:
            self.stop()
            return
        try:
            view = memoryview(chunk)
            while view:
                view = view[os.write(self._feed, view):]
        except OSError:
            self.end_of_input()

    def end_of_input(self) -> None:
        if self._feed is not None:
            try:
                os.close(self._feed)
            except OSError:
                pass
            self._feed = None

    def stop(self) -> None:
        import signal

        # Killed before its input is closed, and its answer never read: on EOF it would diagnose the
        # part it had been fed and could answer before the signal lands.
        self._stopped = True
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        self.end_of_input()

    def result(self) -> Report | None:
        """The child's report once the input has ended (None: it gave up or failed). Blocks until the
        child answers or exits, without holding the interpreter (a read of a pipe)."""
        if self._done:
            return None
        self._done = True
        self.end_of_input()
        if self._stopped:
            os.close(self._answer)
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
            return None
        chunks = []
        try:
            while True:
                b = os.read(self._answer, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        except OSError:
            chunks = []
        finally:
            os.close(self._answer)
            try:
                os.waitpid(self.pid, 0)
            except OSError:
                pass
        if not chunks:
            return None
        import pickle

        try:
            report = pickle.loads(b"".join(chunks))
        except Exception:
            return None
        return report if isinstance(report, Report) else None


def _spare_core() -> bool:
    """Can the child run beside the parent? On one core it would only take turns with it. (A busy
    machine is no reason to skip it: measured, the child costs nothing there, and wins a core's worth
    wherever one is free.)"""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return cores >= 2


def _spooled(fd: int, tee: EarlyReport | None = None) -> tuple[int, str]:
    """A pipe's bytes relayed to a new pipe (which the scanner reads) and kept in a private file
    (up to FULL_VIEW_LIMIT), so the log view can hold every line of a piped log once it ends;
    `tee` gets them too."""
    import tempfile

    import atexit
    import shutil

    folder = tempfile.mkdtemp(prefix="triage-pipe-")  # 0700: the log may hold private paths and tokens
    atexit.register(shutil.rmtree, folder, True)
    path = os.path.join(folder, "input.log")
    r, w = os.pipe()

    def pump() -> None:
        kept = 0
        try:
            with open(path, "wb") as spool:
                while True:
                    try:
                        chunk = os.read(fd, 1 << 16)
                    except OSError:
                        break
                    if not chunk:
                        break
                    if tee is not None:
                        tee.feed(chunk)
                    if kept <= FULL_VIEW_LIMIT:
                        spool.write(chunk)
                        spool.flush()
                        kept += len(chunk)
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(w, view):]
        except OSError:
            pass
        finally:
            if tee is not None:
                tee.end_of_input()
            os.close(w)

    threading.Thread(target=pump, daemon=True).start()
    return r, path


def quick_report(opts: Options, scan: Scan) -> Report:
    """The diagnosis from the log alone (and a saved probe snapshot): no probing, no network."""
    from triage.pipeline import build_report

    try:
        return build_report(scan.source, offline=True, probe=False, snapshot=opts.snapshot, scan=scan)
    except InputError as exc:  # an unusable snapshot must not hide the diagnosis
        report = build_report(scan.source, offline=True, probe=False, snapshot=None, scan=scan)
        report.warnings.append(str(exc))
        return report


def full_report(opts: Options, scan: Scan) -> Report:
    """Everything the command line allows: probes of this machine or --host, upstream search (for the
    demo, the recorded answers)."""
    from triage.pipeline import build_report

    try:
        report = build_report(scan.source, offline=opts.offline, probe=opts.probe, host=opts.host,
                              python=opts.python, snapshot=opts.snapshot, scan=scan)
    except InputError as exc:
        report = build_report(scan.source, offline=opts.offline, probe=opts.probe and not opts.snapshot,
                              host=opts.host, python=opts.python, snapshot=None, scan=scan)
        report.warnings.append(str(exc))
    if opts.demo:
        from triage.demo import with_recorded_upstream

        with_recorded_upstream(report)
    return report


def view_lines(scan: Scan, path: str | None) -> list[tuple[int, str]]:
    """The lines the log view shows: every line of a file (or a pipe's spool) that is not too big,
    else the selected (error-like) lines with their original numbers."""
    if path and os.path.isfile(path) and os.path.getsize(path) <= FULL_VIEW_LIMIT:
        try:
            src = open_source(path)
            from triage.logread.normalize import clean
            from triage.logread.select import read_all_lines

            return [(no, clean(raw)) for no, raw in read_all_lines(src)]
        except (InputError, OSError):
            pass
    return [(ln.no, ln.shown) for ln in scan.lines]


def load_hosts(snapshot: str | None) -> list[Any]:
    """Every host of a saved `triage probe --json` (the fleet view)."""
    if not snapshot:
        return []
    import json

    from triage.probes import HostProbe

    try:
        with open(snapshot, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, list):
        hosts = [data] if isinstance(data, dict) and "facts" in data else []
    return [HostProbe.from_json(h) for h in hosts if isinstance(h, dict)]
