"""A real HTTP server on loopback that answers like GitHub's REST API, from recorded JSON.

Tests point triage at it with TRIAGE_GITHUB_API. Each route answers with a status, headers and
a body (a fixture file, raw bytes, or a delay to provoke a timeout); every request is recorded
so a test can check what was sent (the query, the Authorization header).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qs, urlparse

import pytest

FIXTURES = Path(__file__).parent / "fixtures" / "github"


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


class Answer:
    def __init__(self, status: int = 200, body: bytes | str | dict | list = b"{}", headers: dict[str, str] | None = None,
                 delay: float = 0.0):
        self.status = status
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        self.body = body.encode() if isinstance(body, str) else body
        self.headers = {"Content-Type": "application/json; charset=utf-8", **(headers or {})}
        self.delay = delay


class FakeGitHub:
    def __init__(self) -> None:
        self.routes: list[tuple[str, Callable[[dict[str, list[str]]], bool], Answer]] = []
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                url = urlparse(self.path)
                params = parse_qs(url.query)
                server.requests.append({"path": url.path, "params": params, "headers": dict(self.headers)})
                ans = server.answer(url.path, params)
                if ans.delay:
                    time.sleep(ans.delay)
                try:
                    self.send_response(ans.status)
                    for k, v in ans.headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(ans.body)))
                    self.end_headers()
                    self.wfile.write(ans.body)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def route(self, path: str, answer: Answer, when: Callable[[dict[str, list[str]]], bool] | None = None) -> None:
        """Later routes win, so a test can override a default."""
        self.routes.insert(0, (path, when or (lambda p: True), answer))

    def answer(self, path: str, params: dict[str, list[str]]) -> Answer:
        for p, pred, ans in self.routes:
            if p == path and pred(params):
                return ans
        return Answer(404, {"message": "Not Found", "status": "404"})

    def searches(self) -> list[str]:
        return [r["params"].get("q", [""])[0] for r in self.requests if r["path"] == "/search/issues"]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def q_has(word: str) -> Callable[[dict[str, list[str]]], bool]:
    return lambda p: word in (p.get("q") or [""])[0]


@pytest.fixture
def fake_github(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """A loopback GitHub, with triage's cache and state in a fresh TRIAGE_HOME and no token."""
    gh = FakeGitHub()
    monkeypatch.setenv("TRIAGE_GITHUB_API", gh.url)
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    for var in ("GITHUB_TOKEN", "GH_TOKEN", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    yield gh
    gh.close()
