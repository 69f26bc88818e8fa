"""An attention backend's metadata that lacks a field the shared attention code reads.

Each V1 attention backend builds its own metadata dataclass (FlashAttentionMetadata, FlashInferMetadata,
MLACommonMetadata, FlashMLASparseMetadata, ROCMAiterMLASparseMetadata, ...), and the model-agnostic layers
(MLAAttention, unified_mla_kv_cache_update, the KV-connector wrappers, the spec-decode proposers) read fields
from it. When a change to the shared code starts reading a field that one backend's dataclass never carried,
every model routed to that backend dies at its first forward - the profiling dummy run at start-up - with
"AttributeError: 'ROCMAiterMLASparseMetadata' object has no attribute 'num_decode_tokens'" (vllm-project/vllm
#50064: after #47327 the MLA wrapper reads num_decodes / num_prefills / num_decode_tokens, which the ROCm AITER
sparse-MLA metadata lacked until #48886; #33546 the same for FlashMLASparseMetadata). The backend and the code
that calls it are out of step inside one vLLM build: a regression of that build, fixed by a newer release or
nightly, or avoided with another backend. Backends that a hardware plugin defines (vllm-ascend's
AscendMetadata, Gaudi's, XPU's) are left out: there the plugin and vLLM are releases apart, an install matter.
"""

from __future__ import annotations

from triage.rules.base import Rule

# the backend's class: a metadata dataclass whose name says attention (or names a backend family); a hardware
# plugin's own classes (Ascend..., Hpu..., Xpu..., Npu...) are not in-tree backends
_CLS = (r"(?!(?:Ascend|Hpu|HPU|Npu|NPU|Xpu|XPU|Gaudi|Musa|Tpu|TPU|Pallas))"
        r"\w*(?:Attention|Attn|MLA|Mla|FlashInfer|FlashAttn|Aiter|AITER|Triton|Flex|Indexer|Sparse)\w*Metadata")

RULES = [
    Rule(signature="attention.backend_metadata_missing_field", category="attention_backend",
         title="The attention backend's metadata ({cls}) lacks the field '{attr}' vLLM's attention code reads",
         fix="This vLLM build calls the attention backend with code that expects a field ({attr}) its metadata "
             "class {cls} does not carry - the backend and the shared attention layer are out of step, a "
             "regression of this build rather than of your setup. Upgrade to a release or nightly that fixes it "
             "(search the vLLM tracker for the class and field), go back to the last release that worked, or "
             "select another backend with --attention-backend (or the platform's switch, e.g. "
             "VLLM_ROCM_USE_AITER_MLA=0) if the model has one.",
         patterns=[rf"AttributeError: '(?P<cls>{_CLS})' object has no attribute '(?P<attr>\w+)'"],
         playbook="attention-backend", confidence=0.75),
]
