"""triage.enrich: probe facts added to log diagnoses, and the bundled demo snapshot."""

import json

from triage.enrich import enrich, gpu_family
from triage.model import Diagnosis
from triage.probes import DEMO_SNAPSHOT, demo_probe, load_snapshot


def sparse_diag(**facts):
    base = {"head_size": 576, "dtype": "torch.bfloat16", "kv_cache_dtype": "auto", "block_size": 64,
            "use_mla": True, "use_sparse": True, "has_sink": False,
            "rejected": {"FLASHMLA_SPARSE": ["compute capability not supported"],
                         "FLASHINFER_MLA_SPARSE": ["compute capability not supported"]}}
    base.update(facts)
    return Diagnosis(category="attention_backend", signature="attention.no_valid_backend",
                     title="No valid attention backend", confidence=0.95, facts=base)


def test_demo_snapshot_is_consistent():
    data = json.loads(DEMO_SNAPSHOT.read_text())
    [host] = data["hosts"]
    f = host["facts"]
    assert host["ok"] and len(f["gpus"]) == 8
    assert {g["name"] for g in f["gpus"]} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {g["compute_capability"] for g in f["gpus"]} == {"12.0"} and f["compute_capability"] == "12.0"
    assert all(g["memory_total_mib"] > 95000 for g in f["gpus"])
    assert f["driver_version"].startswith("580.") and f["cuda_driver_version"] == "13.0"
    assert f["vllm_version"] == "0.16.0rc2.dev313+g662205d34"
    assert f["vllm_install"]["kind"] == "nightly" and f["vllm_install"]["installer"] == "pip"
    assert f["patched_files"] == ["vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/flashmla_sparse.py"]
    assert f["torch_version"] == "2.10.0+cu129" and f["torch_cuda_version"] == "12.9"
    assert f["packages"]["vllm"] == f["vllm_version"]
    assert [x["id"] for x in host["findings"]] == ["vllm.patched"]
    # A snapshot's interpreter is marked as recorded elsewhere: a name to show, never one to run.
    assert demo_probe().facts == {**f, "python": {**f["python"], "read_from": "snapshot"}}


def test_sparse_mla_on_sm120_names_the_missing_backend():
    env = demo_probe().facts
    d = sparse_diag()
    enrich([d], env)
    assert d.facts["gpu_family"] == "SM12x" and d.facts["compute_capability"] == "12.0"
    assert d.facts["missing_backend"] == "sparse MLA for SM12x"
    text = " ".join(d.explanation)
    assert "No sparse MLA attention backend exists for compute capability 12.0" in text
    assert "vLLM 0.16.0rc2.dev313+g662205d34 (nightly wheel, pip)" in text
    assert "2 vLLM file(s) were patched by hand" in text
    assert d.facts["patched_files"] == env["patched_files"]
    assert d.to_json()["facts"]["explanation"] == d.explanation


def test_sparse_mla_string_booleans_and_sm120_backend_present():
    d = sparse_diag(use_sparse="True", rejected={"FLASHINFER_MLA_SPARSE_SM120": ["kv_cache_dtype not supported"]})
    enrich([d], {"compute_capability": "12.1", "vllm_version": "0.23.0"})
    assert d.facts["gpu_family"] == "SM12x"
    assert "has an SM12x sparse MLA backend but rejected it" in d.explanation[0]
    assert "kv_cache_dtype not supported" in d.explanation[0]


def test_no_sm12x_line_on_hopper():
    d = sparse_diag()
    enrich([d], {"gpus": [{"index": 0, "compute_capability": "9.0"}]})
    assert d.facts["gpu_family"] == "SM90" and not d.explanation


def test_dense_mla_on_sm12x():
    d = sparse_diag(use_sparse=False)
    enrich([d], {"compute_capability": "12.0"})
    assert "only TRITON_MLA" in d.explanation[0]


def test_log_facts_win_over_probe():
    d = sparse_diag(compute_capability="12.0")
    enrich([d], {"compute_capability": "9.0"})
    assert d.facts["compute_capability"] == "12.0"


def test_driver_older_than_torch_cuda():
    d = Diagnosis(category="cuda_driver", signature="cuda_driver.too_old", title="driver too old", confidence=0.9)
    enrich([d], {"driver_version": "550.127.05", "cuda_driver_version": "12.4", "torch_cuda_version": "12.9"})
    assert d.facts["driver_too_old_for_torch"] is True
    # too old a driver fails as "driver too old" or, through compat libraries on a non-data-center GPU, as 804
    assert "until the driver is upgraded" in d.explanation[0] and "12.4" in d.explanation[0]
    d2 = Diagnosis(category="cuda_driver", signature="cuda_driver.error_803", title="x", confidence=0.9)
    enrich([d2], {"cuda_driver_version": "13.0", "torch_cuda_version": "12.9"})
    assert d2.facts["driver_too_old_for_torch"] is False and "compat" in d2.explanation[0]


def test_memory_diagnosis_names_processes():
    from tests.fakes import fake_pynvml
    from triage.probes.gpu import probe_gpus

    fake_pynvml.configure("rtxpro6000x8_busy")
    env = {"gpus": probe_gpus(fake_pynvml)["gpus"]}
    d = Diagnosis(category="kv_cache_memory", signature="kv_cache.no_memory", title="x", confidence=0.9)
    enrich([d], env)
    assert d.facts["gpu_processes"][0]["pid"] == 48213 and "48213" in d.explanation[0]


def test_unrelated_and_empty_env_untouched():
    d = Diagnosis(category="tokenizer_chat_template", signature="tokenizer.x", title="x", confidence=0.5)
    enrich([d], demo_probe().facts)
    assert d.facts == {} and d.explanation == []
    d = sparse_diag()
    enrich([d], {})
    assert "gpu_family" not in d.facts


def test_gpu_family():
    assert [gpu_family(c) for c in [(12, 0), (12, 1), (10, 0), (9, 0), (8, 0), (8, 9), (7, 5)]] == [
        "SM12x", "SM12x", "SM10x", "SM90", "SM80", "SM8x", "SM75"]


def test_load_snapshot_errors(tmp_path):
    import pytest

    p = tmp_path / "x.json"
    for text in ["not json", "[]", '{"hosts": []}', '{"hosts": [{"host": "a"}]}']:
        p.write_text(text)
        with pytest.raises(ValueError):
            load_snapshot(p)
    with pytest.raises(ValueError, match="cannot read"):
        load_snapshot(tmp_path / "missing.json")
    p.write_text(json.dumps({"host": "h", "ok": True, "error": None, "facts": {"gpus": []}, "findings": []}))
    assert load_snapshot(p).host == "h"


def test_unrecognised_failure_gets_no_area_specific_lines():
    """The fallback's category is a guess from the traceback: the enrichers of that area must not add their story."""
    env = {"driver_version": "550.127.05", "cuda_driver_version": "12.4", "torch_cuda_version": "12.9",
           "compute_capability": "12.0", "gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000", "processes": [
               {"pid": 7, "name": "python", "used_memory_mib": 9000}]}]}
    for cat in ("cuda_driver", "attention_backend", "gpu_oom", "kernel_library"):
        d = Diagnosis(category=cat, signature="generic.unrecognized_exception", title="Unrecognised failure: KeyError: 'x'",
                      confidence=0.35, facts={"use_sparse": True})
        enrich([d], env)
        assert d.explanation == [] and "driver_too_old_for_torch" not in d.facts and "gpu_processes" not in d.facts, cat
