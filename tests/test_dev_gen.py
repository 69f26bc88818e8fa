"""tests/logs/dev-gen: real pastes from public threads that no specific rule was written for (bare
asserts, cut tracebacks, quoted HTTP bodies, INFO lines before a cut failure), through the CLI.

A known miss is said with its reason; it must stay a miss until a general mechanism names it (an
xfail that starts passing fails the run, so the list stays honest).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_triage

DEV = Path(__file__).parent / "logs" / "dev-gen"
EXPECTED: dict[str, dict] = yaml.safe_load((DEV / "expected.yaml").read_text())
KNOWN_MISSES: dict[str, str] = {
    "compressed-weight-scale-keyerror.log": "a weight_scale tensor vLLM built no parameter for reads as a plain weight mismatch",
    "bnb-merged-keyerror-oneline.log": "a plain weight name: nothing in the line says the checkpoint is quantized",
}


CASES = [pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_MISSES[n], strict=True)) if n in KNOWN_MISSES else n
         for n in sorted(EXPECTED)]


@pytest.mark.parametrize("name", CASES)
def test_dev_gen_log_through_the_cli(name):
    e = EXPECTED[name]
    r = run_triage("--log", str(DEV / name), "--json", "--offline", "--no-probe",
                   env={"TRIAGE_GITHUB_API": "http://127.0.0.1:9"})
    assert r.returncode in (0, 2, 3), r.stderr.decode()[-2000:]
    report = json.loads(r.stdout)
    top = report["diagnoses"][0]
    assert top["category"] == e["category"], [(d["category"], d["title"]) for d in report["diagnoses"][:3]]
    assert top["confidence"] >= e.get("min_confidence", 0.5)


def test_every_dev_gen_log_has_a_thread_and_a_root_cause():
    for name, e in EXPECTED.items():
        assert (DEV / name).is_file(), name
        assert e["source"].startswith("https://github.com/") and len(e["root_cause"]) > 30, name
