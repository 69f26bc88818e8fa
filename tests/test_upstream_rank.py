"""Ranking on the trap case: same GPU, other subsystem must not win."""

from __future__ import annotations

import json
from pathlib import Path

from triage.upstream import advisor
from triage.upstream.facets import classify_subsystem, diagnosis_facets
from triage.upstream.github import slim_item
from triage.upstream.rank import parse_time, rank, score_hit
from upstream_cases import sm120_diagnosis, sm120_env

FIX = Path(__file__).parent / "fixtures" / "github"
NOW = parse_time("2026-09-25T00:00:00Z")


def _items(name):
    return [slim_item(i) for i in json.loads((FIX / name).read_text())["items"]]


def _facets():
    d, env = sm120_diagnosis(), sm120_env()
    f = diagnosis_facets(d, env)
    for e in advisor.load_capabilities():
        if advisor.matches(e, d, env, f) is not False:
            f.related_backends |= set(e.get("backends") or [])
    f.related_backends -= f.backends
    return f


def _ranked():
    # GitHub's order: issues first (the NVFP4 MoE issue on top), then the PR search.
    items = _items("search_issues_sm120_dsa.json") + _items("search_prs_sparse_mla.json")
    assert items[0]["number"] == 31085  # the trap really is GitHub's first hit
    return rank(items, _facets(), now=NOW, limit=20)


def test_attention_issues_and_triton_sparse_prs_rank_above_the_nvfp4_moe_issue():
    ranked = _ranked()
    pos = {h["number"]: i for i, h in enumerate(ranked)}
    trap = pos[31085]
    for n in (31936, 32732, 45317, 31480, 38476, 47629, 43477):
        assert pos[n] < trap, (n, [(h["number"], h["score"], h["why"]) for h in ranked])


def test_unrelated_hits_rank_last():
    ranked = _ranked()
    assert {h["number"] for h in ranked[-2:]} == {19999, 2369}
    assert all(h["score"] < ranked[0]["score"] - 5 for h in ranked[-2:])


def test_why_names_matching_and_differing_facets():
    by = {h["number"]: h for h in _ranked()}
    assert by[31085]["why"].startswith("same GPU")
    assert "other subsystem: MoE kernels" in by[31085]["why"]
    assert "same error" in by[31936]["why"] and "GPU" in by[31936]["why"]
    assert "model" in by[31936]["why"]  # DeepSeek-V3.2 both
    assert "backend (TRITON_MLA_SPARSE)" in by[38476]["why"]
    assert by[38476]["why"].endswith("(open PR)")
    assert by[43477]["state"] == "merged" and by[43477]["kind"] == "pr"
    assert "merged PR" in by[43477]["why"]
    assert by[31480]["why"].endswith("(closed, not planned)")


def test_hit_shape_is_the_report_contract():
    for h in _ranked():
        assert {"number", "url", "title", "state", "kind", "score", "why"} <= set(h)
        assert h["kind"] in ("issue", "pr")
        assert h["url"].startswith("https://github.com/vllm-project/vllm/")
        assert isinstance(h["score"], float)


def test_other_gpu_same_error_reads_as_such():
    f = _facets()
    item = {"number": 1, "title": "No valid attention backend found on H100 for FLASHMLA_SPARSE",
            "body": "ValueError: No valid attention backend found for cuda with ...", "state": "open", "is_pr": False}
    score, why, _ = score_hit(item, f, now=NOW)
    assert why.startswith("same error in the title; same subsystem and backend; other GPU")


def test_duplicates_across_searches_are_merged():
    items = _items("search_issues_sm120_dsa.json")
    ranked = rank(items + items, _facets(), now=NOW, limit=50)
    assert len(ranked) == len(items)


def test_subsystem_classifier_on_titles():
    assert classify_subsystem("[Feature]: Add SM120 support for native NVFP4 MoE kernels") == "MoE kernels"
    assert classify_subsystem('Regression: "No valid attention backend found" for DeepSeek-R1-NVFP4') == "attention backend"
    assert classify_subsystem("AWQ Marlin kernel fails with GPTQ checkpoint") == "quantization"
    assert classify_subsystem("NCCL timeout with Ray on multi-node") == "distributed"
    assert classify_subsystem("hello world") is None
