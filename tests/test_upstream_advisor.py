"""The upgrade advisor: the installer's answer, the capability table, the verdict."""

from __future__ import annotations

import asyncio
import re
import sys

import pytest

from triage.model import Diagnosis, Evidence
from triage.runner import LocalRunner, Result
from triage.upstream import advisor, fixes
from triage import versions as V
from triage.upstream.cache import Cache
from triage.upstream.facets import diagnosis_facets
from triage.upstream.github import GitHub
from upstream_cases import sm120_diagnosis, sm120_env
from upstream_fake_github import Answer, fake_github, fixture  # noqa: F401 (pytest fixture)


class Scripted:
    where = "gpu-a"

    def __init__(self, *results):
        self.results = list(results)
        self.calls = []

    def run(self, argv, *, timeout=60.0, input=None, env=None):
        self.calls.append(list(argv))
        return self.results.pop(0)


def R(rc=0, out="", err="", timed_out=False):
    return Result(["x"], rc, out, err, timed_out)


def advise(avail, diag=None, **env):
    d = diag or sm120_diagnosis()
    e = sm120_env(**env)
    return advisor.advise(d, e, diagnosis_facets(d, e), avail).to_json()


# --- the installer ---------------------------------------------------------------------------

def test_real_pip_lists_versions_from_a_local_index(tmp_path, monkeypatch):
    for v in ("0.22.1", "0.26.0", "0.27.0rc1", "0.13.0"):
        (tmp_path / f"vllm-{v}.tar.gz").write_bytes(b"")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path))
    got = advisor.installer_versions(LocalRunner(), sys.executable, timeout=60)
    assert got.versions == ["0.13.0", "0.22.1", "0.26.0", "0.27.0rc1"]
    assert got.latest == "0.26.0"  # a release candidate is listed but not the default target
    assert "pip index versions" in got.source


def test_pip_output_with_installed():
    out = "vllm (0.11.0)\nAvailable versions: 0.11.0, 0.10.2, 0.10.1.1, 0.9.2\n  INSTALLED: 0.10.1.1\n  LATEST:    0.11.0\n"
    assert advisor.parse_pip_index(out) == (["0.9.2", "0.10.1.1", "0.10.2", "0.11.0"], "0.10.1.1")


def test_pip_too_old():
    got = advisor.installer_versions(Scripted(R(1, "", 'ERROR: unknown command "index"')), "/py")
    assert not got.known and "too old" in got.message


def test_pip_timeout():
    got = advisor.installer_versions(Scripted(R(124, "", "", True)), "/py", timeout=2)
    assert not got.known and "did not answer within 2s" in got.message


def test_no_network_for_pip():
    got = advisor.installer_versions(Scripted(R(1, "", "ERROR: No matching distribution found for vllm")), "/py")
    assert not got.known and "no vLLM" in got.message


def test_no_pip_falls_back_to_uv():
    s = Scripted(R(1, "", "/py: No module named pip"),
                 R(0, "", "Resolved 150 packages in 1.2s\nWould download 1 package\nWould install 1 package\n + vllm==0.26.0\n"))
    got = advisor.installer_versions(s, "/py")
    assert got.versions == ["0.26.0"] and s.calls[1][:3] == ["uv", "pip", "install"]
    assert "--dry-run" in s.calls[1]


def test_no_pip_and_no_uv():
    got = advisor.installer_versions(Scripted(R(1, "", "No module named pip"), R(-1, "", "uv: not found")), "/py")
    assert not got.known and "uv is not installed" in got.message


# --- verdicts --------------------------------------------------------------------------------

def test_fixes_when_a_version_with_the_backend_is_available():
    up = advise(advisor.Available(["0.22.1", "0.26.0", "0.27.0rc1", "0.27.0"], source="pip index versions vllm"))
    assert up["verdict"] == "fixes" and up["target_version"] == "0.26.0"
    ev = "\n".join(up["evidence"])
    assert "needs --kv-cache-dtype fp8_ds_mla" in ev and "livelock" in ev and "#43477" in ev
    assert "TRITON_MLA_SPARSE" in ev and "#38476" in ev


