"""Load and validate playbooks (YAML): the bundled ones and the user's own.

A wrong playbook is refused with its file, line and what is wrong: unknown step kind, a branch to
a missing step, a missing field, a condition on an unknown fact, a cycle with no exit. Data is read
with one safe parse: the node tree gives line numbers, the data is constructed from it.

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

import difflib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from triage.lazyre import lazy
from triage.model import CATEGORIES
from triage.playbooks.conditions import KNOWN_FACTS, Condition, ConditionError, fact_type

OUTCOME_RE = lazy(r"^[a-z][a-z0-9_-]*:\S+$")
STEP_ID_RE = lazy(r"^[a-z0-9][a-z0-9_-]*$")
PLAYBOOK_ID_RE = lazy(r"^[a-z0-9][a-z0-9-]*$")
# {fact}, {*list_fact} (argv expansion), {fact|words shown when the fact is unknown}
PLACEHOLDER_RE = lazy(r"\{(\*?)([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)(?:\|([^{}]*))?\}")
FACT_TYPES = {"version", "capability", "number", "bool", "text", "list", "map"}

# Built-in read-only probes a check step may name (implemented in triage.playbooks.engine).
PROBES = {"upstream", "sparse-mla-bundled"}
# Built-in actions an apply step may name (implemented in triage.playbooks.actions).
ACTIONS = {"sparse-mla", "upgrade-vllm", "set-flag", "set-env", "save-patches"}

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
        branches = STEP_KINDS[self.kind].branches
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


# Facts the engine always sets (derive_facts), so a one-line text may quote them bare.
ALWAYS_KNOWN = {"target_python", "log_path", "dry_run", "patched_count"}

# --- validation -------------------------------------------------------------------------------


class _Checker:
    """Collects the problems of one playbook, each with its line; the shared checks of every step kind."""

    def __init__(self, source: str, lines: "_Lines"):
        self.source = source
        self.at = lines
        self.errors: list[PlaybookError] = []
        self.facts: dict[str, str] = {}  # facts the playbook declares or its steps set
        self.fillable: set[str] | None = None  # facts something can fill, when known

    def err(self, message: str, *path: Any) -> None:
        self.errors.append(PlaybookError(self.source, self.at(*path), message))

    def condition(self, src: Any, *path: Any) -> Condition | None:
        if not isinstance(src, str) or not src.strip():
            self.err("a condition must be a non-empty text", *path)
            return None
        try:
            cond = Condition(src)
            cond.check_facts(self.facts)
        except ConditionError as exc:
            self.err(str(exc), *path)
            return None
        for m in _SIGNATURE_TEST.finditer(src):
            for sig in re.findall(r"'([^']*)'|\"([^\"]*)\"", m.group(1)):
                self.signature("".join(sig), *path)
        return cond

    def signature(self, sig: str, *path: Any) -> None:
        """A signature the playbook names must be one a rule emits, else its branch never runs."""
        known = rule_signatures()
        if sig not in known:
            close = difflib.get_close_matches(sig, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            self.err(f"no rule emits the signature {sig!r}{hint}", *path)

    def template(self, value: Any, *path: Any, inline: bool = False, guard: str = "") -> None:
        """Every {placeholder} names a fact something can fill. A one-line text (a title, a choice label)
        cannot leave out a sentence, so a fact that may be missing there needs words to show instead
        (`{fact|words}`), or a `when` that names it."""
        for m in PLACEHOLDER_RE.finditer(str(value)):
            name = m.group(2)
            if fact_type(name, self.facts) is None:
                self.err(f"unknown fact {name!r} in {{{m.group(1)}{name}}}", *path)
            elif self.fillable is not None and name.split(".", 1)[0] not in self.fillable:
                self.err(f"no step, probe or diagnosis ever sets the fact {name!r}: {{{name}}} would never be filled", *path)
            elif inline and m.group(3) is None and name not in ALWAYS_KNOWN and not re.search(rf"\b{re.escape(name)}\b", guard):
                self.err(f"{{{name}}} in a one-line text needs words for when it is missing ({{{name}|...}}) "
                         "or a `when` that tests it", *path)

    def argv(self, value: Any, node: Any, *path: Any) -> None:
        if not isinstance(value, list) or not value or not all(isinstance(a, (str, int, float)) for a in value):
            self.err("argv must be a non-empty list of arguments (a command is never one shell string)", *path)
            return
        for i, a in enumerate(value):
            self.template(a, *path, i)
        for i in _comma_splits(node):
            self.err(f"argv items {i} and {i + 1} were one argument split at a comma by YAML's [flow, list]: "
                     "quote it ('--a=x,y') or write the list one item a line", *path, i)

    def pattern(self, raw: dict, key: str, sid: str, *path: Any) -> None:
        if key in raw:
            try:
                re.compile(str(raw[key]))
            except re.error as exc:
                self.err(f"step {sid!r}: bad {key}: {exc}", *path, key)


# `signature == 'x'`, `signature in ['x', 'y']`: the quoted signatures a condition tests.
_SIGNATURE_TEST = lazy(r"\bsignature\s*(?:==|!=|not\s+in|in)\s*(\[[^\]]*\]|'[^']*'|\"[^\"]*\")")


def rule_signatures() -> set[str]:
    out: set[str] = set()
    for rule in _rules():
        out.add(rule.signature)
        out.update(getattr(rule, "emits", None) or ())
    return out


def _comma_splits(node: Any) -> list[int]:
    """Indexes i where items i and i+1 of a flow sequence were written `a,b` (one argument to a
    reader, two to YAML)."""
    if not isinstance(node, yaml.SequenceNode) or not node.flow_style:
        return []
    out = []
    for i in range(len(node.value) - 1):
        a, b = node.value[i], node.value[i + 1]
        if (isinstance(a, yaml.ScalarNode) and isinstance(b, yaml.ScalarNode) and a.style is None and b.style is None
                and a.end_mark.index + 1 == b.start_mark.index):
            out.append(i)
    return out


def _check_explain(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    pass


def _check_check(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    if not any(k in raw for k in ("expect", "argv", "probe")):
        c.err(f"step {sid!r} (check) needs expect, argv or probe", "steps", i)
    if "argv" in raw and "probe" in raw:
        c.err(f"step {sid!r} (check) has both argv and probe; use one", "steps", i)
    if "probe" in raw and raw["probe"] not in PROBES:
        c.err(f"step {sid!r}: unknown probe {raw['probe']!r} (one of: {', '.join(sorted(PROBES))})", "steps", i, "probe")
    if "expect" in raw:
        c.condition(raw["expect"], "steps", i, "expect")
    c.pattern(raw, "pattern", sid, "steps", i)


def _check_ask(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    choices = raw.get("choices")
    inp = raw.get("input")
    if (choices is None) == (inp is None):
        c.err(f"step {sid!r} (ask) needs either choices or input", "steps", i)
    if choices is not None:
        if not isinstance(choices, list) or not choices:
            c.err(f"step {sid!r}: choices must be a non-empty list", "steps", i, "choices")
        else:
            keys = []
            for j, ch in enumerate(choices):
                if not isinstance(ch, dict) or not {"key", "label", "goto"} <= set(ch):
                    c.err(f"step {sid!r}: each choice needs key, label and goto", "steps", i, "choices", j)
                    continue
                for k in ch:
                    if k not in ("key", "label", "goto", "when"):
                        c.err(f"step {sid!r}: choice has unknown field {k!r}", "steps", i, "choices", j, k, "@key")
                keys.append(ch["key"])
                if isinstance(ch["label"], bool):
                    # YAML 1.1 reads a bare `label: No` as false: the reader is shown the words written
                    label_node = _child(_child(_child(node, "choices"), j), "label")
                    ch["label"] = label_node.value if isinstance(label_node, yaml.ScalarNode) else str(ch["label"])
                c.template(ch["label"], "steps", i, "choices", j, "label", inline=True, guard=str(ch.get("when") or ""))
                if "when" in ch:
                    c.condition(ch["when"], "steps", i, "choices", j, "when")
            if len(set(keys)) != len(keys):
                c.err(f"step {sid!r}: choice keys must be unique", "steps", i, "choices")
            if "default" in raw and raw["default"] not in keys:
                c.err(f"step {sid!r}: default {raw['default']!r} is not one of the choices", "steps", i, "default")
        if "next" in raw:
            c.err(f"step {sid!r}: an ask with choices branches through each choice's goto, not next", "steps", i, "next")
    if inp is not None:
        if not isinstance(inp, dict) or not isinstance(inp.get("fact"), str):
            c.err(f"step {sid!r}: input needs the fact it sets (input: {{fact: NAME}})", "steps", i, "input")
        if "next" not in raw:
            c.err(f"step {sid!r} (ask) with input is missing field 'next'", "steps", i)


def _check_run(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    if "undo" in raw:
        c.argv(raw["undo"], _child(node, "undo"), "steps", i, "undo")


def _check_apply(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    if raw.get("action") not in ACTIONS:
        c.err(f"step {sid!r}: unknown action {raw.get('action')!r} (one of: {', '.join(sorted(ACTIONS))})",
              "steps", i, "action")
    args = raw.get("with", {})
    if not isinstance(args, dict):
        c.err(f"step {sid!r}: with must be a mapping of action arguments", "steps", i, "with")
        return
    for k, v in args.items():
        for item in v if isinstance(v, list) else [v]:
            c.template(item, "steps", i, "with", k)
        if isinstance(v, list):
            for j in _comma_splits(_child(_child(node, "with"), k)):
                c.err(f"step {sid!r}: with.{k} items {j} and {j + 1} were one value split at a comma: quote it",
                      "steps", i, "with", k, j)


def _check_verify(c: _Checker, sid: str, raw: dict, node: Any, i: int) -> None:
    c.pattern(raw, "ready", sid, "steps", i)


class StepKind:
    """What a step of one kind must and may have, where it branches, and its own checks."""

    def __init__(self, required: set[str], optional: set[str], branches: set[str], check: Any):
        self.required, self.optional, self.branches, self.check = required, optional, branches, check

    def __iter__(self):  # (required, optional, branches), as the table was first written
        return iter((self.required, self.optional, self.branches))


STEP_KINDS: dict[str, StepKind] = {
    "explain": StepKind({"text", "next"}, set(), {"next"}, _check_explain),
    "check": StepKind(
        {"on_pass", "on_fail"},
        {"text", "expect", "argv", "probe", "capture", "pattern", "timeout", "on_unknown", "env"},
        {"on_pass", "on_fail", "on_unknown"},
        _check_check,
    ),
    "ask": StepKind({"question"}, {"text", "choices", "input", "default", "next"}, {"next"}, _check_ask),
    "run": StepKind({"argv", "on_success", "on_failure"}, {"text", "timeout", "undo", "env", "on_decline"},
                    {"on_success", "on_failure", "on_decline"}, _check_run),
    "apply": StepKind({"action", "on_success", "on_failure"}, {"text", "with", "on_decline"},
                      {"on_success", "on_failure", "on_decline"}, _check_apply),
    "verify": StepKind({"on_pass", "on_fail"}, {"text", "argv", "timeout", "ready", "diagnose", "env", "on_decline"},
                       {"on_pass", "on_fail", "on_decline"}, _check_verify),
}


def _child(node: Any, key: Any) -> Any:
    """The node of a mapping's value, or of a sequence's item."""
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == key:
                return v
    if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]
    return None


def _parse(text: str, source: str) -> tuple[Any, Any]:
    """The data and the node tree of one YAML document, from one parse."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise PlaybookInvalid([PlaybookError(source, line, f"not valid YAML: {exc.problem or exc}")]) from None
    except yaml.YAMLError as exc:
        raise PlaybookInvalid([PlaybookError(source, None, f"not valid YAML: {exc}")]) from None
    return data, node


