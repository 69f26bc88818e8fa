"""mdl's dev set (tests/logs/dev-mdl/): real model-support, model-loading and tokenizer/chat-template failures as
people paste them, each through the CLI with the category its thread established."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-mdl")
# Misses not yet named by a mechanism, each with the reason.
OPEN: dict[str, str] = {
    "model_support--verl-qwen35-bullet-fragment.log": "transformers' unknown-model-type message without backticks",
    "tokenizer_chat_template--mistral-tokenizer-hf-pixtral-processor.log": "MistralTokenizer inside an HF processor",
    "model_loading--hf-transfer-missing-wrapped.log": "hf_transfer enabled but missing",
    "model_support--qwen35-text-gptq-model-type.log": "pydantic 'Value error,' form of the unknown-model-type message",
    "model_support--ascend-qwen35moe-lowercase-typos.log": "lower-cased, misspelt unknown-model-type message",
    "model_loading--hf-429-cached-model-verl.log": "Hub 429 rate limit",
    "model_support--qwen25vl-video-transformers-v5-cut.log": "cut in vLLM's multimodal processing frames",
}


@pytest.mark.parametrize("name", params(EXPECTED, OPEN))
def test_dev_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])