def test_does_not_fix_when_the_index_stops_before_it():
    up = advise(advisor.Available(["0.20.0", "0.22.1"], source="pip index versions vllm"))
    assert up["verdict"] == "does-not-fix" and up["target_version"] is None
    assert up["evidence"][0].startswith("no released vLLM available to this environment fixes this on this GPU")
    assert "#38476" in up["evidence"][0] and "#47629" in up["evidence"][0]


def test_already_on_a_version_with_the_backend():
    up = advise(advisor.Available(["0.26.0", "0.27.0"]), vllm_version="0.26.0",
                packages={"flashinfer-python": "0.6.14"})
    assert up["verdict"] == "does-not-fix"
    ev = "\n".join(up["evidence"])
    assert "already in the installed 0.26.0" in ev and "needs --kv-cache-dtype fp8_ds_mla" in ev
    assert "flashinfer-python>=0.6.12 (installed 0.6.14: ok)" in ev


def test_unknown_compute_capability_gives_unknown():
    up = advise(advisor.Available(), compute_capability=None, gpus=[])
    assert up["verdict"] == "unknown" and up["target_version"] is None
    assert any("compute capability is unknown" in e for e in up["evidence"])
    assert any(e.startswith("if the GPU has compute capability 12.x: Sparse MLA") and "0.24.0" in e for e in up["evidence"])


def test_hopper_is_not_told_to_upgrade_for_sm120():
    up = advise(advisor.Available(["0.26.0"]), compute_capability="9.0", gpus=[{"name": "NVIDIA H100", "compute_capability": "9.0"}])
    assert up["verdict"] == "unknown"


def test_overwrites_and_how_to_keep_them():
    up = advise(advisor.Available(["0.26.0"]), patched_files=[{"path": "vllm/platforms/cuda.py", "sha256": "x"}])
    assert up["overwrites"] == ["vllm/platforms/cuda.py"]
    assert "triage probe --save-patches DIR" in up["keep_patches"]
    none = advise(advisor.Available(["0.26.0"]), patched_files=[])
    assert none["overwrites"] == [] and "keep_patches" not in none


def test_flashinfer_mla_on_sm120_never():
    d = Diagnosis("attention_backend", "attention.selected_backend_invalid", "Selected backend is not valid", 0.9,
                  [Evidence(5, "ValueError: Selected backend AttentionBackendEnum.FLASHINFER_MLA is not valid for this "
                               "configuration. Reason: ['sparse not supported', 'compute capability not supported']")],
                  {"use_sparse": True, "rejected": {"FLASHINFER_MLA": ["sparse not supported", "compute capability not supported"]}})
    up = advise(advisor.Available(["0.27.0"]), diag=d)
    assert up["verdict"] == "does-not-fix"
    assert "10.x only" in up["evidence"][2]


def test_fp8_on_ampere_from_051():
    d = Diagnosis("quantization", "quantization.min_capability", "fp8 needs a newer GPU", 0.9,
                  [Evidence(1, "ValueError: The quantization method fp8 is not supported for the current GPU. "
                               "Minimum capability: 90. Current capability: 86.")])
    up = advise(advisor.Available(["0.4.1", "0.5.0", "0.5.1", "0.5.2"]), diag=d, vllm_version="0.4.1",
                compute_capability="8.6", gpus=[{"name": "NVIDIA A40", "compute_capability": "8.6"}], architecture="LlamaForCausalLM")
    assert up["verdict"] == "fixes" and up["target_version"] == "0.5.1"


def test_triton_mla_fp8_regression():
    d = sm120_diagnosis(kv_cache_dtype="fp8_e4m3")
    d.facts.update(use_sparse=False, rejected={"FLASH_ATTN_MLA": ["compute capability not supported"],
                                               "TRITON_MLA": ["kv_cache_dtype not supported"]})
    up = advise(advisor.Available(["0.14.0", "0.24.0", "0.25.0"]), diag=d, vllm_version="0.14.0",
                architecture="DeepseekV3ForCausalLM")
    assert up["verdict"] == "fixes" and up["target_version"] == "0.25.0"


