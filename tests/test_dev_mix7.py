"""mix7's dev set (tests/logs/dev-mix7/): a sample of recent (June-September 2026) failure threads from vLLM and
the projects that run it, through the CLI, and the block-size mechanism it added, on the forms the raising code
writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix7")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "model_support--lvllm-minimax-m3-no-model-impl-block-size.log":
        "the thread's cause (the Lvllm fork has parsers but no MiniMax-M3 model implementation) is only in the "
        "reporter's prose; vLLM's own message is the general block-size disagreement, which "
        "attention.no_common_block_size names as attention_backend (its fix names the missing-implementation case)",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- select_common_block_size: no kernel block size every attention backend takes -------------------------

@pytest.mark.parametrize("text, size", [
    # vllm/v1/worker/utils.py before vllm-project/vllm#58557 (a trailing space after the period)
    ("ValueError: No common block size for 128. \n", "128"),
    ("(EngineCore pid=7) ERROR 09-10 09:44:03 [core.py:1202] ValueError: No common block size for 16. \n", "16"),
    # after #58557: each backend and the sizes it takes
    ("ValueError: No common block size for 96 (A: [MultipleOf(48)]; B: [64]).\n", "96"),
    ("ValueError: No common block size for 64 (FLASHMLA_SPARSE: [256]; DEEPSEEK_V4_INDEXER: [128, 256]).\n", "64"),
])
def test_no_common_block_size_is_the_attention_backends(text, size):
    d = first(text)
    assert (d.signature, d.category) == ("attention.no_common_block_size", "attention_backend")
    assert f"for {size} tokens" in d.title


def test_backends_listed_by_newer_vllm_reach_the_title():
    d = first("ValueError: No common block size for 96 (A: [MultipleOf(48)]; B: [64]).\n")
    assert "B: [64]" in d.title


def test_the_raise_line_quoted_in_a_traceback_is_not_a_size():
    d = top('    raise ValueError(f"No common block size for {kv_manager_block_size}. ")\n')
    assert d is None or d.signature != "attention.no_common_block_size"
