"""The playbook engine: walks a playbook's steps against the facts of one diagnosis, independent of
any user interface.

A front end (the console one below, the TUI) drives a `Session`:

    session = Session(playbook, facts, runner=LocalRunner())
    view = session.start()
    while view is not None:
        show(view)
        view = session.advance(answer_for(view))   # see StepView.needs
    print(session.outcome)

Each StepView says what it needs from the operator: nothing (`None`: show it, then advance()),
"ack" (read it), "confirm" (a change: advance(True) runs it, advance(False) declines), "choice"
(advance(key)) or "input" (advance(text)). Before a change runs, its view carries the exact argv,
the commands of an action and the diff of a file edit. In dry-run nothing runs: commands are shown,
checks on commands are assumed to pass, and the walk follows the success branches.

Values from facts reach commands as argv elements (`{model}` inside one element stays inside it; a
whole element `{*launch_argv}` expands a list fact), never as shell text.
"""

from __future__ import annotations

import os
import re
import shlex
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, TextIO

from triage import upstream
from triage.actions import sparse_mla
from triage.diagnose import diagnose
from triage.launch import serve_argv
from triage.lazyre import lazy
from triage.logread import scan_source
from triage.logread.source import open_source
from triage.model import Report
from triage.playbooks.actions import SPARSE_MLA_MODULE, ActionContext, Preview, default_actions
from triage.playbooks.conditions import Condition, lookup
from triage.playbooks.flagfix import change_facts
from triage.playbooks.load import PLACEHOLDER_RE, Playbook, Step, is_outcome
from triage.playbooks.wording import fact_words, human_value, missing_line, outcome_words, status_words
from triage.runner import LocalRunner, Result, Runner

MAX_STEPS = 200
TIMEOUTS = {"check": 60.0, "run": 600.0, "verify": 900.0}
DECLINED = "manual:declined"

OUTCOME_HINTS = {
    "manual:escalate": "Nobody seems to have reported this yet: `triage report --log {log_path}` writes an upstream bug report "
    "(environment, command, the decisive log lines, what was tried), redacted, ready to file.",
    "manual:declined": "Stopped: a change was declined. Nothing after it was run.",
    "manual:loop-limit": "Stopped: the playbook went round too many times.",
}


class MissingFact(KeyError):
    def __init__(self, name: str):
        super().__init__(name)
        self.name = name

    def __str__(self) -> str:
        return f"{fact_words(self.name)} is not known"


MACHINE_FACTS = {"vllm_version", "vllm_install", "python_prefix", "python", "compute_capability", "gpus",
                 "driver_version", "cuda_driver_version", "cuda_version", "torch_version", "packages",
                 "patched_files", "os", "shm_bytes", "in_container"}

# --- facts ------------------------------------------------------------------------------------


def derive_facts(
    environment: dict[str, Any] | None,
    diagnosis: Any = None,
    *,
    python: str | None = None,
    log_path: str | None = None,
    host: str | None = None,
    dry_run: bool = False,
) -> dict[str, Any]:
    """One flat fact dictionary for conditions and templates: the environment, the diagnosis' facts,
    and values derived from them (cc_major, target_python, launch_argv, ...)."""
    facts: dict[str, Any] = dict(environment or {})
    if diagnosis is not None:
        dfacts = diagnosis.get("facts", {}) if isinstance(diagnosis, dict) else getattr(diagnosis, "facts", {})
        for k, v in (dfacts or {}).items():
            # The failing line is the authority on what vLLM ran with (max_model_len, dtype, ...);
            # the machine's own facts come from the probe when there is one.
            if k not in MACHINE_FACTS or k not in facts:
                facts[k] = v
        get = diagnosis.get if isinstance(diagnosis, dict) else lambda k: getattr(diagnosis, k, None)
        facts["category"] = get("category")
        facts["signature"] = get("signature")
        # The rule's own advice, for a playbook's general path to quote: a category's playbook cannot know
        # every failure the category holds.
        fix = get("fix")
        summary = fix.get("summary") if isinstance(fix, dict) else getattr(fix, "summary", None)
        if summary:
            facts["fix_summary"] = str(summary)
        # The launch change the refusal calls for, from the diagnosis' own facts (not the machine's)
        for k, v in change_facts(facts["signature"], dict(dfacts or {})).items():
            facts.setdefault(k, v)
    if python:
        facts["_python_override"] = python
    if log_path:
        facts["log_path"] = log_path
    if host:
        facts["host"] = host
    facts["dry_run"] = dry_run
    refresh_derived(facts)
    return facts


def refresh_derived(facts: dict[str, Any]) -> None:
    gpus = facts.get("gpus") or []
    if not isinstance(gpus, list):  # a rule's count of GPUs, not the probe's list
        if isinstance(gpus, int) and not isinstance(gpus, bool):
            facts.setdefault("gpu_count", gpus)
        gpus = []
    first = gpus[0] if gpus and isinstance(gpus[0], dict) else {}
    cc = facts.get("compute_capability") or first.get("compute_capability")
    if cc is not None:
        facts["compute_capability"] = str(cc)
        try:
            facts["cc_major"] = int(str(cc).split(".")[0])
        except ValueError:
            pass
    if first.get("name"):
        facts["gpu_name"] = first["name"]
    if gpus:
        facts["gpu_count"] = len(gpus)
    if first.get("memory_total_mib") is not None:
        facts["gpu_memory_mib"] = first["memory_total_mib"]
    from triage.interpreter import runnable_python

    trusted = runnable_python(facts, facts.get("_python_override"))
    py = trusted or lookup(facts, "python.executable")
    if not py and facts.get("python_prefix"):
        py = os.path.join(str(facts["python_prefix"]), "bin", "python")
    facts["target_python"] = py or "python3"
    # An interpreter the log or a snapshot names runs only after the operator confirms a step with it.
    facts["target_python_trusted"] = not py or py == trusted
    kind = lookup(facts, "vllm_install.kind")
    if kind:
        facts["install_kind"] = kind
    facts["patched_count"] = len(facts.get("patched_files") or [])
    if facts.get("model"):
        prefix = facts.get("python_prefix")
        vllm = os.path.join(str(prefix), "bin", "vllm") if prefix else "vllm"
        facts["launch_argv"] = serve_argv(dict(facts.get("launch_args") or {}), vllm=vllm, model=str(facts["model"]))
        # The log's prefix/bin/vllm, unless the interpreter the user named lives beside it.
        facts["launch_program_unvouched"] = bool(prefix) and not (
            trusted and os.path.dirname(os.path.abspath(trusted)) == os.path.join(os.path.abspath(str(prefix)), "bin"))


