"""Preflight on the model families the fixture logs name (config.json from each public model card, in
tests/preflight/): for every launch whose failure is decided before it starts, preflight predicts the
category triage diagnoses in that failure's log; for a healthy launch of each family it predicts nothing."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

from conftest import run_triage
from triage.preflight.launch import parse_launch
from triage.preflight.machine import Machine, given_gpus
from triage.preflight.model import read_model
from triage.preflight.predict import predict

HERE = Path(__file__).resolve().parent
SPEC = json.loads((HERE / "preflight" / "pairs.json").read_text())
PAIRS = SPEC["pairs"]


def _id(p: dict) -> str:
    return f"{p['model']}-{p['machine']}-" + (p["log"].removesuffix(".log") if "log" in p else "healthy")


@lru_cache(maxsize=None)
def diagnosed_category(log: str) -> str:
    r = run_triage("--log", str(HERE / "logs" / log), "--json", "--offline", "--no-probe")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["diagnoses"][0]["category"]


def _machine(p: dict) -> Machine:
    spec = SPEC["machines"][p["machine"]]
    m = Machine(gpus=given_gpus(spec["gpu"], spec["count"], spec["cc"], spec["mem_gib"]), packages={"vllm": p["vllm"]})
    m.in_container = spec.get("container", False)
    m.shm_bytes = spec["shm_mib"] << 20 if "shm_mib" in spec else None
    return m


@pytest.mark.parametrize("pair", PAIRS, ids=_id)
def test_family_launch(pair):
    launch = parse_launch(["vllm", "serve", str(HERE / "preflight" / pair["model"]), *pair["args"]])
    got = predict(launch, read_model(launch.model), _machine(pair))
    cats = [d.category for d in got]
    if "log" not in pair:
        assert got == [], f"false alarm on a healthy launch: {[(d.category, d.title) for d in got]}"
        return
    want = diagnosed_category(pair["log"])
    assert want in cats, f"{pair['log']} is diagnosed {want}; preflight predicted {cats}"
    first = next(d for d in got if d.category == want)
    assert first.facts["predicted"] is True and first.evidence


def test_every_family_has_a_failure_and_a_healthy_launch():
    families = {p["model"].split("-")[0] for p in PAIRS}
    assert families >= {"deepseek", "glm", "qwen3", "llama", "gemma", "gpt"}
    for fam in families:
        kinds = {"log" in p for p in PAIRS if p["model"].startswith(fam)}
        assert kinds == {True, False}, fam
