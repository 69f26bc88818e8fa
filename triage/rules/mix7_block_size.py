"""The KV block size no attention backend of the model agrees on.

vLLM's V1 worker picks one kernel block size per KV-cache group in select_common_block_size
(vllm/v1/worker/utils.py, via prepare_kernel_block_sizes / try_get_kernel_block_size): the KV-manager block size
(--block-size, or the size the platform preferred from the first attention backend) is kept when every backend of
the group takes it, else the largest int size that divides it and every backend takes. When none does it raises
"ValueError: No common block size for <N>. " - since vllm-project/vllm#58557 (2026-09) followed by each backend
and its sizes: "No common block size for 96 (A: [MultipleOf(48)]; B: [64])." It is met when a model mixes layer
kinds whose kernels want different pages (MiniMax-M3's dense layers take MultipleOf(16), its sparse layers only
128; DeepSeek-V4's sparse MLA and indexer backends 64/128/256), when --block-size names a size one backend refuses,
or when the build has no implementation of the model's attention layout and falls back to generic backends.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="attention.no_common_block_size", category="attention_backend",
         title="The model's attention backends share no KV block size for {size} tokens{detail}",
         fix="vLLM found no kernel block size that every attention backend of this model takes for a KV block of "
             "{size} tokens. Pass a --block-size all of them support (the sizes each backend takes are listed in "
             "the message on newer vLLM: 128 for MiniMax-M3's sparse layers, 64 or 128 for DeepSeek-V4's sparse "
             "MLA), or drop --block-size so vLLM picks it; if you forced one with --attention-backend, let vLLM "
             "choose. When the model's sparse or hybrid layers have no implementation in this vLLM build (a fork "
             "or an older release), upgrade to a release that supports the model.",
         patterns=[r"No common block size for (?P<size>\d+)(?:\s*\((?P<backends>.+)\))?"],
         facts=lambda m, line, scan: {"detail": f" ({m.group('backends')})" if m.group("backends") else ""},
         playbook="attention-backend", confidence=0.8),
]