_SENTENCE_END = lazy(r"(?<=[.!?])\s+(?=\S)")
_BLOCK_LINE = lazy(r"^\s*(?:[-*\u2022$|>]\s|\d+[.)]\s|```)|^\s{2,}\S")


def _fill(m: re.Match, facts: dict[str, Any]) -> str | None:
    """A placeholder's text, or None when its fact is missing and it has no default."""
    v = lookup(facts, m.group(2))
    if v is None or v == "":
        return m.group(3)
    v = human_value(m.group(2), v)
    if isinstance(v, list):
        if m.group(2).endswith("argv"):
            return show_argv([str(x) for x in v])
        return ", ".join(str(x) for x in v) if v else "none"
    if isinstance(v, dict):
        return None
    if isinstance(v, bool):
        return "yes" if v else "no"
    return str(v)


def _fill_all(text: str, facts: dict[str, Any], missing: list[str]) -> str | None:
    """Every placeholder filled, or None (and the missing facts noted) when one cannot be."""
    gaps: list[str] = []

    def sub(m: re.Match) -> str:
        got = _fill(m, facts)
        if got is None:
            gaps.append(m.group(2))
            return ""
        return got

    out = PLACEHOLDER_RE.sub(sub, text)
    if gaps:
        missing.extend(g for g in gaps if g not in missing)
        return None
    return out


def render_text(template: Any, facts: dict[str, Any], missing: list[str] | None = None) -> str:
    """Fill {fact} placeholders for people to read. A sentence (or list line) whose fact is missing
    is left out and the fact noted in `missing`; paragraphs are joined into one line each so a
    front end can wrap them to its width."""
    missing = [] if missing is None else missing
    out: list[str] = []
    para: list[str] = []

    def flush() -> None:
        if not para:
            return
        kept = []
        for sentence in _SENTENCE_END.split(" ".join(para)):
            got = _fill_all(sentence, facts, missing)
            if got is not None and got.strip():
                kept.append(got)
        if kept:
            out.append(" ".join(kept))
        para.clear()

    for line in str(template).rstrip().split("\n"):
        whole = PLACEHOLDER_RE.fullmatch(line.strip())
        v = lookup(facts, whole.group(2)) if whole else None
        if not line.strip():
            flush()
            if out and out[-1] != "":
                out.append("")
        elif whole and isinstance(v, list) and v and not whole.group(2).endswith("argv"):
            # A list placeholder alone on its line reads as a bulleted list.
            flush()
            indent = line[: len(line) - len(line.lstrip())]
            out.extend(f"{indent}- {x}" for x in v)
        elif whole and v not in (None, "") and "\n" in str(v):
            flush()  # a multi-line value (captured command output) keeps its lines
            out.extend("  " + x for x in str(v).splitlines())
        elif _BLOCK_LINE.match(line) or (whole and v in (None, "")):
            flush()
            got = _fill_all(line, facts, missing)
            if got is not None:
                out.append(got)
        else:
            para.append(line.strip())
    flush()
    while out and out[-1] == "":
        out.pop()
    return "\n".join(out)


def render_inline(template: Any, facts: dict[str, Any]) -> str:
    """A title or a choice label: one line that cannot lose a sentence, so a missing fact reads as
    what it is (`how many tokens the KV cache holds`)."""

    def sub(m: re.Match) -> str:
        got = _fill(m, facts)
        return got if got is not None else fact_words(m.group(2))

    return PLACEHOLDER_RE.sub(sub, str(template)).strip()


def render_argv(template: list[Any], facts: dict[str, Any]) -> list[str]:
    """Each template element becomes one argument (or, for `{*list}`, several): never shell text."""
    out: list[str] = []
    for element in template:
        element = str(element)
        whole = PLACEHOLDER_RE.fullmatch(element)
        if whole and whole.group(1) == "*":
            v = lookup(facts, whole.group(2))
            if v is None:
                raise MissingFact(whole.group(2))
            out.extend(str(x) for x in (v if isinstance(v, (list, tuple)) else [v]))
            continue

        def sub(m: re.Match) -> str:
            v = lookup(facts, m.group(2))
            if v is None or v == "":
                raise MissingFact(m.group(2))
            return str(v)

        out.append(PLACEHOLDER_RE.sub(sub, element))
    return out


def show_argv(argv: list[str]) -> str:
    """How a command is shown to people (quoted as a shell would need it); it is never run this way."""
    return shlex.join(argv)


# --- views ------------------------------------------------------------------------------------


@dataclass
class StepResult:
    status: str  # pass | fail | unknown | success | failure | declined | not-run
    message: str = ""
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    said: bool = False  # the message says it all; the status word is not shown


@dataclass
class StepView:
    step_id: str
    kind: str
    title: str
    text: str = ""
    needs: str | None = None  # None | "ack" | "confirm" | "choice" | "input"
    argv: list[str] | None = None
    lines: list[str] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    diff: str = ""
    choices: list[tuple[str, str]] = field(default_factory=list)
    default: str | None = None
    result: StepResult | None = None
    where: str = "this machine"
    dry_run: bool = False
    error: str = ""  # the previous answer was not accepted
    # The interpreter a log or a snapshot named that confirming this step would run: only a person
    # answering this very question may allow it (not --yes).
    unvouched: str | None = None


