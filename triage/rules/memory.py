"""GPU memory: the KV-cache budget, CUDA out-of-memory, CUDA-graph capture."""

from __future__ import annotations

import re
if False:  # for type checkers only (importing typing costs start-up time)
    from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

# Which phase of start-up ran out of memory, from function names in the traceback.
PHASES = [
    ("capture_model", "CUDA graph capture"), ("_dummy_sampler_run", "sampler warm-up"),
    ("profile_run", "memory profiling"), ("determine_available_memory", "memory profiling"),
    ("_dummy_run", "warm-up"), ("compile_or_warm_up_model", "warm-up"),
    ("load_weights", "weight loading"), ("load_model", "model loading"), ("initialize_cache", "KV cache allocation"),
    ("_allocate_kv_cache", "KV cache allocation"), ("initialize_kv_cache", "KV cache allocation"),
]


def _oom_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for exc in scan.exceptions:
        if exc.line.no == line.no and exc.frames:
            funcs = [f.func for f in exc.frames]
            for fn, phase in PHASES:
                if fn in funcs:
                    out["phase"] = phase
                    break
            break
    return out


def _kv_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """kv_capacity_tokens: the one number for the longest context that fits, for every message form
    (vLLM's own count or estimate where the message gives one, else scaled from the GiB it reports);
    the diagnosis, the playbook and the command all quote it."""
    gd = m.groupdict()
    out: dict[str, Any] = {}
    fit = gd.get("kv_capacity_tokens") or gd.get("estimated")
    out["suggestion_basis"] = "vLLM's own estimate"
    if not fit and gd.get("max_model_len") and gd.get("needed_gib") and gd.get("available_gib"):
        # vLLM gives no estimate (older releases; an estimate of 0): full-attention KV grows linearly with the length
        needed, avail = float(gd["needed_gib"]), float(gd["available_gib"])
        if needed > 0 and avail > 0:
            fit = int(int(gd["max_model_len"]) * avail / needed)
            out["suggestion_basis"] = "scaled from the KV memory available"
    if fit:
        out["kv_capacity_tokens"] = int(fit)
        out["suggested_max_model_len"] = int(fit)
    return out


def _free_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """The highest --gpu-memory-utilization that fits the memory that was free (two points of headroom)."""
    free, total = float(m.group("free_gib")), float(m.group("total_gib"))
    if total <= 0:
        return {}
    return {"fitting_util": max(0.05, int(free / total * 100) / 100 - 0.02)}