def _check_top(c: _Checker, data: dict) -> tuple[Any, Any, list, list]:
    for key in sorted(TOP_REQUIRED - set(data)):
        c.err(f"missing field {key!r}")
    for key in data:
        if key not in TOP_REQUIRED | TOP_OPTIONAL:
            c.err(f"unknown field {key!r}", key, "@key")
    pid = data.get("id")
    if "id" in data and (not isinstance(pid, str) or not PLAYBOOK_ID_RE.match(pid)):
        c.err(f"id must be lower-case letters, digits and dashes, not {pid!r}", "id")
    title = data.get("title")
    if "title" in data and (not isinstance(title, str) or not title.strip()):
        c.err("title must be a non-empty text", "title")
    cats = data.get("categories")
    if "categories" in data:
        if not isinstance(cats, list) or not cats:
            c.err("categories must be a non-empty list", "categories")
            cats = []
        for i, cat in enumerate(cats):
            if cat not in CATEGORIES:
                c.err(f"unknown category {cat!r} (one of: {', '.join(CATEGORIES)})", "categories", i)
    sigs = data.get("signatures") or []
    if not isinstance(sigs, list) or not all(isinstance(s, str) for s in sigs):
        c.err("signatures must be a list of rule signatures", "signatures")
        sigs = []
    for i, sig in enumerate(sigs):
        c.signature(sig, "signatures", i)
    declared = data.get("facts") or {}
    if not isinstance(declared, dict):
        c.err("facts must map a fact name to its type", "facts")
        declared = {}
    for name, typ in declared.items():
        if typ not in FACT_TYPES:
            c.err(f"fact {name!r} has unknown type {typ!r} (one of: {', '.join(sorted(FACT_TYPES))})", "facts", name)
        else:
            c.facts[str(name)] = typ
    return pid, title, list(cats or []), list(sigs)


