"""The shapes every part of triage shares: evidence, diagnoses and the report.

Data flows one way: input (triage.logread) -> facts (scan + probes) -> diagnosis (triage.rules,
triage.diagnose) -> plan (playbooks) -> action. These classes are the hand-offs between the stages;
`to_json()` gives the public shape of ../shared/spec/report.md. They are plain classes, not
dataclasses: importing dataclasses (and inspect, ast, typing with it) costs more start-up than a
small report takes to diagnose (issue 2).
"""

from __future__ import annotations

from triage.record import Record

if False:  # typing is for type checkers only: importing it costs start-up time (issue 2)
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

# The upgrade verdicts of the report's `upgrade` object, in words for people (text report, TUI).
UPGRADE_VERDICTS: dict[str, str] = {
    "fixes": "upgrading fixes this",
    "does-not-fix": "upgrading does not fix this",
    "unknown": "unknown whether upgrading fixes this",
}

# Exit codes of spec/report.md.
EXIT_DIAGNOSED = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2
EXIT_NO_FAILURE = 3


class Evidence(Record):
    __slots__ = ("line", "text")
    _fields = __slots__

    def __init__(self, line: int, text: str) -> None:
        # line: 1-based line number in the original input; text: the line as the user sees it,
        # without colour codes.
        object.__setattr__(self, "line", line)
        object.__setattr__(self, "text", text)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")  # frozen: evidence is quoted, never edited

    __delattr__ = __setattr__

    def __hash__(self) -> int:  # frozen, hence hashable
        return hash((self.line, self.text))

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}


class Fix(Record):
    __slots__ = ("summary", "playbook")
    _fields = __slots__

    def __init__(self, summary: str, playbook: str | None = None) -> None:
        self.summary = summary
        self.playbook = playbook

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "playbook": self.playbook}


class Diagnosis(Record):
    __slots__ = ("category", "signature", "title", "confidence", "evidence", "facts", "fix", "first_line",
                 "explanation")
    _fields = __slots__

    def __init__(self, category: str, signature: str, title: str, confidence: float,
                 evidence: list[Evidence] | None = None, facts: dict[str, Any] | None = None,
                 fix: Fix | None = None, first_line: int = 0, explanation: list[str] | None = None) -> None:
        self.category = category
        self.signature = signature
        self.title = title
        self.confidence = confidence
        self.evidence = [] if evidence is None else evidence
        self.facts = {} if facts is None else facts
        self.fix = Fix("") if fix is None else fix
        # Not in the JSON: where the first decisive line sits, used to rank a cascade.
        self.first_line = first_line
        # Plain-words explanation lines (backend by backend, ...); published as facts["explanation"].
        self.explanation = [] if explanation is None else explanation

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


class Note(Record):
    """A recognised line that is not a failure (harmless warnings) — kept so the user sees we read it."""

    __slots__ = ("signature", "title", "evidence")
    _fields = __slots__

    def __init__(self, signature: str, title: str, evidence: list[Evidence] | None = None) -> None:
        self.signature = signature
        self.title = title
        self.evidence = [] if evidence is None else evidence

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature, "title": self.title, "evidence": [e.to_json() for e in self.evidence]}


class Report(Record):
    # No __slots__ of its own (it has a __dict__): front ends attach run details (elapsed_s) to a report.
    _fields = ("source", "bytes", "lines", "diagnoses", "environment", "notes", "upstream", "upgrade", "warnings",
               "input_complete", "upstream_queries")

    def __init__(self, source: str, bytes: int, lines: int, diagnoses: list[Diagnosis] | None = None,
                 environment: dict[str, Any] | None = None, notes: list[Note] | None = None,
                 upstream: list[dict[str, Any]] | None = None, upgrade: dict[str, Any] | None = None,
                 warnings: list[str] | None = None, input_complete: bool = True,
                 upstream_queries: list[str] | None = None) -> None:
        self.source = source
        self.bytes = bytes
        self.lines = lines
        self.diagnoses = [] if diagnoses is None else diagnoses
        self.environment = {} if environment is None else environment
        self.notes = [] if notes is None else notes
        # Filled by the upstream stage; absent from the JSON while None.
        self.upstream = upstream
        self.upgrade = upgrade
        # Messages for the user about the run itself (truncated input, probe skipped, ...).
        self.warnings = [] if warnings is None else warnings
        self.input_complete = input_complete
        self.upstream_queries = upstream_queries  # exactly what was sent (after redaction)

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
