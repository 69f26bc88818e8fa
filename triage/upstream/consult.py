"""What upstream knows about this failure, and whether upgrading fixes it: one bounded call.

    lookup(report, offline=False)   # sets report.upstream, report.upgrade, report.upstream_queries

Synchronous for its callers; inside, the searches run concurrently on one httpx client while
the environment's installer is asked for versions on a thread. The whole thing is bounded by
DEADLINE seconds; whatever is not back by then is taken from the cache or left out, and the
user is told which. With offline=True nothing leaves the machine: cache only.
"""

from __future__ import annotations

import time
from typing import Any

from triage.model import UpstreamHit
from triage.upstream import advisor
from triage.upstream.cache import Cache, human_age
from triage.upstream.facets import diagnosis_facets
from triage.upstream.github import GitHub, SearchResult, api_base
from triage.upstream.query import Query, build_queries
from triage.upstream.rank import positioned, rank

DEADLINE = 5.0
SEARCH_TTL = 6 * 3600.0
VERSIONS_TTL = 3600.0
MAX_HITS = 10

# The exact queries of the last lookup (also on report.upstream_queries), for display.
last_queries: list[str] = []


def _python_of(report: Any, python: str | None) -> str | None:
    from triage.interpreter import runnable_python

    return runnable_python(report.environment, python)


def _versions(runner: Any, python: str | None, cache: Cache, timeout: float) -> advisor.Available:
    if runner is None or not python:
        return advisor.Available(message="no Python environment to ask")
    where = getattr(runner, "where", "")
    key = cache.key("versions", where, python)
    hit = cache.get(key, ttl=VERSIONS_TTL)
    if hit and hit.fresh and isinstance(hit.value, dict):
        v = hit.value
        return advisor.Available(v.get("versions") or [], v.get("installed"), v.get("source", ""), v.get("message", ""))
    avail = advisor.installer_versions(runner, python, timeout=timeout)
    if avail.known:
        cache.put(key, {"versions": avail.versions, "installed": avail.installed, "source": avail.source,
                        "message": ""}, label=f"versions {python}")
    return avail


def _local_runner_for(env: dict[str, Any], python: str) -> Any:
    """This machine's runner, when the Python that runs vLLM is here (not on a probed SSH host)."""
    import os
    import socket

    from triage.runner import LocalRunner

    host = env.get("probed_host")
    local_names = {None, "", "localhost", "127.0.0.1", "this machine", socket.gethostname()}
    if host not in local_names or not os.path.isfile(python) or not os.access(python, os.X_OK):
        return None
    return LocalRunner()


class _Thread:
    """A daemon thread with a result: a hung installer must not hold the process at exit."""

    def __init__(self, fn: Any, *args: Any):
        self.result: Any = None
        import threading  # only online: the offline report path stays light

        self._t = threading.Thread(target=self._run, args=(fn, *args), daemon=True)
        self._fn = fn
        self._t.start()

    def _run(self, fn: Any, *args: Any) -> None:
        try:
            self.result = fn(*args)
        except Exception as exc:  # reported as unknown availability, never raised into the report
            self.result = advisor.Available(message=f"installer query failed: {type(exc).__name__}")

    def join(self, timeout: float) -> Any:
        self._t.join(max(0.0, timeout))
        return self.result


def _from_cache(cache: Cache, base: str, q: Query, status: str, message: str) -> SearchResult:
    hit = cache.get(cache.key("search", base, q.q), ttl=SEARCH_TTL)
    if hit is None:
        return SearchResult(q.q, status, message=message)
    st = "cached" if hit.fresh and status == "offline" else "stale"
    return SearchResult(q.q, st, hit.value.get("items", []), hit.value.get("total_count", 0),
                        hit.value.get("incomplete", False), message=message, age=hit.age)


async def _search_all(queries: list[Query], cache: Cache, base: str, deadline: float) -> tuple[list[SearchResult], Any]:
    import asyncio

    results: list[SearchResult] = []
    todo: list[Query] = []
    for q in queries:
        hit = cache.get(cache.key("search", base, q.q), ttl=SEARCH_TTL)
        if hit and hit.fresh:
            results.append(SearchResult(q.q, "cached", hit.value.get("items", []), hit.value.get("total_count", 0),
                                        hit.value.get("incomplete", False), age=hit.age))
        else:
            todo.append(q)
    if not todo:
        return results, None
    gh = GitHub(base)
    await gh.__aenter__()
    try:
        remaining = max(0.5, deadline - time.monotonic())
        answers = await asyncio.wait_for(asyncio.gather(*(gh.search(q.q) for q in todo), return_exceptions=True),
                                         timeout=remaining)
    except asyncio.TimeoutError:
        answers = [SearchResult(q.q, "timeout", message="GitHub did not answer in time") for q in todo]
    for q, ans in zip(todo, answers):
        if isinstance(ans, BaseException):
            ans = SearchResult(q.q, "error", message=f"search failed: {type(ans).__name__}")
        if ans.status == "ok":
            cache.put(cache.key("search", base, q.q),
                      {"items": ans.items, "total_count": ans.total_count, "incomplete": ans.incomplete},
                      label=q.q)
            results.append(ans)
        else:
            results.append(_from_cache(cache, base, q, ans.status, ans.message))
    return results, gh


