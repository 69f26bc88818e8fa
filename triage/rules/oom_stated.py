"""A failure the report states in its own words, when the error lines themselves are not in the text.

A thread often keeps only the start of a traceback (cut in execute_model, in determine_num_available_blocks),
only a profiling warning, or only the comments, while its title or prose says what happened: "CUDA OOM on ...",
"CUDA out of memory when setting limit_mm_per_prompt", "NCCL hangs and causes timeout", "<kernel OOM-killer
reports vllm serve process killed>". The words are the
reporter's, not vLLM's: each rule here is `stated` (diagnose drops it when a rule reading the log's own lines
finds a failure of its category), ranks below any sure rule otherwise, and reads only lines that no logger printed: a title (a
markdown heading on the first line), a prose line, never a code or traceback row. A line that says the failure
is avoided or prevented is no statement of it.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import LazyPattern, lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

STATED_CONFIDENCE = 0.55
# Rows that are code, a traceback's, a shell's or a config's, not prose (a heading counts only on line 1)
CODE_START = ("File ", "Traceback", "raise ", "return ", "assert ", "^", "~", "at ", "$ ", ">>>", "--", "export ",
              "python", "vllm ", "import ", "from ", "def ", "{", "[pip", "[conda")
NOT_STATED_RE = lazy(r"\b(?:avoid\w*|prevent\w*|instead of|no longer|without|to reduce|reduc\w+ the risk|"
                     r"is not an?|isn't|wasn't|not caused by)\b"
                     # the report ruling it out ("Not OOM.", "no `CUDA out of memory` in worker logs")
                     r"|\bnot (?:an? )?OOM\b|\bno [`'\"]?(?:CUDA|GPU)[\s-]*(?:out[\s-]of[\s-]memory|OOM)"
                     # a timeout being configured ("set NCCL timeout to 3600", "increase the NCCL timeout")
                     r"|\b(?:set|setting|increas\w*|rais\w*|longer)\b[^.]{0,30}\btime[\s-]?out", re.I)

GPU_OOM_RE = lazy(r"\b(?:CUDA|GPU|VRAM|HIP|NPU|XPU)[\s-]*(?:out[\s-]of[\s-]memory|OOM(?:ed|s)?)\b"
                  r"|\bOutOfMemoryError\b"
                  r"|\bOOM(?:ed|s)?\b.{0,30}\b(?:on|in) (?:the |each |every )?(?:GPUs?|VRAM|device)\b"
                  # a bare "OOM" as the event of the run ("OOM when using <model>", "OOM occurs as ..."): in a
                  # vLLM report the device's; the host's is named by its killer (HOST_OOM_RE)
                  r"|\bOOM(?:ed|s)?\b(?![\s-]?kill)(?=\s+(?:when|while|during|occurs?|occurred|happens?|happened|"
                  r"error|issue|problem)\b)",
                  re.I)
NCCL_HANG_RE = lazy(r"\bNCCL\b.{0,60}?\b(?:hangs?|hung|hanging|stuck|freez\w*|deadlock\w*|timed[\s-]?out|"
                    r"time[\s-]?outs?|watchdog)\b", re.I)

# the phase the report names for its device OOM, on the OOM's line or a prose line beside it (a paragraph wraps:
# "... then crashes during CUDA-graph capture with" / "`torch.OutOfMemoryError`."): capture is the failing step
CAPTURE_PHASE_RE = lazy(r"\b(?:during|while|in|at|when)\s+(?:the\s+)?(?:(?:real|actual|full)\s+)?"
                        r"(?:CUDA[\s-]?)?graphs?[\s-]captur\w*"
                        r"|\b(?:during|while|when)\s+capturing\s+(?:the\s+)?(?:CUDA[\s-]?|cuda\s+)?graphs?\b", re.I)

# the host's kernel OOM killer (host RAM, not the GPU's): "OOM-killed", "killed by the OOM killer", "status 137"
HOST_OOM_RE = lazy(r"\bOOM[\s-]?kill(?:er|ed)\b|\bkilled by (?:the )?(?:kernel(?:'s)? |linux )?OOM\b"
                   r"|\b(?:exit(?:ed)?(?: with)?|status|exit code) 137\b", re.I)


def _prose(ln: Line) -> str:
    """The text of a line that states something in the reporter's words: no logger's level, no code row."""
    text = ln.text.strip()
    if ln.level or not text:
        return ""
    if text.startswith("#"):
        # a markdown heading is the thread's title only on the first line; elsewhere it may be a comment in code
        heading = ln.no == 1 and ln.text.startswith("#") and text[1:2] in (" ", "#")  # not an indented comment
        return text.lstrip("#").strip() if heading else ""
    if text.startswith(CODE_START) or "Traceback (most recent call last)" in text:
        return ""  # (a notebook's traceback head, "OutOfMemoryError    Traceback (most recent call last)")
    return text


def _phase_line(scan: Scan, i: int, phase: LazyPattern) -> tuple[Line, "re.Match[str]"] | None:
    """The prose line at i, or the one just before or after it, that names the phase (a wrapped paragraph)."""
    for j in (i, i - 1, i + 1):
        if 0 <= j < len(scan.lines):
            text = _prose(scan.lines[j])
            m = phase.search(text) if text else None
            if m is not None and not NOT_STATED_RE.search(text):
                return scan.lines[j], m
    return None


def _stated(rule_sig: str, rx: LazyPattern, needles: tuple[str, ...],
            phase: tuple[LazyPattern, str] | None = None):
    def check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
        joined = scan.joined_text()
        if not any(n in joined for n in needles):  # most logs: one substring search, no line loop
            return None
        rule = STATED[rule_sig]
        for i, ln in enumerate(scan.lines):
            text = _prose(ln)
            if not text:
                continue
            m = rx.search(text)
            if m is None or NOT_STATED_RE.search(text):
                continue
            evidence = [(ln, m)]
            if phase is not None:  # the report names the step that ran out: that step's rule says it
                named = _phase_line(scan, i, phase[0])
                if named is not None:
                    rule = STATED[phase[1]]
                    if named[0] is not ln:
                        evidence = sorted([named, (ln, m)], key=lambda hit: hit[0].no)
            return rule.diagnosis(scan, evidence, facts={"stated_by": "the report's own words"},
                                  confidence=STATED_CONFIDENCE)
        return None
    return check


RULES = [
    Rule(signature="oom.stated_in_report", category="gpu_oom",
         title="The report says the GPU ran out of memory (its error lines are not in this text)",
         fix="Check the full log for the out-of-memory traceback to see the phase; then lower "
             "--gpu-memory-utilization, --max-num-seqs or --max-num-batched-tokens (and --max-model-len), or for "
             "multimodal models --limit-mm-per-prompt; a model that does not fit needs more GPUs "
             "(--tensor-parallel-size) or a quantized checkpoint.",
         check=_stated("oom.stated_in_report", GPU_OOM_RE, ("OOM", "oom", "emory", "EMORY"),
                       phase=(CAPTURE_PHASE_RE, "cudagraph.oom_stated_in_report")), playbook="gpu-oom",
         confidence=STATED_CONFIDENCE, stated=True),
    # (no check of its own: oom.stated_in_report hands over when the report says the OOM came in graph capture)
    Rule(signature="cudagraph.oom_stated_in_report", category="cudagraph_capture",
         title="The report says the GPU ran out of memory during CUDA graph capture (its error lines are not in "
               "this text)",
         fix="Graph capture allocates after the KV cache has taken its share: lower --gpu-memory-utilization a "
             "step (0.98 -> 0.95), capture fewer sizes (--compilation-config '{{\"cudagraph_capture_sizes\": "
             "[1, 2, 4, 8]}}' or a smaller --max-num-seqs), or set --kv-cache-memory-bytes; --enforce-eager confirms "
             "it (no graphs, no capture memory).",
         check=lambda scan, env: None, playbook="cudagraph-capture", confidence=STATED_CONFIDENCE, stated=True),
    Rule(signature="distributed.hang_stated_in_report", category="distributed",
         title="The report says an NCCL collective hung or timed out (its error lines are not in this text)",
         fix="A rank stopped taking part in a collective. Rerun with NCCL_DEBUG=INFO to see the transport; try "
             "--disable-custom-all-reduce, then NCCL_P2P_DISABLE=1 (PCIe GPUs without working peer-to-peer, ACS/IOMMU "
             "on), and check that every rank's GPU is healthy (nvidia-smi, dmesg Xid).",
         check=_stated("distributed.hang_stated_in_report", NCCL_HANG_RE, ("NCCL", "nccl", "Nccl")),
         playbook="distributed", confidence=STATED_CONFIDENCE, stated=True),
    Rule(signature="environment.host_oom_stated_in_report", category="environment",
         title="The report says the host's OOM killer killed vLLM (host RAM, not GPU memory)",
         fix="Host RAM ran out: confirm with `dmesg -T | grep -i -B5 'killed process'`; add RAM or swap, lower "
             "--cpu-offload-gb / --swap-space, load fewer shards at once, and in a container raise its memory "
             "limit (Docker --memory, Kubernetes resources.limits.memory).",
         check=_stated("environment.host_oom_stated_in_report", HOST_OOM_RE, ("OOM", "oom", "137")),
         playbook="environment", confidence=STATED_CONFIDENCE, stated=True),
]
STATED = {r.signature: r for r in RULES}
