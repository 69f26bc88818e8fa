"""The flagship journey, end to end, on real failures: DSA sparse-MLA models on GPUs without a sparse MLA
backend, and what comes after (the DSA indexer's DeepGEMM, the CUSTOM plugin slot).

tests/logs/flagship/*.log keep each thread's (or vLLM source's) exact error string in the shape vLLM
prints; expected.yaml says what the diagnosis must be, what its explanation must say, and, with a
recorded probe environment run through triage.enrich, what the machine facts add. Then: the upgrade
verdict (offline, from the capability table), and the guided fix's branch for each case.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from playbook_support import NoRunRunner, fake_actions, upstream_unknown
from triage.diagnose import diagnose
from triage.enrich import enrich
from triage.logread import scan_path, scan_text
from triage.model import CATEGORIES
from triage.playbooks.engine import Session, derive_facts
from triage.playbooks.load import load_library
from triage.upstream import advisor
from triage.upstream.facets import diagnosis_facets

FLAGSHIP = Path(__file__).parent / "logs" / "flagship"
EXPECTED: dict[str, dict] = yaml.safe_load((FLAGSHIP / "expected.yaml").read_text())
NAMES = sorted(EXPECTED)
LIB = load_library(include_user=False)


def top(name: str, env: dict | None = None):
    diagnoses, _ = diagnose(scan_path(str(FLAGSHIP / name)))
    assert diagnoses, f"{name}: nothing diagnosed"
    d = diagnoses[0]
    if env is not None:
        enrich([d], env)
    return d


def words(d) -> str:
    return "\n".join([d.title, d.fix.summary, *d.explanation])


def test_every_flagship_log_has_a_sourced_expectation():
    logs = {p.name for p in FLAGSHIP.glob("*.log")}
    assert logs == set(EXPECTED), (sorted(logs - set(EXPECTED)), sorted(set(EXPECTED) - logs))
    for name, e in EXPECTED.items():
        assert e["category"] in CATEGORIES, name
        assert e["source"].startswith("https://"), name
        assert e.get("root_cause") and e.get("signature") and e.get("playbook"), name


@pytest.mark.parametrize("name", NAMES)
def test_flagship_log_diagnosed(name):
    e = EXPECTED[name]
    d = top(name)
    summary = (d.category, d.signature, d.title)
    assert (d.category, d.signature) == (e["category"], e["signature"]), summary
    assert d.fix.playbook == e["playbook"], summary
    assert d.evidence and d.confidence >= 0.8, summary
    for k, v in (e.get("facts") or {}).items():
        assert d.facts.get(k) == v, (k, d.facts.get(k), v)
    text = words(d)
    for s in e.get("explanation_contains") or []:
        assert s in text, (s, text)
    for s in e.get("not_contains") or []:
        assert s not in text, (s, text)
    assert not re.search(r"(?<![\w])\?(?![\w])", d.title), d.title
    # the in-memory path (a pipe) agrees with the file path (grep)
    d2, _ = diagnose(scan_text((FLAGSHIP / name).read_bytes()))
    assert (d2[0].signature, d2[0].facts.get("case")) == (d.signature, d.facts.get("case"))


PROBED = [n for n in NAMES if EXPECTED[n].get("probe")]


@pytest.mark.parametrize("name", PROBED)
def test_flagship_log_with_the_probed_machine(name):
    """The machine facts say what exists for this GPU and this vLLM, and what it would take."""
    e = EXPECTED[name]
    d = top(name, dict(e["probe"]))
    for k, v in (e.get("enriched_facts") or {}).items():
        assert d.facts.get(k) == v, (k, d.facts.get(k), v)
    text = words(d)
    for s in e.get("enriched_contains") or []:
        assert s in text, (s, text)


# --- will an upgrade fix it? (offline: the capability table and a recorded installer answer) -------

AVAILABLE = advisor.Available(["0.13.0", "0.22.1", "0.26.0", "0.28.0", "0.29.0rc1"], source="pip index versions vllm")


def advise(name: str, env: dict, avail: advisor.Available = AVAILABLE) -> dict:
    d = top(name, env)
    return advisor.advise(d, env, diagnosis_facets(d, env), avail, offline=True).to_json()


def test_sm120_on_an_old_vllm_is_fixed_by_the_release_with_the_sm120_backend():
    env = {"compute_capability": "12.0", "vllm_version": "0.13.0", "architecture": "DeepseekV32ForCausalLM",
           "packages": {"flashinfer-python": "0.5.3"}, "patched_files": ["vllm/platforms/cuda.py"]}
    up = advise("v013-selectorconfig-sm120-dsv32.log", env)
    assert up["verdict"] == "fixes" and up["target_version"] == "0.26.0"
    ev = "\n".join(up["evidence"])
    assert "#43477" in ev and "needs --kv-cache-dtype fp8_ds_mla" in ev
    assert "flashinfer-python>=0.6.12 (installed 0.5.3: too old)" in ev
    assert "livelock" in ev and "DeepGEMM#324" in ev
    assert up["overwrites"] == ["vllm/platforms/cuda.py"] and "save them first" in up["keep_patches"]


def test_sm80_has_only_open_pull_requests():
    env = {"compute_capability": "8.0", "vllm_version": "0.19.1", "architecture": "GlmMoeDsaForCausalLM"}
    up = advise("v0191-sm80-a800-glm51.log", env)
    assert up["verdict"] == "does-not-fix" and up["target_version"] is None
    assert up["evidence"][0].startswith("no released vLLM available to this environment fixes this on this GPU")
    assert "#38476 (open)" in up["evidence"][0] and "#47629 (open)" in up["evidence"][0]


def test_h100_float16_is_not_an_upgrade_question():
    env = {"compute_capability": "9.0", "vllm_version": "0.13.0"}
    up = advise("v013-h100-dsv32-float16.log", env)
    assert up["verdict"] == "does-not-fix" and up["target_version"] is None
    ev = "\n".join(up["evidence"])
    assert "bfloat16 only" in ev and "--dtype bfloat16" in ev


def test_sm120_backend_already_installed_is_not_an_upgrade_question():
    env = {"compute_capability": "12.0", "vllm_version": "0.28.0"}
    up = advise("v028-sm120-glm52-kv-bf16-rejected.log", env)
    assert up["verdict"] == "does-not-fix"
    assert any("already in the installed 0.28.0" in e for e in up["evidence"])


def test_a_tagless_pr_image_is_not_told_to_upgrade_by_its_version_number():
    # 0.1.dev20051+g487ecf187 is a PR image newer than 0.26.0 in fact; its number compares below it.
    env = {"compute_capability": "12.0", "vllm_version": "0.1.dev20051+g487ecf187"}
    up = advise("v028-rtx5090-glm52-forced-flashmla-sparse.log", env)
    assert not any("installed vLLM: 0.1.dev" in e for e in up["evidence"])
    assert up["verdict"] == "fixes" and up["target_version"] == "0.26.0"  # a release that surely has it


def test_unknown_gpu_gives_unknown():
    up = advise("v013-selectorconfig-sm120-dsv32.log", {"vllm_version": "0.13.0"}, advisor.Available())
    assert up["verdict"] == "unknown" and up["target_version"] is None
    assert any("compute capability is unknown" in e for e in up["evidence"])
    assert any(e.startswith("if the GPU has compute capability 12.x") and "0.24.0" in e for e in up["evidence"])


# --- the guided fix: which branch each case takes ------------------------------------------------

def walk(name: str, env: dict, answers: dict | None = None, *, playbook: str | None = None):
    d = top(name, env)
    pb = LIB.get(playbook or d.fix.playbook)
    facts = derive_facts(env, d, log_path=str(FLAGSHIP / name), dry_run=True)
    s = Session(pb, facts, runner=NoRunRunner(), dry_run=True, upstream=upstream_unknown,
                sparse_probe=lambda: {"available": True}, actions=fake_actions())
    view = s.start()
    while view is not None:
        answer = None
        if view.needs == "choice":
            answer = (answers or {}).get(view.step_id, view.default or view.choices[0][0])
        elif view.needs == "input":
            answer = ""
        view = s.advance(answer)
    return s.outcome, s.visited


def test_h100_float16_ends_in_the_dtype_flag():
    outcome, visited = walk("v013-h100-dsv32-float16.log", {"compute_capability": "9.0", "vllm_version": "0.13.0"})
    assert outcome == "flag:--dtype" and "use-bf16" in visited
    assert "ask-upstream" not in visited and "install-backend" not in visited


def test_sm120_kv_bfloat16_ends_in_the_kv_flag_not_an_upgrade():
    outcome, visited = walk("v028-sm120-glm52-kv-bf16-rejected.log", {"compute_capability": "12.0", "vllm_version": "0.28.0"})
    assert outcome == "flag:--kv-cache-dtype" and "use-kv" in visited and "ask-upstream" not in visited


def test_sm120_without_flashinfer_api_asks_for_the_library():
    outcome, _ = walk("newest-sm120-glm53-flashinfer-api.log", {"compute_capability": "12.0", "vllm_version": "0.29.1"})
    assert outcome == "manual:install-library"


def test_nope_head_512_goes_to_the_bundled_backend_that_takes_it():
    outcome, visited = walk("glm53-image-sm120-head512-rejected.log",
                            {"compute_capability": "12.0", "vllm_version": "0.1.dev20051+g487ecf187"})
    assert "nope-bundled" in visited and "check-bundled" in visited
    assert outcome == "manual:upgrade-vllm-first"  # the tagless build's number reads as older than 0.14


def test_custom_filtered_by_vllm_plugins_names_the_variable():
    outcome, visited = walk("custom-backend-filtered-by-vllm-plugins.log", {"compute_capability": "12.0",
                                                                             "vllm_version": "0.16.0"})
    assert visited[:3] == ["route", "plugin-state", "plugins-filtered"] and outcome == "env:VLLM_PLUGINS"


def test_custom_not_installed_installs_the_backend():
    outcome, visited = walk("custom-backend-plugin-not-installed.log", {"compute_capability": "12.0",
                                                                         "vllm_version": "0.16.0"})
    assert "check-bundled" in visited and "install-backend" in visited and outcome == "apply:sparse-mla"
    assert "what-happened" not in visited


def test_sm80_warns_that_the_indexer_stops_it_before_installing():
    env = {"compute_capability": "8.0", "vllm_version": "0.19.1"}
    outcome, visited = walk("v0191-sm80-a800-glm51.log", env)
    assert "indexer-blocks" in visited and outcome == "manual:indexer-needs-deepgemm"
    outcome, visited = walk("v0191-sm80-a800-glm51.log", env, {"indexer-blocks": "install"})
    assert outcome == "apply:sparse-mla"


def test_indexer_failure_playbook_per_gpu():
    outcome, visited = walk("sm120-dsv32-indexer-deepgemm-after-attention.log", {"compute_capability": "12.0",
                                                                                  "vllm_version": "0.12.0"})
    assert "indexer-gpu" in visited and outcome == "manual:install-deepgemm"
    outcome, _ = walk("dsv4-indexer-requires-deepgemm.log", {"compute_capability": "8.6", "vllm_version": "0.20.1"})
    assert outcome == "manual:indexer-needs-deepgemm"
    # the warm-up case is not the indexer: it goes the FP8-kernel way
    _, visited = walk("v022-h200-qwen-bf16-deepgemm-warmup.log", {"compute_capability": "9.0", "vllm_version": "0.22.0"})
    assert "indexer-gpu" not in visited and "deepgemm-other" in visited


def test_without_a_probe_the_log_still_narrows_the_gpu_family():
    # FLASHMLA_SPARSE refused only the dtype: the GPU passed its 9.x/10.x check, so no 12.x upgrade talk.
    up = advise("v013-h100-dsv32-float16.log", {"vllm_version": "0.13.0"}, advisor.Available())
    assert up["verdict"] == "does-not-fix" and not any("12.x" in e for e in up["evidence"])
    assert any("--dtype bfloat16" in e for e in up["evidence"])
    # the SM120 backend refused the KV dtype: the 12.x entry applies, and it is already installed
    up = advise("v028-sm120-glm52-kv-bf16-rejected.log", {"vllm_version": "0.28.0"}, advisor.Available())
    assert up["verdict"] == "does-not-fix" and any("already in the installed 0.28.0" in e for e in up["evidence"])


def test_a_plugin_problem_is_not_an_upgrade_question():
    up = advise("custom-backend-filtered-by-vllm-plugins.log", {"vllm_version": "0.16.0"}, advisor.Available())
    assert up["verdict"] == "unknown" and not any("0.26.0" in e for e in up["evidence"])
