"""Load and validate playbooks (YAML): the bundled ones and the user's own.

A wrong playbook is refused with its file, line and what is wrong: unknown step kind, a branch to
a missing step, a missing field, a condition on an unknown fact, a cycle with no exit. Data is read
with `yaml.safe_load`; line numbers come from the node marks of `yaml.compose` on the same text.

Shape (see playbooks/*.yaml and README):

    id: attention-sparse-mla
    title: ...
    categories: [attention_backend]
    signatures: [attention.no_valid_backend]
    when: "use_sparse"            # optional: the playbook applies only when this holds
    facts: {my_fact: text}        # optional: extra facts the playbook's steps set or read
    steps:
      - id: ...
        kind: explain|check|ask|run|apply|verify
        ...

A branch target is a step id, or an outcome `KIND:TARGET` (`apply:sparse-mla`, `manual:escalate`)
which ends the playbook.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from triage.model import CATEGORIES
from triage.playbooks.conditions import Condition, ConditionError, fact_type

OUTCOME_RE = re.compile(r"^[a-z][a-z0-9_-]*:\S+$")
STEP_ID_RE = re.compile(r"^[a-z0-9][a-z0-9_-]*$")
PLAYBOOK_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# {fact}, {*list_fact} (argv expansion), {fact|words shown when the fact is unknown}
PLACEHOLDER_RE = re.compile(r"\{(\*?)([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)(?:\|([^{}]*))?\}")
FACT_TYPES = {"version", "capability", "number", "bool", "text", "list", "map"}

# Built-in read-only probes a check step may name (implemented in triage.playbooks.engine).
PROBES = {"upstream", "sparse-mla-bundled"}
# Built-in actions an apply step may name (implemented in triage.playbooks.actions).
ACTIONS = {"sparse-mla", "upgrade-vllm", "set-flag", "set-env", "save-patches"}

# kind -> (required fields, optional fields, branch fields)
STEP_KINDS: dict[str, tuple[set[str], set[str], set[str]]] = {
    "explain": ({"text", "next"}, set(), {"next"}),
    "check": (
        {"on_pass", "on_fail"},
        {"text", "expect", "argv", "probe", "capture", "pattern", "timeout", "on_unknown", "env"},
        {"on_pass", "on_fail", "on_unknown"},
    ),
    "ask": ({"question"}, {"text", "choices", "input", "default", "next"}, {"next"}),
    "run": (
        {"argv", "on_success", "on_failure"},
        {"text", "timeout", "undo", "env", "on_decline"},
        {"on_success", "on_failure", "on_decline"},
    ),
    "apply": (
        {"action", "on_success", "on_failure"},
        {"text", "with", "on_decline"},
        {"on_success", "on_failure", "on_decline"},
    ),
    "verify": (
        {"on_pass", "on_fail"},
        {"text", "argv", "timeout", "ready", "diagnose", "env", "on_decline"},
        {"on_pass", "on_fail", "on_decline"},
    ),
}
COMMON_FIELDS = {"id", "kind", "title"}
TOP_REQUIRED = {"id", "title", "categories", "steps"}
TOP_OPTIONAL = {"signatures", "when", "facts", "start", "summary", "description"}


class PlaybookError(ValueError):
    """One thing wrong with a playbook, where it is."""

    def __init__(self, file: str, line: int | None, message: str):
        self.file = file
        self.line = line
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.message}"


class PlaybookInvalid(ValueError):
    """A playbook refused, with every problem found in it."""

    def __init__(self, errors: list[PlaybookError]):
        self.errors = errors
        super().__init__("\n".join(str(e) for e in errors))


@dataclass
class Step:
    id: str
    kind: str
    data: dict[str, Any]
    line: int

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def title(self) -> str:
        return str(self.data.get("title") or self.id.replace("-", " "))

    def targets(self) -> list[tuple[str, str]]:
        """(field, target) for every branch out of this step."""
        _req, _opt, branches = STEP_KINDS[self.kind]
        out = [(k, v) for k, v in self.data.items() if k in branches and isinstance(v, str)]
        for i, choice in enumerate(self.data.get("choices") or []):
            if isinstance(choice, dict) and isinstance(choice.get("goto"), str):
                out.append((f"choices[{i}].goto", choice["goto"]))
        return out


@dataclass
class Playbook:
    id: str
    title: str
    categories: list[str]
    signatures: list[str]
    steps: dict[str, Step]
    start: str
    source: str
    when: Condition | None = None
    facts: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    origin: str = "bundled"  # or "user"

    @property
    def outcomes(self) -> list[str]:
        seen: list[str] = []
        for step in self.steps.values():
            for _f, target in step.targets():
                if is_outcome(target) and target not in seen:
                    seen.append(target)
        return seen

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "title": self.title, "categories": list(self.categories), "outcomes": self.outcomes}


def is_outcome(target: str) -> bool:
    return bool(OUTCOME_RE.match(target))


# --- line numbers -----------------------------------------------------------------------------


def _line_map(node: yaml.Node | None, path: tuple = (), out: dict | None = None) -> dict[tuple, int]:
    out = {} if out is None else out
    if node is None:
        return out
    out[path] = node.start_mark.line + 1
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            out[path + (key,)] = key_node.start_mark.line + 1
            _line_map(value_node, path + (key,), out)
            # the key's own line, for "missing/unknown field" messages
            out[path + (key, "@key")] = key_node.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _line_map(item, path + (i,), out)
    return out


class _Lines:
    def __init__(self, lines: dict[tuple, int]):
        self.lines = lines

    def __call__(self, *path: Any) -> int | None:
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), 1)


# --- validation -------------------------------------------------------------------------------


def load_text(text: str, source: str = "<playbook>", origin: str = "bundled") -> Playbook:
    """Parse and validate one playbook; raises PlaybookInvalid listing every problem."""
    try:
        data = yaml.safe_load(text)
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise PlaybookInvalid([PlaybookError(source, line, f"not valid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise PlaybookInvalid([PlaybookError(source, None, f"not valid YAML: {exc}")]) from None
    at = _Lines(_line_map(node))
    errors: list[PlaybookError] = []

    def err(message: str, *path: Any) -> None:
        errors.append(PlaybookError(source, at(*path), message))

    if not isinstance(data, dict):
        raise PlaybookInvalid([PlaybookError(source, 1, "a playbook is a YAML mapping with id, title, categories and steps")])

    for key in sorted(TOP_REQUIRED - set(data)):
        err(f"missing field {key!r}")
    for key in data:
        if key not in TOP_REQUIRED | TOP_OPTIONAL:
            err(f"unknown field {key!r}", key, "@key")

    pid = data.get("id")
    if "id" in data and (not isinstance(pid, str) or not PLAYBOOK_ID_RE.match(pid)):
        err(f"id must be lower-case letters, digits and dashes, not {pid!r}", "id")
    title = data.get("title")
    if "title" in data and (not isinstance(title, str) or not title.strip()):
        err("title must be a non-empty text", "title")

    cats = data.get("categories")
    if "categories" in data:
        if not isinstance(cats, list) or not cats:
            err("categories must be a non-empty list", "categories")
            cats = []
        for i, c in enumerate(cats):
            if c not in CATEGORIES:
                err(f"unknown category {c!r} (one of: {', '.join(CATEGORIES)})", "categories", i)
    sigs = data.get("signatures") or []
    if not isinstance(sigs, list) or not all(isinstance(s, str) for s in sigs):
        err("signatures must be a list of rule signatures", "signatures")
        sigs = []

    extra_facts: dict[str, str] = {}
    declared = data.get("facts") or {}
    if not isinstance(declared, dict):
        err("facts must map a fact name to its type", "facts")
        declared = {}
    for name, typ in declared.items():
        if typ not in FACT_TYPES:
            err(f"fact {name!r} has unknown type {typ!r} (one of: {', '.join(sorted(FACT_TYPES))})", "facts", name)
        else:
            extra_facts[str(name)] = typ

    raw_steps = data.get("steps")
    if "steps" in data and (not isinstance(raw_steps, list) or not raw_steps):
        err("steps must be a non-empty list", "steps")
        raw_steps = []
    raw_steps = raw_steps or []

    # Facts set by steps (capture / ask input) are known to the whole playbook.
    for i, raw in enumerate(raw_steps):
        if isinstance(raw, dict):
            for key in ("capture",):
                if isinstance(raw.get(key), str):
                    extra_facts.setdefault(raw[key], "text")
            inp = raw.get("input")
            if isinstance(inp, dict) and isinstance(inp.get("fact"), str):
                extra_facts.setdefault(inp["fact"], "text")

    def check_condition(src: Any, *path: Any) -> Condition | None:
        if not isinstance(src, str) or not src.strip():
            err("a condition must be a non-empty text", *path)
            return None
        try:
            cond = Condition(src)
            cond.check_facts(extra_facts)
            return cond
        except ConditionError as exc:
            err(str(exc), *path)
            return None

    def check_template(value: Any, *path: Any) -> None:
        for m in PLACEHOLDER_RE.finditer(str(value)):
            if fact_type(m.group(2), extra_facts) is None:
                err(f"unknown fact {m.group(2)!r} in {{{m.group(1)}{m.group(2)}}}", *path)

    def check_argv(value: Any, *path: Any) -> None:
        if not isinstance(value, list) or not value or not all(isinstance(a, (str, int, float)) for a in value):
            err("argv must be a non-empty list of arguments (a command is never one shell string)", *path)
            return
        for i, a in enumerate(value):
            check_template(a, *path, i)

    when = check_condition(data["when"], "when") if "when" in data else None

    steps: dict[str, Step] = {}
    for i, raw in enumerate(raw_steps):
        if not isinstance(raw, dict):
            err("a step is a mapping with at least id and kind", "steps", i)
            continue
        sid = raw.get("id")
        kind = raw.get("kind")
        if not isinstance(sid, str) or not STEP_ID_RE.match(sid):
            err(f"step needs an id of lower-case letters, digits and dashes (got {sid!r})", "steps", i)
            continue
        if sid in steps:
            err(f"duplicate step id {sid!r}", "steps", i, "id")
            continue
        if kind not in STEP_KINDS:
            err(f"step {sid!r} has unknown kind {kind!r} (one of: {', '.join(STEP_KINDS)})", "steps", i, "kind")
            continue
        required, optional, _branches = STEP_KINDS[kind]
        for key in sorted(required - set(raw)):
            err(f"step {sid!r} ({kind}) is missing field {key!r}", "steps", i)
        for key in raw:
            if key not in required | optional | COMMON_FIELDS:
                err(f"step {sid!r} ({kind}) has unknown field {key!r}", "steps", i, key, "@key")
        for key in ("text", "question", "title"):
            if key in raw:
                check_template(raw[key], "steps", i, key)
        if "argv" in raw:
            check_argv(raw["argv"], "steps", i, "argv")
        if "undo" in raw:
            check_argv(raw["undo"], "steps", i, "undo")
        if "timeout" in raw and (not isinstance(raw["timeout"], (int, float)) or raw["timeout"] <= 0):
            err(f"step {sid!r}: timeout must be a positive number of seconds", "steps", i, "timeout")
        if "env" in raw:
            if not isinstance(raw["env"], dict):
                err(f"step {sid!r}: env must map variable names to values", "steps", i, "env")
            else:
                for k, v in raw["env"].items():
                    check_template(v, "steps", i, "env", k)
        if "pattern" in raw:
            try:
                re.compile(str(raw["pattern"]))
            except re.error as exc:
                err(f"step {sid!r}: bad pattern: {exc}", "steps", i, "pattern")
        if "ready" in raw:
            try:
                re.compile(str(raw["ready"]))
            except re.error as exc:
                err(f"step {sid!r}: bad ready pattern: {exc}", "steps", i, "ready")
        if kind == "check":
            if not any(k in raw for k in ("expect", "argv", "probe")):
                err(f"step {sid!r} (check) needs expect, argv or probe", "steps", i)
            if "argv" in raw and "probe" in raw:
                err(f"step {sid!r} (check) has both argv and probe; use one", "steps", i)
            if "probe" in raw and raw["probe"] not in PROBES:
                err(f"step {sid!r}: unknown probe {raw['probe']!r} (one of: {', '.join(sorted(PROBES))})", "steps", i, "probe")
            if "expect" in raw:
                check_condition(raw["expect"], "steps", i, "expect")
        if kind == "apply":
            if raw.get("action") not in ACTIONS:
                err(f"step {sid!r}: unknown action {raw.get('action')!r} (one of: {', '.join(sorted(ACTIONS))})", "steps", i, "action")
            args = raw.get("with", {})
            if not isinstance(args, dict):
                err(f"step {sid!r}: with must be a mapping of action arguments", "steps", i, "with")
            else:
                for k, v in args.items():
                    for item in v if isinstance(v, list) else [v]:
                        check_template(item, "steps", i, "with", k)
        if kind == "ask":
            choices = raw.get("choices")
            inp = raw.get("input")
            if (choices is None) == (inp is None):
                err(f"step {sid!r} (ask) needs either choices or input", "steps", i)
            if choices is not None:
                if not isinstance(choices, list) or not choices:
                    err(f"step {sid!r}: choices must be a non-empty list", "steps", i, "choices")
                else:
                    keys = []
                    for j, ch in enumerate(choices):
                        if not isinstance(ch, dict) or not {"key", "label", "goto"} <= set(ch):
                            err(f"step {sid!r}: each choice needs key, label and goto", "steps", i, "choices", j)
                            continue
                        for k in ch:
                            if k not in ("key", "label", "goto", "when"):
                                err(f"step {sid!r}: choice has unknown field {k!r}", "steps", i, "choices", j, k, "@key")
                        keys.append(ch["key"])
                        check_template(ch["label"], "steps", i, "choices", j, "label")
                        if "when" in ch:
                            check_condition(ch["when"], "steps", i, "choices", j, "when")
                    if len(set(keys)) != len(keys):
                        err(f"step {sid!r}: choice keys must be unique", "steps", i, "choices")
                    if "default" in raw and raw["default"] not in keys:
                        err(f"step {sid!r}: default {raw['default']!r} is not one of the choices", "steps", i, "default")
                if "next" in raw:
                    err(f"step {sid!r}: an ask with choices branches through each choice's goto, not next", "steps", i, "next")
            if inp is not None:
                if not isinstance(inp, dict) or not isinstance(inp.get("fact"), str):
                    err(f"step {sid!r}: input needs the fact it sets (input: {{fact: NAME}})", "steps", i, "input")
                if "next" not in raw:
                    err(f"step {sid!r} (ask) with input is missing field 'next'", "steps", i)
        steps[sid] = Step(sid, kind, raw, at("steps", i) or 1)

    # Branch targets: existing steps or well-formed outcomes.
    idx = {sid: n for n, sid in enumerate(s.get("id") for s in raw_steps if isinstance(s, dict))}
    for step in steps.values():
        i = idx.get(step.id, 0)
        for fname, target in step.targets():
            path = ("steps", i) + tuple(_split_field(fname))
            if ":" in target:
                if not is_outcome(target):
                    err(f"step {step.id!r}: {fname} {target!r} is not an outcome of the form KIND:TARGET", *path)
            elif target not in steps:
                err(f"step {step.id!r}: {fname} goes to missing step {target!r}", *path)
        _req, _opt, branches = STEP_KINDS[step.kind]
        for b in branches:
            if b in step.data and not isinstance(step.data[b], str):
                err(f"step {step.id!r}: {b} must be a step id or an outcome", "steps", i, b)

    start = data.get("start") or (next(iter(steps)) if steps else "")
    if "start" in data and start not in steps:
        err(f"start goes to missing step {start!r}", "start")

    if not errors:
        for sid in _stuck_steps(steps, start):
            step = steps[sid]
            errors.append(
                PlaybookError(source, step.line, f"step {sid!r} is in a cycle with no exit: it can never reach an outcome")
            )

    if errors:
        raise PlaybookInvalid(errors)
    return Playbook(
        id=pid,
        title=title.strip(),
        categories=list(cats),
        signatures=list(sigs),
        steps=steps,
        start=start,
        source=source,
        when=when,
        facts=extra_facts,
        summary=str(data.get("summary") or data.get("description") or "").strip(),
        origin=origin,
    )


def _split_field(fname: str) -> list[Any]:
    out: list[Any] = []
    for part in fname.split("."):
        m = re.match(r"^(\w+)\[(\d+)\]$", part)
        if m:
            out.extend([m.group(1), int(m.group(2))])
        else:
            out.append(part)
    return out


def _stuck_steps(steps: dict[str, Step], start: str) -> list[str]:
    """Steps reachable from the start from which no outcome can be reached."""
    reach: set[str] = set()
    todo = [start] if start in steps else []
    while todo:
        sid = todo.pop()
        if sid in reach:
            continue
        reach.add(sid)
        todo.extend(t for _f, t in steps[sid].targets() if t in steps)
    exits: set[str] = {sid for sid, s in steps.items() if any(is_outcome(t) for _f, t in s.targets())}
    changed = True
    while changed:
        changed = False
        for sid, s in steps.items():
            if sid not in exits and any(t in exits for _f, t in s.targets()):
                exits.add(sid)
                changed = True
    return [sid for sid in steps if sid in reach and sid not in exits]


def load_file(path: str | Path, origin: str = "bundled") -> Playbook:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlaybookInvalid([PlaybookError(str(p), None, f"cannot read: {exc}")]) from None
    return load_text(text, str(p), origin)


# --- where playbooks live ---------------------------------------------------------------------


def bundled_dir() -> Path:
    """playbooks/ of a source checkout, else the copy the wheel carries (triage/playbooks_bundled)."""
    pkg = Path(__file__).resolve().parent.parent
    source = pkg.parent / "playbooks"
    if source.is_dir() and any(source.glob("*.yaml")):
        return source
    return pkg / "playbooks_bundled"


def user_dir() -> Path:
    from triage.paths import config_dir

    return config_dir() / "playbooks"


def _yaml_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    return sorted(list(folder.glob("*.yaml")) + list(folder.glob("*.yml")))


@dataclass
class Library:
    playbooks: dict[str, Playbook]
    errors: list[PlaybookError]
    notes: list[str] = field(default_factory=list)

    def get(self, pid: str) -> Playbook | None:
        return self.playbooks.get(pid)

    def for_diagnosis(self, category: str, signature: str | None, facts: dict[str, Any]) -> Playbook | None:
        """The best playbook for a diagnosis: a signature match first, then the category, whose `when` holds."""
        candidates = [p for p in self.playbooks.values() if category in p.categories]

        def fit(p: Playbook) -> int:
            """0: its `when` holds; 1: it has none; 2: unknown whether it holds; 3: it does not apply."""
            if p.when is None:
                return 1
            return {True: 0, None: 2, False: 3}[p.when.evaluate(facts, p.facts)]

        ranked = sorted(
            (p for p in candidates if fit(p) < 3),
            key=lambda p: (0 if signature and signature in p.signatures else 1, fit(p), p.id),
        )
        return ranked[0] if ranked else None


def load_library(extra_dirs: list[Path] | None = None, *, include_user: bool = True) -> Library:
    """Every valid playbook; invalid ones are left out and listed in `errors`. User playbooks replace
    bundled ones of the same id."""
    playbooks: dict[str, Playbook] = {}
    errors: list[PlaybookError] = []
    notes: list[str] = []
    sources: list[tuple[Path, str]] = [(bundled_dir(), "bundled")]
    if include_user:
        sources.append((user_dir(), "user"))
    for d in extra_dirs or []:
        sources.append((Path(d), "user"))
    for folder, origin in sources:
        seen_here: dict[str, str] = {}
        for f in _yaml_files(folder):
            try:
                pb = load_file(f, origin)
            except PlaybookInvalid as exc:
                errors.extend(exc.errors)
                continue
            if pb.id in seen_here:
                errors.append(PlaybookError(str(f), 1, f"id {pb.id!r} is already used by {seen_here[pb.id]}"))
                continue
            seen_here[pb.id] = str(f)
            if pb.id in playbooks and origin == "user":
                notes.append(f"{f} replaces the bundled playbook {pb.id!r}")
            playbooks[pb.id] = pb
    return Library(playbooks, errors, notes)
