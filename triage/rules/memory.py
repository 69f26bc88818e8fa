"""GPU memory: the KV-cache budget, CUDA out-of-memory, CUDA-graph capture."""

from __future__ import annotations

import re
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.wrapped import read_wrapped_messages
from triage.rules.base import Rule
from triage.rules.budget import memory_budget, phase_of, util_that_fits

def _oom_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """The phase from the traceback (or vLLM's own words), and the first fix that phase calls for."""
    funcs: list[str] = []
    files: list[str] = []
    message = line.text
    for exc in scan.exceptions:
        if exc.line.no == line.no:
            funcs = [f.func for f in exc.frames]
            files = [f.file for f in exc.frames]
            message = exc.message
            cause = exc.caused_by
            while not funcs and cause is not None:  # vLLM re-raised it: the frames are on the cause
                funcs = [f.func for f in cause.frames]
                files = [f.file for f in cause.frames]
                cause = cause.caused_by
            break
    phase = phase_of(funcs, message)
    if phase is None:
        phase = _phase_from_progress(scan, line.no)
    b = memory_budget(scan)
    out: dict[str, Any] = {"phase": phase} if phase else {}
    out["phase_suffix"] = f" during {phase}" if phase else ""
    # vllm/v1/worker/gpu/ is Model Runner V2 (vllm/v1/worker/gpu_model_runner.py the legacy one): its memory
    # accounting differs (the capability table knows the releases where it reserved nothing for CUDA graphs)
    if any("/v1/worker/gpu/" in f for f in files) or any("Using V2 Model Runner" in ln.text for ln in scan.lines):
        out["model_runner"] = "v2"
    util = b.get("util")
    util_s = f" (now {util:g})" if util else ""
    seqs = (scan.facts.get("launch_args") or {}).get("max_num_seqs")
    n = seqs
    for ln in scan.lines:
        m2 = re.search(r"warming up (?:sampler|pooler)\b.{0,20}? with (\d+) dummy requests", ln.text) \
            if "warming up " in ln.text else None
        if m2:
            n = int(m2.group(1))
            break
    if phase in ("sampler warm-up", "pooler warm-up"):
        out["advice"] = (f"The weights and KV cache fit; the {phase.split()[0]}'s warm-up with {n or 'max_num_seqs'} dummy requests did "
                         f"not. Lower --max-num-seqs (e.g. {max(16, (n or 256) // 2)}), or leave more headroom outside "
                         f"the KV cache with a lower --gpu-memory-utilization{util_s}. A smaller model or more GPUs is "
                         "not needed.")
    elif phase == "CUDA graph capture":
        v2 = (" This vLLM runs Model Runner V2 (vllm/v1/worker/gpu/): VLLM_USE_V2_MODEL_RUNNER=0 switches to the legacy "
              "runner, which reserves memory for the graphs." if out.get("model_runner") == "v2" else "")
        out["advice"] = (f"The weights and KV cache fit; capturing CUDA graphs needed memory outside vLLM's budget. Lower "
                         f"--gpu-memory-utilization{util_s} by 0.03-0.05 to leave room for the graphs, or capture fewer "
                         "sizes (--max-num-seqs, or -cc.cudagraph_capture_sizes / --cuda-graph-sizes), or skip graphs "
                         "with --enforce-eager (slower decode). A smaller model or more GPUs is not needed." + v2)
    elif phase == "memory profiling" or phase == "warm-up":
        out["advice"] = ("The profiling batch (--max-num-batched-tokens tokens through the model) needed more activation "
                         "memory than was free: lower --max-num-batched-tokens (and --max-model-len), or for multimodal "
                         "models --limit-mm-per-prompt; free memory held by other processes.")
    elif phase == "KV cache allocation":
        out["advice"] = (f"Memory measured as free during profiling was gone when the KV cache was allocated: lower "
                         f"--gpu-memory-utilization{util_s}, and check for other processes on the GPU.")
    elif phase == "weight loading":
        out["advice"] = ("The weights alone do not fit this GPU at this parallel size: spread them with "
                         "--tensor-parallel-size / --pipeline-parallel-size, use a quantized checkpoint or a smaller "
                         "model, and free memory held by other processes.")
    else:
        out["advice"] = ("The log does not show which start-up phase ran out of memory: if it was while loading weights, "
                         "spread the model (--tensor-parallel-size) or quantize it; if after loading, lower "
                         "--max-num-seqs / --max-num-batched-tokens or --gpu-memory-utilization, or use --enforce-eager "
                         "if it failed while capturing CUDA graphs.")
    # ROCm builds of torch word the same failures with HIP: the walk then speaks of AMD's tools and settings
    if "HIP" in line.text or "hipError" in line.text:
        out["oom_device"] = "rocm"
    return out


