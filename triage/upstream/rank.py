"""Re-rank search hits by how well they match the diagnosis, facet by facet.

GitHub orders by text relevance, which is how "Blackwell SM120 MLA attention" finds an issue
about NVFP4 MoE kernels on SM120 first: the same GPU, another subsystem, and no help at all.
Here the subsystem weighs most, then the error phrase and backend names, then the GPU family
and the model family; state (merged PR, open PR, closed as fixed) and recency break ties.
Each hit gets a short `why` that names the facets that matched and those that did not.
"""

from __future__ import annotations

import math
import re
import time
from typing import Any

from triage.lazyre import lazy
from triage.upstream.facets import (
    Facets,
    backends_in,
    classify_subsystem,
    gpu_families_in,
    model_families_in,
)
from triage.upstream.terms import is_generic, message_of

# The hit's own text against the log's message weighs most: a thread that quotes the same error
# is about this failure whatever its labels say. Subsystem, GPU and model break ties.
W_MESSAGE = 6.0  # times the strength of the message match, 0..1
TRUSTED_MATCH = 0.8  # from here on the message match is trusted over a subsystem guess
W_SUBSYSTEM_SAME = 2.0
W_SUBSYSTEM_OTHER = -1.5
W_BACKEND = 1.0  # per shared backend, at most two
W_GPU_SAME = 1.5
W_GPU_OTHER = -0.5
W_MODEL_SAME = 1.0
W_MODEL_RELATED = 0.6
W_RELEASE_SAME = 0.75  # the thread names the log's vLLM minor release
W_RELEASE_NEAR = 0.4  # within two minor releases
W_IN_MESSAGE_RANGE = 0.3  # the thread's release has the message in its source
W_OUTSIDE_MESSAGE_RANGE = -0.4  # every release the thread names predates or postdates the message
W_MERGED = 1.5
W_OPEN_PR = 1.0
W_FIXED = 0.5
W_NOT_PLANNED = -0.5
W_RECENCY = 0.5  # full for a hit updated today, half after ~4 months
W_GITHUB_ORDER = 0.6  # for GitHub's first answer to a query, falling as 1/(1 + position)
W_MORE_QUERIES = 0.4  # per further query that returned the same hit

_STOP = frozenset("""the a an and or of to in on at for with from by is are was were be been this that it its as not no
into than then but if when while which what who how can could should would will may must have has had do does did
error failed please check see use using your you we our set also only more most""".split())
_WORDS = lazy(r"[A-Za-z_][A-Za-z0-9_.-]*[A-Za-z0-9_]|[A-Za-z]")
_VLLM_VERSION = lazy(r"vllm[^\n\d]{0,24}?v?(\d+)\.(\d+)(?:\.\d+)?", re.I)


def parse_time(value: Any) -> float | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        from datetime import datetime, timezone  # here: only search hits carry dates (start-up)

        return datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc).timestamp()
    except ValueError:
        return None


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def _content_words(text: str) -> set[str]:
    return {w.lower() for w in _WORDS.findall(text) if len(w) > 2 and w.lower() not in _STOP}


def message_match(f: Facets, title: str, body: str) -> tuple[float, str]:
    """How closely a hit's text quotes the log's error: (strength 0..1, what matched)."""
    msg = message_of(f)
    text = _norm(f"{title}\n{body}")
    phrase = _norm(f.phrase or msg.phrase)
    specific_phrase = bool(phrase) and not is_generic(phrase) and len(phrase.split()) >= 3
    key = [t.lower() for t in msg.key]
    key_found = [t for t in key if _contains_token(text, t)]
    best, label = 0.0, ""
    if specific_phrase and phrase in _norm(title):
        best, label = 1.0, "same error in the title"
    elif specific_phrase and phrase in text:
        best, label = 0.9, "same error"
    if key and len(key_found) == len(key) and (not phrase or phrase in text):
        # the generic words and all of what they are about ("undefined symbol" + the symbol)
        s = 0.95 if len(key) > 1 or not specific_phrase else 0.85
        if s > best:
            best, label = s, "same error and " + ", ".join(msg.key[:2])
    elif key_found and best < 0.9:
        s = 0.5 * len(key_found) / len(key) + (0.2 if phrase and phrase in text else 0.0)
        if s > best:
            best, label = s, "names " + ", ".join(t for t in msg.key if t.lower() in key_found)[:60]
    # Near-exact: most of the message's words are there (a reworded or translated paste).
    words = _content_words(msg.text[:400])
    if len(words) >= 4:
        overlap = len(words & _content_words(f"{title}\n{body}")) / len(words)
        s = 0.75 * overlap if overlap >= 0.5 else 0.4 * overlap
        if s > best:
            best, label = s, "similar message" if overlap >= 0.5 else ""
    return best, label