# --- probes -----------------------------------------------------------------------------------


def default_upstream(facts: dict[str, Any], report: Report | None = None, offline: bool = False) -> dict[str, Any]:
    """What upstream knows, as facts under `upstream`: verdict (fixes|does-not-fix|unknown),
    target_version, hits. Uses the report's own upstream section when it has one, else runs
    triage.upstream.lookup on the report (which fills report.upstream and report.upgrade)."""
    upgrade = report.upgrade if report is not None else None
    hits = report.upstream if report is not None else None
    source = "report"
    if upgrade is None and not offline and report is not None and report.diagnoses:
        try:
            upstream.lookup(report, offline=False)
        except Exception as exc:  # the network and GitHub fail in many ways; degrade to unknown
            return {"verdict": "unknown", "why": f"upstream lookup failed: {exc}", "source": "triage.upstream"}
        upgrade, hits = report.upgrade, report.upstream
        source = "triage.upstream"
    if not upgrade:
        if offline:
            why = "offline"
        elif report is None or not report.diagnoses:
            why = "no diagnosis to look up upstream"
        else:
            why = "the upstream lookup gave no verdict"
        return {"verdict": "unknown", "why": why, "hits": len(hits or []), "source": source}
    out = {
        "verdict": upgrade.verdict,
        "target_version": upgrade.target_version,
        "evidence": upgrade.evidence,
        "hits": len(hits or []),
        "source": source,
    }
    if offline and out["verdict"] not in ("fixes", "does-not-fix"):
        out["why"] = "offline"
    if hits:
        top = hits[0]
        out["top"] = f"#{top.number} {top.title} ({top.url})"
    return out


def sparse_mla_probe() -> dict[str, Any]:
    """Whether the bundled backend can be installed from here: its package ships with triage."""
    try:
        sparse_mla.package_version()
    except (OSError, ValueError):
        return {"available": False, "module": SPARSE_MLA_MODULE}
    return {"available": True, "module": SPARSE_MLA_MODULE}


def sparse_mla_range() -> dict[str, Any]:
    """The vLLM range the bundled backend was proven in (written once, in its support module)."""
    from triage_sparse_mla.support import MAX_VLLM_EXCLUSIVE, MIN_VLLM, SUPPORTED_VLLM

    # .dev0: a release line's pre-releases and nightlies count as that line (as support does)
    return {"min_vllm": "%d.%d.0.dev0" % MIN_VLLM, "max_vllm": "%d.%d.0.dev0" % MAX_VLLM_EXCLUSIVE,
            "supported_vllm": SUPPORTED_VLLM}


def default_diagnose(path: str) -> list[dict[str, Any]] | None:
    """Diagnoses of a log file, from the log alone: a verify step asks only which failure it shows
    (the machine's facts and upstream add explanation, never change the signature)."""
    diagnoses, _notes = diagnose(scan_source(open_source(path)))
    return [d.to_json() for d in diagnoses]


# --- the session ------------------------------------------------------------------------------


