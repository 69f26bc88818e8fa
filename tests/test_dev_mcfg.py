"""mcfg's dev set (tests/logs/dev-mcfg/): real model, config, quantization, speculative-decoding, tokenizer and
memory failures as people paste them, each through the CLI with the category its thread established."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import run_triage

DEV = Path(__file__).parent / "logs" / "dev-mcfg"
EXPECTED: dict[str, dict] = yaml.safe_load((DEV / "expected.yaml").read_text())
# Misses not yet named by a mechanism, each with the reason.
OPEN: dict[str, str] = {
    "quantization--granite-fp8-weight-scale-no-parameter.log": "a scale tensor with no parameter is not yet quantization",
    "tokenizer_chat_template--powermoe-warmup-cut-traceback.log": "chat-template frames without the exception line",
    "quantization--modelopt-fp8-kscale-keyerror.log": "a KeyError on a k_scale name is read as a weight mismatch",
    "quantization--compressed-tensors-cc75-cut-frames.log": "frames in a quantization module without an exception",
    "speculative_decoding--eagle3-qwen3-moe-fp8-cut.log": "only the EAGLE INFO line names speculative decoding",
    "model_support--qwen2-tokenizer-transformers5-special-tokens.log": "transformers v5 removed tokenizer attribute",
    "model_support--medgemma-rope-type-key-validation.log": "rope config refused inside a ModelConfig ValidationError",
}


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_dev_log_through_the_cli(name):
    if name in OPEN:
        pytest.xfail(OPEN[name])
    p = run_triage("--log", str(DEV / name), "--json", "--offline", "--no-probe")
    report = json.loads(p.stdout)
    assert report["diagnoses"], p.stderr
    assert report["diagnoses"][0]["category"] == EXPECTED[name]["category"], report["diagnoses"][0]["title"]
