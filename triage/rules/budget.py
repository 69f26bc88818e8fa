"""The numbers of vLLM's GPU memory budget, and the start-up phase a failure happened in, read from the log.

vLLM sizes the KV cache as: total GPU memory x --gpu-memory-utilization, minus the weights, the peak
activations of a profiling batch and non-torch memory (CUDA graphs in newer releases). It prints the
parts as it goes: V0 in one line ("the current vLLM instance can use total_gpu_memory (8.00GiB) x
gpu_memory_utilization (0.70) = 5.60GiB" and "model weights take 5.20GiB; ... KV Cache is -1.05GiB"),
V1 piece by piece ("Model loading took 15.2 GiB memory", "Available KV cache memory: -1.3 GiB"). The
memory rules explain a failure with these numbers where the log has them, and say less where not.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.logread.traceback import STEPS

V0_BUDGET_RE = lazy(r"total_gpu_memory \((?P<total>[\d.]+)\s*GiB\) x gpu_memory_utilization \((?P<util>[\d.]+)\)")
V0_PARTS_RE = lazy(r"model weights take (?P<weights>[\d.]+)\s*GiB; non_torch_memory takes (?P<non_torch>[\d.]+)\s*GiB; "
                   r"PyTorch activation peak memory takes (?P<activation>[\d.]+)\s*GiB; the rest of the memory "
                   r"reserved for KV Cache is (?P<kv>-?[\d.]+)\s*GiB")
WEIGHTS_RE = lazy(r"(?:Model loading took|Loading model weights took) (?P<weights>[\d.]+)\s*(?P<unit>GiB|GB)")
KV_AVAILABLE_RE = lazy(r"Available KV cache memory: (?P<kv>-?[\d.]+)\s*GiB")
TOTAL_RES = (
    lazy(r"total capacity of (?P<total>[\d.]+) GiB"),
    lazy(r"Free memory on device(?: \S+)? \([\d.]+/(?P<total>[\d.]+) GiB\)"),
    lazy(r"\b(?:H100|H200|H800|H20|A100|A800|L40S?|L4|A10G?|A40|A6000|B200|B300|GB200|RTX PRO 6000)[\w -]*?\b(?P<total>\d{2,3})\s?GB\b"),
)
UTIL_RES = (
    lazy(r"gpu_memory_utilization[=:(' ]+(?P<util>0?\.\d+|1(?:\.0+)?)\b"),
    lazy(r"--gpu-memory-utilization[= ](?P<util>0?\.\d+|1(?:\.0+)?)\b"),
)

# Where in start-up the failure happened: the innermost frame whose function names a step (one table,
# in triage.logread.traceback, for every reader of frames).
PHASES = STEPS
# The message itself, when the frames are not in the log (vLLM re-raises some OOMs with its own words).
PHASE_WORDS = [("warming up sampler", "sampler warm-up"), ("warming up pooler", "pooler warm-up"), ("capturing cudagraph", "CUDA graph capture"),
               ("CUDA graph", "CUDA graph capture")]


def phase_of(frames_funcs: list[str], message: str = "") -> str | None:
    """The start-up phase from the traceback's function names, else from the message."""
    funcs = set(frames_funcs)
    for fn, phase in PHASES:
        if fn in funcs:
            return phase
    # torch's OOM report says how much sits "in private pools (e.g., CUDA Graphs)" whatever the phase
    low = message.lower().replace("(e.g., cuda graphs)", "")
    for words, phase in PHASE_WORDS:
        if words.lower() in low:
            return phase
    return None


def _num(v: str) -> float:
    return float(v)


def memory_budget(scan: Scan) -> dict[str, Any]:
    """total_gib, util, weights_gib, activation_gib, non_torch_gib, kv_gib: whichever the log states."""
    out: dict[str, Any] = {}
    args = scan.facts.get("launch_args") or {}
    util = args.get("gpu_memory_utilization", scan.facts.get("gpu_memory_utilization"))
    if isinstance(util, (int, float)) and 0 < util <= 1:
        out["util"] = float(util)
        out["util_from"] = "launch"
    for ln in scan.lines:
        t = ln.text
        if "GiB" not in t and "GB" not in t and "utilization" not in t:
            continue
        m = V0_BUDGET_RE.search(t)
        if m:
            out.setdefault("total_gib", _num(m.group("total")))
            out.setdefault("util", _num(m.group("util")))
        m = V0_PARTS_RE.search(t)
        if m:
            for k in ("weights", "non_torch", "activation", "kv"):
                out[f"{k}_gib"] = _num(m.group(k))
        m = WEIGHTS_RE.search(t)
        if m and "weights_gib" not in out:
            w = _num(m.group("weights"))
            out["weights_gib"] = round(w * 1e9 / 2**30, 2) if m.group("unit") == "GB" else w
        m = KV_AVAILABLE_RE.search(t)
        if m:
            out["kv_gib"] = _num(m.group("kv"))
        for key, group, regexes in (("total_gib", "total", TOTAL_RES), ("util", "util", UTIL_RES)):
            if key not in out:
                m = next((m for rx in regexes if (m := rx.search(t))), None)
                if m:
                    out[key] = _num(m.group(group))
    if "total_gib" not in out:
        for g in scan.facts.get("gpus") or []:
            m = TOTAL_RES[2].search(str(g.get("name", ""))) if isinstance(g, dict) else None
            if m:
                out["total_gib"] = _num(m.group("total"))
                break
    return out


def util_that_fits(b: dict[str, Any], kv_room_gib: float | None = None) -> float | None:
    """The --gpu-memory-utilization that leaves some room (default: 5% of the GPU, at least 0.5 GiB) for the KV
    cache, from the logged parts; None when the parts are not in the log or no utilization up to 0.95 would do."""
    total, weights = b.get("total_gib"), b.get("weights_gib")
    if not total or weights is None:
        return None
    if kv_room_gib is None:
        kv_room_gib = max(0.5, 0.05 * total)
    need = weights + b.get("activation_gib", 0.0) + b.get("non_torch_gib", 0.0) + kv_room_gib
    util = need / total
    util = int(util * 20 + 0.999) / 20  # up to the next 0.05
    return util if util <= 0.95 else None
