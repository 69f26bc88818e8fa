"""Conditions on facts, as written in playbooks: `compute_capability >= 12.0 and use_sparse`.

A small expression language, parsed here (never eval'd):

    expr    := or
    or      := and ("or" and)*
    and     := not ("and" not)*
    not     := "not" not | cmp
    cmp     := operand [(== != < <= > >= in "not in") operand] | operand "is" ["not"] "known"
    operand := FACT | NUMBER-OR-VERSION | "text" | 'text' | true | false | null | [operand, ...] | ( expr )

Facts are dotted names (`vllm_install.kind`, `packages.torch`); a fact missing from the machine is
*unknown*, and logic is three-valued (Kleene): a comparison with an unknown fact is unknown, `unknown
and false` is false, `unknown or true` is true. Playbooks branch on unknown explicitly (`on_unknown`)
so a missing probe degrades to "we don't know" instead of a wrong answer.

Versions (`vllm_version < 0.11.1`) and compute capabilities (`12.0 > 9.0`) compare with PEP 440-like
ordering (triage.versions.Version); plain numbers compare numerically; everything else as text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from triage.lazyre import lazy
from triage.versions import InvalidVersion, Version

# --- the facts a condition may name -----------------------------------------------------------

# Type of each fact: "version", "capability", "number", "bool", "text", "list", "map".
# A dotted name is known when its head is a known "map" fact (packages.vllm, vllm_install.kind).
KNOWN_FACTS: dict[str, str] = {
    # environment (log + probes)
    "vllm_version": "version",
    "vllm_install": "map",
    "model": "text",
    "architecture": "text",
    "launch_args": "map",
    "python_prefix": "text",
    "python": "map",
    "compute_capability": "capability",
    "gpus": "list",
    "driver_version": "version",
    "cuda_driver_version": "version",
    "cuda_version": "version",
    "torch_version": "version",
    "packages": "map",
    "patched_files": "list",
    "os": "map",
    "shm_bytes": "number",
    "in_container": "bool",
    # diagnosis
    "category": "text",
    "signature": "text",
    "fix_summary": "text",  # the diagnosis' fix, in the rule's words
    "head_size": "number",
    "dtype": "text",
    "kv_cache_dtype": "text",
    "block_size": "number",
    "use_mla": "bool",
    "use_sparse": "bool",
    "has_sink": "bool",
    "rejected": "map",
    "backend": "text",
    # derived by the engine (triage.playbooks.engine.derive_facts)
    "cc_major": "number",
    "gpu_name": "text",
    "gpu_count": "number",
    "gpu_memory_mib": "number",
    "target_python": "text",
    "launch_argv": "list",
    "log_path": "text",
    "host": "text",
    "patched_count": "number",
    "install_kind": "text",
    "dry_run": "bool",
    "refusal_kind": "text",  # triage.playbooks.flagfix: set | drop | env | request
    "flag_change": "text",  # the launch change, shell-quoted
    # set by built-in probes and steps
    "upstream": "map",
    "sparse_mla": "map",
    "verify": "map",
    "saved_patches_dir": "text",
    "launch_file": "text",  # the launch script or compose file a step asks for
}

_VERSIONISH = {"version", "capability"}


def fact_type(name: str, extra: dict[str, str] | None = None) -> str | None:
    """The type of a (dotted) fact name, or None when no playbook may name it."""
    table = dict(KNOWN_FACTS)
    if extra:
        table.update(extra)
    if name in table:
        return table[name]
    head = name.split(".", 1)[0]
    if head in table and table[head] in ("map", "list"):
        if head == "packages":
            return "version"
        return "any"
    return None


def lookup(facts: dict[str, Any], name: str) -> Any:
    """A dotted fact's value, or None when unknown. `gpus.0.name` indexes lists."""
    cur: Any = facts
    for part in name.split("."):
        if isinstance(cur, dict):
            if part in cur:
                cur = cur[part]
                continue
            return None
        if isinstance(cur, (list, tuple)) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
            continue
        return None
    return cur


# --- parsing ----------------------------------------------------------------------------------


class ConditionError(ValueError):
    """A condition that cannot be parsed, or that names an unknown fact."""


_TOKEN_RE = lazy(
    r"""\s*(?:
      (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
     |(?P<op>==|!=|<=|>=|<|>|\(|\)|\[|\]|,)
     |(?P<num>\d[0-9A-Za-z.+!_]*)
     |(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*)
    )""",
    re.VERBOSE,
)

