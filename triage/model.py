"""The shapes every part of triage shares: evidence, diagnoses and the report.

Data flows one way: input (triage.logread) -> facts (scan + probes) -> diagnosis (triage.rules,
triage.diagnose) -> plan (playbooks) -> action. These classes are the hand-offs between the stages;
`to_json()` gives the public shape of spec/report.md (extend it, never break it); `from_json()` reads
it back (a saved `triage --json` report).
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


@dataclass(frozen=True, slots=True)
class Evidence:
    """A log line quoted as evidence: never edited, hence frozen."""

    line: int  # 1-based line number in the original input
    text: str  # the line as the user sees it, without colour codes

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Evidence:
        return cls(int(data["line"]), str(data["text"]))


@dataclass(slots=True)
class Fix:
    summary: str
    playbook: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"summary": self.summary, "playbook": self.playbook}


@dataclass(slots=True)
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

    def __post_init__(self) -> None:
        # Rules pass None for "none found"; the JSON always has the lists and the fix.
        if self.evidence is None:
            self.evidence = []
        if self.facts is None:
            self.facts = {}
        if self.fix is None:
            self.fix = Fix("")
        if self.explanation is None:
            self.explanation = []

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

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Diagnosis:
        facts = dict(data.get("facts") or {})
        explanation = list(facts.pop("explanation", None) or [])
        evidence = [Evidence.from_json(e) for e in data.get("evidence") or []]
        fix = data.get("fix") or {}
        return cls(str(data["category"]), str(data["signature"]), str(data.get("title") or ""),
                   float(data.get("confidence") or 0), evidence, facts,
                   Fix(str(fix.get("summary") or ""), fix.get("playbook")),
                   first_line=evidence[0].line if evidence else 0, explanation=explanation)


@dataclass(slots=True)
class Note:
    """A recognised line that is not a failure (harmless warnings) — kept so the user sees we read it."""

    signature: str
    title: str
    evidence: list[Evidence] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"signature": self.signature, "title": self.title, "evidence": [e.to_json() for e in self.evidence]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Note:
        return cls(str(data["signature"]), str(data.get("title") or ""),
                   [Evidence.from_json(e) for e in data.get("evidence") or []])


@dataclass(slots=True)
class UpstreamHit:
    """An issue or pull request upstream that speaks to the failure, ranked (report.upstream).

    The optional fields appear in the JSON only when known."""

    number: int
    title: str
    url: str
    state: str  # open | closed | merged
    kind: str  # issue | pr
    score: float
    why: str  # why it ranks where it does, in words
    repo: str = ""
    state_reason: str | None = None
    merged_at: str | None = None
    closed_at: str | None = None
    subsystem: str | None = None
    age: str | None = None  # served from the cache: how old that answer is, in words
    fixed_by: int | None = None  # the PR that fixed it
    fixed_by_repo: str | None = None
    fixed_in: str | None = None  # the first vLLM release with that PR
    fixed_in_basis: str | None = None  # how fixed_in was found
    recorded: bool | None = None  # a recorded answer (the demo's), not one fetched now

    _REQUIRED = ("number", "title", "url", "state", "kind", "score", "why", "repo")
    _OPTIONAL = ("state_reason", "merged_at", "closed_at", "subsystem", "age", "fixed_by", "fixed_by_repo",
                 "fixed_in", "fixed_in_basis", "recorded")

    def to_json(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in self._REQUIRED}
        out.update({k: v for k in self._OPTIONAL if (v := getattr(self, k)) is not None})
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UpstreamHit:
        known = cls._REQUIRED + cls._OPTIONAL
        return cls(**{k: data[k] for k in known if k in data and data[k] is not None and k != "repo"},
                   repo=str(data.get("repo") or ""))


@dataclass(slots=True)
class Upgrade:
    """Whether upgrading vLLM fixes the failure (report.upgrade): the verdict, the version to go to,
    the evidence in words, and the hand-patched files an upgrade would overwrite."""

    verdict: str  # a key of UPGRADE_VERDICTS
    target_version: str | None = None
    evidence: list[str] = field(default_factory=list)
    overwrites: list[str] = field(default_factory=list)
    keep_patches: str | None = None  # how to save the patched files first
    available: dict[str, Any] | None = None  # what the installer can reach

    @property
    def verdict_words(self) -> str:
        return UPGRADE_VERDICTS.get(self.verdict, self.verdict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"verdict": self.verdict, "target_version": self.target_version,
                               "evidence": list(self.evidence), "overwrites": list(self.overwrites)}
        if self.keep_patches:
            out["keep_patches"] = self.keep_patches
        if self.available is not None:
            out["available"] = self.available
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Upgrade:
        """Reads a saved report's `upgrade`; evidence written as one string becomes a list of one."""
        ev = data.get("evidence")
        evidence = [str(e) for e in ev] if isinstance(ev, list) else ([str(ev)] if ev else [])
        return cls(str(data.get("verdict") or "unknown"), data.get("target_version"), evidence,
                   [str(f) for f in data.get("overwrites") or []], data.get("keep_patches"), data.get("available"))


@dataclass(slots=True)
class Report:
    source: str
    bytes: int
    lines: int
    diagnoses: list[Diagnosis] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    notes: list[Note] = field(default_factory=list)
    # Filled by the upstream stage; absent from the JSON while None.
    upstream: list[UpstreamHit] | None = None
    upgrade: Upgrade | None = None
    # Messages for the user about the run itself (truncated input, probe skipped, ...).
    warnings: list[str] = field(default_factory=list)
    input_complete: bool = True
    upstream_queries: list[str] | None = None  # exactly what was sent (after redaction)
    input_truncated: bool = False  # a line was cut or the reader stopped early: said in the report

    @property
    def exit_code(self) -> int:
        return EXIT_DIAGNOSED if self.diagnoses else EXIT_NO_FAILURE

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "input": {"source": self.source, "bytes": self.bytes, "lines": self.lines,
                      **({"truncated": True} if self.input_truncated else {})},
            "diagnoses": [d.to_json() for d in self.diagnoses],
            "environment": self.environment,
        }
        if self.notes:
            out["notes"] = [n.to_json() for n in self.notes]
        if self.upstream is not None:
            out["upstream"] = [h.to_json() for h in self.upstream]
        if self.upgrade is not None:
            out["upgrade"] = self.upgrade.to_json()
        if self.upstream_queries is not None:
            out["upstream_queries"] = self.upstream_queries
        if self.warnings:
            out["warnings"] = list(self.warnings)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Report:
        """A saved `triage --json` report. Raises ValueError when it is not one."""
        if not isinstance(data, dict) or not isinstance(data.get("diagnoses"), list):
            raise ValueError("not a triage report (no diagnoses list)")
        inp = data.get("input") or {}
        upstream = data.get("upstream")
        upgrade = data.get("upgrade")
        try:
            return cls(source=str(inp.get("source", "-")), bytes=int(inp.get("bytes") or 0),
                       lines=int(inp.get("lines") or 0),
                       diagnoses=[Diagnosis.from_json(d) for d in data["diagnoses"]],
                       environment=dict(data.get("environment") or {}),
                       notes=[Note.from_json(n) for n in data.get("notes") or []],
                       upstream=[UpstreamHit.from_json(h) for h in upstream] if isinstance(upstream, list) else None,
                       upgrade=Upgrade.from_json(upgrade) if isinstance(upgrade, dict) else None,
                       warnings=[str(w) for w in data.get("warnings") or []],
                       upstream_queries=data.get("upstream_queries"))
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not a triage report ({type(exc).__name__}: {exc})") from None
