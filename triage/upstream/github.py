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

from triage.lazyre import lazy
from triage.paths import cache_dir
from triage.record import Record

DEFAULT_API = "https://api.github.com"
API_VERSION = "2022-11-28"
CONNECT_TIMEOUT = 1.5  # an air-gapped host fails here at once and falls back to the cache
READ_TIMEOUT = 4.0
SEARCH_LIMIT_ANON = 10  # searches a minute
SEARCH_LIMIT_TOKEN = 30
# Bounds on what a server (GitHub, a proxy, a hostile TRIAGE_GITHUB_API) can make triage hold or show.
MAX_BODY = 16 << 20  # one answer; a compare of two releases is a few MB
MAX_ITEMS = 100  # GitHub's own per_page ceiling
MAX_RETRY_SHOWN = 3600.0
MAX_BLOCK = 900.0  # a 403 blocks searches at this API base for at most this long


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

    def __init__(self, path: Path | None = None, per_minute: int = SEARCH_LIMIT_ANON, base: str | None = None):
        if path is None:
            # One budget per API base: a block announced by one server says nothing about another.
            import hashlib

            tag = hashlib.sha256((base or api_base()).encode()).hexdigest()[:12]
            path = cache_dir() / "upstream" / f"search-rate-{tag}.json"
        self.path = path
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
        data["blocked_until"] = now + max(1.0, min(seconds, MAX_BLOCK))
        self._save(data)


def _retry_after(headers: Any, now: float | None = None) -> float | None:
    now = time.time() if now is None else now
    ra = headers.get("retry-after")
    if ra:
        try:
            return min(MAX_RETRY_SHOWN, max(1.0, float(ra)))
        except (ValueError, OverflowError):
            pass
    if headers.get("x-ratelimit-remaining") == "0" and headers.get("x-ratelimit-reset"):
        try:
            return min(MAX_RETRY_SHOWN, max(1.0, float(headers["x-ratelimit-reset"]) - now))
        except (ValueError, OverflowError):
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
    m = re.search(r"/repos/([\w.-]+/[\w.-]+)$", url)
    if m:
        return m.group(1)
    m = re.search(r"github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/", str(item.get("html_url") or ""))
    return m.group(1) if m else ""


_HTML_URL = lazy(r"^https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+$")
_STAMP = lazy(r"^\d{4}-\d\d-\d\dT[\d:.]+Z?$")


def _text(v: Any, limit: int) -> str:
    from triage.sanitize import clean

    return clean(str(v if v is not None else "")[:limit])


def _stamp(v: Any) -> str | None:
    return v if isinstance(v, str) and _STAMP.match(v) else None


def slim_item(item: dict[str, Any]) -> dict[str, Any] | None:
    """Keep what ranking and display need, cleaned and bounded; drop the rest before caching."""
    if not isinstance(item, dict) or not isinstance(item.get("number"), int) or isinstance(item.get("number"), bool):
        return None
    pr = item.get("pull_request")
    labels = [_text(lb.get("name"), 60) for lb in (item.get("labels") or [])[:30]
              if isinstance(lb, dict) and lb.get("name")] if isinstance(item.get("labels"), list) else []
    url = str(item.get("html_url") or "")
    state = str(item.get("state") or "")
    reason = item.get("state_reason")
    return {
        "number": item["number"],
        "title": _text(item.get("title"), 300),
        "html_url": url if _HTML_URL.match(url) else "",
        "repo": repo_of(item),
        "state": state if state in ("open", "closed") else "",
        "state_reason": reason if isinstance(reason, str) and re.fullmatch(r"[a-z_]{1,30}", reason) else None,
        "is_pr": isinstance(pr, dict),
        "merged_at": _stamp(pr.get("merged_at")) if isinstance(pr, dict) else None,
        "draft": bool(item.get("draft")),
        "labels": labels,
        "created_at": _stamp(item.get("created_at")),
        "updated_at": _stamp(item.get("updated_at")),
        "closed_at": _stamp(item.get("closed_at")),
        "comments": item.get("comments") if isinstance(item.get("comments"), int) else 0,
        "body": _text(item.get("body"), 4000),
    }


class GitHub:
    """`async with GitHub() as gh:` — one connection pool for one lookup."""

    def __init__(self, base: str | None = None, *, tok: str | None = None, connect_timeout: float = CONNECT_TIMEOUT,
                 read_timeout: float = READ_TIMEOUT, gate: RateGate | None = None):
        self.base = (base or api_base()).rstrip("/")
        self._token = tok if tok is not None else token()
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self.gate = gate or RateGate(per_minute=SEARCH_LIMIT_TOKEN if self._token else SEARCH_LIMIT_ANON,
                                     base=self.base)
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
            async with self._client.stream("GET", path, params=params) as r:
                body = bytearray()
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > MAX_BODY:
                        return Response(r.status_code, None, f"GitHub sent more than {MAX_BODY >> 20} MB; ignored",
                                        kind="malformed")
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
            data = json.loads(bytes(body)) if body else None
        except (ValueError, RecursionError):
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
        raw = data["items"][:max(1, min(per_page, MAX_ITEMS))]  # a server may send far more than asked
        items = [s for s in (slim_item(i) for i in raw) if s is not None]
        dropped = len(raw) - len(items)
        incomplete = bool(data.get("incomplete_results"))
        parts = []
        if incomplete:
            parts.append("GitHub timed out on part of this search: results may be incomplete")
        if dropped:
            parts.append(f"{dropped} malformed item(s) skipped")
        total = data.get("total_count")
        return SearchResult(q, "ok", items, total if isinstance(total, int) else len(items), incomplete,
                            "; ".join(parts))
