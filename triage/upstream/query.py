"""Build GitHub search queries from a diagnosis' stable facets, within GitHub's limits.

GitHub rejects (422) a search without `is:issue` or `is:pull-request`, and does not support
queries over 256 characters or with more than five AND/OR/NOT operators. Every term that comes
from the log passes through redact() first; a term that still carries a placeholder is dropped
rather than sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from triage.lazyre import lazy
from triage.upstream.facets import FAMILY_SEARCH_TERMS, Facets
from triage.upstream.redact import redact

MAX_QUERY_CHARS = 256
MAX_OPERATORS = 5
MAX_QUERIES = 3  # the unauthenticated search budget is 10 a minute: leave room for a second run

_OPERATOR = lazy(r"(?<![\w\"])(AND|OR|NOT)(?![\w\"])", needles=("AND", "OR", "NOT"))


@dataclass(frozen=True, slots=True)
class Query:
    q: str
    kind: str  # "issue" | "pr"

    def to_json(self) -> dict[str, str]:
        return {"q": self.q, "kind": self.kind}


def count_operators(q: str) -> int:
    # Operators inside quoted phrases are words, not operators.
    unquoted = re.sub(r"\"[^\"]*\"", "", q) if '"' in q else q
    return len(_OPERATOR.findall(unquoted))


def valid(q: str) -> bool:
    return (
        len(q) <= MAX_QUERY_CHARS
        and count_operators(q) <= MAX_OPERATORS
        and ("is:issue" in q or "is:pull-request" in q)
    )


def _clean_term(term: str, identities: Iterable[str] | None) -> str:
    """Redact, then drop what cannot be searched for safely (placeholders, stray quotes)."""
    red = redact(term, identities=identities)
    words = [w for w in red.replace('"', " ").split() if "<" not in w and ">" not in w]
    return " ".join(words)


def _quote(phrase: str) -> str:
    return f'"{phrase}"' if " " in phrase else phrase


def _or_group(terms: list[str]) -> str:
    terms = [_quote(t) for t in terms if t]
    if not terms:
        return ""
    if len(terms) == 1:
        return terms[0]
    return "(" + " OR ".join(terms) + ")"


def _assemble(qualifiers: list[str], terms: list[str]) -> str | None:
    """Join, dropping terms from the end until the query fits GitHub's limits."""
    terms = [t for t in terms if t]
    while True:
        q = " ".join(qualifiers + terms)
        if valid(q):
            return q
        if not terms:
            return None
        terms = terms[:-1]


def _topic_terms(f: Facets) -> list[str]:
    """Words that name the subsystem when no error phrase is known, or for PR searches."""
    if f.subsystem == "attention backend":
        if f.use_sparse:
            return ['"sparse MLA"']
        if f.use_mla:
            return ["MLA", "attention"]
        return ['"attention backend"']
    if f.subsystem == "MoE kernels":
        return ["MoE"]
    if f.subsystem == "quantization":
        return ["quantization"]
    if f.subsystem == "Triton compile":
        return ["triton"]
    return []


def build_queries(f: Facets, *, identities: Iterable[str] | None = None) -> list[Query]:
    """At most MAX_QUERIES searches, most specific first; each within GitHub's limits."""
    if identities is None:  # this machine's names, looked up once (not once per term)
        from triage.upstream.redact import local_identities

        identities = local_identities()
    phrase = _clean_term(f.phrase, identities) if f.phrase else ""
    gpu_terms = FAMILY_SEARCH_TERMS.get(f.gpu_family[0], []) if f.gpu_family else []
    gpu_group = _or_group(gpu_terms[:2])  # 1 operator; "Blackwell" alone would also match B200
    model_term = ""
    if f.architecture:
        model_term = _clean_term(f.architecture, identities)
    if not model_term and f.model_family:
        model_term = _quote(f.model_family)
    named = sorted(b for b in f.backends if len(f.backends) <= 2)  # a selector dump names them all: too broad
    repo_quals = [f"repo:{r}" for r in f.repos[:3]]
    main_repo = ["repo:vllm-project/vllm"]

    out: list[Query] = []
    seen: set[str] = set()

    def add(qualifiers: list[str], terms: list[str], kind: str) -> None:
        q = _assemble(qualifiers, terms)
        # A query of qualifiers alone would return every issue of the repository.
        if q and q not in seen and any(t and t in q for t in terms):
            seen.add(q)
            out.append(Query(q, kind))

    topic = _topic_terms(f)
    head = _quote(phrase) if phrase else (topic[0] if topic else "")
    # 1. the error itself on this GPU family (the decisive combination)
    add(repo_quals + ["is:issue"], [head, *named[:1], gpu_group], "issue")
    # 2. the error with this model (other GPUs may hit it too)
    if model_term:
        add(main_repo + ["is:issue"], [head, model_term], "issue")
    elif phrase:
        add(main_repo + ["is:issue"], [head, *topic[:1]], "issue")
    # 3. pull requests on the subsystem for this GPU family (a fix may be in flight)
    pr_terms = topic[:1] or ([head] if head else [])
    related = sorted(f.related_backends)[:2]
    if related:
        pr_group = _or_group([*gpu_terms[:1], *related])
    else:
        pr_group = gpu_group
    add(main_repo + ["is:pull-request"], [*pr_terms, pr_group], "pr")
    return out[:MAX_QUERIES]
