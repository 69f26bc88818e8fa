"""What a rule is: data (signature, category, patterns, fix) plus, where needed, a small function.

A rule reads a Scan (and the environment facts, when probes ran) and returns at most one
Diagnosis. Most rules are pure data: a few regexes over message text, an optional fact extractor
for named groups, a title and a fix that may quote the facts. Rules never see each other; ranking
happens in triage.diagnose.
"""

from __future__ import annotations

import re

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import CATEGORIES, Diagnosis, Evidence, Fix
from triage.record import Record

if False:  # for type checkers only: typing costs start-up time
    from typing import Any, Callable

    FactsFn = Callable[["re.Match[str]", Line, Scan], dict[str, Any]]
    CheckFn = Callable[[Scan, dict[str, Any]], "Diagnosis | None"]

MAX_EVIDENCE = 6


class _Blank(dict):
    def __missing__(self, key: str) -> str:
        return "?"


def fill(template: str, facts: dict[str, Any]) -> str:
    """str.format with unknown facts shown as '?' (titles must never raise)."""
    try:
        return template.format_map(_Blank({k: _show(v) for k, v in facts.items()}))
    except (ValueError, IndexError, AttributeError):
        return template


def _show(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


class Rule(Record):
    """A plain class, not a dataclass: see triage.record (start-up)."""

    __slots__ = ("signature", "category", "title", "fix", "patterns", "playbook", "confidence", "facts", "check",
                 "harmless", "secondary", "wrapper", "emits", "_guards", "_compiled")
    _fields = __slots__[:-2]

    def __init__(
        self,
        signature: str,  # stable dotted id: "<area>.<what>"
        category: str,  # one of triage.model.CATEGORIES
        title: str,  # one line a person understands; may use {fact}
        fix: str,  # one or two sentences; may use {fact}
        patterns: list[str] | None = None,  # regexes over Line.text; named groups become facts
        playbook: str | None = None,
        confidence: float = 0.85,
        facts: FactsFn | None = None,  # extra facts from the first match
        check: CheckFn | None = None,  # a whole custom matcher instead of patterns
        harmless: bool = False,  # recognised, but not a failure (reported as a note)
        secondary: bool = False,  # usually the consequence of another failure (demoted in ranking)
        wrapper: bool = False,  # a cascade wrapper: never a diagnosis on its own
        emits: tuple[str, ...] = (),  # other signatures a custom check may return (besides `signature`)
    ) -> None:
        self.signature = signature
        self.category = category
        self.title = title
        self.fix = fix
        self.patterns = [] if patterns is None else patterns
        self.playbook = playbook
        self.confidence = confidence
        self.facts = facts
        self.check = check
        self.harmless = harmless
        self.secondary = secondary
        self.wrapper = wrapper
        self.emits = emits
        if self.category not in CATEGORIES and not (self.harmless or self.wrapper):
            raise ValueError(f"{self.signature}: unknown category {self.category!r}")
        # Per pattern: a literal the text must contain for the regex to have a chance (derived from the
        # pattern, remembered across runs), and the regex itself, compiled on first need. Compiling
        # every rule's regexes up front would dominate start-up; most never meet a line that contains
        # their literal.
        self._guards: list[str | None] = [guard_for(p) for p in self.patterns]
        self._compiled: list[re.Pattern[str] | None] = [None] * len(self.patterns)

    def _search(self, i: int, text: str) -> "re.Match[str] | None":
        guard = self._guards[i]
        if guard is not None and guard not in text:
            return None
        rx = self._compiled[i]
        if rx is None:
            rx = self._compiled[i] = re.compile(self.patterns[i])
        return rx.search(text)

    def run(self, scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
        if self.check is not None:
            return self.check(scan, env)
        return self.match_lines(scan)

    def match_lines(self, scan: Scan) -> Diagnosis | None:
        # Patterns whose literal is on no line at all cannot match: one substring search over the
        # whole text rules them out instead of one per line (most rules end here).
        joined = scan.joined_text()
        live = [i for i, g in enumerate(self._guards) if g is None or "\n" in g or g in joined]
        if not live:
            return None
        hits: list[tuple[Line, re.Match[str]]] = []
        seen_texts: set[str] = set()
        for ln in scan.lines:
            for i in live:
                m = self._search(i, ln.text)
                if m:
                    if ln.text not in seen_texts:
                        hits.append((ln, m))
                        seen_texts.add(ln.text)
                    break
            if len(hits) >= MAX_EVIDENCE:
                break
        if not hits:
            return None
        return self.diagnosis(scan, hits)

    def diagnosis(self, scan: Scan, hits: list[tuple[Line, "re.Match[str]"]],
                  facts: dict[str, Any] | None = None, confidence: float | None = None) -> Diagnosis:
        first_line, first_m = hits[0]
        f: dict[str, Any] = {}
        for k, v in first_m.groupdict().items():
            if v is not None:
                f[k] = _number(v)
        if self.facts is not None:
            f.update(self.facts(first_m, first_line, scan))
        if facts:
            f.update(facts)
        conf = self.confidence if confidence is None else confidence
        if first_line.level == "WARNING" and not self.harmless:
            conf *= 0.85  # a warning is rarely the cause of death on its own
        ctx = dict(scan.facts)
        ctx.update(f)
        return Diagnosis(
            category=self.category,
            signature=self.signature,
            title=fill(self.title, ctx),
            confidence=min(conf, 0.99),
            evidence=[Evidence(ln.no, ln.shown) for ln, _ in hits],
            facts=f,
            fix=Fix(fill(self.fix, ctx), self.playbook),
            first_line=first_line.no,
        )


_ESCAPED_CLASSES = set("dDwWsSbBAZ0123456789")

# required_literal() of every rule pattern, remembered across runs in the cache folder: deriving
# them all costs more start-up than diagnosing a small log (issue 2). Keyed by pattern text, so an
# edited rule only misses its own entry; the file name carries this module's size and mtime, so a
# change to the derivation starts a new table.
_GUARDS: dict[str, str | None] | None = None
_GUARDS_MISSED = False


def _guards_file():  # -> Path | None
    try:
        import os

        from triage.paths import cache_dir

        st = os.stat(__file__)
        return cache_dir() / f"rule-guards-{st.st_size}-{st.st_mtime_ns}.json"
    except OSError:
        return None


def guard_for(pattern: str) -> str | None:
    """required_literal(pattern), from the remembered table when it is there."""
    global _GUARDS, _GUARDS_MISSED
    table = _GUARDS
    if table is None:
        table = _GUARDS = {}
        path = _guards_file()
        if path is not None:
            try:
                import json

                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                data = None
            if isinstance(data, dict):
                table.update((k, v) for k, v in data.items() if v is None or isinstance(v, str))
    try:
        return table[pattern]
    except KeyError:
        g = table[pattern] = required_literal(pattern)
        _GUARDS_MISSED = True
        return g


def save_guards() -> None:
    """Write the table back when this run derived guards it did not have (a read-only cache only
    costs the derivation next time)."""
    global _GUARDS_MISSED
    if not _GUARDS_MISSED or _GUARDS is None:
        return
    _GUARDS_MISSED = False
    path = _guards_file()
    if path is None:
        return
    import json
    import os

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(_GUARDS), encoding="utf-8")
        os.replace(tmp, path)
    except OSError:
        pass


def required_literal(pattern: str, min_len: int = 4) -> str | None:
    """The longest run of plain characters that every match of `pattern` contains, or None.

    Groups are looked into when they are neither alternations nor quantified nor lookarounds;
    a top-level `|` means no literal is required. A character followed by a quantifier is dropped.
    """
    if pattern.startswith("(?") and not pattern.startswith(("(?:", "(?P", "(?=", "(?!", "(?<")):
        return None  # inline flags such as (?i) change what a literal means
    runs = _required_runs(pattern)
    if runs is None:
        return None
    best = max(runs, key=len, default="")
    return best if len(best) >= min_len else None


def _group_end(p: str, i: int) -> int:
    """Index of the ')' closing the '(' at p[i], or -1."""
    depth = 0
    n = len(p)
    while i < n:
        c = p[i]
        if c == "\\":
            i += 2
            continue
        if c == "[":
            j = i + 1
            if j < n and p[j] == "^":
                j += 1
            if j < n and p[j] == "]":
                j += 1
            while j < n and p[j] != "]":
                j += 2 if p[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _required_runs(pattern: str) -> list[str] | None:
    """Literal runs every match contains; None when the pattern is a top-level alternation."""
    runs: list[str] = []
    cur: list[str] = []
    i, n = 0, len(pattern)

    def flush() -> None:
        if cur:
            runs.append("".join(cur))
            cur.clear()

    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt not in _ESCAPED_CLASSES and not nxt.isalpha():
                cur.append(nxt)
            else:
                flush()
            i += 2
            continue
        if c == "[":
            flush()
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            i = j + 1
            continue
        if c == "(":
            flush()
            end = _group_end(pattern, i)
            if end < 0:
                return runs  # unbalanced: what was seen so far still holds
            body = pattern[i + 1:end]
            quantified = end + 1 < n and pattern[end + 1] in "?*{"
            if body.startswith("?P<"):
                body = body[body.index(">") + 1:]
            elif body.startswith("?:"):
                body = body[2:]
            elif body.startswith("?"):
                body = None  # lookaround, comment, flags: says nothing about what is matched
            if body is not None and not quantified:
                inner = _required_runs(body)
                if inner:
                    runs.extend(inner)
            i = end + 1
            continue
        if c == "|":
            return None
        if c in "?*+{":
            if cur:
                cur.pop()  # the quantified character may be absent (or repeated)
            flush()
            if c == "{":
                while i < n and pattern[i] != "}":
                    i += 1
        elif c in ".^$":
            flush()
        else:
            cur.append(c)
        i += 1
    flush()
    return runs


def _number(v: str) -> Any:
    if v.isdigit():
        return int(v)
    try:
        if re.fullmatch(r"\d+\.\d+", v):
            return float(v)
    except ValueError:
        pass
    return v
