"""What a rule is: data (signature, category, patterns, fix) plus, where needed, a small function.

A rule reads a Scan (and the environment facts, when probes ran) and returns at most one
Diagnosis. Most rules are pure data: a few regexes over message text, an optional fact extractor
for named groups, a title and a fix that may quote the facts. Rules never see each other; ranking
happens in triage.diagnose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import CATEGORIES, Diagnosis, Evidence, Fix
from triage.regexlit import derived, required_literal  # noqa: F401 (required_literal: re-exported)

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


@dataclass(slots=True)
class Rule:
    signature: str  # stable dotted id: "<area>.<what>"
    category: str  # one of triage.model.CATEGORIES
    title: str  # one line a person understands; may use {fact}
    fix: str  # one or two sentences; may use {fact}
    patterns: list[str] = field(default_factory=list)  # regexes over Line.text; named groups become facts
    playbook: str | None = None
    confidence: float = 0.85
    facts: FactsFn | None = None  # extra facts from the first match
    check: CheckFn | None = None  # a whole custom matcher instead of patterns
    harmless: bool = False  # recognised, but not a failure (reported as a note)
    secondary: bool = False  # usually the consequence of another failure (demoted in ranking)
    wrapper: bool = False  # a cascade wrapper: never a diagnosis on its own
    # the report's own words about the failure (a title, prose): dropped when a rule reading the log's lines
    # finds a failure of the same category (its reading is better than the reporter's summary)
    stated: bool = False
    emits: tuple[str, ...] = ()  # other signatures a custom check may return (besides `signature`)
    # Per pattern: a literal the text must contain for the regex to have a chance, the clauses it
    # must satisfy (one literal of each; see triage.regexlit), both derived from the pattern, and the
    # regex itself, compiled on first need: most patterns never meet a line that could match.
    _guards: list[str | None] = field(init=False, repr=False, compare=False)
    _clauses: list[tuple[tuple[str, ...], ...]] = field(init=False, repr=False, compare=False)
    _compiled: list[re.Pattern[str] | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.patterns is None:
            self.patterns = []
        if self.category not in CATEGORIES and not (self.harmless or self.wrapper):
            raise ValueError(f"{self.signature}: unknown category {self.category!r}")
        known = [derived(p) for p in self.patterns]
        self._guards = [g for g, _ in known]
        self._clauses = [c for _, c in known]
        self._compiled = [None] * len(self.patterns)

    def _search(self, i: int, text: str) -> "re.Match[str] | None":
        guard = self._guards[i]
        if guard is not None and guard not in text:
            return None
        for clause in self._clauses[i]:
            for lit in clause:
                if lit in text:
                    break
            else:
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
        live = [i for i, g in enumerate(self._guards)
                if (g is None or "\n" in g or g in joined)
                and all(any("\n" in x or x in joined for x in c) for c in self._clauses[i])]
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


def _number(v: str) -> Any:
    if v.isdigit():
        return int(v)
    try:
        if re.fullmatch(r"\d+\.\d+", v):
            return float(v)
    except ValueError:
        pass
    return v


def not_in_passing(rule: Rule, scan: Scan) -> Diagnosis | None:
    """The rule's diagnosis unless all it saw are INFO/WARNING lines: an optional import or a look-up
    that failed and was logged in passing (the start-up went on) is not the failure. For a rule's
    `check`: `check=lambda scan, env: not_in_passing(THE_RULE, scan)`."""
    d = rule.match_lines(scan)
    if d is None:
        return None
    levels = {ln.no: ln.level for ln in scan.lines}
    return None if all(levels.get(e.line) in ("INFO", "WARNING") for e in d.evidence) else d


def next_row_text(scan: Scan, no: int) -> str:
    """The text of the row numbered `no + 1`, stripped; "" when it was not selected: where a message a tool
    wrapped onto the next row continues ("... Check failed: (x) is false:" / "file.cu(18): error:")."""
    return next((ln.text.strip() for ln in scan.lines if ln.no == no + 1), "")
