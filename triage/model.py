"""The shapes every part of triage shares: evidence, diagnoses and the report.

Data flows one way: input (triage.logread) -> facts (scan + probes) -> diagnosis (triage.rules,
triage.diagnose) -> plan (playbooks) -> action. These dataclasses are the hand-offs between the
stages; `to_json()` gives the public shape of ../shared/spec/report.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEMA = "triage.report/1"

# The category vocabulary of spec/report.md, in the order the spec lists it.
CATEGORIES: dict[str, str] = {
    "attention_backend": "no valid / wrong attention backend (MLA, sparse MLA, head size, compute capability, dtype)",
    "unsupported_gpu": "GPU too old or too new for the build",
    "dtype_unsupported": "a dtype the GPU cannot run",
    "quantization": "quantization method or kernel not available on this GPU, or a shape it cannot take",
    "cuda_driver": "driver too old for the CUDA build, PTX from a newer toolchain, compat libraries",
    "install_mismatch": "compiled extension against another torch, torch/torchvision mismatch, vllm._C missing",
    "kernel_library": "FlashInfer / FlashAttention / DeepGEMM missing, too old, wrong build, or failing JIT",
    "triton_compile": "Triton compile failures: out of shared memory, ptxas, no C compiler",
    "kv_cache_memory": "KV-cache budget too small for the requested context",
    "gpu_oom": "CUDA out of memory while loading, warming up or profiling",
    "cudagraph_capture": "CUDA-graph capture failures",
    "distributed": "NCCL, Gloo, Ray, multi-node networking, /dev/shm, fork vs spawn",
    "model_support": "architecture unknown to the installed vLLM or transformers",
    "model_loading": "weight, GGUF or config loading failures",
    "tokenizer_chat_template": "tokenizer or chat template missing or incompatible",
    "speculative_decoding": "draft-model / EAGLE / MTP failures",
    "engine_config": "invalid launch arguments or config",
    "environment": "host or container: no GPU visible, unsupported OS, port already bound",
}

# Exit codes of spec/report.md.
EXIT_DIAGNOSED = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NO_FAILURE = 3


@dataclass(frozen=True)
class Evidence:
    line: int  # 1-based line number in the original input
    text: str  # the line as the user sees it, without colour codes

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


@dataclass
class Fix:
    summary: str
    playbook: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "playbook": self.playbook}


@dataclass
class Diagnosis:
    category: str
    signature: str
    title: str
    confidence: float
    evidence: list[Evidence] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    fix: Fix = field(default_factory=lambda: Fix(""))
    # Not in the JSON: where the first decisive line sits, used to rank a cascade.
    first_line: int = 0
    # Plain-words explanation lines (backend by backend, ...); published as facts["explanation"].
    explanation: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        facts = dict(self.facts)
        if self.explanation:
            facts.setdefault("explanation", list(self.explanation))
        return {
            "category": self.category,
            "signature": self.signature,
            "title": self.title,
            "confidence": round(float(self.confidence), 2),
            "evidence": [e.to_json() for e in self.evidence],
            "facts": facts,
            "fix": self.fix.to_json(),
        }


@dataclass
class Note:
    """A recognised line that is not a failure (harmless warnings) — kept so the user sees we read it."""

    signature: str
    title: str
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature, "title": self.title, "evidence": [e.to_json() for e in self.evidence]}


@dataclass
class Report:
    source: str
    bytes: int
    lines: int
    diagnoses: list[Diagnosis] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    # Filled by later stages (issue 4); absent from the JSON while None.
    upstream: list[dict[str, Any]] | None = None
    upgrade: dict[str, Any] | None = None
    # Messages for the user about the run itself (truncated input, probe skipped, ...).
    warnings: list[str] = field(default_factory=list)
    input_complete: bool = True
    upstream_queries: list[str] | None = None  # exactly what was sent (after redaction)

    @property
    def exit_code(self) -> int:
        return EXIT_DIAGNOSED if self.diagnoses else EXIT_NO_FAILURE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "input": {"source": self.source, "bytes": self.bytes, "lines": self.lines},
            "diagnoses": [d.to_json() for d in self.diagnoses],
            "environment": self.environment,
        }
        if self.notes:
            out["notes"] = [n.to_json() for n in self.notes]
        if self.upstream is not None:
            out["upstream"] = self.upstream
        if self.upgrade is not None:
            out["upgrade"] = self.upgrade
        if self.upstream_queries is not None:
            out["upstream_queries"] = self.upstream_queries
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out
