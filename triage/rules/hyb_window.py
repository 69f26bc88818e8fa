"""Sliding-window attention that covers only some of a model's layers.

vLLM's Qwen2 implementation (qwen2.py, qwen2_rm.py; 0.5 .. 0.8) refuses a config with use_sliding_window on and
max_window_layers set: `Sliding window for some but all layers is not supported. This model uses sliding window
but `max_window_layers` = N is less than `num_hidden_layers` = M. Please open an issue to discuss this feature.`
(formatted with % in 0.5, .format later; the check does not compare the two numbers, so it also fires when they
are equal). Per-layer sliding window for Qwen2 came with vllm#17772 (0.9). The released Qwen2/2.5/QwQ configs keep
use_sliding_window false: a config that turns it on was edited or converted.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="hyb.partial_sliding_window_unsupported", category="model_support",
         title="This vLLM's Qwen2 code cannot run sliding window on only some layers (use_sliding_window with "
               "max_window_layers)",
         fix="vLLM before 0.9 refuses any Qwen2-family config with use_sliding_window true and max_window_layers set: "
             "set \"use_sliding_window\": false in the model's config.json (the released Qwen2/2.5/QwQ checkpoints "
             "ship it false), or upgrade vLLM to 0.9+ (per-layer sliding window, vllm#17772).",
         patterns=[r"Sliding window for some but all layers is not supported(?:\. This model uses sliding window but "
                   r"`?max_window_layers`? = (?P<max_window_layers>\d+) is less than `?num_hidden_layers`? = "
                   r"(?P<num_hidden_layers>\d+))?"],
         playbook="model-support", confidence=0.9),
]