def _step_sets(raw_steps: list) -> dict[str, str]:
    """Facts set by steps (capture, ask input): known to the whole playbook."""
    out: dict[str, str] = {}
    for raw in raw_steps:
        if isinstance(raw, dict):
            if isinstance(raw.get("capture"), str):
                out.setdefault(raw["capture"], "text")
            inp = raw.get("input")
            if isinstance(inp, dict) and isinstance(inp.get("fact"), str):
                out.setdefault(inp["fact"], "text")
    return out


def _id_title(sid: str, title: Any) -> bool:
    """A title that is only the step's internal id (`ask-file-len`, `ask file len`)."""
    words = lambda t: re.sub(r"[\s_-]+", " ", str(t)).strip().lower()  # noqa: E731
    return isinstance(title, str) and words(title) == words(sid)


def _check_step(c: _Checker, raw: Any, node: Any, i: int, steps: dict[str, Step]) -> None:
    if not isinstance(raw, dict):
        c.err("a step is a mapping with at least id and kind", "steps", i)
        return
    sid, kind = raw.get("id"), raw.get("kind")
    if not isinstance(sid, str) or not STEP_ID_RE.match(sid):
        c.err(f"step needs an id of lower-case letters, digits and dashes (got {sid!r})", "steps", i)
        return
    if sid in steps:
        c.err(f"duplicate step id {sid!r}", "steps", i, "id")
        return
    if kind not in STEP_KINDS:
        c.err(f"step {sid!r} has unknown kind {kind!r} (one of: {', '.join(STEP_KINDS)})", "steps", i, "kind")
        return
    sk = STEP_KINDS[kind]
    for key in sorted(sk.required - set(raw)):
        c.err(f"step {sid!r} ({kind}) is missing field {key!r}", "steps", i)
    for key in raw:
        if key not in sk.required | sk.optional | COMMON_FIELDS:
            c.err(f"step {sid!r} ({kind}) has unknown field {key!r}", "steps", i, key, "@key")
    if _id_title(sid, raw.get("title")):
        c.err(f"step {sid!r}: its title is its internal id; say what the step does", "steps", i, "title")
    for key in ("text", "question", "title"):
        if key in raw:
            c.template(raw[key], "steps", i, key, inline=key == "title")
    if "argv" in raw:
        c.argv(raw["argv"], _child(node, "argv"), "steps", i, "argv")
    if "timeout" in raw and (not isinstance(raw["timeout"], (int, float)) or raw["timeout"] <= 0):
        c.err(f"step {sid!r}: timeout must be a positive number of seconds", "steps", i, "timeout")
    if "env" in raw:
        if not isinstance(raw["env"], dict):
            c.err(f"step {sid!r}: env must map variable names to values", "steps", i, "env")
        else:
            for k, v in raw["env"].items():
                c.template(v, "steps", i, "env", k)
    sk.check(c, sid, raw, node, i)
    steps[sid] = Step(sid, kind, raw, c.at("steps", i) or 1)


