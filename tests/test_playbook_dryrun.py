"""Every playbook walked end to end in dry-run against recorded probe snapshots: nothing runs,
nothing is recorded, every walk ends in one of the playbook's named outcomes."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from tests.playbook_support import (
    DIAGNOSES, SNAPSHOTS, NoRunRunner, diagnosis, fake_actions, snapshot, upstream_fixes, upstream_unknown,
)
from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
from triage.playbooks.load import load_library

LIB = load_library(include_user=False)
IDS = sorted(LIB.playbooks)

# Which recorded diagnosis each playbook is walked with.
CASE_FOR = {pid: next(k for k, d in DIAGNOSES.items() if d["category"] in LIB.playbooks[pid].categories) for pid in IDS}
CASE_FOR.update({"attention-backend": "attention_dense", "distributed-shm": "distributed_shm",
                 "environment-port-in-use": "environment_port", "install-resolve": "install_resolve_python"})


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def explore(pb, facts, upstream, limit=80):
    """Walk every combination of answers (up to `limit` walks); returns [(outcome, visited)]."""
    walks = []
    todo = [[]]
    while todo and len(walks) < limit:
        answers = todo.pop()
        runner = NoRunRunner()
        s = Session(pb, facts, runner=runner, dry_run=True, upstream=upstream,
                    sparse_probe=lambda: {"available": True}, actions=fake_actions())
        view = s.start()
        depth = 0
        while view is not None:
            answer = None
            if view.needs == "choice":
                if depth < len(answers):
                    answer = answers[depth]
                else:
                    for key, _label in view.choices[1:]:
                        todo.append(answers + [key])
                    answer = view.choices[0][0]
                    answers = answers + [answer]
                depth += 1
            elif view.needs == "input":
                answer = ""
            elif view.needs == "confirm":
                raise AssertionError(f"dry run asked to confirm a change at {view.step_id}")
            view = s.advance(answer)
        assert runner.calls == []
        walks.append((s.outcome, list(s.visited)))
    return walks


@pytest.mark.parametrize("snap", sorted(SNAPSHOTS))
@pytest.mark.parametrize("pid", IDS)
def test_dry_run_walks_end_in_named_outcomes(pid, snap, tmp_path):
    pb = LIB.playbooks[pid]
    facts = derive_facts(snapshot(snap), diagnosis(CASE_FOR[pid]), log_path="vllm.log", dry_run=True)
    for upstream in (upstream_unknown, upstream_fixes("0.28.0")):
        for outcome, visited in explore(pb, facts, upstream):
            assert outcome in pb.outcomes, (outcome, visited)
    assert not (tmp_path / "home" / "state" / "transcripts").exists(), "a dry run recorded a transcript"


@pytest.mark.parametrize("pid", IDS)
def test_walks_cover_most_steps(pid):
    pb = LIB.playbooks[pid]
    seen: set[str] = set()
    for snap in SNAPSHOTS:
        for case in {CASE_FOR[pid]} | {k for k, d in DIAGNOSES.items() if d["category"] in pb.categories}:
            facts = derive_facts(snapshot(snap), diagnosis(case), log_path="vllm.log", dry_run=True)
            for upstream in (upstream_unknown, upstream_fixes("0.28.0")):
                for _o, visited in explore(pb, facts, upstream):
                    seen.update(visited)
    assert len(seen) >= 0.5 * len(pb.steps), f"{pid}: only {sorted(seen)} of {sorted(pb.steps)}"


def walk(pid, snap, case, upstream, answers=None):
    pb = LIB.playbooks[pid]
    facts = derive_facts(snapshot(snap), diagnosis(case), log_path="vllm.log", dry_run=True)
    s = Session(pb, facts, runner=NoRunRunner(), dry_run=True, upstream=upstream,
                    sparse_probe=lambda: {"available": True}, actions=fake_actions())
    out = io.StringIO()
    front = ConsoleFrontEnd(out, io.StringIO(), yes=True, interactive=False)
    if answers:
        front.answer = lambda v, _orig=front.answer: answers.get(v.step_id, _orig(v))  # type: ignore[method-assign]
    outcome = front.run(s)
    return outcome, s.visited, out.getvalue()


def test_flagship_on_sm120_without_an_upgrade_installs_the_bundled_backend():
    outcome, visited, text = walk("attention-sparse-mla", "sm120-nightly", "attention_backend", upstream_unknown)
    assert outcome == "apply:sparse-mla"
    assert visited[:7] == ["route", "config-route", "what-happened", "confirm-sparse", "sparse-config", "confirm-gpu", "show-install"]
    assert "install-backend" in visited and "upgrade" not in visited
    assert "--attention-backend CUSTOM" in text
    assert "compute capability 12.0" in text and "0.16.0rc2.dev313+g662205d34" in text
    assert "nightly" in text and "vllm/platforms/cuda.py" in text


def test_flagship_with_an_upgrade_saves_patches_then_upgrades():
    outcome, visited, text = walk("attention-sparse-mla", "sm120-nightly", "attention_backend", upstream_fixes("0.28.0"))
    assert outcome == "upgrade:vllm"
    assert visited.index("save-patches") < visited.index("upgrade")
    assert "/root/ml-env/bin/python -m pip install vllm==0.28.0" in text


def test_flagship_by_choice_takes_the_bundled_backend_even_when_an_upgrade_exists():
    outcome, visited, _ = walk("attention-sparse-mla", "sm120-nightly", "attention_backend", upstream_fixes("0.28.0"),
                               answers={"offer-upgrade": "bundled"})
    assert outcome == "apply:sparse-mla" and "upgrade" not in visited


def test_flagship_on_hopper_with_float16_asks_for_bfloat16():
    diag = "attention_backend"
    DIAGNOSES_fp16 = diagnosis(diag)
    DIAGNOSES_fp16["facts"]["dtype"] = "torch.float16"
    pb = LIB.playbooks["attention-sparse-mla"]
    facts = derive_facts(snapshot("h100-release"), DIAGNOSES_fp16, dry_run=True)
    outcomes = {o for o, _v in explore(pb, facts, upstream_unknown)}
    assert outcomes == {"flag:--dtype"}


def test_flagship_without_gpu_facts_reads_the_gpu_and_then_stops_in_dry_run():
    outcome, visited, _ = walk("attention-sparse-mla", "no-probe", "attention_backend", upstream_unknown)
    # In dry run the nvidia-smi check is not run; it is assumed to pass, and the capability is still unknown.
    assert visited[:8] == ["route", "config-route", "what-happened", "confirm-sparse", "sparse-config", "confirm-gpu", "read-gpu",
                           "confirm-gpu-again"]
    assert outcome == "manual:run-on-gpu-host"


def test_flagship_with_an_old_vllm_asks_to_upgrade_first():
    snap = snapshot("gb10")
    snap["vllm_version"] = "0.13.0"
    pb = LIB.playbooks["attention-sparse-mla"]
    facts = derive_facts(snap, diagnosis("attention_backend"), dry_run=True)
    assert {o for o, _v in explore(pb, facts, upstream_unknown)} == {"manual:upgrade-vllm-first"}


def test_kv_cache_default_path_sets_max_model_len():
    outcome, _visited, text = walk("kv-cache-memory", "h100-release", "kv_cache_memory", upstream_unknown)
    assert outcome == "flag:--max-model-len"
    assert "--max-model-len 10000" in text


def test_dtype_on_t4_goes_to_float16():
    outcome, _v, _t = walk("dtype-unsupported", "t4", "dtype_unsupported", upstream_unknown)
    assert outcome == "flag:--dtype"


def test_distributed_shm_in_a_container():
    outcome, _v, text = walk("distributed-shm", "h100-release", "distributed_shm", upstream_unknown)
    assert outcome == "config:shm-size" and "--ipc=host" in text


def test_library_picks_the_playbook_for_a_diagnosis():
    sparse = derive_facts(snapshot("sm120-nightly"), diagnosis("attention_backend"))
    dense = derive_facts(snapshot("h100-release"), diagnosis("attention_dense"))
    assert LIB.for_diagnosis("attention_backend", "attention.no_valid_backend", sparse).id == "attention-sparse-mla"
    assert LIB.for_diagnosis("attention_backend", "attention.no_valid_backend", dense).id == "attention-backend"
    port = derive_facts({}, diagnosis("environment_port"))
    assert LIB.for_diagnosis("environment", "env.port_in_use", port).id == "environment-port-in-use"
    nogpu = derive_facts({}, diagnosis("environment"))
    assert LIB.for_diagnosis("environment", "env.no_gpu_visible", nogpu).id == "environment"
    for pid, pb in LIB.playbooks.items():
        assert Path(pb.source).name == f"{pid}.yaml"