class Session:
    def __init__(
        self,
        playbook: Playbook,
        facts: dict[str, Any],
        *,
        runner: Runner | None = None,
        dry_run: bool = False,
        actions: dict[str, Any] | None = None,
        recorder_factory: Callable[[str, str, str], Any] | None = None,
        upstream: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        diagnose: Callable[[str], list[dict[str, Any]] | None] = default_diagnose,
        sparse_probe: Callable[[], dict[str, Any]] = sparse_mla_probe,
    ):
        self.playbook = playbook
        self.facts = dict(facts)
        self.facts["dry_run"] = dry_run
        self.runner: Runner = GuardedRunner(runner or LocalRunner(), self.facts)
        self.dry_run = dry_run
        self.actions = actions if actions is not None else default_actions()
        self._recorder_factory = recorder_factory or _default_recorder
        self._upstream = upstream or (lambda f: default_upstream(f))
        self._diagnose = diagnose
        self._sparse_probe = sparse_probe
        self.recorder: Any = None
        self.outcome: str | None = None
        self.history: list[StepView] = []
        self.current: StepView | None = None
        self.visited: list[str] = []
        self._step: Step | None = None
        self._phase = ""
        self._pending_target: str | None = None
        self._preview: Preview | None = None
        self._argv: list[str] | None = None
        self._step_facts = {name for st in playbook.steps.values()
                            for name in (st.get("capture"), (st.get("input") or {}).get("fact")) if name}

    # --- public API ---

    @property
    def finished(self) -> bool:
        return self.outcome is not None

    def start(self) -> StepView | None:
        return self._enter(self.playbook.start)

    def advance(self, answer: Any = None) -> StepView | None:
        """Give the answer the current view needs; returns the next view, or None at the end."""
        view, step = self.current, self._step
        if view is None or step is None:
            return None
        if view.needs == "confirm":
            if step.kind == "check":  # a check that runs an interpreter the log names
                if not answer:
                    res = StepResult("unknown", f"not run: running {self.facts.get('target_python')} was declined")
                    return self._replace(step, res, step.get("on_unknown") or step.get("on_fail"), argv=self._argv)
                if isinstance(self.runner, GuardedRunner) and view.unvouched:
                    self.runner.allow(view.unvouched)
                return self._show(self._run_check(step, self._argv or []))
            if not answer:
                self._note(f"declined: {step.id}")
                return self._go(step.get("on_decline") or DECLINED)
            if isinstance(self.runner, GuardedRunner) and view.unvouched:
                self.runner.allow(view.unvouched)  # the operator saw it in this step and said yes
            return self._execute(step)
        if view.needs == "choice":
            keys = {k for k, _l in view.choices}
            key = view.default if answer in (None, "") else str(answer)
            if key not in keys:
                view.error = f"choose one of: {', '.join(sorted(keys))}"
                return view
            goto = next(c["goto"] for c in step.get("choices") if str(c["key"]) == key)
            self._note(f"{step.id}: chose {key}")
            return self._go(goto)
        if view.needs == "input":
            text = "" if answer is None else str(answer).strip()
            if step.kind == "verify":
                return self._verify_log(step, text)
            fact = step.get("input")["fact"]
            if not text and not step.get("input").get("optional") and not self.dry_run:
                view.error = "an answer is needed"
                return view
            self.facts[fact] = text or None
            return self._go(step.get("next"))
        # "ack" or an informational view: move on.
        return self._go(self._pending_target or step.get("next"))

    def finish(self) -> None:
        if self.recorder is not None and hasattr(self.recorder, "finish"):
            self.recorder.finish(self.outcome)

    def outcome_hint(self) -> str:
        if self.outcome is None:
            return ""
        hint = OUTCOME_HINTS.get(self.outcome)
        return render_text(hint, self.facts) if hint else ""

    # --- walking ---

    def _go(self, target: str | None) -> StepView | None:
        if target is None:
            target = "manual:escalate"
        if is_outcome(target):
            self.outcome = target
            self.current = None
            self._step = None
            self.finish()
            return None
        if len(self.visited) >= MAX_STEPS:
            self.outcome = "manual:loop-limit"
            self.current = None
            self.finish()
            return None
        return self._enter(target)

    def _enter(self, sid: str) -> StepView | None:
        step = self.playbook.steps[sid]
        self._step = step
        self.visited.append(sid)
        self._pending_target = None
        self._preview = None
        self._argv = None
        if is_routing(step):
            # A branch on facts alone: said only when it holds and explains why; else walked silently.
            value = Condition(step.get("expect")).evaluate(self.facts, self.playbook.facts)
            status = {True: "pass", False: "fail", None: "unknown"}[value]
            self._note(f"{step.id}: {status}")
            if not (status == "pass" and step.get("text")):
                target = step.get("on_pass") if status == "pass" else step.get("on_fail")
                if status == "unknown":
                    target = step.get("on_unknown") or step.get("on_fail")
                return self._go(target)
        handler = getattr(self, f"_enter_{step.kind}")
        view = handler(step)
        return self._show(view)

    def _show(self, view: StepView) -> StepView:
        self.current = view
        self.history.append(view)
        return view

    def _view(self, step: Step, **kw: Any) -> StepView:
        missing: list[str] = []
        text = render_text(step.get("text") or step.get("question") or "", self.facts, missing)
        # Facts this playbook's own steps set (captured output, answers) are not the log's to give.
        missing = [m for m in missing if m.split(".", 1)[0] not in self._step_facts]
        if missing:
            text = (text + "\n" if text else "") + missing_line(missing)
        if kw.get("needs") == "confirm" and isinstance(self.runner, GuardedRunner):
            py = str(self.facts.get("target_python"))
            shown = [*(kw.get("argv") or [])[:1], *(c[0] for c in kw.get("commands") or [] if c)]
            if self.runner.needs_consent(py) and step.kind in ("apply", "check"):
                kw["unvouched"] = py
            else:
                kw["unvouched"] = next((p for p in shown if self.runner.needs_consent(p)), None)
        return StepView(
            step_id=step.id,
            kind=step.kind,
            title=render_inline(step_title(step), self.facts),
            text=kw.pop("text", text),
            where=self.runner.where,
            dry_run=self.dry_run,
            **kw,
        )

    def _replace(self, step: Step, result: StepResult, target: str | None, **kw: Any) -> StepView:
        self._pending_target = target
        return self._show(self._view(step, result=result, **kw))

    def _dry(self, step: Step, message: str, target: str | None, **kw: Any) -> StepView:
        self._pending_target = target
        return self._view(step, result=StepResult("not-run", message), **kw)

    # explain
    def _enter_explain(self, step: Step) -> StepView:
        self._pending_target = step.get("next")
        return self._view(step, needs="ack")

    # ask
    def _enter_ask(self, step: Step) -> StepView:
        if step.get("input") is not None:
            return self._view(step, needs="input", default=step.get("input").get("default"))
        choices = []
        for ch in step.get("choices"):
            if "when" in ch and Condition(ch["when"]).evaluate(self.facts, self.playbook.facts) is not True:
                continue
            choices.append((str(ch["key"]), render_inline(ch["label"], self.facts)))
        keys = [k for k, _l in choices]
        default = str(step.get("default")) if step.get("default") is not None and str(step.get("default")) in keys else (keys[0] if keys else None)
        return self._view(step, needs="choice", choices=choices, default=default)

    # check
    def _enter_check(self, step: Step) -> StepView | None:
        if is_routing(step):  # shown only when it holds and says why (see _enter)
            self._pending_target = step.get("on_pass")
            return self._view(step, needs="ack")
        argv = None
        result_msg = ""
        said = False  # the probe's own words are the whole result
        if step.get("probe"):
            if step.get("probe") == "upstream":
                got = self._upstream(self.facts)
                self.facts["upstream"] = got
                result_msg = upstream_words(got)
                said = True
            elif step.get("probe") == "sparse-mla-bundled":
                got = {**sparse_mla_range(), **self._sparse_probe()}
                self.facts["sparse_mla"] = {**(self.facts.get("sparse_mla") or {}), **got}
                result_msg = "the bundled sparse MLA backend installer is " + ("available" if got.get("available") else "missing")
                said = True
        if step.get("argv") is not None:
            try:
                argv = render_argv(step.get("argv"), self.facts)
            except MissingFact as exc:
                res = StepResult("unknown", f"not checked: {exc}")
                return self._checked(step, None, res)
            if self.dry_run:
                res = StepResult("not-run", "dry run: this read-only check is not run; assuming it passes")
                self._pending_target = step.get("on_pass")
                return self._view(step, argv=argv, result=res)
            if argv and isinstance(self.runner, GuardedRunner) and self.runner.needs_consent(argv[0]):
                self._argv = argv
                py = argv[0]
                text = render_text(step.get("text") or "", self.facts)
                ask = (f"This check runs {py}, which was named by the log or a snapshot, not by you: "
                       "triage runs nothing from a log without asking.")
                return self._view(step, argv=argv, needs="confirm", text=(text + "\n" if text else "") + ask)
            return self._run_check(step, argv)
        return self._judge_check(step, None, StepResult("", result_msg, said=said))

    def _run_check(self, step: Step, argv: list[str]) -> StepView:
        r = self._run(argv, timeout=float(step.get("timeout") or TIMEOUTS["check"]), env=self._env(step))
        out = (r.stdout or "") + (r.stderr or "")
        if step.get("capture"):
            value: str | None = out.strip()
            if step.get("pattern"):
                m = re.search(str(step.get("pattern")), out, re.MULTILINE)
                value = (m.group(1) if m.groups() else m.group(0)) if m else None
            self.facts[step.get("capture")] = value or None
            refresh_derived(self.facts)
        if step.get("expect") is None:
            status = "pass" if r.ok else "fail"
            res = StepResult(status, "timed out" if r.timed_out else f"exit status {r.returncode}", r.returncode, r.stdout, r.stderr, r.timed_out)
            return self._checked(step, argv, res)
        base = StepResult("", "timed out" if r.timed_out else f"exit status {r.returncode}", r.returncode, r.stdout,
                          r.stderr, r.timed_out)
        return self._judge_check(step, argv, base)

    def _judge_check(self, step: Step, argv: list[str] | None, base: StepResult) -> StepView:
        if step.get("expect") is not None:
            value = Condition(step.get("expect")).evaluate(self.facts, self.playbook.facts)
            base.status = {True: "pass", False: "fail", None: "unknown"}[value]
            if not base.message:
                base.message = {"pass": "yes", "fail": "no", "unknown": "cannot tell"}[base.status]
        else:
            base.status = "pass"
        return self._checked(step, argv, base)

    def _checked(self, step: Step, argv: list[str] | None, res: StepResult) -> StepView:
        target = {"pass": step.get("on_pass"), "fail": step.get("on_fail")}.get(res.status)
        if res.status == "unknown":
            target = step.get("on_unknown") or step.get("on_fail")
        self._pending_target = target
        return self._view(step, argv=argv, result=res)

    # run
    def _enter_run(self, step: Step) -> StepView:
        try:
            argv = render_argv(step.get("argv"), self.facts)
        except MissingFact as exc:
            if self.dry_run:
                return self._dry(step, f"dry run: not run ({exc} here)", step.get("on_success"),
                                 argv=preview_argv(step.get("argv"), self.facts))
            self._pending_target = step.get("on_failure")
            return self._view(step, result=StepResult("failure", f"cannot run: {exc}"))
        self._argv = argv
        if self.dry_run:
            self._pending_target = step.get("on_success")
            return self._view(step, argv=argv, result=StepResult("not-run", "dry run: not run"))
        return self._view(step, argv=argv, needs="confirm")

    # apply
    def _enter_apply(self, step: Step) -> StepView:
        action = self.actions.get(step.get("action"))
        if action is None:
            self._pending_target = step.get("on_failure")
            return self._view(step, result=StepResult("failure", f"action {step.get('action')!r} is not available"))
        try:
            args = self._action_args(step)
        except MissingFact as exc:
            if self.dry_run:
                if exc.name in self.facts:
                    # An answer left empty: the real walk takes the failure branch, so the dry run does too.
                    return self._dry(step, f"dry run: not applied: {exc}", step.get("on_failure"))
                return self._dry(step, f"dry run: would {action_words(step, self.facts)} ({exc} yet)",
                                 step.get("on_success"))
            self._pending_target = step.get("on_failure")
            return self._view(step, result=StepResult("failure", f"cannot apply: {exc}"))
        preview = action.preview(args, self._ctx())
        if preview.problem and isinstance(self.runner, GuardedRunner) and self.runner.needs_consent(
                str(self.facts.get("target_python"))):
            # Planning wanted the interpreter, and one the log names runs only once this step is confirmed.
            preview = Preview(lines=[f"target: {self.facts.get('target_python')} (named by the log or a snapshot: "
                                     "not run to plan this before you confirm)"])
        self._preview = preview
        kw = dict(lines=preview.lines, commands=preview.commands, diff=preview.diff)
        if preview.problem:
            self._pending_target = step.get("on_failure")
            return self._view(step, result=StepResult("failure", preview.problem), **kw)
        if self.dry_run:
            # Walk on as if it was applied: later steps show what they would then do.
            if preview.facts:
                self.facts.update(preview.facts)
                refresh_derived(self.facts)
            self._pending_target = step.get("on_success")
            return self._view(step, result=StepResult("not-run", "dry run: not applied"), **kw)
        return self._view(step, needs="confirm", **kw)

    # verify
    def _enter_verify(self, step: Step) -> StepView:
        if step.get("argv") is None:
            if self.dry_run:
                self._pending_target = step.get("on_pass")
                return self._view(step, result=StepResult("not-run", "dry run: would ask for the new log and diagnose it"))
            return self._view(step, needs="input")
        try:
            argv = render_argv(step.get("argv"), self.facts)
        except MissingFact as exc:
            self._pending_target = step.get("on_fail")
            return self._view(step, result=StepResult("unknown", f"cannot verify: {exc}"))
        self._argv = argv
        if self.dry_run:
            self._pending_target = step.get("on_pass")
            return self._view(step, argv=argv, result=StepResult("not-run", "dry run: not run"))
        return self._view(step, argv=argv, needs="confirm")

    def _execute(self, step: Step) -> StepView | None:
        if step.kind == "run":
            argv = self._argv or []
            r = self._run(argv, timeout=float(step.get("timeout") or TIMEOUTS["run"]), env=self._env(step))
            undo = None
            if step.get("undo"):
                try:
                    undo = render_argv(step.get("undo"), self.facts)
                except MissingFact:
                    undo = None
            self._recorder().change(f"ran: {show_argv(argv)} (exit {r.returncode})", undo, where=self.runner.where)
            status = "success" if r.ok else "failure"
            msg = "timed out: " + f"{step.get('timeout') or TIMEOUTS['run']:g}s" if r.timed_out else f"exit status {r.returncode}"
            res = StepResult(status, msg, r.returncode, r.stdout, r.stderr, r.timed_out)
            return self._replace(step, res, step.get("on_success") if r.ok else step.get("on_failure"), argv=argv)
        if step.kind == "apply":
            action = self.actions[step.get("action")]
            ctx = self._ctx(record=True)
            try:
                got = action.apply(self._action_args(step), ctx)
            except MissingFact as exc:
                got = None
                res = StepResult("failure", f"cannot apply: {exc}")
            if got is not None:
                self.facts.update(got.facts)
                refresh_derived(self.facts)
                res = StepResult("success" if got.ok else "failure", got.message)
            pv = self._preview or Preview()
            return self._replace(
                step, res, step.get("on_success") if res.status == "success" else step.get("on_failure"),
                lines=pv.lines, commands=pv.commands, diff=pv.diff,
            )
        if step.kind == "verify":
            argv = self._argv or []
            timeout = float(step.get("timeout") or TIMEOUTS["verify"])
            r = self._run(argv, timeout=timeout, env=self._env(step))
            out = (r.stdout or "") + (r.stderr or "")
            ready = step.get("ready")
            if ready and re.search(str(ready), out, re.MULTILINE):
                res = StepResult("pass", "it came up", r.returncode, r.stdout, r.stderr, r.timed_out)
                self.facts["verify"] = {"ok": True}
                return self._replace(step, res, step.get("on_pass"), argv=argv)
            return self._judge(step, out, r, argv)
        raise AssertionError(step.kind)

    def _judge(self, step: Step, output: str, r: Result | None, argv: list[str] | None) -> StepView:
        diags = None
        if step.get("diagnose", True):
            with tempfile.NamedTemporaryFile("w", suffix=".log", delete=False, encoding="utf-8") as fh:
                fh.write(output)
                path = fh.name
            try:
                diags = self._diagnose(path)
            finally:
                os.unlink(path)
        ran_ok = r is None or r.ok
        if diags:
            top = diags[0]
            same = top.get("signature") == self.facts.get("signature")
            self.facts["verify"] = {"ok": False, "signature": top.get("signature"), "category": top.get("category"),
                                    "title": top.get("title"), "same": same}
            msg = ("the same failure again: " if same else "a different failure now: ") + str(top.get("title"))
            res = StepResult("fail", msg)
        elif diags is None and step.get("diagnose", True) and r is None:
            self.facts["verify"] = {"ok": None}
            res = StepResult("unknown", "cannot diagnose the log here")
        else:
            ok = ran_ok or (r is not None and r.timed_out and step.get("ready") is None)
            self.facts["verify"] = {"ok": ok}
            res = StepResult("pass" if ok else "fail", "no failure found" if ok else (
                "timed out" if r is not None and r.timed_out else f"exit status {r.returncode if r else '?'}"))
        if r is not None:
            res.returncode, res.stdout, res.stderr, res.timed_out = r.returncode, r.stdout, r.stderr, r.timed_out
        target = step.get("on_pass") if res.status == "pass" else step.get("on_fail")
        return self._replace(step, res, target, argv=argv)

    def _verify_log(self, step: Step, path: str) -> StepView | None:
        if not path:
            return self._replace(step, StepResult("unknown", "no new log given; not verified"), step.get("on_fail"))
        try:
            with open(os.path.expanduser(path), encoding="utf-8", errors="replace") as fh:
                output = fh.read()
        except OSError as exc:
            view = self.current
            assert view is not None  # a verify step is being shown
            view.error = f"cannot read {path}: {exc.strerror or exc}"
            return view
        return self._judge(step, output, None, None)

    # --- helpers ---

    def _env(self, step: Step) -> dict[str, str] | None:
        env = step.get("env")
        if not env:
            return None
        return {str(k): render_text(v, self.facts) for k, v in env.items()}

    def _action_args(self, step: Step) -> dict[str, Any]:
        args: dict[str, Any] = {}
        for k, v in (step.get("with") or {}).items():
            if isinstance(v, list):
                args[k] = render_argv(v, self.facts)
            elif isinstance(v, str):
                whole = PLACEHOLDER_RE.fullmatch(v)
                if whole:  # keep the fact's own type (a list of patched files, a bool)
                    val = lookup(self.facts, whole.group(2))
                    if val is None:
                        raise MissingFact(whole.group(2))
                    args[k] = val
                else:
                    args[k] = render_argv([v], self.facts)[0]
            else:
                args[k] = v
        return args

    def _ctx(self, record: bool = False) -> ActionContext:
        return ActionContext(
            runner=self.runner,
            recorder=self._recorder() if record else None,
            facts=self.facts,
            python=str(self.facts.get("target_python") or "python3"),
        )

    def _recorder(self) -> Any:
        if self.recorder is None:
            self.recorder = self._recorder_factory(self.playbook.title, self.runner.where, self.playbook.id)
        return self.recorder

    def _note(self, text: str) -> None:
        if self.recorder is not None and hasattr(self.recorder, "note"):
            self.recorder.note(text)

    def _run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None) -> Result:
        recorder = self._recorder()  # before running: what cannot be recorded does not run
        r = self.runner.run(argv, timeout=timeout, env=env)
        recorder.command(argv, r, self.runner.where)
        return r


