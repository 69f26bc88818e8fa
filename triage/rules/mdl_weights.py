"""Checkpoint files PyTorch will not unpickle.

vLLM reads .bin/.pt checkpoints with torch.load(weights_only=True) (model_loader/weight_utils.py), and PyTorch 2.6
made weights_only the default everywhere: a file that pickles more than tensors, a truncated download or a Git LFS
pointer saved in place of the weights is refused ("Weights only load failed", transformers' "Unable to load weights
from pytorch checkpoint file").
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="model_loading.pickle_checkpoint_refused", category="model_loading",
         title="PyTorch refused to load a pickled checkpoint file (.bin/.pt)",
         fix="Load the model from its safetensors files when the repository has them (--load-format safetensors). "
             "Otherwise check the .bin files: a few hundred bytes means a Git LFS pointer (run `git lfs pull` or "
             "re-download with `hf download`), a short file an interrupted download; a checkpoint that pickles more than "
             "tensors needs converting to safetensors with the library that wrote it.",
         patterns=[r"Weights only load failed", r"Unable to load weights from pytorch checkpoint file"],
         playbook="model-loading", confidence=0.85),
]