RULES = [
    Rule(signature="kv_cache.max_len_exceeds_capacity", category="kv_cache_memory",
         title="The KV cache cannot hold one request of max_model_len {max_model_len} tokens (room for {kv_capacity_tokens})",
         fix="Lower --max-model-len to at most {kv_capacity_tokens} (vLLM's own count), or free memory for the KV cache: raise "
             "--gpu-memory-utilization, use --kv-cache-dtype fp8, more GPUs (--tensor-parallel-size), or a "
             "quantized checkpoint.",
         patterns=[r"The model's max seq len \((?P<max_model_len>\d+)\) is larger than the maximum number of tokens that can be stored in KV cache \((?P<kv_capacity_tokens>\d+)\)"],
         facts=_kv_facts, playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="kv_cache.insufficient_for_max_len", category="kv_cache_memory",
         title="Not enough KV-cache memory for max_model_len {max_model_len}: {needed_gib} GiB needed, {available_gib} GiB available",
         fix="Lower --max-model-len to at most {kv_capacity_tokens} ({suggestion_basis}), or raise "
             "--gpu-memory-utilization, use --kv-cache-dtype fp8, or add GPUs.",
         patterns=[r"max seq len \((?P<max_model_len>\d+)\),\s*\(?(?P<needed_gib>[\d.]+) GiB KV cache is needed, which is larger than the available KV cache memory \((?P<available_gib>-?[\d.]+) GiB\)(?:.*?estimated maximum model length is (?P<estimated>\d+))?"],
         facts=_kv_facts, playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="kv_cache.mamba_blocks_below_max_num_seqs", category="kv_cache_memory",
         title="max_num_seqs {max_num_seqs} exceeds the {blocks} Mamba state blocks this memory budget holds",
         fix="Hybrid (Mamba / linear-attention) models keep one state block per running sequence: lower "
             "--max-num-seqs to at most {blocks}, or raise --gpu-memory-utilization / lower --max-model-len.",
         patterns=[r"max_num_seqs \((?P<max_num_seqs>\d+)\) exceeds available Mamba cache blocks \((?P<blocks>\d+)\)"],
         playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="kv_cache.no_memory_for_blocks", category="kv_cache_memory",
         title="No GPU memory is left for the KV cache after loading the model",
         fix="The weights and activations fill the GPU: raise --gpu-memory-utilization, lower --max-num-seqs / "
             "--max-num-batched-tokens, use a quantized checkpoint, or spread the model over more GPUs.",
         patterns=[r"No available memory for the cache blocks",
                   r"Insufficient memory for KV cache", r"available KV cache memory \(-?[\d.]+ GiB\).{0,40}(?:negative|not enough)"],
         playbook="kv-cache-memory", confidence=0.9),
    Rule(signature="kv_cache.free_memory_below_utilization", category="kv_cache_memory",
         title="Free GPU memory at start-up ({free_gib} GiB) is below what --gpu-memory-utilization {util} asks for",
         fix="Something else holds GPU memory (another vLLM, a stale process, a notebook): free it (see the "
             "processes in `nvidia-smi` / `triage probe`), or lower --gpu-memory-utilization below the free share.",
         patterns=[r"Free memory on device(?: cuda:\d+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want_gib>[\d.]+) GiB\)"],
         facts=_free_facts, playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="oom.cuda_out_of_memory", category="gpu_oom",
         title="CUDA out of memory{phase_suffix}",
         fix="The model does not fit this GPU's memory at this configuration: use a quantized checkpoint or a "
             "smaller model, spread it with --tensor-parallel-size, lower --max-model-len / --max-num-seqs, or "
             "--enforce-eager if it failed while capturing CUDA graphs; free memory held by other processes first.",
         patterns=[r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError: CUDA out of memory\.(?: Tried to allocate (?P<tried>[\d.]+ [KMG]iB)\. GPU (?P<gpu_index>\d+) has a total capacity of (?P<total>[\d.]+ [KMG]iB) of which (?P<free>[\d.]+ [KMG]iB) is free)?",
                   r"CUDA out of memory\. Tried to allocate (?P<tried>[\d.]+ [KMG]iB)",
                   r"CUDA error: out of memory", r"CUBLAS_STATUS_ALLOC_FAILED", r"cudaErrorMemoryAllocation",
                   r"RuntimeError: CUDA out of memory"],
         facts=lambda m, line, scan: _with_suffix(_oom_facts(m, line, scan)),
         playbook="gpu-oom", confidence=0.9),
    Rule(signature="cudagraph.mode_unsupported", category="cudagraph_capture",
         title="cudagraph_mode {mode} is not supported by the attention backend ({backend})",
         fix="This attention backend cannot run inside a {mode} CUDA graph: launch with "
             "--compilation-config '{{\"cudagraph_mode\": \"PIECEWISE\"}}' (or FULL_AND_PIECEWISE / FULL_DECODE_ONLY), "
             "pick another attention backend, or upgrade to a vLLM that downgrades the mode by itself.",
         # only the error: the warning form ends in "; setting cudagraph_mode=PIECEWISE" and is harmless
         patterns=[r"CUDAGraphMode\.(?P<mode>\w+) is not supported with (?P<backend>[\w.]+) backend \(support: AttentionCGSupport\.(?P<support>\w+)\); please try"],
         playbook="cudagraph-capture", confidence=0.9),
    Rule(signature="cudagraph.capture_failed", category="cudagraph_capture",
         title="CUDA graph capture failed",
         fix="An op that cannot be captured ran during CUDA graph capture: launch with --enforce-eager to confirm, "
             "then try -O/--compilation-config with fewer cudagraph sizes or another attention backend; report it "
             "upstream with the op name.",
         patterns=[r"operation not permitted when stream is capturing", r"cudaErrorStreamCaptureUnsupported",
                   r"cudaErrorStreamCaptureInvalidated", r"operation failed due to a previous error during capture",
                   r"CUDA graph capture (?:failed|is not supported)", r"cudaErrorStreamCaptureImplicit",
                   r"Cannot (?:capture|use) CUDA graph"],
         playbook="cudagraph-capture", confidence=0.9),
]


def _with_suffix(f: dict[str, Any]) -> dict[str, Any]:
    f["phase_suffix"] = f" during {f['phase']}" if f.get("phase") else ""
    return f