def is_routing(step: Step) -> bool:
    """A check on facts alone (no command, no probe): a branch, not something to show."""
    return step.kind == "check" and step.get("argv") is None and step.get("probe") is None


def step_title(step: Step) -> str:
    """The step's title, or words for what it does; never its internal id."""
    if step.get("title"):
        return str(step.get("title"))
    kind = step.kind
    if kind == "apply":
        args = step.get("with") or {}
        action = step.get("action")
        if action == "set-flag" and args.get("flag"):
            return f"Set {args['flag']} in the launch command"
        if action == "set-env" and args.get("name"):
            return f"Set {args['name']} in the launch environment"
        return ACTION_TITLES.get(str(action), "Apply the change")
    if kind == "ask":
        if (step.get("input") or {}).get("fact") == "launch_file":
            return "Where is the launch command?"
        q = str(step.get("question") or "").strip().split("\n")[0]
        q = re.sub(r"\s*\([^)]*\)?\s*$", "", q).strip()
        q = re.split(r"(?<=[.?!:;])\s", q)[0].rstrip(":;")
        if "{" in q:  # a question about facts reads badly as a title when one is missing
            q = ""
        if len(q) > 70:
            q = q[:70].rsplit(" ", 1)[0] + " …"
        return q or ("Your choice" if step.get("choices") else "Your answer")
    if kind == "verify":
        return "Launch again and check"
    if kind == "run":
        return "Run the command"
    if kind == "check":
        return "What upstream knows" if step.get("probe") == "upstream" else "Check"
    return "What to do"


