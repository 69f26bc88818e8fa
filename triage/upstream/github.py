"""A small async GitHub REST client for issue search and the few follow-up calls triage needs.

Failure is ordinary here: GPU servers are often air-gapped, searches are rate-limited (10 a
minute without a token), GitHub answers 422 to a query it dislikes and sometimes sends half an
answer. Every outcome is a value with a plain-words `message`, never an exception for the caller.
The token is sent in a header and appears in no message, log line or cache file.
"""

from __future__ import annotations

import json
import os
import re
import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the headless report imports no pathlib (start-up)
    from pathlib import Path

from triage.paths import cache_dir
from triage.record import Record

DEFAULT_API = "https://api.github.com"
API_VERSION = "2022-11-28"
CONNECT_TIMEOUT = 1.5  # an air-gapped host fails here at once and falls back to the cache
READ_TIMEOUT = 4.0
SEARCH_LIMIT_ANON = 10  # searches a minute
SEARCH_LIMIT_TOKEN = 30


def api_base() -> str:
    return (os.environ.get("TRIAGE_GITHUB_API") or DEFAULT_API).rstrip("/")


def token() -> str | None:
    for var in ("GITHUB_TOKEN", "GH_TOKEN"):
        v = (os.environ.get(var) or "").strip()
        if v:
            return v
    return None


def _scrub(text: str, secret: str | None) -> str:
    """Remove the token from anything that came back from the server before it is shown."""
    text = str(text)
    if secret:
        text = text.replace(secret, "<token>")
    return text[:300]


class SearchResult(Record):
    __slots__ = ("query", "status", "items", "total_count", "incomplete", "message", "age", "retry_after")
    _fields = __slots__

    def __init__(self, query: str, status: str, items: list[dict[str, Any]] | None = None, total_count: int = 0,
                 incomplete: bool = False, message: str = "", age: float | None = None,
                 retry_after: float | None = None) -> None:
        self.query = query
        self.status = status  # ok | cached | stale | rate_limited | rejected | unreachable | timeout | error | offline
        self.items = [] if items is None else items
        self.total_count = total_count
        self.incomplete = incomplete
        self.message = message
        self.age = age  # seconds, for answers that came from the cache
        self.retry_after = retry_after


class Response(Record):
    __slots__ = ("status", "data", "message", "retry_after", "kind")
    _fields = __slots__

    def __init__(self, status: int, data: Any = None, message: str = "", retry_after: float | None = None,
                 kind: str = "ok") -> None:
        self.status = status  # HTTP status, or 0 when no answer came back
        self.data = data
        self.message = message
        self.retry_after = retry_after
        self.kind = kind  # ok | rate_limited | rejected | unreachable | timeout | error | malformed


