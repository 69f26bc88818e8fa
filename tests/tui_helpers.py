"""Shared by the TUI tests: the app fed with recorded data, and a way to wait until it is idle."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from triage.model import Report

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "tui"
DEMO_LOG_REL = "triage/demo/glm5_sm120.log"  # relative to ROOT, so screens do not show a machine's path


def report_from_json(data: dict[str, Any]) -> Report:
    """A recorded `triage --json` report back into the model objects the app shows."""
    return Report.from_json(data)


def recorded_report() -> Report:
    data = json.loads((FIXTURES / "demo_report.json").read_text(encoding="utf-8"))
    data["input"]["source"] = DEMO_LOG_REL
    return report_from_json(data)


def log_only(report: Report) -> Report:
    """What the quick stage shows before the probes and upstream came back."""
    env = {k: v for k, v in report.environment.items()
           if k in ("vllm_version", "model", "architecture", "python_prefix", "python_version", "launch_args")}
    return Report(source=report.source, bytes=report.bytes, lines=report.lines, diagnoses=report.diagnoses,
                  environment=env, notes=report.notes, warnings=[], input_complete=True)


def make_app(*, full: bool = True, hosts: list[Any] | None = None, source: str = DEMO_LOG_REL, **kw: Any):
    """The real app on the bundled log, with the report stages replaced by the recorded report."""
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    rec = recorded_report()
    opts = Options(source=source, offline=not full, probe=full)
    return TriageApp(opts, quick=lambda _o, _s: log_only(rec), full=lambda _o, _s: recorded_report(),
                     hosts=hosts if hosts is not None else [], **kw)


async def settle(pilot: Any, app: Any, rounds: int = 400) -> None:
    """Wait until the log is read, both stages are in, and no step of a fix is running."""
    for _ in range(rounds):
        await pilot.pause(0.02)
        if not app.views_mounted:  # the views other than the diagnosis come after the first frame
            continue
        fix = app.query_one("#fix")
        if (app.live is not None and app.live.ended and app.report is not None and not app.busy
                and not app._quick_running and not fix.running
                and (app.full is not None or not app.opts.needs_full_stage) and _cursor_shown(app)):
            break
    await app.workers.wait_for_complete()
    await pilot.pause()


def _cursor_shown(app: Any) -> bool:
    """The log view has scrolled its cursor into sight (it does so after a refresh)."""
    lv = app.query_one("#log")
    if not lv.lines or not lv.size.height:
        return True
    top = lv.scroll_offset.y
    return top <= lv.cursor < top + lv.scrollable_content_region.height


# The Fix view reads the engine's own step shapes: the scripted session hands it the real classes.
from triage.playbooks.engine import StepResult as Result  # noqa: E402
from triage.playbooks.engine import StepView as View  # noqa: E402


class ScriptedSession:
    """A playbook walk with the engine's protocol (start/advance/outcome/outcome_hint/recorder):
    explain -> choice -> run a real command (confirm) -> input -> outcome."""

    def __init__(self, runner: Any, command: list[str]):
        self.runner = runner
        self.command = command
        self.outcome: str | None = None
        self.answers: list[Any] = []
        self.recorder = type("Rec", (), {"root": "/state/transcripts/1", "changed_anything": lambda self: True})()
        self._i = 0
        self._shown_result = False

    def _steps(self) -> list[View]:
        return [
            View("what", "explain", "What failed", "The sparse MLA backend is missing on this GPU.", needs="ack"),
            View("how", "ask", "Upgrade, or keep this vLLM?", "Pick one.", needs="choice",
                 choices=[("upgrade", "Upgrade vLLM to 0.26.0"), ("bundled", "Install the bundled backend")],
                 default="bundled"),
            View("install", "run", "Install the backend", "This changes the environment.", needs="confirm",
                 argv=self.command),
            View("log", "verify", "The new log", "Give the path of the new log.", needs="input", default=""),
        ]

    def start(self) -> View:
        self._i = 0
        return self._steps()[0]

    def advance(self, answer: Any = None) -> View | None:
        self.answers.append(answer)
        if self._shown_result:  # the result of a run was shown: on to the next step
            self._shown_result = False
            self._i += 1
            return self._steps()[self._i]
        step = self._steps()[self._i]
        if step.needs == "confirm":
            if answer:
                r = self.runner.run(step.argv, timeout=30)
                res = Result("success" if r.ok else "failure", f"exit status {r.returncode}", r.returncode,
                             r.stdout, r.stderr)
            else:
                res = Result("declined", "skipped")
            self._shown_result = True
            return View(step.step_id, step.kind, step.title, step.text, argv=step.argv, result=res)
        self._i += 1
        if self._i >= len(self._steps()):
            self.outcome = "apply:sparse-mla"
            return None
        return self._steps()[self._i]

    def outcome_hint(self) -> str:
        return "Launch with --attention-backend CUSTOM."


def scripted_plan(monkeypatch: Any, command: list[str]) -> dict[str, Any]:
    """Make triage.tui.fixflow.plan hand out a ScriptedSession driven through the real StreamingRunner."""
    from triage.tui import fixflow

    made: dict[str, Any] = {}

    def plan(report: Any, **kw: Any) -> fixflow.Plan:
        runner = fixflow.StreamingRunner(None, kw.get("on_line"))
        session = ScriptedSession(runner, command)
        made["session"] = session
        return fixflow.Plan(session, "attention-sparse-mla", "Sparse MLA on a GPU without a backend", "", runner)

    monkeypatch.setattr(fixflow, "plan", plan)
    return made


def read_pty(master: int) -> bytes:
    """Everything written to a pty until its other side is closed (EIO or EOF ends it)."""
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            return out
        if not chunk:
            return out
        out += chunk
