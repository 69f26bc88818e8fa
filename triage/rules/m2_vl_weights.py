"""A vision tower's weight reaching a text decoder's loader: a checkpoint saved in the new Qwen-VL layout.

transformers 4.52 moved the Qwen2-VL / Qwen2.5-VL submodules (the vision tower under `model.visual`, the decoder
under `model.language_model`), and checkpoints saved with it (or by trainers that use it: verl, ROLL, LlamaFactory)
name their weights that way. A vLLM whose Qwen-VL `hf_to_vllm_mapper` predates the change (fixed in vLLM PR
#19054, 0.9.1) maps `model.` to the language model, so the vision weights are handed to the text decoder's
`load_weights` (qwen2.py), which indexes `params_dict[name]` and raises `KeyError: 'visual.patch_embed.proj.weight'`.
A trainer's weight sync through `collective_rpc` shows only the key ("Call to collective_rpc method failed:
'visual.…'"). The checkpoint is fine: the vLLM and transformers versions do not fit, which is model_support, not a
checkpoint/model mismatch (model_loading.weight_mismatch, which it outranks).

A KeyError on a vision weight raised while the model is being built (a quantization config's per-layer lookup in
the vision tower's __init__) is not this: there the trace shows the constructor, not a loader.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

# The vision tower's modules in the Qwen2-VL family (patch_embed, blocks, merger), optionally under `model.`.
VISUAL_KEY = r"'(?P<param>(?:model\.)?visual\.(?:patch_embed|blocks|merger|deepstack_merger_list)[\w.]*)'"

_CONSTRUCTING = ("VisionTransformer(", "initialize_model")


def _check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    d = VL_WEIGHTS_NEW_LAYOUT.match_lines(scan)
    if d is None:
        return None
    text = scan.joined_text()
    if any(c in text for c in _CONSTRUCTING) and "load_weights" not in text:
        return None
    return d


VL_WEIGHTS_NEW_LAYOUT: Rule = Rule(
    signature="model_support.vl_weights_new_layout", category="model_support",
    title="A Qwen-VL vision weight ('{param}') reached the text decoder's loader: checkpoint layout newer than this vLLM",
    fix="The checkpoint names its vision weights the way transformers >= 4.52 saves Qwen-VL models, which this vLLM "
        "does not map: upgrade vLLM (0.9.1 or later maps both layouts), or with an older vLLM pin "
        "`pip install 'transformers<4.52'` in the environment that saves the checkpoint (trainer and rollout alike).",
    patterns=[r"KeyError: " + VISUAL_KEY,
              # a trainer's weight sync: vLLM's collective_rpc re-raises the KeyError's text only
              r"collective_rpc method failed: " + VISUAL_KEY],
    playbook="model-support", confidence=0.86,
    check=_check)

RULES = [VL_WEIGHTS_NEW_LAYOUT]
