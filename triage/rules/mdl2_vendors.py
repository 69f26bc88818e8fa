"""A model type the vLLM platform plugin itself cannot run, said by the plugin rather than by vLLM.

vllm-metal (Apple Silicon, MLX) runs hybrid models (Mamba / gated-delta-net / short-conv layers beside attention)
through its own runtime, which keeps one "state family" per supported model type; a hybrid model type it has no
family for is refused while the engine config is built, in vllm_metal/attention/runtime/factory.py:
`NotImplementedError: Metal hybrid runtime has no state family for model_type='granitemoehybrid'.` vLLM itself
resolved the architecture (the log says so just before), so the model is supported on CUDA; it is the plugin
release that cannot run it yet.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="model_support.metal_hybrid_unsupported", category="model_support",
         title="vllm-metal cannot run the hybrid model type {model_type} on Apple Silicon",
         fix="The vllm-metal plugin's hybrid runtime has no support for this model type (vLLM itself knows the "
             "architecture): upgrade vllm-metal (`pip install -U vllm-metal`, or its install script) to a release "
             "that lists the model type, serve a non-hybrid variant of the model, or run it on a CUDA machine.",
         patterns=[r"Metal hybrid runtime has no state family for model_type=['\"]?(?P<model_type>[\w-]+(?:\.[\w-]+)*)"],
         playbook="model-support", confidence=0.92),
]
