"""A start-up log that ends inside one of vLLM's steps with no error at all: vLLM hung there (or the log was cut).

vLLM prints a progress line as each step of start-up begins and most say when they end: the distributed
set-up (NCCL, the custom all-reduce's P2P check, Ray's placement group), weight loading, torch.compile,
CUDA-graph capture; a started server says so ("Application startup complete"). The step whose start is the
last thing printed is where the process stopped. A hang is the common reason in three steps, each with a
well-known cause (GPUs that cannot reach each other, slow storage or host memory, a capture that never
returns), so the step is worth a guess, said as one: the same log is what a user sees who cut the paste
there. The messages are vLLM's, every release (parallel_state, pynccl, custom_all_reduce_utils, ray_utils,
model_runner / gpu_model_runner, weight_utils, compilation/backends and monitor, the API server).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from triage.lazyre import lazy
from triage.model import Diagnosis, Evidence, Fix

if TYPE_CHECKING:
    from triage.logread.scan import Scan

CONFIDENCE = 0.25  # the log cannot tell a hang from a paste cut at this line
TAIL = 40  # lines the stop may lie above the end (progress bars, warnings, a shell prompt)

DISTRIBUTED, LOADING, COMPILE, CAPTURE, PAST = "distributed", "loading", "compile", "capture", "past"
# The last of these lines decides where start-up was: a step started (and not ended) or past the steps.
MILESTONES = [
    (lazy(r"Application startup complete|Uvicorn running on|Starting vLLM API server|Available routes are"
          r"|init engine \(profile, create kv cache, warmup model\) took|Avg prompt throughput|Processed prompts"),
     PAST),
    (lazy(r"Graph capturing finished|graph capturing finished"), PAST),
    (lazy(r"Capturing CUDA graph|Capturing cudagraphs|Capturing the model for CUDA graphs"), CAPTURE),
    (lazy(r"torch\.compile takes [\d.]+ ?s in total|Compiling a graph for (?:dynamic|general) shape takes"), PAST),
    (lazy(r"Dynamo bytecode transform time|Compiling a graph for (?:dynamic|general) shape|Start compiling"
          r"|for vLLM's torch\.compile"), COMPILE),
    (lazy(r"Memory profiling takes|Available KV cache memory|# (?:GPU|CPU) blocks|GPU KV cache size"
          r"|Maximum concurrency for"), PAST),
    (lazy(r"(?:Loading (?:model )?weights|Model loading) took|checkpoint shards: +100%"), PAST),
    (lazy(r"Starting to load model|Loading (?:safetensors|pt) checkpoint shards|Using model weights format"
          r"|Fetching \d+ files"), LOADING),
    (lazy(r"generating GPU P2P access cache|reading GPU P2P access cache|vLLM is using nccl==|Found nccl from library"
          r"|message queue communication handle|Waiting for creating a placement group|NCCL INFO "
          r"|world_size=(?P<ws>\d+) rank=\d+|rank \d+ in world size (?P<ws2>\d+) is assigned"), DISTRIBUTED),
]
STEPS = {
    DISTRIBUTED: ("distributed", "the distributed set-up (NCCL, the GPUs' peer-to-peer check, Ray's placement group)",
                  "A start-up that hangs here is most often GPUs that cannot reach each other: run with NCCL_DEBUG=INFO "
                  "to see where NCCL waits; on hosts without working PCIe peer-to-peer (IOMMU or ACS enabled, VMs, "
                  "many consumer GPUs) try NCCL_P2P_DISABLE=1 and --disable-custom-all-reduce. With Ray, `ray status` "
                  "shows whether the GPUs the placement group waits for exist. If the paste was only cut here, "
                  "capture the whole output (`vllm serve ... 2>&1 | tee vllm.log`) and diagnose that."),
    LOADING: ("model_loading", "weight loading",
              "Loading a large checkpoint from network storage or a slow disk can take many minutes; if it never ends, "
              "check the disk's read speed and the host's free memory (`free -g`: a process the kernel kills for host "
              "memory prints only 'Killed'), and copy the weights to local disk. If the paste was only cut here, "
              "capture the whole output (`vllm serve ... 2>&1 | tee vllm.log`) and diagnose that."),
    COMPILE: ("triton_compile", "torch.compile",
              "The first torch.compile of a model can take many minutes (it is cached afterwards under "
              "~/.cache/vllm/torch_compile_cache); if it never ends, relaunch with --enforce-eager to serve without "
              "compilation and CUDA graphs, and check that the cache directory is on a local, writable disk. If the "
              "paste was only cut here, capture the whole output (`vllm serve ... 2>&1 | tee vllm.log`)."),
    CAPTURE: ("cudagraph_capture", "CUDA-graph capture",
              "Relaunch with --enforce-eager: if the server then starts, capture is what hangs. With tensor "
              "parallelism try --disable-custom-all-reduce (its buffers are registered as capture ends), or fewer "
              "capture sizes (--max-num-seqs). If the paste was only cut here, capture the whole output "
              "(`vllm serve ... 2>&1 | tee vllm.log`) and diagnose that."),
}


def progress(text: str) -> bool:
    """Whether a line is one of vLLM's start-up progress lines (a step begun or done)."""
    return any(rx.search(text) is not None for rx, _ in MILESTONES)


def stalled(scan: Scan) -> Diagnosis | None:
    """Where a start-up with no error stopped, when that step is one where vLLM is known to hang."""
    if not any(ln.level for ln in scan.lines):
        return None  # a fragment without vLLM's own lines (a progress bar quoted alone) says nothing of a hang
    state, last = None, None
    for ln in scan.lines:
        for rx, step in MILESTONES:
            m = rx.search(ln.text)
            if m is None:
                continue
            if step == DISTRIBUTED and (m.group("ws") or m.group("ws2") or "2") == "1":
                break  # one process: nothing to wait for
            state, last = step, ln
            break
    if state is None or state == PAST or last is None or scan.lines_total - last.no > TAIL:
        return None
    category, step, fix = STEPS[state]
    name = step.split(" (")[0]
    return Diagnosis(
        category=category, signature="generic.stopped_during_startup",
        title=f"The start-up stops during {name} with no error: it hung there, or the log was cut",
        confidence=CONFIDENCE, evidence=[Evidence(last.no, last.shown)],
        facts={"step": name, "category_guessed_from": f"the step it stopped in ({step})", "category_decided": False},
        explanation=[f"category {category}: likely, because the last thing vLLM printed is the start of {step}, "
                     "with no error and no sign that the server started"],
        fix=Fix(fix, None), first_line=last.no)
