"""vLLM's Transformers backend splitting a model for pipeline parallelism by a nested module name.

A model vLLM has no implementation of runs through its Transformers backend (models/transformers.py). With
--pipeline-parallel-size > 1 the backend walks the model's `_pp_plan` keys with `getattr(self.model, name)`; a
multimodal model's plan names nested modules ("language_model.embed_tokens", "text_model.layers"), and getattr with
a dotted name raises `AttributeError: 'Qwen3VLMoeModel' object has no attribute 'language_model.embed_tokens'`.
Later releases read the plan with attrgetter, and most such models gained a native implementation. A dotted name in
"object has no attribute" only comes from a getattr with a module path, so the message itself identifies the path.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="model_support.transformers_backend_nested_pp", category="model_support",
         title="vLLM's Transformers fallback cannot split {cls} for pipeline parallelism (nested module '{attr}')",
         fix="This vLLM has no native implementation of the model and runs it through its Transformers backend, whose "
             "pipeline-parallel setup cannot reach the nested module '{attr}'. Upgrade vLLM to a release that supports "
             "the model natively (the model card's recipe names it), or run it without --pipeline-parallel-size "
             "(tensor parallelism only).",
         patterns=[r"'(?P<cls>\w+)' object has no attribute '(?P<attr>[A-Za-z_]\w*(?:\.\w+)+)'"],
         playbook="model-support", confidence=0.8),
]