def action_words(step: Step, facts: dict[str, Any]) -> str:
    """What an apply step would do, for a dry run that cannot build its preview."""
    args = step.get("with") or {}
    action = step.get("action")
    if action == "set-flag" and args.get("flag"):
        value = render_inline(args.get("value"), facts) if args.get("value") is not None else ""
        return f"set {args['flag']} {value}".rstrip() + " in the launch command"
    if action == "set-env" and args.get("name"):
        return f"set {args['name']} in the launch environment"
    return ACTION_TITLES.get(str(action), "apply the change").lower()


def preview_argv(template: list[Any], facts: dict[str, Any]) -> list[str]:
    """A command to show (never to run) where a missing fact reads as what it is: `<the torch version vLLM needs>`."""
    out: list[str] = []
    for element in template:
        whole = PLACEHOLDER_RE.fullmatch(str(element))
        if whole and whole.group(1) == "*" and lookup(facts, whole.group(2)) is None:
            out.append(f"<{fact_words(whole.group(2))}>")
            continue
        try:
            out.extend(render_argv([element], facts))
        except MissingFact:
            out.append(PLACEHOLDER_RE.sub(lambda m: _fill(m, facts) or f"<{fact_words(m.group(2))}>", str(element)))
    return out


ACTION_TITLES = {
    "upgrade-vllm": "Upgrade vLLM",
    "sparse-mla": "Install the bundled sparse MLA backend",
    "save-patches": "Keep copies of the hand-patched vLLM files",
    "set-flag": "Change a launch flag",
    "set-env": "Set an environment variable at launch",
}


