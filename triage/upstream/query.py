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
from triage.upstream.facets import FAMILY_SEARCH_TERMS, Facets, error_phrase
from triage.upstream.redact import redact
from triage.upstream.terms import is_generic, message_of, search_term

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
    """Words that name the subsystem, for PR searches and when the message says nothing specific."""
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
    if f.subsystem == "CUDA graphs":
        return ['"CUDA graph"']
    if f.subsystem == "speculative decoding":
        return ["speculative"]
    return []


# Failures that depend on the GPU: the family narrows the search to the threads that matter.
# Elsewhere (a flag, a module, a config) the GPU is noise and would hide the thread.
GPU_BOUND = frozenset({"attention backend", "quantization", "Triton compile", "kernel libraries", "MoE kernels",
                       "CUDA graphs"})


def message_terms(f: Facets, identities: Iterable[str]) -> tuple[list[str], list[str]]:
    """(terms that identify the message, further specific terms), each ready for the query."""
    msg = message_of(f)
    phrase = _clean_term(f.phrase, identities) if f.phrase else ""
    key = [search_term(t) for t in (_clean_term(t, identities) for t in msg.key) if t]
    others = [search_term(t) for t in (_clean_term(t, identities) for t in msg.others) if t]
    head: list[str] = []
    if phrase:
        head.append(_quote(phrase))
    if phrase and not is_generic(phrase):
        head += key[:1]  # the phrase identifies it; a key token (backend, flag) narrows it
        rest = key[1:]  # identifiers elsewhere in the message are detail, not what failed
    else:
        # A generic phrase ("undefined symbol") is only worth searching with what it is about.
        specific = key + others
        head += specific[:1]
        rest = specific[1:]
        if len(head) == 1 and msg.exc_type and head[0] != msg.exc_type:
            head.insert(0, msg.exc_type)  # "OutOfMemoryError" "CUDA out of memory": still the best we have
    if not head and msg.exc_type and msg.exc_type not in _BARE_TYPES:
        head = [msg.exc_type]  # a message cut off after its type ("CompilationError: at 48:12:")
    if not head and f.title:
        title = _clean_term(error_phrase(f.title), identities)
        head = [_quote(title)] if title else []
    return head, rest


# Exception types raised for everything: a search for one of them alone finds nothing in particular.
_BARE_TYPES = frozenset({"ValueError", "RuntimeError", "TypeError", "AssertionError", "Exception", "KeyError",
                         "OSError", "ImportError", "AttributeError", "NotImplementedError", "IndexError"})


def build_queries(f: Facets, *, identities: Iterable[str] | None = None) -> list[Query]:
    """At most MAX_QUERIES searches, most specific first; each within GitHub's limits."""
    if identities is None:  # this machine's names, looked up once (not once per term)
        from triage.upstream.redact import local_identities

        identities = local_identities()
    head, rest = message_terms(f, identities)
    gpu_terms = FAMILY_SEARCH_TERMS.get(f.gpu_family[0], []) if f.gpu_family else []
    gpu_group = _or_group(gpu_terms[:2]) if f.subsystem in GPU_BOUND else ""
    model_term = ""
    if f.architecture:
        model_term = _clean_term(f.architecture, identities)
    if not model_term and f.model_family:
        model_term = _quote(f.model_family)
    repo_quals = [f"repo:{r}" for r in f.repos[:3]]
    main_repo = ["repo:vllm-project/vllm"]
    topic = _topic_terms(f)

    out: list[Query] = []
    seen: set[str] = set()

    def add(qualifiers: list[str], terms: list[str], kind: str) -> None:
        q = _assemble(qualifiers, terms)
        # A query of qualifiers alone would return every issue of the repository.
        if q and q not in seen and any(t and t in q for t in terms):
            seen.add(q)
            out.append(Query(q, kind))

    if not head:
        head = topic[:1]
    # 1. the error itself (on this GPU family, where the GPU decides)
    add(repo_quals + ["is:issue"], [*head, gpu_group], "issue")
    # 2. the error with what else it names (the second token, else the model), on any GPU
    if rest:
        add(main_repo + ["is:issue"], [*head[:1], rest[0]], "issue")
    elif model_term and f.subsystem not in ("engine config", "install / build", "environment"):
        add(main_repo + ["is:issue"], [*head, model_term], "issue")
    elif gpu_group:
        add(main_repo + ["is:issue"], head, "issue")
    # 3. pull requests: a fix may be in flight
    related = sorted(f.related_backends)[:2]
    if topic and related:
        add(main_repo + ["is:pull-request"], [topic[0], _or_group([*gpu_terms[:1], *related])], "pr")
    elif topic and gpu_group:
        add(main_repo + ["is:pull-request"], [topic[0], *head[1:2], gpu_group], "pr")
    else:
        add(main_repo + ["is:pull-request"], head, "pr")
    return out[:MAX_QUERIES]
