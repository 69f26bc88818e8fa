"""lookup(): the whole path against a loopback GitHub, the cache (fresh, stale, offline), fixes."""

from __future__ import annotations

import json
import time

from triage.runner import Result
from triage.upstream import consult, lookup
from triage.upstream.cache import Cache
from upstream_cases import sm120_report
from upstream_fake_github import Answer, fake_github, fixture, q_has  # noqa: F401 (pytest fixture)

SHA = "9f1c2d3e4b5a69788796a5b4c3d2e1f00a1b2c3d"


class PipRunner:
    """Answers `python -m pip index versions vllm` like pip 24 does."""

    where = "this machine"

    def __init__(self, versions=("0.26.0", "0.25.0", "0.22.1", "0.13.0"), installed="0.13.0"):
        self.calls = []
        self.out = (f"vllm ({versions[0]})\nAvailable versions: {', '.join(versions)}\n"
                    f"  INSTALLED: {installed}\n  LATEST:    {versions[0]}\n")

    def run(self, argv, *, timeout=60.0, input=None, env=None):
        self.calls.append(list(argv))
        return Result(list(argv), 0, self.out, "")


def serve_all(gh):
    gh.route("/search/issues", Answer(200, fixture("search_issues_sm120_dsa.json")), q_has("is:issue"))
    gh.route("/search/issues", Answer(200, fixture("search_prs_sparse_mla.json")), q_has("is:pull-request"))
    gh.route("/repos/vllm-project/vllm/releases", Answer(200, fixture("releases_vllm.json")))
    gh.route("/repos/vllm-project/vllm/pulls/43477", Answer(200, {"number": 43477, "merged": True,
                                                                   "merge_commit_sha": SHA}))
    gh.route(f"/repos/vllm-project/vllm/compare/{SHA}...v0.24.0", Answer(200, {"status": "ahead", "ahead_by": 120}))


def test_online_lookup(fake_github):
    serve_all(fake_github)
    rep = sm120_report()
    runner = PipRunner()
    t = time.monotonic()
    lookup(rep, offline=False, runner=runner)
    assert time.monotonic() - t < 30  # a hang guard, not a speed test (bench/ measures speed)
    # the exact queries are on the report, and exactly those went out
    # (sent concurrently: the server may receive them in any order)
    assert sorted(rep.upstream_queries) == sorted(fake_github.searches())
    assert len(rep.upstream_queries) == 3
    nums = [h.number for h in rep.upstream]
    assert nums.index(31085) > nums.index(38476)
    assert set(nums[-2:]) == {19999, 2369} or nums.index(31085) < nums.index(19999)
    merged = next(h for h in rep.upstream if h.number == 43477)
    assert merged.fixed_by == 43477 and merged.fixed_in == "0.24.0" and merged.fixed_in_basis == "git compare"
    up = rep.upgrade.to_json()
    assert up["verdict"] == "fixes" and up["target_version"] == "0.25.0"  # the first listed release >= 0.24.0, the first with FLASHINFER_MLA_SPARSE_SM120
    assert up["overwrites"] == ["vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/flashmla_sparse.py"]
    assert "triage probe --save-patches DIR" in up["keep_patches"]
    assert any("flashinfer-python>=0.6.12 (installed 0.5.3: too old)" in e for e in up["evidence"])
    assert runner.calls[0][1:5] == ["-m", "pip", "index", "versions"]
    assert runner.calls[0][0] == "/home/alice/venvs/vllm/bin/python"
    # and the report's JSON carries both
    out = rep.to_json()
    assert out["upstream"][0]["why"] and out["upgrade"]["verdict"] == "fixes"
    assert {"number": 43477, "kind": "pr", "state": "merged", "fixed_by": 43477, "fixed_in": "0.24.0",
            "fixed_in_basis": "git compare"}.items() <= next(h for h in out["upstream"] if h["number"] == 43477).items()
    assert all("updated_at" not in h and None not in h.values() for h in out["upstream"])
    # nothing private went out
    for q in fake_github.searches():
        assert "acme" not in q and "alice" not in q and "/data" not in q


def test_compare_moves_to_the_next_release_when_the_branch_was_cut_before(fake_github):
    serve_all(fake_github)
    fake_github.route(f"/repos/vllm-project/vllm/compare/{SHA}...v0.24.0", Answer(200, {"status": "diverged"}))
    fake_github.route(f"/repos/vllm-project/vllm/compare/{SHA}...v0.25.0", Answer(200, {"status": "ahead"}))
    rep = sm120_report()
    lookup(rep, offline=False)
    merged = next(h for h in rep.upstream if h.number == 43477)
    assert merged.fixed_in == "0.25.0"