def _contains_token(text: str, tok: str) -> bool:
    # Titles cut long tokens (a mangled C++ symbol): a long enough head of one counts.
    if tok in text:
        return True
    return len(tok) >= 32 and tok[:24] in text


def release_minors(text: str) -> set[tuple[int, int]]:
    """The vLLM releases (major, minor) a thread names: "vllm==0.10.1", "vLLM Version: 0.11.0", "v0.9.2"."""
    return {(int(a), int(b)) for a, b in _VLLM_VERSION.findall(text[:6000]) if int(a) < 5}


def _minor_of(version: str | None) -> tuple[int, int] | None:
    m = re.match(r"\s*v?(\d+)\.(\d+)", version or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def score_hit(item: dict[str, Any], f: Facets, *, order: float = 0.0, now: float | None = None,
              also_in: int = 0) -> tuple[float, str, dict]:
    """Score one slimmed search item; returns (score, why, facets matched).

    `order` is GitHub's own ranking of the hit, 1 for the first answer to a query, falling with
    the position; `also_in` how many further queries returned it.
    """
    now = time.time() if now is None else now
    title = item.get("title") or ""
    body = item.get("body") or ""
    text = f"{title}\n{body}"
    score = 0.0
    same: list[str] = []
    other: list[str] = []
    matched: dict[str, Any] = {}

    strength, label = message_match(f, title, body)
    score += W_MESSAGE * strength
    trusted = strength >= TRUSTED_MATCH
    matched["message"] = round(strength, 2)
    if label:
        same.append(label)

    sub = classify_subsystem(title, body)
    matched["subsystem"] = sub
    if f.subsystem and sub:
        if sub == f.subsystem:
            score += W_SUBSYSTEM_SAME
            matched["same_subsystem"] = True
            same.append("subsystem")
        elif not trusted:  # a thread quoting the same error is about it, whatever else it says
            score += W_SUBSYSTEM_OTHER
            other.append(f"other subsystem: {sub}")

    wanted = f.backends | f.related_backends
    shared = sorted(backends_in(text) & wanted)
    if shared:
        score += W_BACKEND * min(len(shared), 2)
        matched["backends"] = shared
        fix_side = sorted(set(shared) & f.related_backends)
        same.append("backend")
        if fix_side and not (set(shared) & f.backends):
            same[-1] = f"backend ({fix_side[0]})"

    fams = gpu_families_in(text)
    if f.gpu_family:
        key = f.gpu_family[0]
        if key in fams:
            score += W_GPU_SAME
            same.append("GPU")
        elif fams:
            score += W_GPU_OTHER
            other.append("other GPU")

    models = model_families_in(text)
    if f.model_family and models:
        if f.model_family in models:
            score += W_MODEL_SAME
            same.append("model")
        elif f.model_group and f.model_group in models.values():
            score += W_MODEL_RELATED
            same.append("model family")
        else:
            other.append("other model")

    mine = _minor_of(f.vllm_version)
    if mine:
        theirs = release_minors(text)
        if mine in theirs:
            score += W_RELEASE_SAME
            same.append(f"vLLM {mine[0]}.{mine[1]}")
        elif any(t[0] == mine[0] and abs(t[1] - mine[1]) <= 2 for t in theirs):
            score += W_RELEASE_NEAR
            same.append("nearby vLLM release")

    releases = f.releases
    span = (_minor_of(releases[0]), _minor_of(releases[1])) if releases else None
    if releases and span and span[0] and span[1]:
        theirs = release_minors(text)
        if theirs:
            inside = [t for t in theirs if span[0] <= t <= span[1]]
            if inside:
                score += W_IN_MESSAGE_RANGE
            else:
                score += W_OUTSIDE_MESSAGE_RANGE
                other.append(f"its vLLM release has no such message ({releases[0]}-{releases[1]} do)")

    state = []
    if item.get("is_pr"):
        if item.get("merged_at"):
            score += W_MERGED
            state.append("merged PR")
        elif item.get("state") == "open":
            score += W_OPEN_PR if matched.get("same_subsystem") or trusted else 0.0
            state.append("open PR")
        else:
            state.append("closed PR, not merged")
    else:
        reason = item.get("state_reason")
        if item.get("state") == "closed" and reason == "completed":
            score += W_FIXED
            state.append("closed as fixed")
        elif item.get("state") == "closed" and reason == "not_planned":
            score += W_NOT_PLANNED
            state.append("closed, not planned")
        elif item.get("state") == "open":
            state.append("open")

    updated = parse_time(item.get("updated_at")) or parse_time(item.get("created_at"))
    if updated:
        days = max(0.0, (now - updated) / 86400)
        score += W_RECENCY * math.exp(-days / 180)
    score += W_GITHUB_ORDER * order + W_MORE_QUERIES * min(also_in, 2)

    why_parts = []
    if same:
        why_parts.append(_why_same(same))
    why_parts.extend(other)
    why = "; ".join(why_parts) or "weak match"
    if state:
        why += f" ({state[0]})"
    return round(score, 3), why, matched


def _why_same(parts: list[str]) -> str:
    # "same error in the title, subsystem and GPU": the message label first, as it weighs most
    head = parts[0]
    if head.startswith(("same ", "names ", "similar ")):
        return head + ("; same " + _join(parts[1:]) if parts[1:] else "")
    return "same " + _join(parts)


def _join(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def rank(items: list[dict[str, Any]], f: Facets, *, now: float | None = None, limit: int = 10) -> list[dict[str, Any]]:
    """Merge hits from several searches (dedup by repo and number), score, best first.

    An item may carry `_pos` (its place in its own query's answer) and `_query`; without them the
    place in `items` stands for GitHub's order.
    """
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    pos_of: dict[tuple[str, int], int] = {}
    queries_of: dict[tuple[str, int], set] = {}
    for i, it in enumerate(items):
        key = (it.get("repo") or "", int(it["number"]))
        pos = int(it.get("_pos", i))
        if key not in seen:
            seen[key] = it
            pos_of[key] = pos
        else:
            pos_of[key] = min(pos_of[key], pos)
        if "_query" in it:
            queries_of.setdefault(key, set()).add(it["_query"])
    ranked = []
    for key, it in seen.items():
        order = 1.0 / (1.0 + pos_of[key])
        also = max(0, len(queries_of.get(key, ())) - 1)
        score, why, matched = score_hit(it, f, order=order, now=now, also_in=also)
        ranked.append(
            {
                "number": it["number"],
                "url": it.get("html_url") or "",
                "title": it.get("title") or "",
                "state": "merged" if it.get("merged_at") else (it.get("state") or ""),
                "kind": "pr" if it.get("is_pr") else "issue",
                "score": score,
                "why": why,
                "repo": it.get("repo") or "",
                "updated_at": it.get("updated_at"),
                **({"state_reason": it["state_reason"]} if it.get("state_reason") else {}),
                **({"merged_at": it["merged_at"]} if it.get("merged_at") else {}),
                **({"closed_at": it["closed_at"]} if it.get("closed_at") else {}),
                **({"subsystem": matched["subsystem"]} if matched.get("subsystem") else {}),
            }
        )
    ranked.sort(key=lambda h: (-h["score"], -(h["number"])))
    return ranked[:limit]


def positioned(answers: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """The items of several queries' answers, each marked with its query and its place in it."""
    out = []
    for qi, answer in enumerate(answers):
        for pos, it in enumerate(answer):
            out.append({**it, "_pos": pos, "_query": qi})
    return out