def upstream_words(got: dict[str, Any]) -> str:
    """What the upstream probe learned, in words."""
    verdict = got.get("verdict")
    target = got.get("target_version")
    if verdict == "fixes":
        msg = "upstream: upgrading fixes this" + (f" (vLLM {target})" if target else "")
    elif verdict == "does-not-fix":
        msg = "upstream: upgrading does not fix this"
    elif verdict in ("partial", "may-fix", "maybe"):
        msg = "upstream: upgrading may fix this" + (f" (vLLM {target})" if target else "")
    elif got.get("why") == "offline":
        msg = "upstream not searched (offline): whether upgrading fixes this is not known"
    else:
        why = got.get("why")
        msg = "upstream: no answer on whether upgrading fixes this" + (f" ({why})" if why else "")
    return msg


class GuardedRunner:
    """The session's runner: an interpreter the log or a snapshot names (target_python when not
    trusted) runs only once the operator confirmed a step showing it, and a local one never from a
    path another user could have written (triage.interpreter.refuse_reason)."""

    def __init__(self, inner: Runner, facts: dict[str, Any]):
        self.inner = inner
        self.facts = facts
        self.allowed: set[str] = set()

    @property
    def where(self) -> str:
        return self.inner.where

    def allow(self, program: str) -> None:
        self.allowed.add(program)

    def needs_consent(self, program: str) -> bool:
        named = set()
        if not self.facts.get("target_python_trusted", True):
            named.add(str(self.facts.get("target_python")))
        launch = self.facts.get("launch_argv")
        if self.facts.get("launch_program_unvouched") and isinstance(launch, list) and launch:
            named.add(str(launch[0]))
        return program in named and program not in self.allowed

    def run(self, argv: Any, *, timeout: float = 60.0, input: str | None = None,
            env: dict[str, str] | None = None) -> Result:
        argv = [str(a) for a in argv]
        if argv and self.needs_consent(argv[0]):
            return Result(argv, -1, "", f"not run: {argv[0]} was named by the log or a snapshot and not confirmed")
        if argv and argv[0] in self.allowed and self.inner.where == LocalRunner.where:
            from triage.interpreter import refuse_reason

            why = refuse_reason(argv[0])
            if why:
                return Result(argv, -1, "", why)
        if argv and argv[0] == self.facts.get("target_python") and self.inner.where == LocalRunner.where:
            from triage.interpreter import refuse_reason

            why = refuse_reason(argv[0])
            if why:
                return Result(argv, -1, "", why)
        return self.inner.run(argv, timeout=timeout, input=input, env=env)


def _default_recorder(title: str, where: str, pid: str) -> Any:
    from triage.transcript import Transcript

    return Transcript.start(title, where, id=pid)