class RateGate:
    """Remembers, across runs, how many searches went out in the last minute and any block
    GitHub announced (retry-after, x-ratelimit-reset), so a second `triage` a few seconds later
    does not burn the budget or hammer a 403."""

    def __init__(self, path: Path | None = None, per_minute: int = SEARCH_LIMIT_ANON):
        self.path = path or cache_dir() / "upstream" / "search-rate.json"
        self.per_minute = per_minute

    def _load(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def _save(self, data: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(data))
            os.replace(tmp, self.path)
        except OSError:
            pass

    def wait_needed(self, now: float | None = None) -> float:
        now = time.time() if now is None else now
        data = self._load()
        blocked = float(data.get("blocked_until") or 0)
        if blocked > now:
            return blocked - now
        stamps = [float(s) for s in data.get("stamps", []) if now - float(s) < 60]
        if len(stamps) >= self.per_minute:
            return 60 - (now - min(stamps))
        return 0.0

    def record(self, now: float | None = None) -> None:
        now = time.time() if now is None else now
        data = self._load()
        stamps = [float(s) for s in data.get("stamps", []) if now - float(s) < 60]
        stamps.append(now)
        data["stamps"] = stamps[-max(self.per_minute, 1) * 2 :]
        self._save(data)

    def block(self, seconds: float, now: float | None = None) -> None:
        now = time.time() if now is None else now
        data = self._load()
        data["blocked_until"] = now + max(1.0, min(seconds, 3600.0))
        self._save(data)


def _retry_after(headers: Any, now: float | None = None) -> float | None:
    now = time.time() if now is None else now
    ra = headers.get("retry-after")
    if ra:
        try:
            return max(1.0, float(ra))
        except ValueError:
            pass
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return max(1.0, float(headers["x-ratelimit-reset"]) - now)
        except ValueError:
            pass
    return None


def _error_message(data: Any) -> str:
    if isinstance(data, dict):
        msg = str(data.get("message") or "")
        errs = data.get("errors")
        if isinstance(errs, list) and errs and isinstance(errs[0], dict) and errs[0].get("message"):
            msg = f"{msg}: {errs[0]['message']}" if msg else str(errs[0]["message"])
        return msg
    return ""


def repo_of(item: dict[str, Any]) -> str:
    url = str(item.get("repository_url") or "")
    m = re.search(r"/repos/([^/]+/[^/]+)$", url)
    if m:
        return m.group(1)
    m = re.search(r"github\.com/([^/]+/[^/]+)/(?:issues|pull)/", str(item.get("html_url") or ""))
    return m.group(1) if m else ""


def slim_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """Keep what ranking and display need; drop the rest before caching."""
    if not isinstance(item, dict) or not isinstance(item.get("number"), int):
        return None
    pr = item.get("pull_request")
    labels = [str(lb.get("name")) for lb in item.get("labels") or [] if isinstance(lb, dict) and lb.get("name")]
    return {
        "number": item["number"],
        "title": str(item.get("title") or ""),
        "html_url": str(item.get("html_url") or ""),
        "repo": repo_of(item),
        "state": str(item.get("state") or ""),
        "state_reason": item.get("state_reason"),
        "is_pr": isinstance(pr, dict),
        "merged_at": pr.get("merged_at") if isinstance(pr, dict) else None,
        "draft": bool(item.get("draft")),
        "labels": labels,
        "created_at": item.get("created_at"),
        "updated_at": item.get("updated_at"),
        "closed_at": item.get("closed_at"),
        "comments": item.get("comments") if isinstance(item.get("comments"), int) else 0,
        "body": str(item.get("body") or "")[:4000],
    }


class GitHub:
    """`async with GitHub() as gh:` — one connection pool for one lookup."""

    def __init__(self, base: str | None = None, *, tok: str | None = None, connect_timeout: float = CONNECT_TIMEOUT,
                 read_timeout: float = READ_TIMEOUT, gate: RateGate | None = None):
        self.base = (base or api_base()).rstrip("/")
        self._token = tok if tok is not None else token()
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.gate = gate or RateGate(per_minute=SEARCH_LIMIT_TOKEN if self._token else SEARCH_LIMIT_ANON)
        self.unreachable = False  # after one connect failure, nothing else is tried
        self._client: Any = None

    @property
    def authenticated(self) -> bool:
        return bool(self._token)

    def __repr__(self) -> str:  # never show the token, even in a debugger
        return f"GitHub(base={self.base!r}, authenticated={self.authenticated})"

    async def __aenter__(self) -> "GitHub":
        import httpx  # heavy: only when a lookup really goes to the network

        headers = {
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "triage-vllm-doctor",
        }
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._client = httpx.AsyncClient(
            base_url=self.base,
            headers=headers,
            timeout=httpx.Timeout(self.read_timeout, connect=self.connect_timeout),
            follow_redirects=False,
            trust_env=True,
        )
        return self

    async def __aexit__(self, *exc: Any) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def get(self, path: str, params: dict[str, Any] | None = None) -> Response:
        import httpx

        if self.unreachable:
            return Response(0, message=f"GitHub API unreachable at {self.base}", kind="unreachable")
        try:
            r = await self._client.get(path, params=params)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.ProxyError) as exc:
            self.unreachable = True
            why = "timed out connecting" if isinstance(exc, httpx.ConnectTimeout) else "cannot connect"
            return Response(0, message=f"GitHub API unreachable at {self.base} ({why}); offline?", kind="unreachable")
        except httpx.TimeoutException:
            return Response(0, message=f"GitHub API at {self.base} did not answer within {self.read_timeout:g}s",
                            kind="timeout")
        except httpx.HTTPError as exc:
            return Response(0, message=f"GitHub request failed: {_scrub(type(exc).__name__, self._token)}",
                            kind="error")
        try:
            data = r.json()
        except ValueError:
            data = None
        if r.status_code in (403, 429):
            ra = _retry_after(r.headers)
            msg = _scrub(_error_message(data), self._token)
            limited = ra is not None or "rate limit" in msg.lower() or r.status_code == 429
            if limited:
                ra = ra or 60.0
                return Response(r.status_code, data, f"GitHub rate limit reached; retry in {int(ra)}s", ra,
                                kind="rate_limited")
            return Response(r.status_code, data, f"GitHub refused the request ({r.status_code}): {msg or 'forbidden'}",
                            kind="error")
        if r.status_code == 401:
            return Response(401, data, "GitHub rejected the token (401); set GITHUB_TOKEN to a valid token or unset it",
                            kind="error")
        if r.status_code == 422:
            msg = _scrub(_error_message(data), self._token) or "unprocessable query"
            return Response(422, data, f"GitHub rejected the query (422): {msg}", kind="rejected")
        if r.status_code >= 400:
            return Response(r.status_code, data, f"GitHub answered HTTP {r.status_code}", kind="error")
        if data is None:
            return Response(r.status_code, None, "GitHub sent an answer that is not JSON", kind="malformed")
        return Response(r.status_code, data)

    async def search(self, q: str, *, per_page: int = 20) -> SearchResult:
        wait = self.gate.wait_needed()
        if wait > 0:
            return SearchResult(q, "rate_limited", message=f"search budget spent; retry in {int(wait) + 1}s",
                                retry_after=wait)
        if self.unreachable:
            return SearchResult(q, "unreachable", message=f"GitHub API unreachable at {self.base}")
        self.gate.record()
        resp = await self.get("/search/issues", {"q": q, "per_page": per_page})
        if resp.kind == "rate_limited":
            self.gate.block(resp.retry_after or 60.0)
            return SearchResult(q, "rate_limited", message=resp.message, retry_after=resp.retry_after)
        if resp.kind != "ok":
            return SearchResult(q, resp.kind, message=resp.message)
        data = resp.data
        if not isinstance(data, dict) or not isinstance(data.get("items"), list):
            return SearchResult(q, "malformed", message="GitHub sent a search answer without an item list")
        items = [s for s in (slim_item(i) for i in data["items"]) if s is not None]
        dropped = len(data["items"]) - len(items)
        incomplete = bool(data.get("incomplete_results"))
        parts = []
        if incomplete:
            parts.append("GitHub timed out on part of this search: results may be incomplete")
        if dropped:
            parts.append(f"{dropped} malformed item(s) skipped")
        total = data.get("total_count")
        return SearchResult(q, "ok", items, total if isinstance(total, int) else len(items), incomplete,
                            "; ".join(parts))