def test_fresh_cache_makes_no_request(fake_github):
    serve_all(fake_github)
    lookup(sm120_report(), offline=False)
    n = len(fake_github.searches())
    fake_github.route("/search/issues", Answer(500, b"boom"))
    rep = sm120_report()
    lookup(rep, offline=False)
    assert len(fake_github.searches()) == n
    assert [h.number for h in rep.upstream][:3] and not any("upstream" in w for w in rep.warnings)


def _age_cache(hours):
    root = Cache().root
    for f in root.glob("*.json"):
        data = json.loads(f.read_text())
        if "fetched_at" in data:
            data["fetched_at"] -= hours * 3600
            f.write_text(json.dumps(data))


def test_stale_cache_when_rate_limited(fake_github):
    serve_all(fake_github)
    lookup(sm120_report(), offline=False)
    _age_cache(10)
    fake_github.route("/search/issues", Answer(403, fixture("error_403_secondary.json"), {"retry-after": "45"}))
    rep = sm120_report()
    lookup(rep, offline=False)
    assert rep.upstream and all(h.age == "10h" for h in rep.upstream)
    assert any("cached results up to 10h old" in w and "rate limit" in w for w in rep.warnings)


def test_offline_makes_no_request_and_uses_the_cache(fake_github):
    serve_all(fake_github)
    lookup(sm120_report(), offline=False)
    before = len(fake_github.requests)
    _age_cache(30)
    rep = sm120_report()
    runner = PipRunner()
    lookup(rep, offline=True, runner=runner)
    assert len(fake_github.requests) == before and runner.calls == []
    assert rep.upstream and rep.upstream[0].age == "30h"
    assert next(h for h in rep.upstream if h.number == 43477).fixed_in == "0.24.0"  # cached too
    assert rep.upgrade.verdict == "fixes"
    assert any("not checked (offline)" in e for e in rep.upgrade.evidence)


def test_offline_with_an_empty_cache(fake_github):
    rep = sm120_report()
    lookup(rep, offline=True)
    assert fake_github.requests == []
    assert rep.upstream == []
    assert [w for w in rep.warnings if "upstream" in w] == ["upstream: offline, and nothing cached for 3 of 3 searches"]
    assert rep.upstream_queries  # still shown: the user can run them by hand


def test_unreachable_github_falls_back_at_once(fake_github, monkeypatch):
    monkeypatch.setenv("TRIAGE_GITHUB_API", "http://127.0.0.1:9")  # discard port: nothing listens
    rep = sm120_report()
    t = time.monotonic()
    lookup(rep, offline=False)
    assert time.monotonic() - t < 3
    assert rep.upstream == []
    assert len([w for w in rep.warnings if "unreachable" in w]) == 1


def test_the_whole_lookup_is_bounded(fake_github, monkeypatch):
    fake_github.route("/search/issues", Answer(200, fixture("search_incomplete.json"), delay=8))
    rep = sm120_report()
    t = time.monotonic()
    consult.lookup(rep, offline=False, deadline=1.5)
    assert time.monotonic() - t < 3.5
    assert rep.upstream == [] and rep.upgrade is not None


def test_no_diagnosis_no_lookup(fake_github):
    from triage.model import Report

    rep = Report(source="x", bytes=0, lines=0)
    lookup(rep, offline=False)
    assert rep.upstream is None and rep.upgrade is None and fake_github.requests == []


def test_offline_lookup_loads_no_network_stack(tmp_path):
    import subprocess
    import sys

    code = ("import sys; sys.path.insert(0, 'tests'); from upstream_cases import sm120_report; "
            "from triage.upstream import lookup; r = sm120_report(); lookup(r, offline=True); "
            "assert r.upgrade.verdict == 'fixes', r.upgrade; "
            "print(sorted(m for m in ('httpx', 'asyncio', 'textual', 'torch') if m in sys.modules))")
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         cwd=Path(__file__).resolve().parent.parent, env={"TRIAGE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "PYTHONPATH": "."})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_playbook_upstream_probe_reads_what_the_lookup_found(fake_github):
    # The guided fix asks upstream when the report has no verdict yet (the TUI's fix view can open
    # before the upstream stage is done): the lookup fills the report in place, and the verdict it
    # found is what the playbook sees.
    from triage.playbooks.engine import default_upstream

    serve_all(fake_github)
    rep = sm120_report()
    assert rep.upgrade is None
    got = default_upstream({}, rep, offline=False)
    assert got["source"] == "triage.upstream"
    assert got["verdict"] == rep.upgrade.verdict != "unknown", got
    assert got["hits"] == len(rep.upstream) > 0
    assert got["top"].startswith(f"#{rep.upstream[0].number} ")


def test_playbook_upstream_probe_offline_and_without_a_report():
    from triage.playbooks.engine import default_upstream

    assert default_upstream({}, sm120_report(), offline=True)["why"] == "offline"
    assert default_upstream({}, None, offline=False)["why"] == "no diagnosis to look up upstream"