def _apply_cached_fixes(hits: list[dict[str, Any]], cache: Cache, base: str) -> None:
    for h in hits:
        hit = cache.get(cache.key("fix", base, h.get("repo") or "vllm-project/vllm", str(h["number"])))
        if hit and isinstance(hit.value, dict):
            h.update(hit.value)


def _messages(results: list[SearchResult]) -> list[str]:
    """One line per kind of trouble, not one per query: an air-gapped host reads as one line."""
    stale = [r for r in results if r.status == "stale" and r.age is not None]
    failed = [r for r in results if r.status in ("rate_limited", "unreachable", "timeout", "rejected", "error",
                                                  "malformed") and not r.items]
    empty_offline = [r for r in results if r.status == "offline" and not r.items]
    notes = [r for r in results if r.status in ("ok", "cached") and r.message]
    out: list[str] = []
    if stale:
        oldest = max(r.age or 0.0 for r in stale)
        why = next((r.message for r in stale if r.message), "")
        out.append(f"upstream: showing cached results up to {human_age(oldest)} old"
                   + (f" ({why})" if why else "") + f" for {len(stale)} of {len(results)} searches")
    for msg in dict.fromkeys(r.message or r.status for r in failed):
        n = sum(1 for r in failed if (r.message or r.status) == msg)
        out.append(f"upstream: {msg}; no cached results for {n} search{'es' if n != 1 else ''}")
    if empty_offline:
        out.append(f"upstream: offline, and nothing cached for {len(empty_offline)} of {len(results)} searches")
    for r in notes:
        out.append(f"upstream: {r.message} ({r.query!r})")
    return out


def lookup(report: Any, *, offline: bool, runner: Any = None, python: str | None = None,
           deadline: float = DEADLINE) -> None:
    """Fill report.upstream (ranked hits), report.upgrade (verdict) and report.upstream_queries."""
    global last_queries
    if not getattr(report, "diagnoses", None):
        return
    diag = report.diagnoses[0]
    env = report.environment or {}
    start = time.monotonic()
    end = start + deadline
    cache = Cache()
    base = api_base()

    facets = diagnosis_facets(diag, env)
    for entry in advisor.load_capabilities():
        if advisor.matches(entry, diag, env, facets) is not False:
            facets.related_backends |= set(entry.get("backends") or [])
    facets.related_backends -= facets.backends
    queries = build_queries(facets)
    last_queries = [q.q for q in queries]
    report.upstream_queries = list(last_queries)

    py = _python_of(report, python)
    if runner is None and py:
        runner = _local_runner_for(env, py)
    versions_job = None
    if not offline and runner is not None and py:
        versions_job = _Thread(_versions, runner, py, cache, max(1.0, deadline - 0.5))

    gh = None
    if offline:
        results = [_from_cache(cache, base, q, "offline", "") for q in queries]
    else:
        import asyncio  # only online: the offline report path stays light

        from triage.upstream import fixes

        async def online() -> tuple[list[SearchResult], list[dict[str, Any]]]:
            res, client = await _search_all(queries, cache, base, end - 0.3)
            items = positioned([r.items for r in res])
            hits = rank(items, facets, limit=MAX_HITS)
            if client is not None:
                try:
                    if not client.unreachable:
                        left = end - time.monotonic()
                        if left > 0.3:
                            try:
                                await asyncio.wait_for(fixes.annotate(client, hits, cache), timeout=left)
                            except asyncio.TimeoutError:
                                pass
                finally:
                    await client.__aexit__(None, None, None)
            return res, hits

        try:
            results, hits_online = asyncio.run(online())
        except Exception as exc:  # the report must come out even if this part fails
            results = [_from_cache(cache, base, q, "error", f"upstream lookup failed: {type(exc).__name__}")
                       for q in queries]
            hits_online = None
        gh = hits_online

    if gh is None:
        items = positioned([r.items for r in results])
        hits = rank(items, facets, limit=MAX_HITS)
    else:
        hits = gh
    _apply_cached_fixes(hits, cache, base)
    ages = {}
    for r in results:
        if r.age is not None and r.status in ("stale", "cached"):
            for it in r.items:
                ages[(it.get("repo") or "", it["number"])] = r.age
    for h in hits:
        age = ages.get((h.get("repo") or "", h["number"]))
        if age is not None:
            h["age"] = human_age(age)
        h.pop("updated_at", None)

    report.upstream = [UpstreamHit.from_json(h) for h in hits]
    for m in _messages(results):
        if m not in report.warnings:
            report.warnings.append(m)

    avail = advisor.Available()
    if versions_job is not None:
        got = versions_job.join(end - time.monotonic())
        if got is None:
            avail = advisor.Available(message=f"the installer did not answer within {deadline:g}s")
        else:
            avail = got
    elif not offline:
        avail = advisor.Available(message="no Python environment to ask" if not py else "no runner to ask the installer")
    report.upgrade = advisor.advise(diag, env, facets, avail, hits=hits, offline=offline)