# --- the table itself --------------------------------------------------------------------------

def test_every_capability_is_sourced_and_readable():
    caps = advisor.load_capabilities()
    assert len(caps) >= 5
    for c in caps:
        assert c["sources"], c["id"]
        assert all(re.search(r"https://|vllm/", s) for s in c["sources"]), c["id"]
        assert c["status"] in ("released", "unreleased", "never")
        for key in ("since", "absent_in", "broken_in", "works_in"):
            if key in c:
                assert V.parse(c[key]) is not None, (c["id"], key)
        if c["status"] == "unreleased":
            assert c["prs"] and "since" not in c


@pytest.mark.parametrize("a,b", [("0.11.1rc6.dev16+g933cdea44.cu129", "0.11.1rc6"), ("0.11.1rc6", "0.11.1"),
                                 ("0.11.1", "0.11.1.post1"), ("0.9.2", "0.10.0"), ("0.13.0+faa43dbf.nv26.01", "0.14.0"),
                                 ("0.23.1rc1.dev531+ga65f93fb2", "0.26.0")])
def test_version_order(a, b):
    assert V.lt(a, b) and not V.lt(b, a)


def test_satisfies():
    assert V.satisfies("0.6.14", ">=0.6.14") and V.satisfies("0.6.13", ">=0.6.14") is False
    assert V.satisfies("0.6.14", "junk") is None


# --- fixes: the PR that closed an issue ---------------------------------------------------------

def test_closed_issue_gets_its_pr_and_release(fake_github, tmp_path):
    sha = "1" * 40
    fake_github.route("/repos/vllm-project/vllm/issues/4327/timeline", Answer(200, [
        {"event": "labeled", "created_at": "2024-06-01T00:00:00Z"},
        {"event": "cross-referenced", "source": {"type": "issue", "issue": {
            "number": 5000, "title": "unrelated older PR", "html_url": "https://github.com/vllm-project/vllm/pull/5000",
            "pull_request": {"merged_at": "2024-04-01T00:00:00Z"}, "repository": {"full_name": "vllm-project/vllm"}}}},
        {"event": "cross-referenced", "source": {"type": "issue", "issue": {
            "number": 5651, "title": "[Kernel] FP8 Marlin for Ampere", "html_url": "https://github.com/vllm-project/vllm/pull/5651",
            "pull_request": {"merged_at": "2026-06-20T00:00:00Z"}, "repository": {"full_name": "vllm-project/vllm"}}}},
        {"event": "closed", "commit_id": None, "created_at": "2026-06-20T01:00:00Z"},
    ]))
    fake_github.route("/repos/vllm-project/vllm/pulls/5651", Answer(200, {"merge_commit_sha": sha}))
    fake_github.route("/repos/vllm-project/vllm/releases", Answer(200, fixture("releases_vllm.json")))
    fake_github.route(f"/repos/vllm-project/vllm/compare/{sha}...v0.24.0", Answer(200, {"status": "ahead"}))
    hit = {"number": 4327, "kind": "issue", "state": "closed", "state_reason": "completed", "repo": "vllm-project/vllm",
           "closed_at": "2026-06-20T01:00:00Z"}

    async def go():
        async with GitHub(fake_github.url) as gh:
            await fixes.annotate(gh, [hit], Cache(tmp_path / "c"))
    asyncio.run(go())
    assert hit["fixed_by"] == 5651 and hit["fixed_in"] == "0.24.0" and hit["fixed_in_basis"] == "git compare"


def test_merged_pr_after_the_last_release(fake_github, tmp_path):
    fake_github.route("/repos/vllm-project/vllm/releases", Answer(200, fixture("releases_vllm.json")))
    hit = {"number": 60000, "kind": "pr", "state": "merged", "merged_at": "2026-09-01T00:00:00Z", "repo": "vllm-project/vllm"}

    async def go():
        async with GitHub(fake_github.url) as gh:
            await fixes.annotate(gh, [hit], Cache(tmp_path / "c"))
    asyncio.run(go())
    assert hit["fixed_by"] == 60000 and "fixed_in" not in hit and hit["fixed_in_basis"] == "not in a release yet"