def _check_branches(c: _Checker, steps: dict[str, Step], raw_steps: list) -> None:
    """Branch targets are existing steps or well-formed outcomes."""
    idx = {sid: n for n, sid in enumerate(s.get("id") for s in raw_steps if isinstance(s, dict))}
    for step in steps.values():
        i = idx.get(step.id, 0)
        for fname, target in step.targets():
            path = ("steps", i) + tuple(_split_field(fname))
            if ":" in target:
                if not is_outcome(target):
                    c.err(f"step {step.id!r}: {fname} {target!r} is not an outcome of the form KIND:TARGET", *path)
            elif target not in steps:
                c.err(f"step {step.id!r}: {fname} goes to missing step {target!r}", *path)
        for b in STEP_KINDS[step.kind].branches:
            if b in step.data and not isinstance(step.data[b], str):
                c.err(f"step {step.id!r}: {b} must be a step id or an outcome", "steps", i, b)


def load_text(text: str, source: str = "<playbook>", origin: str = "bundled") -> Playbook:
    """Parse (once) and validate one playbook; raises PlaybookInvalid listing every problem."""
    data, node = _parse(text, source)
    if not isinstance(data, dict):
        raise PlaybookInvalid([PlaybookError(source, 1, "a playbook is a YAML mapping with id, title, categories and steps")])
    c = _Checker(source, _Lines(_line_map(node)))
    pid, title, cats, sigs = _check_top(c, data)
    raw_steps = data.get("steps")
    if "steps" in data and (not isinstance(raw_steps, list) or not raw_steps):
        c.err("steps must be a non-empty list", "steps")
        raw_steps = []
    raw_steps = raw_steps or []
    set_by_steps = _step_sets(raw_steps)
    for name, typ in set_by_steps.items():
        c.facts.setdefault(name, typ)
    c.fillable = fillable_facts(cats, set(set_by_steps))
    when = c.condition(data["when"], "when") if "when" in data else None
    steps: dict[str, Step] = {}
    steps_node = _child(node, "steps")
    for i, raw in enumerate(raw_steps):
        _check_step(c, raw, _child(steps_node, i), i, steps)
    _check_branches(c, steps, raw_steps)
    start = data.get("start") or (next(iter(steps)) if steps else "")
    if "start" in data and start not in steps:
        c.err(f"start goes to missing step {start!r}", "start")
    if not c.errors:
        for sid in _stuck_steps(steps, start):
            c.errors.append(PlaybookError(source, steps[sid].line,
                                          f"step {sid!r} is in a cycle with no exit: it can never reach an outcome"))
    if c.errors:
        raise PlaybookInvalid(c.errors)
    return Playbook(
        id=pid,
        title=title.strip(),
        categories=cats,
        signatures=sigs,
        steps=steps,
        start=start,
        source=source,
        when=when,
        facts=dict(c.facts),
        summary=str(data.get("summary") or data.get("description") or "").strip(),
        origin=origin,
    )