# --- a headless front end ---------------------------------------------------------------------


def terminal_width(out: TextIO) -> int:
    """The terminal's columns (80 for a pipe or a file), never less than 40."""
    try:
        cols = os.get_terminal_size(out.fileno()).columns if out.isatty() else 0
    except (OSError, ValueError, AttributeError):
        cols = 0
    if not cols:
        try:
            cols = int(os.environ.get("COLUMNS", "") or 80)
        except ValueError:
            cols = 80
    return max(40, cols)


def wrap_lines(text: str, width: int, indent: str = "    ", hang: str = "") -> list[str]:
    """Each line of `text` wrapped at word boundaries (long words, such as paths, are never split);
    continuation lines keep the line's own indent, plus `hang` under a list marker."""
    import textwrap

    out: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            out.append("")
            continue
        own = line[: len(line) - len(line.lstrip())]
        body = line.strip()
        sub = hang
        m = re.match(r"^(?:[-*\u2022]|\d+[.)])\s+", body)
        if m and not hang:
            sub = " " * len(m.group(0))
        out.extend(textwrap.wrap(body, width=max(20, width - 1), initial_indent=indent + own,
                                 subsequent_indent=indent + own + sub, break_long_words=False,
                                 break_on_hyphens=False) or [indent + own])
    return out


class ConsoleFrontEnd:
    """Plain text in a terminal or a pipe. With yes=True every change is confirmed and every question
    takes its default; without a terminal (interactive=False) changes are refused."""

    def __init__(self, out: TextIO = sys.stdout, inp: TextIO = sys.stdin, *, yes: bool = False, interactive: bool = True):
        self.out = out
        self.inp = inp
        self.yes = yes
        self.interactive = interactive
        self.n = 0
        self._awaiting: str | None = None
        self.width = terminal_width(out)

    def say(self, text: str = "") -> None:
        from triage.sanitize import clean

        self.out.write(clean(text) + "\n")  # facts and command output may carry terminal control
        self.out.flush()

    def para(self, text: str, indent: str = "    ", hang: str = "") -> None:
        """A paragraph wrapped to the terminal at word boundaries; continuation lines keep the indent."""
        for line in wrap_lines(text, self.width, indent, hang):
            self.say(line)

    def _ask(self, prompt: str) -> str | None:
        self.out.write(prompt)
        self.out.flush()
        line = self.inp.readline()
        return None if line == "" else line.rstrip("\n")

    def show(self, v: StepView) -> None:
        # A result that follows its own confirm/input prompt continues that step's block.
        continued = self._awaiting == v.step_id and v.result is not None
        self._awaiting = v.step_id if v.needs in ("confirm", "input") else None
        if not continued:
            self.n += 1
            self.say(f"\n[{self.n}] {v.title}")
            self.para(v.text)
            if v.argv:
                where = f"    (on {v.where})" if v.where != LocalRunner.where else ""
                self.say(f"    $ {show_argv(v.argv)}{where}")
            for line in v.lines:
                self.say(f"    {line}")
            for cmd in v.commands:
                self.say(f"    $ {show_argv(cmd)}")
            for line in v.diff.rstrip("\n").splitlines():
                self.say(f"    | {line}")
        if v.result is not None:
            r = v.result
            head = r.message if r.said and r.message else status_words(r.status) + (f": {r.message}" if r.message else "")
            self.para(f"-> {head}", hang="   ")
            for line in ((r.stdout or "") + (r.stderr or "")).strip().splitlines()[-8:]:
                self.say(f"       {line}")

    def answer(self, v: StepView) -> Any:
        if v.error:
            self.say(f"    ! {v.error}")
        if v.needs is None or v.needs == "ack":
            return None
        if v.needs == "confirm":
            if v.unvouched and (self.yes or not self.interactive):
                self.say(f"    not confirmed: it runs {v.unvouched}, which the log or a snapshot names; "
                         "answer in a terminal, or pass --python")
                return False
            if self.yes:
                self.say("    (confirmed by --yes)")
                return True
            if not self.interactive:
                self.say("    refused: no terminal to confirm this change (use --yes to allow changes)")
                return False
            got = self._ask("    Do it? [y/N] ")
            return bool(got and got.strip().lower() in ("y", "yes"))
        if v.needs == "choice":
            for i, (key, label) in enumerate(v.choices, 1):
                mark = " (default)" if key == v.default else ""
                self.para(f"{i}) {label}{mark}", hang="   ")
            if self.yes or not self.interactive:
                chosen = next((lab for k, lab in v.choices if k == v.default), str(v.default))
                self.para(f"-> {chosen}", hang="   ")
                return v.default
            got = self._ask("    Choose: ")
            if got is None:
                return v.default
            got = got.strip()
            if got.isdigit() and 1 <= int(got) <= len(v.choices):
                return v.choices[int(got) - 1][0]
            return got
        if v.needs == "input":
            if self.yes or not self.interactive:
                self.say(f"    -> {v.default or '(no answer)'}")
                return v.default or ""
            got = self._ask("    > ")
            return got or v.default or ""
        return None

    def run(self, session: Session) -> str | None:
        view = session.start()
        guard = 0
        while view is not None:
            self.show(view)
            answer = self.answer(view)
            nxt = session.advance(answer)
            guard = guard + 1 if nxt is view else 0
            if guard > 3:  # the same question refused again and again (a closed stdin)
                session.outcome = "manual:stopped"
                session.finish()
                break
            view = nxt
        self.say("")
        self.para(f"Result: {outcome_words(session.outcome)}", indent="")
        hint = session.outcome_hint()
        if hint:
            self.para(hint, indent="")
        if session.recorder is not None and hasattr(session.recorder, "root"):
            self.say(f"transcript: {session.recorder.root}  (`triage undo` reverts its changes)")
        return session.outcome
