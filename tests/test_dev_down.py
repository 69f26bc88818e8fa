"""down's dev set (tests/logs/dev-down/): vLLM failures as other projects' logs carry them (RL and fine-tuning
frameworks, evaluation harnesses, serving stacks, notebooks), each through the CLI with the category its
thread established."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_triage

DEV = Path(__file__).parent / "logs" / "dev-down"
EXPECTED: dict[str, dict] = yaml.safe_load((DEV / "expected.yaml").read_text())
# Misses not yet named by a mechanism, each with the reason.
OPEN: dict[str, str] = {}


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_dev_log_through_the_cli(name):
    if name in OPEN:
        pytest.xfail(OPEN[name])
    p = run_triage("--log", str(DEV / name), "--json", "--offline", "--no-probe")
    report = json.loads(p.stdout)
    assert report["diagnoses"], p.stderr
    assert report["diagnoses"][0]["category"] == EXPECTED[name]["category"], report["diagnoses"][0]["title"]
