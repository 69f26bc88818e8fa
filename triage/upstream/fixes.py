"""For merged PRs and issues closed as fixed: which PR fixed it, and the first release with it.

The first release is determined in two steps: the earliest non-draft, non-prerelease release
published after the PR was merged (by date), then, when the API allows, confirmed with
`compare/{merge_commit}...{tag}` (a tag that is "ahead" of or "identical" to the merge commit
contains it). A release branch cut before the merge makes the date guess wrong; the compare
call catches that and moves to the next release. `fixed_in_basis` says which step decided.
"""

from __future__ import annotations

from typing import Any

from triage.upstream.cache import Cache
from triage.upstream.rank import parse_time

RELEASES_TTL = 24 * 3600.0
MAX_FOLLOWUPS = 3  # core API budget is 60/h without a token


async def releases(gh: Any, repo: str, cache: Cache) -> list[dict[str, Any]]:
    """Published releases, oldest first: [{"tag", "published_at"}]."""
    key = cache.key("releases", gh.base, repo)
    hit = cache.get(key, ttl=RELEASES_TTL)
    if hit and hit.fresh:
        return hit.value
    resp = await gh.get(f"/repos/{repo}/releases", {"per_page": 100})
    if resp.kind != "ok" or not isinstance(resp.data, list):
        return hit.value if hit else []
    rels: list[dict[str, Any]] = []
    for r in resp.data:
        if not isinstance(r, dict) or r.get("draft") or r.get("prerelease"):
            continue
        t = parse_time(r.get("published_at"))
        if r.get("tag_name") and t:
            rels.append({"tag": str(r["tag_name"]), "published_at": t})
    rels.sort(key=lambda r: r["published_at"])
    cache.put(key, rels, label=f"releases {repo}")
    return rels


def version_of_tag(tag: str) -> str:
    return tag[1:] if tag.startswith("v") else tag


async def _contains(gh: Any, repo: str, sha: str, tag: str) -> bool | None:
    resp = await gh.get(f"/repos/{repo}/compare/{sha}...{tag}")
    if resp.kind != "ok" or not isinstance(resp.data, dict):
        return None
    status = resp.data.get("status")
    if status in ("ahead", "identical"):
        return True
    if status in ("behind", "diverged"):
        return False
    return None


async def first_release_with(gh: Any, repo: str, merged_at: float, sha: str | None, cache: Cache) -> tuple[str | None, str]:
    rels = [r for r in await releases(gh, repo, cache) if r["published_at"] >= merged_at]
    if not rels:
        return None, "not in a release yet"
    if not sha:
        return version_of_tag(rels[0]["tag"]), "release date"
    for r in rels[:3]:
        inside = await _contains(gh, repo, sha, r["tag"])
        if inside is None:
            return version_of_tag(r["tag"]), "release date"
        if inside:
            return version_of_tag(r["tag"]), "git compare"
    return None, "not determined"


async def _pr_details(gh: Any, repo: str, number: int) -> dict[str, Any] | None:
    resp = await gh.get(f"/repos/{repo}/pulls/{number}")
    return resp.data if resp.kind == "ok" and isinstance(resp.data, dict) else None


async def _closing_pr(gh: Any, repo: str, number: int, closed_at: float | None) -> dict[str, Any] | None:
    """The merged PR that closed an issue, from its timeline (cross-referenced, merged, near the close)."""
    resp = await gh.get(f"/repos/{repo}/issues/{number}/timeline", {"per_page": 100})
    if resp.kind != "ok" or not isinstance(resp.data, list):
        return None
    best = None
    for ev in resp.data:
        if not isinstance(ev, dict) or ev.get("event") not in ("cross-referenced", "connected"):
            continue
        src = (ev.get("source") or {}).get("issue") or {}
        pr = src.get("pull_request") or {}
        merged = parse_time(pr.get("merged_at"))
        if not merged:
            continue
        if closed_at is not None and merged > closed_at + 86400:
            continue
        distance = abs((closed_at or merged) - merged)
        if best is None or distance < best[0]:
            best = (distance, src)
    if best is None:
        return None
    src = best[1]
    return {"number": src.get("number"), "url": src.get("html_url"), "title": src.get("title"),
            "merged_at": (src.get("pull_request") or {}).get("merged_at"),
            "repo": (src.get("repository") or {}).get("full_name") or repo}


async def annotate(gh: Any, hits: list[dict[str, Any]], cache: Cache) -> None:
    """Add fixed_by / fixed_in / fixed_in_basis to the first few fixed hits, in place."""
    todo: list[dict[str, Any]] = []
    for h in hits:
        if len(todo) >= MAX_FOLLOWUPS:
            break
        if h.get("kind") == "pr" and h.get("state") == "merged":
            todo.append(h)
        elif h.get("kind") == "issue" and h.get("state") == "closed" and h.get("state_reason") == "completed":
            todo.append(h)

    async def one(h: dict[str, Any]) -> None:
        repo = h.get("repo") or "vllm-project/vllm"
        key = cache.key("fix", gh.base, repo, str(h["number"]))
        hit = cache.get(key, ttl=RELEASES_TTL)
        if hit and hit.fresh:
            h.update(hit.value)
            return
        found: dict[str, Any] = {}
        if h["kind"] == "pr":
            pr_num, merged_at, pr_repo = h["number"], parse_time(h.get("merged_at")), repo
            found["fixed_by"] = h["number"]
        else:
            pr = await _closing_pr(gh, repo, h["number"], parse_time(h.get("closed_at")))
            if not pr:
                return
            pr_num, merged_at, pr_repo = pr["number"], parse_time(pr.get("merged_at")), pr["repo"]
            found["fixed_by"] = pr_num
            if pr_repo != repo:
                found["fixed_by_repo"] = pr_repo
        if merged_at is None:
            cache.put(key, found, label=f"fix {repo}#{h['number']}")
            h.update(found)
            return
        details = await _pr_details(gh, pr_repo, int(pr_num))
        sha = details.get("merge_commit_sha") if details else None
        version, basis = await first_release_with(gh, pr_repo, merged_at, sha, cache)
        if version:
            found["fixed_in"] = version
        found["fixed_in_basis"] = basis
        cache.put(key, found, label=f"fix {repo}#{h['number']}")
        h.update(found)

    import asyncio

    await asyncio.gather(*(one(h) for h in todo), return_exceptions=True)
