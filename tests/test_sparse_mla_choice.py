"""The flagship playbook's choice between upgrading vLLM and the bundled backend: upgrade when vLLM's
own SM120 sparse backend (FLASHINFER_MLA_SPARSE_SM120, first in vLLM 0.24.0: bfloat16 only,
FlashInfer's sparse MLA decode API from flashinfer-python 0.6.12) would take the model; the bundled
backend otherwise (float16 checkpoints such as the GGUF case, a fix only in an older release, a
FlashInfer without the API)."""

from __future__ import annotations

import io

import pytest

from tests.playbook_support import diagnosis, snapshot, upstream_fixes
from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
from triage.playbooks.load import load_library


def walk(dtype: str | None, target: str, vllm: str | None = None, flashinfer: str | None = "absent"):
    facts = snapshot("sm120-nightly")
    if vllm:
        facts["vllm_version"] = vllm
        facts["packages"]["vllm"] = vllm
    if flashinfer is None:
        facts["packages"].pop("flashinfer-python")
    elif flashinfer != "absent":
        facts["packages"]["flashinfer-python"] = flashinfer
    diag = diagnosis("attention_backend")
    if dtype is None:
        diag["facts"].pop("dtype")
    else:
        diag["facts"]["dtype"] = dtype
    pb = load_library(include_user=False).get("attention-sparse-mla")
    s = Session(pb, derive_facts(facts, diag, log_path="vllm.log"), upstream=upstream_fixes(target),
                actions={}, sparse_probe=lambda: {"available": True}, diagnose=lambda _p: [])
    out = io.StringIO()
    # "stop" at the upgrade question; "n" declines the bundled install: nothing is changed either way
    front = ConsoleFrontEnd(out, io.StringIO("stop\nn\nn\nn\n"), interactive=True)
    outcome = front.run(s)
    return s.visited, outcome, " ".join(out.getvalue().split())  # the console wraps lines under their indent


@pytest.mark.parametrize("dtype,target,vllm,flashinfer", [
    ("torch.bfloat16", "0.28.0", None, "absent"),  # 0.16 nightly: the upgrade brings vLLM's pinned FlashInfer
    ("bfloat16", "0.24.0", None, None),  # the first release with the backend; no FlashInfer yet
    ("torch.bfloat16", "0.33.0", "0.25.1", "0.6.13"),  # has it, FlashInfer has the API
    (None, "0.28.0", None, "absent"),  # dtype not in the log: the user chooses, told both ways
])
def test_upgrade_path_when_vllms_own_backend_takes_the_model(dtype, target, vllm, flashinfer):
    visited, outcome, text = walk(dtype, target, vllm, flashinfer)
    assert "upstream-fits" in visited and "offer-upgrade" in visited, visited
    assert "upstream-does-not-fit" not in visited
    assert outcome == "manual:stopped"
    assert "livelock under sustained load" in text  # the caveat is in the question
    assert "Keep this vLLM and install triage's sparse MLA Triton backend" in text


@pytest.mark.parametrize("dtype,target,vllm,flashinfer,why", [
    ("torch.float16", "0.28.0", None, "absent", "torch.float16"),  # the GGUF case: fp16 checkpoint
    ("torch.bfloat16", "0.23.0", None, "absent", "0.23.0"),  # fixed only where the backend is absent
    ("torch.bfloat16", "0.33.0", "0.25.1", "0.6.11", "0.6.11"),  # FlashInfer without the sparse API
])
def test_bundled_backend_otherwise(dtype, target, vllm, flashinfer, why):
    visited, outcome, text = walk(dtype, target, vllm, flashinfer)
    assert "upstream-does-not-fit" in visited and "offer-upgrade" not in visited, visited
    assert visited[visited.index("upstream-does-not-fit") + 1] == "check-bundled"
    assert why in text
    assert "bundled sparse MLA backend runs float16 and" in text
