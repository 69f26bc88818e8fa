"""Re-rank search hits by how well they match the diagnosis, facet by facet.

GitHub orders by text relevance, which is how "Blackwell SM120 MLA attention" finds an issue
about NVFP4 MoE kernels on SM120 first: the same GPU, another subsystem, and no help at all.
Here the subsystem weighs most, then the error phrase and backend names, then the GPU family
and the model family; state (merged PR, open PR, closed as fixed) and recency break ties.
Each hit gets a short `why` that names the facets that matched and those that did not.
"""

from __future__ import annotations

import math
import time
from typing import Any

from triage.upstream.facets import (
    Facets,
    backends_in,
    classify_subsystem,
    gpu_families_in,
    model_families_in,
)

W_SUBSYSTEM_SAME = 4.0
W_SUBSYSTEM_OTHER = -3.0
W_PHRASE = 3.0
W_BACKEND = 1.5  # per shared backend, at most two
W_GPU_SAME = 2.0
W_GPU_OTHER = -0.5
W_MODEL_SAME = 1.5
W_MODEL_RELATED = 1.0
W_MERGED = 1.5
W_OPEN_PR = 1.0
W_FIXED = 0.5
W_NOT_PLANNED = -0.5
W_RECENCY = 0.5  # full for a hit updated today, half after ~4 months
W_GITHUB_ORDER = 0.3


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


def score_hit(item: dict[str, Any], f: Facets, *, order: float = 0.0, now: float | None = None) -> tuple[float, str, dict]:
    """Score one slimmed search item; returns (score, why, facets matched)."""
    now = time.time() if now is None else now
    title = item.get("title") or ""
    body = item.get("body") or ""
    text = f"{title}\n{body}"
    score = 0.0
    same: list[str] = []
    other: list[str] = []
    matched: dict[str, Any] = {}

    sub = classify_subsystem(title, body)
    matched["subsystem"] = sub
    if f.subsystem and sub:
        if sub == f.subsystem:
            score += W_SUBSYSTEM_SAME
            matched["same_subsystem"] = True
        else:
            score += W_SUBSYSTEM_OTHER
            other.append(f"other subsystem: {sub}")

    if f.phrase and _norm(f.phrase) in _norm(text):
        score += W_PHRASE
        same.append("error")

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

    state = []
    if item.get("is_pr"):
        if item.get("merged_at"):
            score += W_MERGED
            state.append("merged PR")
        elif item.get("state") == "open":
            score += W_OPEN_PR if matched.get("same_subsystem") else 0.0
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
    score += W_GITHUB_ORDER * order

    why_parts = []
    if same:
        why_parts.append("same " + _join(same))
    why_parts.extend(other)
    why = "; ".join(why_parts) or "weak match"
    if state:
        why += f" ({state[0]})"
    return round(score, 3), why, matched


def _join(words: list[str]) -> str:
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " and " + words[-1]


def rank(items: list[dict[str, Any]], f: Facets, *, now: float | None = None, limit: int = 10) -> list[dict[str, Any]]:
    """Merge hits from several searches (dedup by repo and number), score, best first."""
    seen: dict[tuple[str, int], dict[str, Any]] = {}
    order_of: dict[tuple[str, int], int] = {}
    for i, it in enumerate(items):
        key = (it.get("repo") or "", int(it["number"]))
        if key not in seen:
            seen[key] = it
            order_of[key] = i
    n = max(len(seen), 1)
    ranked = []
    for key, it in seen.items():
        order = 1.0 - order_of[key] / n
        score, why, matched = score_hit(it, f, order=order, now=now)
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
