"""The TUI's thin adapter to the playbook engine (triage.playbooks).

The engine walks a playbook and hands out StepViews; the TUI shows them and answers. This module
picks the playbook, builds the Session, and gives the engine a Runner that streams a command's output
line by line to the screen (or, for commands that need the terminal, runs them with the app
suspended). A plan that cannot be made raises `Unavailable` with the reason in words.
"""

from __future__ import annotations

import os
import subprocess
import threading
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from triage.runner import LocalRunner, Result

# Commands that ask the person at the terminal (passwords, pagers, prompts) run with the app suspended.
INTERACTIVE_PROGRAMS = {"sudo", "su", "passwd", "ssh", "vi", "vim", "nano", "less", "more", "docker-login"}


class Unavailable(Exception):
    """No guided fix here; the message says why, in one line."""


def needs_terminal(argv: Sequence[str] | None) -> bool:
    return bool(argv) and os.path.basename(str(argv[0])) in INTERACTIVE_PROGRAMS


class StreamingRunner:
    """A Runner that reports each output line as it comes (`on_line`) and can hand the terminal to
    the command (`terminal=True`: stdio inherited; the caller suspends the app around it).
    Remote runners are wrapped unchanged: their output arrives when the command ends."""

    def __init__(self, inner: Any = None, on_line: Callable[[str], None] | None = None):
        self.inner = inner or LocalRunner()
        self.where = getattr(self.inner, "where", LocalRunner.where)
        self.on_line = on_line or (lambda _line: None)
        self.terminal = False
        self.proc: subprocess.Popen | None = None

    @property
    def local(self) -> bool:
        return isinstance(self.inner, LocalRunner)

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: dict[str, str] | None = None) -> Result:
        argv = [str(a) for a in argv]
        if not self.local:
            r = self.inner.run(argv, timeout=timeout, input=input, env=env)
            for line in (r.stdout + r.stderr).splitlines():
                self.on_line(line)
            return r
        full_env = dict(os.environ, **env) if env else None
        if self.terminal and input is None:
            try:
                rc = subprocess.run(argv, env=full_env, timeout=timeout).returncode
            except subprocess.TimeoutExpired:
                return Result(argv, 124, "", f"timed out after {timeout:g}s", timed_out=True)
            except OSError as exc:
                return Result(argv, -1, "", f"{argv[0]}: {exc.strerror or exc}")
            return Result(argv, rc, "", "(ran in the terminal; output not captured)")
        return self._stream(argv, timeout=timeout, input=input, env=full_env)

    def _stream(self, argv: list[str], *, timeout: float, input: str | None, env: dict[str, str] | None) -> Result:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                                    errors="replace", bufsize=1)
        except OSError as exc:
            return Result(argv, -1, "", f"{argv[0]}: {exc.strerror or exc}")
        self.proc = proc
        out: list[str] = []
        err: list[str] = []

        def pump(stream: Any, sink: list[str]) -> None:
            for line in stream:
                sink.append(line)
                self.on_line(line.rstrip("\n"))

        threads = [threading.Thread(target=pump, args=(proc.stdout, out), daemon=True),
                   threading.Thread(target=pump, args=(proc.stderr, err), daemon=True)]
        for t in threads:
            t.start()
        if input is not None and proc.stdin is not None:
            try:
                proc.stdin.write(input)
                proc.stdin.close()
            except OSError:
                pass
        timed_out = False
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            proc.kill()
            proc.wait()
        for t in threads:
            t.join(timeout=5)
        self.proc = None
        stderr = "".join(err) + (f"\ntimed out after {timeout:g}s" if timed_out else "")
        return Result(argv, 124 if timed_out else proc.returncode, "".join(out), stderr, timed_out=timed_out)


@dataclass
class Plan:
    """A playbook ready to walk, and how it was chosen."""

    session: Any
    playbook_id: str
    title: str
    summary: str
    runner: StreamingRunner


def playbooks() -> list[tuple[str, str]]:
    """(id, title) of every valid playbook, for the picker."""
    from triage.playbooks.load import load_library  # loads yaml: only when the Fix view opens

    lib = load_library()
    return [(pb.id, pb.title) for pb in sorted(_all(lib), key=lambda p: p.id)]


def _all(lib: Any) -> list[Any]:
    pbs = getattr(lib, "playbooks", None)
    if isinstance(pbs, dict):
        return list(pbs.values())
    return list(pbs or [])


def plan(report: Any, *, playbook_id: str | None = None, log_path: str | None = None, host: str | None = None,
         python: str | None = None, offline: bool = False, dry_run: bool = False,
         on_line: Callable[[str], None] | None = None) -> Plan:
    """The Session for the report's top diagnosis (or the playbook named). Raises Unavailable."""
    from triage.playbooks.engine import Session, default_upstream, derive_facts
    from triage.playbooks.load import load_library

    lib = load_library()
    diag = report.diagnoses[0].to_json() if report is not None and report.diagnoses else None
    env = dict(report.environment) if report is not None else {}
    if playbook_id:
        pb = lib.get(playbook_id)
        if pb is None:
            raise Unavailable(f"no playbook {playbook_id!r}")
    elif diag is None:
        raise Unavailable("no failure was found in this log: nothing to fix")
    else:
        named = (diag.get("fix") or {}).get("playbook")
        pb = lib.get(named) if named else None
        if pb is None:
            pb = lib.for_diagnosis(str(diag.get("category")), diag.get("signature"), derive_facts(env, diag))
        if pb is None:
            raise Unavailable(f"no playbook for {diag.get('category')} ({diag.get('signature')}): "
                              f"{(diag.get('fix') or {}).get('summary') or ''}".rstrip(": "))
    inner = LocalRunner()
    if host:
        from triage.transcript import default_runner_for

        try:
            inner = default_runner_for(host)
        except RuntimeError as exc:
            raise Unavailable(f"cannot run steps on {host}: {exc}") from None
    runner = StreamingRunner(inner, on_line)
    facts = derive_facts(env, diag, python=python, log_path=log_path or "vllm.log", host=host, dry_run=dry_run)
    session = Session(pb, facts, runner=runner, dry_run=dry_run,
                      upstream=lambda f: default_upstream(f, report, offline=offline))
    return Plan(session, pb.id, pb.title, getattr(pb, "summary", "") or "", runner)


def show_argv(argv: Sequence[str]) -> str:
    import shlex

    return shlex.join([str(a) for a in argv])


def undo_last() -> tuple[bool, list[str]]:
    """Revert the last applied playbook. (ok, lines to show)."""
    from triage.transcript import undo_last as transcript_undo_last

    rep = transcript_undo_last()
    if rep.transcript is None:
        return False, ["nothing to undo: no applied playbook is recorded"]
    lines = [str(v) for v in rep.reverted]
    lines += [str(v) for v in rep.failed]
    lines += [f"cannot be reverted automatically: {v}" for v in rep.cannot]
    return bool(rep.ok), lines or ["the last playbook changed nothing"]