def _phase_from_progress(scan: Scan, before: int) -> str | None:
    """The last start-up milestone vLLM logged before the failure, when the traceback says nothing."""
    phase = None
    for ln in scan.lines:
        if ln.no >= before:
            break
        t = ln.text
        if "apturing" in t and ("graph" in t.lower()):
            phase = "CUDA graph capture" if "finished" not in t else None
        elif "Loading weights took" in t or "Model loading took" in t or "Loading model weights took" in t:
            phase = "memory profiling"
    return phase


def _no_blocks_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """Why nothing was left for the KV cache, from the budget's numbers in the log."""
    b = memory_budget(scan)
    util, total, weights = b.get("util"), b.get("total_gib"), b.get("weights_gib")
    out: dict[str, Any] = {k: v for k, v in b.items() if k != "util_from"}
    parts = []
    if util and total:
        parts.append(f"vLLM may use {util:g} x {total:g} GiB = {util * total:.1f} GiB")
    elif util:
        parts.append(f"--gpu-memory-utilization is {util:g}")
    if weights is not None:
        parts.append(f"the weights take {weights:g} GiB")
    if b.get("activation_gib") is not None:
        parts.append(f"activations {b['activation_gib']:g} GiB")
    if b.get("kv_gib") is not None:
        parts.append(f"{b['kv_gib']:g} GiB is left for the KV cache")
    fits = util_that_fits(b)
    low = util is not None and util < 0.85
    if low and util is not None and (fits is None and weights is None or (fits is not None and fits > util)):
        out["cause"] = "utilization_too_low"
        out["headline"] = f"--gpu-memory-utilization {util:g} leaves no room for the KV cache after the model"
        out["advice"] = (f"The budget was set low ({'; '.join(parts)}): raise --gpu-memory-utilization"
                         + (f" to about {fits:g}" if fits else " (the default is 0.9)")
                         + "; if another process shares the GPU, the utilizations of all of them must add up to less than 1.")
    elif fits is None and weights is not None and total and weights > 0.8 * total:
        out["cause"] = "weights_fill_gpu"
        out["headline"] = f"The weights ({weights:g} GiB) fill this {total:g} GiB GPU: no memory is left for the KV cache"
        out["advice"] = ("The model does not fit with room for a KV cache: spread it over more GPUs "
                         "(--tensor-parallel-size), or use a quantized checkpoint or a smaller model.")
    elif fits is not None and util is not None and fits > util:
        out["cause"] = "utilization_too_low"
        out["headline"] = f"--gpu-memory-utilization {util:g} leaves no room for the KV cache after the model"
        out["advice"] = f"{'; '.join(parts)}: raise --gpu-memory-utilization to about {fits:g}."
    else:
        out["headline"] = "No GPU memory is left for the KV cache within vLLM's budget"
        out["advice"] = ((f"{'; '.join(parts)}. " if parts else "")
                         + "Raise --gpu-memory-utilization (the default is 0.9), or lower --max-num-batched-tokens / "
                           "--max-num-seqs (smaller activations); if the weights alone fill the GPU, use more GPUs "
                           "(--tensor-parallel-size) or a quantized checkpoint.")
    return out


# KV-cache integrations that change vLLM's memory accounting: when the launch names one and vLLM still ran its
# own free-memory check, the integration is not active (or its own process holds the memory).
KV_INTEGRATIONS = (("ENABLE_KVCACHED", "kvcached"), ("LMCache", "LMCache"),
                   ("lmcache", "LMCache"), ("OffloadingConnector", "vLLM's KV offloading connector"),
                   ("kv_transfer_config", "a KV connector (--kv-transfer-config)"),
                   ("kv_offloading", "KV offloading (--kv-offloading-size)"))


