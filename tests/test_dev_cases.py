"""The real failure logs of ../shared/dev-cases: each must give its established category first."""

import json

import pytest

from conftest import SHARED
from triage.diagnose import diagnose
from triage.logread import scan_text

CASES = [json.loads(line) for line in (SHARED / "dev-cases" / "cases.jsonl").read_text().splitlines() if line.strip()]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_category_first(case):
    diagnoses, _ = diagnose(scan_text(case["log"]))
    assert diagnoses, "no diagnosis"
    assert diagnoses[0].category == case["category"], [(d.category, d.signature) for d in diagnoses]
    assert diagnoses[0].confidence >= 0.5
    assert diagnoses[0].evidence, "a diagnosis must quote its evidence"


def test_flagship_case_facts():
    case = next(c for c in CASES if c["id"] == "attn-dsv32-sparse-mla-sm120-no-backend")
    d = diagnose(scan_text(case["log"]))[0][0]
    assert d.signature == "attention.no_valid_backend"
    assert d.facts["head_size"] == 576 and d.facts["use_sparse"] is True and d.facts["use_mla"] is True
    assert d.facts["rejected"]["TRITON_MLA"] == ["sparse not supported"]
    assert d.facts["rejected"]["FLASHMLA"][-1] == "FlashMLA Sparse is only supported on Hopper and Blackwell devices."
    assert d.fix.playbook == "attention-sparse-mla"
