"""The GitHub client against a real HTTP server on loopback: every answer GitHub gives."""

from __future__ import annotations

import asyncio
import json
import socket
import time

from triage.upstream.github import GitHub, RateGate
from upstream_fake_github import Answer, fake_github, fixture  # noqa: F401 (pytest fixture)

Q = 'repo:vllm-project/vllm is:issue "No valid attention backend found" (SM120 OR "RTX PRO 6000")'


def search(base, q=Q, **kw):
    # loopback answers at once; a loaded test machine must not turn a slow accept into "unreachable"
    kw.setdefault("connect_timeout", 10.0)

    async def go():
        async with GitHub(base, **kw) as gh:
            return await gh.search(q), gh
    return asyncio.run(go())


def test_ok(fake_github):
    fake_github.route("/search/issues", Answer(200, fixture("search_issues_sm120_dsa.json")))
    res, _ = search(fake_github.url)
    assert res.status == "ok" and res.total_count == 1834 and not res.incomplete
    assert [i["number"] for i in res.items][:2] == [31085, 31936]
    first = res.items[0]
    assert first["repo"] == "vllm-project/vllm" and first["is_pr"] is False and first["labels"] == ["feature request", "stale"]
    req = fake_github.requests[0]
    assert req["params"]["q"] == [Q]
    assert req["headers"]["Accept"] == "application/vnd.github+json"
    assert req["headers"]["X-GitHub-Api-Version"] == "2022-11-28"
    assert "Authorization" not in req["headers"]


def test_token_is_sent_and_never_shown(fake_github, monkeypatch, tmp_path):
    secret = "ghp_" + "S" * 36
    monkeypatch.setenv("GH_TOKEN", secret)
    fake_github.route("/search/issues", Answer(401, {"message": f"Bad credentials {secret}"}))
    res, gh = search(fake_github.url)
    assert fake_github.requests[0]["headers"]["Authorization"] == f"Bearer {secret}"
    assert res.status == "error" and "401" in res.message
    assert secret not in res.message and secret not in repr(gh)
    for f in (tmp_path / "home").rglob("*"):
        if f.is_file():
            assert secret not in f.read_text()


def test_403_with_retry_after_blocks_further_searches(fake_github):
    fake_github.route("/search/issues", Answer(403, fixture("error_403_secondary.json"), {"retry-after": "30"}))
    res, _ = search(fake_github.url)
    assert res.status == "rate_limited" and res.retry_after == 30.0
    assert "retry in 30s" in res.message
    # the next run does not hammer GitHub: no request leaves until the block ends
    res2, _ = search(fake_github.url)
    assert res2.status == "rate_limited" and len(fake_github.requests) == 1
    assert "retry in" in res2.message


def test_403_primary_limit_uses_reset_header(fake_github):
    reset = int(time.time()) + 120
    fake_github.route("/search/issues", Answer(403, fixture("error_403_primary.json"),
                                               {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(reset),
                                                "x-ratelimit-resource": "search"}))
    res, _ = search(fake_github.url)
    assert res.status == "rate_limited" and 100 <= res.retry_after <= 121


def test_429(fake_github):
    fake_github.route("/search/issues", Answer(429, {"message": "Too Many Requests"}))
    res, _ = search(fake_github.url)
    assert res.status == "rate_limited" and res.retry_after == 60.0


def test_403_that_is_not_a_rate_limit(fake_github):
    fake_github.route("/search/issues", Answer(403, {"message": "Resource protected by organization SAML enforcement"}))
    res, _ = search(fake_github.url)
    assert res.status == "error" and "SAML" in res.message


def test_422_says_why(fake_github):
    fake_github.route("/search/issues", Answer(422, fixture("error_422.json")))
    res, _ = search(fake_github.url, q="repo:vllm-project/vllm attention")
    assert res.status == "rejected"
    assert res.message == "GitHub rejected the query (422): Validation Failed: Query must include 'is:issue' or 'is:pull-request'"


def test_incomplete_results(fake_github):
    fake_github.route("/search/issues", Answer(200, fixture("search_incomplete.json")))
    res, _ = search(fake_github.url)
    assert res.status == "ok" and res.incomplete and len(res.items) == 2
    assert "incomplete" in res.message


def test_garbage(fake_github):
    fake_github.route("/search/issues", Answer(200, b"<html>502 Bad Gateway</html>", {"Content-Type": "text/html"}))
    res, _ = search(fake_github.url)
    assert res.status == "malformed" and "not JSON" in res.message


def test_json_of_the_wrong_shape(fake_github):
    fake_github.route("/search/issues", Answer(200, {"total_count": 3, "items": "nope"}))
    res, _ = search(fake_github.url)
    assert res.status == "malformed"


def test_malformed_items_are_skipped(fake_github):
    good = json.loads(fixture("search_issues_sm120_dsa.json"))["items"][1]
    fake_github.route("/search/issues", Answer(200, {"total_count": 3, "incomplete_results": False,
                                                     "items": [good, {"title": "no number"}, 42]}))
    res, _ = search(fake_github.url)
    assert res.status == "ok" and [i["number"] for i in res.items] == [31936]
    assert "2 malformed item(s) skipped" in res.message


def test_server_error(fake_github):
    fake_github.route("/search/issues", Answer(502, b"bad gateway", {"Content-Type": "text/plain"}))
    res, _ = search(fake_github.url)
    assert res.status == "error" and "502" in res.message


def test_read_timeout(fake_github):
    fake_github.route("/search/issues", Answer(200, fixture("search_incomplete.json"), delay=2.0))
    t = time.monotonic()
    res, _ = search(fake_github.url, read_timeout=0.3)
    assert res.status == "timeout" and time.monotonic() - t < 1.5


def test_unreachable_fails_fast_and_only_once(fake_github):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now

    async def go():
        async with GitHub(f"http://127.0.0.1:{port}") as gh:
            a = await gh.search(Q)
            b = await gh.search(Q + " x")
            return a, b
    t = time.monotonic()
    a, b = asyncio.run(go())
    assert time.monotonic() - t < 2.0
    assert a.status == "unreachable" and "unreachable" in a.message
    assert b.status == "unreachable"


def test_rate_gate_counts_a_minute(tmp_path):
    gate = RateGate(tmp_path / "r.json", per_minute=3)
    now = 1000.0
    for i in range(3):
        assert gate.wait_needed(now + i) == 0
        gate.record(now + i)
    assert 55 < gate.wait_needed(now + 3) <= 60
    assert gate.wait_needed(now + 61) == 0
