"""A LoRA adapter loaded while speculative decoding is on, failing on a shape inside vLLM's LoRA layers.

V0's speculative decoding (SpecDecodeWorker, 0.4 .. 0.10) built the draft worker with the same LoRA config as the
target, so activating an adapter (vllm/lora/models.py activate_adapter -> lora/layers.py set_lora) also wrote the
target-sized LoRA matrices into the draft model's layers: "RuntimeError: The size of tensor a (768) must match the
size of tensor b (4096) ..." with the draft's hidden size on one side (vllm PR 11966 describes it; V1 applies adapters
to the target only since vllm PR 21068). Without a draft in the launch the same shape error is an adapter made for
another base model, which this rule leaves to the others.

EAGLE3 heads (and DFlash drafters and method "extract_hidden_states") read the target model's intermediate hidden
states, which only model classes implementing SupportsEagle3 expose: V1's model runner raises "Model does not support
EAGLE3 interface but aux_hidden_state_outputs was requested" (v1/worker/gpu_model_runner.py, 0.10+) and Model Runner
V2 "Model does not support EAGLE3 interface" (v1/worker/gpu/spec_decode/eagle/eagle3_utils.py). The target
architecture gains the interface release by release (Qwen3-MoE in vllm PR 26485), so it is this vLLM and this target.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule
from triage.rules.model import SPEC_CONTEXT

SHAPE_RE = lazy(r"size of tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\)|"
                r"expanded size of the tensor \((?P<c>\d+)\) must match the existing size \((?P<d>\d+)\)|shape mismatch",
                needles=("size of t", "shape mismatch"))
# a speculative-decoding launch in the log, or the thread saying so in prose (a draft model named)
SPEC_PROSE_RE = lazy(r"(?i)\bspec(?:ulative)?[ _-]?decod(?:e|ing)\b|\bdraft[ _]model\b")
LORA_FRAME_PARTS = ("/lora/",)


def _lora_on_draft(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "lora" not in joined.lower() or not (SPEC_CONTEXT.search(joined) or SPEC_PROSE_RE.search(joined)):
        return None
    for exc in scan.exceptions:
        m = SHAPE_RE.search(exc.message)
        if m is None or not any(part in f.file for f in exc.frames for part in LORA_FRAME_PARTS):
            continue
        sizes = [s for s in m.groups() if s]
        facts = {"sizes": " vs ".join(sizes)} if sizes else {}
        return Diagnosis(
            category="speculative_decoding", signature="speculative.lora_on_draft",
            title="A LoRA adapter does not fit a model's layers while speculative decoding is on"
                  + (f" ({facts['sizes']})" if facts else ""),
            confidence=0.8, evidence=[Evidence(exc.line.no, exc.line.shown)], facts=facts,
            fix=Fix("With speculative decoding this vLLM also applies the LoRA adapter to the draft model, whose hidden "
                    "size differs from the target's: serve the adapter without --speculative-config "
                    "(or --speculative-model), merge the adapter into the target weights, or upgrade to a vLLM V1 "
                    "release that applies adapters to the target model only.", "speculative-decoding"),
            first_line=exc.line.no)
    return None


RULES = [
    Rule(signature="speculative.lora_on_draft", category="speculative_decoding",
         title="A LoRA adapter does not fit the draft model", fix="", check=_lora_on_draft,
         playbook="speculative-decoding", confidence=0.8),
    Rule(signature="speculative.eagle3_target_unsupported", category="speculative_decoding",
         title="The target model does not implement the EAGLE3 interface in this vLLM",
         fix="EAGLE3 (and DFlash, extract_hidden_states) drafting needs the target model class to expose its "
             "intermediate hidden states (SupportsEagle3), which this vLLM does not do for this architecture: upgrade "
             "to a vLLM release that supports EAGLE3 for it, use a method this target supports (its MTP head, "
             "`\"method\": \"ngram\"`), or start without --speculative-config.",
         patterns=[r"Model does not support EAGLE3 interface"],
         playbook="speculative-decoding", confidence=0.9),
]