_KEYWORDS = {"and", "or", "not", "in", "is", "known", "true", "false", "null", "none"}


@dataclass(frozen=True)
class _Tok:
    kind: str  # str, op, num, name, kw, end
    text: str


def _tokenize(src: str) -> list[_Tok]:
    toks: list[_Tok] = []
    pos = 0
    while pos < len(src):
        if src[pos:].strip() == "":
            break
        m = _TOKEN_RE.match(src, pos)
        if not m or m.end() == pos:
            raise ConditionError(f"cannot read {src[pos:].strip()[:20]!r} in condition {src!r}")
        pos = m.end()
        kind = m.lastgroup or ""
        text = m.group(kind)
        if kind == "name" and text.lower() in _KEYWORDS:
            kind, text = "kw", text.lower()
        toks.append(_Tok(kind, text))
    toks.append(_Tok("end", ""))
    return toks


# AST nodes are tuples: ("fact", name) ("lit", value) ("list", [nodes]) ("and", a, b) ("or", a, b)
# ("not", a) ("cmp", op, a, b) ("known", a, bool) ("truth", a)


class _Parser:
    def __init__(self, src: str):
        self.src = src
        self.toks = _tokenize(src)
        self.i = 0

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, kind: str, text: str | None = None) -> _Tok:
        tok = self.take()
        if tok.kind != kind or (text is not None and tok.text != text):
            want = text or kind
            got = tok.text or "the end"
            raise ConditionError(f"expected {want!r} but found {got!r} in condition {self.src!r}")
        return tok

    def parse(self) -> tuple:
        node = self.or_()
        if self.peek().kind != "end":
            raise ConditionError(f"unexpected {self.peek().text!r} in condition {self.src!r}")
        return node

    def or_(self) -> tuple:
        node = self.and_()
        while self.peek() == _Tok("kw", "or"):
            self.take()
            node = ("or", node, self.and_())
        return node

    def and_(self) -> tuple:
        node = self.not_()
        while self.peek() == _Tok("kw", "and"):
            self.take()
            node = ("and", node, self.not_())
        return node

    def not_(self) -> tuple:
        if self.peek() == _Tok("kw", "not"):
            self.take()
            return ("not", self.not_())
        return self.cmp()

    def cmp(self) -> tuple:
        left = self.operand()
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            return ("cmp", tok.text, left, self.operand())
        if tok == _Tok("kw", "in"):
            self.take()
            return ("cmp", "in", left, self.operand())
        if tok == _Tok("kw", "not") and self.toks[self.i + 1] == _Tok("kw", "in"):
            self.take()
            self.take()
            return ("not", ("cmp", "in", left, self.operand()))
        if tok == _Tok("kw", "is"):
            self.take()
            positive = True
            if self.peek() == _Tok("kw", "not"):
                self.take()
                positive = False
            self.expect("kw", "known")
            return ("known", left, positive)
        return ("truth", left)

    def operand(self) -> tuple:
        tok = self.take()
        if tok.kind == "str":
            body = tok.text[1:-1]
            return ("lit", re.sub(r"\\(.)", r"\1", body))
        if tok.kind == "num":
            return ("lit", _number_or_version(tok.text))
        if tok.kind == "name":
            return ("fact", tok.text)
        if tok.kind == "kw" and tok.text in ("true", "false"):
            return ("lit", tok.text == "true")
        if tok.kind == "kw" and tok.text in ("null", "none"):
            return ("lit", None)
        if tok == _Tok("op", "("):
            node = self.or_()
            self.expect("op", ")")
            return node
        if tok == _Tok("op", "["):
            items: list[tuple] = []
            if self.peek() != _Tok("op", "]"):
                items.append(self.operand())
                while self.peek() == _Tok("op", ","):
                    self.take()
                    items.append(self.operand())
            self.expect("op", "]")
            return ("list", items)
        raise ConditionError(f"expected a fact or a value but found {tok.text or 'the end'!r} in condition {self.src!r}")


def _number_or_version(text: str) -> Any:
    if re.fullmatch(r"\d+", text):
        return int(text)
    return _VersionLiteral(text)


@dataclass(frozen=True)
class _VersionLiteral:
    """A bare literal such as 12.0 or 0.11.1rc2: a version for version facts, a number otherwise."""

    text: str

    def __str__(self) -> str:
        return self.text