def _free_memory_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    out: dict[str, Any] = {}
    try:
        free, total, want = float(gd["free_gib"]), float(gd["total_gib"]), float(gd["want_gib"])
    except (KeyError, TypeError, ValueError):
        return {"advice": "Something else holds GPU memory: free it, or lower --gpu-memory-utilization."}
    held = total - free
    out["held_gib"] = round(held, 2)
    out["fits_util"] = max(0.05, int((free / total - 0.02) * 100) / 100)
    integration = None
    args = scan.facts.get("launch_args") or {}
    text = " ".join([str(args)] + [ln.text for ln in scan.lines if "KV" in ln.text or "kv" in ln.text
                                   or "LMCache" in ln.text or "KVCACHED" in ln.text][:200])
    for needle, name in KV_INTEGRATIONS:
        if needle in text:
            integration = name
            break
    if integration == "kvcached":
        out["integration"] = integration
        out["advice"] = (f"kvcached is enabled (ENABLE_KVCACHED), yet vLLM ran its own start-up check ({free:g} of {total:g} GiB free, "
                         f"{want:g} GiB wanted): kvcached's patch is not active in this vLLM, so the memory that "
                         "kvcached would share is counted as taken. Apply kvcached's vLLM integration in this "
                         "environment (its install step for this vLLM version), or lower --gpu-memory-utilization "
                         f"to {out['fits_util']:g}.")
    elif integration:
        out["integration"] = integration
        out["advice"] = (f"{held:.1f} GiB of {total:g} GiB was taken before vLLM started, and this launch uses "
                         f"{integration}: its own process or buffers can hold GPU memory (check `nvidia-smi`). Give it "
                         f"a GPU share and lower --gpu-memory-utilization to {out['fits_util']:g} or less, or free "
                         "what it holds.")
    else:
        out["advice"] = (f"{held:.1f} GiB of {total:g} GiB was already taken when vLLM started (another vLLM, a stale "
                         "worker, a notebook): free it (see `nvidia-smi` / `triage probe`), or lower "
                         f"--gpu-memory-utilization to {out['fits_util']:g} or less.")
    return out


def _capture_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """The innermost vLLM function of the traceback: the op that broke the capture, when the log has it."""
    for exc in scan.exceptions:
        if exc.line.no >= line.no - 2 and exc.frames:
            for fr in reversed(exc.frames):
                # model, layer, attention or collective code: the op itself, not the engine that drives capture
                if "/vllm/" in fr.file and any(p in fr.file for p in ("/model_executor/", "/attention/",
                                                                      "/distributed/", "/layers/")):
                    where = f"{fr.file.split('/vllm/', 1)[-1]} ({fr.func})"
                    return {"where": where, "where_suffix": f" in {where}"}
            break
    return {"where_suffix": ""}


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
         patterns=[r"max seq len \((?P<max_model_len>\d+)\),\s*\(?(?P<needed_gib>[\d.]+) Gi?B KV cache is needed, which is larger than the available KV cache memory \((?P<available_gib>-?[\d.]+) Gi?B\)(?:.*?estimated maximum model length is (?P<estimated>\d+))?"],
         facts=_kv_facts, playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="kv_cache.mamba_blocks_below_max_num_seqs", category="kv_cache_memory",
         title="max_num_seqs {max_num_seqs} exceeds the {blocks} Mamba state blocks this memory budget holds",
         fix="Hybrid (Mamba / linear-attention) models keep one state block per running sequence: lower "
             "--max-num-seqs to at most {blocks}, or raise --gpu-memory-utilization / lower --max-model-len.",
         # the message quoted from "exceeds ..." on (a paste that kept only its end) still names the blocks
         patterns=[r"(?:max_num_seqs \((?P<max_num_seqs>\d+)\) )?exceeds available Mamba cache blocks \((?P<blocks>\d+)\)"],
         facts=lambda m, line, scan: {} if m.group("max_num_seqs") else {"max_num_seqs": "(the configured value)"},
         playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="kv_cache.no_memory_for_blocks", category="kv_cache_memory",
         title="{headline}",
         fix="{advice}", facts=_no_blocks_facts,
         patterns=[r"No available memory for the cache blocks",
                   r"Insufficient memory for KV cache", r"available KV cache memory \(-?[\d.]+ GiB\).{0,40}(?:negative|not enough)"],
         playbook="kv-cache-memory", confidence=0.9),
    Rule(signature="kv_cache.free_memory_below_utilization", category="kv_cache_memory",
         title="Free GPU memory at start-up ({free_gib} GiB) is below what --gpu-memory-utilization {util} asks for",
         fix="{advice}", facts=_free_memory_facts,
         patterns=[r"Free memory on device(?: cuda:\d+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than desired GPU memory utilization \((?P<util>[\d.]+), (?P<want_gib>[\d.]+) GiB\)",
                   # vllm/v1/worker/utils.py 0.32+: the budget left after another process' weights on the GPU
                   r"Free memory on device(?: cuda:\d+)? \((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\) on startup is less than the engine's budget after excluding external process's weights \((?P<util>[\d.]+), (?P<want_gib>[\d.]+) GiB\)",
                   # the same figures retold in a paste or a commit message ("Free memory on cuda:0 (38.74/121.63 GiB)
                   # < desired utilization (0.35, 42.57 GiB)")
                   r"Free memory on (?:device )?(?:cuda:\d+ )?\((?P<free_gib>[\d.]+)/(?P<total_gib>[\d.]+) GiB\)(?: on startup)? (?:<|is less than) desired (?:GPU memory )?utilization \((?P<util>[\d.]+), (?P<want_gib>[\d.]+) GiB\)"],
         playbook="kv-cache-memory", confidence=0.95),
    Rule(signature="oom.cuda_out_of_memory", category="gpu_oom",
         title="CUDA out of memory{phase_suffix}",
         fix="{advice}",
         # ROCm builds of torch print the same messages with HIP for CUDA
         patterns=[r"(?:torch\.(?:cuda\.)?)?OutOfMemoryError: (?:CUDA|HIP) out of memory\.(?: Tried to allocate (?P<tried>[\d.]+ [KMG]iB)\. GPU (?P<gpu_index>\d+) has a total capacity of (?P<total>[\d.]+ [KMG]iB) of which (?P<free>[\d.]+ [KMG]iB) is free)?",
                   r"(?:CUDA|HIP) out of memory\. Tried to allocate (?P<tried>[\d.]+ [KMG]iB)",
                   r"(?:CUDA|HIP) error: out of memory", r"hipErrorOutOfMemory", r"CUBLAS_STATUS_ALLOC_FAILED", r"cudaErrorMemoryAllocation",
                   r"RuntimeError: CUDA out of memory",
                   # the driver API's name for it (c10's "CUDA driver error", Triton's launcher, cuda-python)
                   r"CUDA driver error: out of memory", r"Triton Error \[CUDA\]: out of memory",
                   r"CUDA_ERROR_OUT_OF_MEMORY",
                   # c10 CUDACachingAllocator's OOM report lists the GPU's processes through NVML
                   # (reportProcessMemoryInfo); where NVML cannot (MIG, vGPU, containers) its asserts replace the
                   # OOM message: an allocation failed all the same
                   r"NVML_SUCCESS == (?:r|DriverAPI::get\(\)->nvml\w+\(.{0,120}?\)) INTERNAL ASSERT FAILED at \"[^\"]*CUDACachingAllocator\.cpp"],
         facts=_oom_facts,
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
         title="CUDA graph capture failed{where_suffix}",
         fix="An op that cannot be captured ran during CUDA graph capture{where_suffix}: launch with --enforce-eager "
             "to confirm, then try -O/--compilation-config with fewer cudagraph sizes or another attention backend; "
             "report it upstream with the op name.", facts=_capture_facts,
         patterns=[r"operation not permitted when stream is capturing", r"cudaErrorStreamCaptureUnsupported",
                   r"cudaErrorStreamCaptureInvalidated", r"operation failed due to a previous error during capture",
                   r"CUDA graph capture (?:failed|is not supported)", r"cudaErrorStreamCaptureImplicit",
                   r"Cannot (?:capture|use) CUDA graph"],
         playbook="cudagraph-capture", confidence=0.9),
]