def fillable_facts(categories: list[str], set_by_steps: set[str]) -> set[str]:
    """Facts something can fill for a playbook of these categories: the machine and derived facts,
    what its steps set, and what the rules of its categories read from a log (their named groups and
    the facts their titles and fixes quote)."""
    out = set(KNOWN_FACTS) | set_by_steps
    for rule in _rules():
        if rule.category in categories:
            for pat in rule.patterns or []:
                out.update(re.findall(r"\(\?P<([A-Za-z_]\w*)>", pat))
            for tmpl in (rule.title, rule.fix):
                out.update(re.findall(r"\{([A-Za-z_]\w*)", str(tmpl or "")))
    return out | _written_facts()


_WRITTEN: set[str] | None = None


def _written_facts() -> set[str]:
    """Fact names the rules' fact functions and the enrichment write (`out["name"] = ...`, `{"name": ...}`),
    read from their source: what a diagnosis can set beyond a pattern's named groups."""
    global _WRITTEN
    if _WRITTEN is None:
        import ast

        import triage.enrich
        import triage.rules

        files = sorted(Path(triage.rules.__file__).parent.rglob("*.py")) + [Path(triage.enrich.__file__)]
        names: set[str] = set()
        for f in files:
            for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
                    key = node.slice
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        names.add(key.value)
                elif isinstance(node, ast.Dict):
                    names.update(k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
        _WRITTEN = names
    return _WRITTEN


_RULES: list | None = None


def _rules() -> list:
    global _RULES
    if _RULES is None:
        from triage.rules import all_rules

        _RULES = list(all_rules())
    return _RULES


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