class Condition:
    """A parsed condition; `facts()` lists the names it reads, `evaluate()` gives True/False/None."""

    def __init__(self, source: str):
        self.source = str(source)
        self.ast = _Parser(self.source).parse()

    def facts(self) -> list[str]:
        out: list[str] = []

        def walk(node: tuple) -> None:
            if node[0] == "fact":
                out.append(node[1])
            for child in node[1:]:
                if isinstance(child, tuple):
                    walk(child)
                elif isinstance(child, list):
                    for c in child:
                        walk(c)

        walk(self.ast)
        return out

    def check_facts(self, extra: dict[str, str] | None = None) -> None:
        for name in self.facts():
            if fact_type(name, extra) is None:
                raise ConditionError(
                    f"unknown fact {name!r} in condition {self.source!r} (quote it if you meant the text {name!r})"
                )

    def evaluate(self, facts: dict[str, Any], types: dict[str, str] | None = None) -> bool | None:
        return _eval(self.ast, facts, types or {})

    def __repr__(self) -> str:
        return f"Condition({self.source!r})"


def evaluate(source: str, facts: dict[str, Any]) -> bool | None:
    return Condition(source).evaluate(facts)


def _value(node: tuple, facts: dict[str, Any]) -> Any:
    kind = node[0]
    if kind == "lit":
        return node[1]
    if kind == "fact":
        return lookup(facts, node[1])
    if kind == "list":
        return [_value(n, facts) for n in node[1]]
    # a parenthesised boolean used as an operand
    return _eval(node, facts, {})


def _kind_of(node: tuple, types: dict[str, str]) -> str | None:
    if node[0] == "fact":
        return fact_type(node[1], types)
    return None


def _coerce_pair(a: Any, b: Any, kind: str | None) -> tuple[Any, Any, str]:
    """Bring two values to one comparable domain: version, number, bool or text."""
    if isinstance(a, bool) or isinstance(b, bool):
        return _as_bool(a), _as_bool(b), "bool"
    if kind in _VERSIONISH or isinstance(a, _VersionLiteral) or isinstance(b, _VersionLiteral):
        if kind not in ("number",):
            try:
                return Version.parse(a), Version.parse(b), "version"
            except InvalidVersion:
                pass
    try:
        return float(str(a)), float(str(b)), "number"
    except ValueError:
        pass
    return str(a), str(b), "text"


def _as_bool(v: Any) -> Any:
    if isinstance(v, str):
        low = v.strip().lower()
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0", ""):
            return False
    return bool(v)


def _compare(op: str, a: Any, b: Any, kind: str | None) -> bool | None:
    if a is None or b is None:
        return None  # unknown; `is known` is how a playbook asks about knowing
    if op == "in":
        if isinstance(b, (list, tuple)):
            known = [x for x in b if x is not None]
            for item in known:
                if _compare("==", a, item, kind):
                    return True
            return False if len(known) == len(b) else None
        if isinstance(b, dict):
            return str(a) in b
        return str(a) in str(b)
    x, y, _domain = _coerce_pair(a, b, kind)
    if op == "==":
        return x == y
    if op == "!=":
        return x != y
    try:
        return {"<": x < y, "<=": x <= y, ">": x > y, ">=": x >= y}[op]
    except TypeError:
        return None


def _eval(node: tuple, facts: dict[str, Any], types: dict[str, str]) -> bool | None:
    kind = node[0]
    if kind == "and":
        a = _eval(node[1], facts, types)
        if a is False:
            return False
        b = _eval(node[2], facts, types)
        if b is False:
            return False
        return None if a is None or b is None else True
    if kind == "or":
        a = _eval(node[1], facts, types)
        if a is True:
            return True
        b = _eval(node[2], facts, types)
        if b is True:
            return True
        return None if a is None or b is None else False
    if kind == "not":
        v = _eval(node[1], facts, types)
        return None if v is None else not v
    if kind == "known":
        v = _value(node[1], facts)
        present = v is not None and v != "" and v != [] and v != {}
        return present if node[2] else not present
    if kind == "truth":
        v = _value(node[1], facts)
        if v is None:
            return None
        return _as_bool(v) if not isinstance(v, (list, dict)) else bool(v)
    if kind == "cmp":
        op, left, right = node[1], node[2], node[3]
        ftype = _kind_of(left, types) or _kind_of(right, types)
        return _compare(op, _value(left, facts), _value(right, facts), ftype)
    if kind in ("fact", "lit", "list"):
        v = _value(node, facts)
        return None if v is None else bool(v)
    raise ConditionError(f"bad condition node {kind}")