def _budget_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    out = _no_blocks_facts(m, line, scan)  # the same budget story as the error vLLM raises next
    if gd.get("kv_gib"):
        out["kv_budget"] = f"{gd['kv_gib']} GiB"
    elif gd.get("concurrency"):
        out["kv_budget"] = f"{gd['concurrency']}x of one max_model_len request"
        # room for part of one request is not "no room": the KV cache is smaller than max_model_len needs
        out["headline"] = (f"The KV cache left after memory profiling holds only {gd['concurrency']}x of one "
                           "max_model_len request")
        return out
    else:
        out["kv_budget"] = "0 blocks"
    out["headline"] = f"Memory profiling left no room for the KV cache (KV cache budget: {out['kv_budget']})"
    return out


# The cause stated only by INFO lines: vLLM's memory profiling found nothing left for the KV cache (a
# negative budget, zero blocks) before any error was raised; a pasted log is often cut right there.
RULES += [
    Rule(signature="kv_cache.negative_budget", category="kv_cache_memory",
         title="{headline}",
         fix="{advice}",
         patterns=[r"Available KV cache memory: (?P<kv_gib>-[\d.]+) ?GiB",  # V1 gpu_worker
                   r"the rest of the memory reserved for KV Cache is (?P<kv_gib>-[\d.]+) ?GiB",  # V0 worker
                   r"# (?:GPU|cuda|CUDA) blocks: (?:0|-\d+), # CPU blocks",  # V0 executor (-1 in the oldest releases)
                   r"GPU KV cache size: 0 tokens",  # V1 kv_cache_utils
                   # V0 executor: printed before it raises that the KV cache cannot hold one request
                   r"Maximum concurrency for [\d,]+ tokens per request: (?P<concurrency>0\.\d+)x",
                   # V1 scheduler / block pool: the assertion's source line under its frame
                   r"assert (?:num_gpu_blocks is not None and |isinstance\(num_gpu_blocks, int\) and )num_gpu_blocks > 0"],
         # secondary: the error vLLM raises next (when the log has it) says the same more exactly
         facts=_budget_facts, playbook="kv-cache-memory", confidence=0.85, secondary=True),
]

# a message a paste wrapped over lines still reaches every plain pattern rule here
read_wrapped_messages(RULES)
