"""Pooling models (embedding, reranker, classification, reward) asked of an architecture this vLLM cannot pool.

vLLM resolves which tasks an architecture can serve from its model registry, and refuses a task the model is not
registered (or convertible) for:
- 0.6.2 .. 0.9.x (config.py `_resolve_task`): "This model does not support the '{task_option}' task. Supported
  tasks: {supported_tasks}" (a set: {'generate'}, {'embedding'}, {'embed', 'classify', ...}). Causal LMs such as
  Qwen2ForCausalLM became convertible for embed in 0.6.6 and for classify/reward in 0.7 (`as_embedding_model`,
  `as_seq_cls_model`); a model added on main is missing from the release before it.
- 0.10+ (config/model.py, `--task` replaced by `--runner`/`--convert`): "This model does not support `--runner
  pooling`. You can pass `--convert <embed|classify|reward> to adapt it into a pooling model."

A generative model class that reaches a pooling request anyway has no pooler: the V0 pooling model runner calls
`self.model.pooler(...)` and torch's Module.__getattr__ raises "'Qwen3ForCausalLM' object has no attribute 'pooler'"
(Qwen3-Reranker, mxbai-rerank-v2 and reward checkpoints whose config says *ForCausalLM, served with --task score
before vLLM could convert them). Qwen3-Reranker is served since 0.9.2 through its sequence-classification
conversion (`--hf-overrides` with Qwen3ForSequenceClassification, classifier_from_token ["no", "yes"] and
is_original_qwen3_reranker).
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="pooling.task_unsupported", category="model_support",
         title="This vLLM cannot run the model for the '{task}' task (it supports {supported})",
         fix="The installed vLLM registers this architecture only for {supported}. Use a checkpoint made for the "
             "task (an embedding, reranker or reward model), or upgrade vLLM: 0.6.6+ converts a causal LM for "
             "embedding (`--task embed`), 0.7+ also for classify/reward, and from 0.10 the switch is "
             "`--runner pooling --convert embed|classify|reward` (a model added after your release needs a newer one).",
         patterns=[r"does not support the '(?P<task>\w+)' task\. Supported tasks: (?P<supported>\{[^}]{0,200}\})",
                   r"This model does not support `--runner (?P<task>pooling)`"],
         facts=lambda m, line, scan: {"supported": m.groupdict().get("supported")
                                      or "generation only; pass --convert to pool it"},
         playbook="model-support", confidence=0.9),
    Rule(signature="pooling.model_without_pooler", category="model_support",
         title="{arch} has no pooler: a pooling request (embed/score/rerank) reached a generative model class",
         fix="vLLM built the checkpoint's causal-LM class, which cannot pool. Serve it as a pooling model this vLLM "
             "supports: for Qwen3-Reranker use vLLM 0.9.2+ with `--hf-overrides '{{\"architectures\": "
             "[\"Qwen3ForSequenceClassification\"], \"classifier_from_token\": [\"no\", \"yes\"], "
             "\"is_original_qwen3_reranker\": true}}'` (or a *-seq-cls conversion of the checkpoint); otherwise "
             "`--task embed|classify|reward` (0.10+: `--runner pooling --convert ...`) on a release that converts "
             "this architecture.",
         patterns=[r"'(?P<arch>\w+(?:ForCausalLM|LMHeadModel|ForConditionalGeneration))' object has no attribute "
                   r"'pooler'"],
         playbook="model-support", confidence=0.85),
]
