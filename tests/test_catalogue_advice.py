"""A failure no hand rule knows: the remedy its own message gives becomes the fix, quoted as text."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from triage.catalogue.advice import advice


@pytest.mark.parametrize("message, said", [
    # vllm/v1/core/kv_cache_utils.py
    ("Cannot auto-fit max_model_len: not enough GPU memory available to serve even a single token. "
     "Try increasing `gpu_memory_utilization`.", "Try increasing `gpu_memory_utilization`."),
    # vllm/transformers_utils/tokenizer.py
    ("tokenizer must be a string, got 3: 3. Please provide a valid tokenizer path or HuggingFace model ID.",
     "Please provide a valid tokenizer path or HuggingFace model ID."),
    # vllm/renderers/cohere.py: the install command stays inside the quote
    ("The `cohere` tokenizer/renderer mode requires the `cohere_melody` package. Install it via "
     "`pip install 'cohere-melody>=0.14.0'` or build from https://github.com/cohere-ai/melody.",
     "Install it via `pip install 'cohere-melody>=0.14.0'` or build from https://github.com/cohere-ai/melody."),
    # an imperative opening its sentence
    ("bfloat16 KV cache is not supported on Tesla T4 (compute capability 7.5); bfloat16 requires SM80+. "
     "Re-run with --kv-cache-dtype float16.", "Re-run with --kv-cache-dtype float16."),
    # two sentences of advice, no more
    ("Every node should have a unique IP address. Got 2 nodes with node ids a and b and 1 unique IP addresses "
     "{'10.0.0.1'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, "
     "make sure it is unique for each node.",
     "Please check your network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it is "
     "unique for each node."),
])
def test_advice_sentences(message: str, said: str) -> None:
    assert advice(message) == said




def test_no_advice_strict() -> None:
    assert advice("An EC producer-only instance requires a multimodal model.") is None
    assert advice("Received 3 instead of 4. Version 0.10.2 is lower than required.") is None
    assert advice("Passing raw prompts is deprecated and will be removed in v0.18. Please use the renderer.") is None


def test_long_advice_is_cut() -> None:
    said = advice("Please " + "set the option carefully " * 30 + ".")
    assert said is not None and len(said) <= 280 and said.endswith("...")


def _report(tmp_path, text: str) -> dict:
    log = tmp_path / "vllm.log"
    log.write_text(text)
    out = subprocess.run([sys.executable, "-m", "triage", "--log", str(log), "--json", "--offline", "--no-probe"],
                         capture_output=True, text=True, timeout=120)
    return json.loads(out.stdout)


def test_catalogue_match_quotes_the_messages_remedy(tmp_path) -> None:
    # vLLM's Ray executor (vllm/v1/executor/ray_executor.py): no hand rule knows it; the catalogue does
    d = _report(tmp_path, (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/executor/ray_executor.py", line 290, in _init_workers_ray\n'
        "    raise RuntimeError(\n"
        "RuntimeError: Every node should have a unique IP address. Got 2 nodes with node ids ['a1', 'b2'] and 1 unique "
        "IP addresses {'10.0.0.5'}. Please check your network configuration. If you set `VLLM_HOST_IP` environment "
        "variable, make sure it is unique for each node.\n"))["diagnoses"][0]
    assert d["signature"].startswith("catalogue.vllm"), d["signature"]
    assert d["fix"]["summary"].startswith("The message says what to do: \u201cPlease check your network configuration.")
    assert "executor.py" in d["fix"]["summary"]  # where vLLM raises it


def test_catalogue_match_without_remedy_keeps_the_generic_fix(tmp_path) -> None:
    d = _report(tmp_path, (
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/vllm/config/vllm.py", line 10, in __post_init__\n'
        "    raise ValueError(msg)\n"
        "ValueError: An EC producer-only instance requires a multimodal model.\n"))["diagnoses"][0]
    assert d["signature"].startswith("catalogue.vllm")
    assert "Search upstream for its text" in d["fix"]["summary"]


def test_unrecognised_exception_quotes_its_remedy(tmp_path) -> None:
    d = _report(tmp_path, "ValueError: Widget frobnication failed for 3 items. Please set --frob-size 4 or lower.\n")
    top = d["diagnoses"][0]
    assert top["signature"].startswith("generic."), top["signature"]
    assert "\u201cPlease set --frob-size 4 or lower.\u201d" in top["fix"]["summary"]
