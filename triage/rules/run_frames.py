"""A traceback cut inside the sampler's (or pooler's) warm-up, named by that step.

After the KV cache is allocated, the V1 worker warms up the sampler with max_num_seqs dummy requests
(gpu_worker.compile_or_warm_up_model -> gpu_model_runner._dummy_sampler_run; pooling models:
_dummy_pooler_run). The only error vLLM raises there itself is its out-of-memory wrapper ("CUDA out of memory
occurred when warming up sampler with N dummy requests", every release 0.8-0.33): with no library's frames
below the step (a FlashInfer or Triton sampling kernel failing is that library's failure), a paste that stops
there most likely ran out of GPU memory. Said as likely: the message is cut.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

WARMUP_FUNCS = {"_dummy_sampler_run", "_dummy_pooler_run", "_dummy_pooler_run_task"}
# the call's source line printed under the caller's frame, when the paste stops before the callee's frame
WARMUP_CALL_RE = lazy(r"^\s*(?:\w+\s*=\s*)?(?:self\.)?(?:model_runner\.)?(?P<func>_dummy_(?:sampler|pooler)_run)\(")
# libraries whose own kernels run inside the warm-up and fail in ways of their own
INNER_LIBRARIES = ("/flashinfer/", "/triton/", "/torch/_inductor/", "/deep_gemm/", "/vllm/model_executor/layers/")


def _warmup_step(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for tb in scan.cut_tracebacks:
        paths = ["/" + f.file.replace("\\", "/").lstrip("/") for f in tb.frames]
        if not any("/vllm/" in p for p in paths) or any(lib in p for p in paths for lib in INNER_LIBRARIES):
            continue
        step = next((f.func for f in reversed(tb.frames) if f.func in WARMUP_FUNCS), None)
        if step is None:
            lo = tb.line.no - 3 * len(tb.frames) - 2
            step = next((m.group("func") for ln in scan.lines if lo <= ln.no <= tb.line.no + 2
                         for m in [WARMUP_CALL_RE.match(ln.text)] if m), None)
        if step is None:
            continue
        what = "sampler" if "sampler" in step else "pooler"
        return Diagnosis(
            category="gpu_oom", signature="oom.warmup_step_cut",
            title=f"Start-up failed while warming up the {what} ({step}); most likely out of GPU memory",
            confidence=0.55, evidence=[Evidence(tb.line.no, tb.line.shown)],
            facts={"step": step, "category_guessed_from": "the warm-up step in the frames (the message is cut)"},
            fix=Fix(f"The traceback stops in vLLM's {what} warm-up, which runs max_num_seqs dummy requests after the "
                    "KV cache took its share of memory; the error vLLM raises there is its out-of-memory one. Lower "
                    "--max-num-seqs (the warm-up's batch) or --gpu-memory-utilization (to leave room outside the KV "
                    "cache); LoRA adapters (--max-loras, --max-lora-rank) add to it. Paste the whole log to confirm.",
                    "gpu-oom"),
            first_line=tb.line.no)
    return None


RULES = [
    Rule(signature="oom.warmup_step_cut", category="gpu_oom",
         title="Start-up failed while warming up the sampler", fix="", check=_warmup_step, confidence=0.55,
         playbook="gpu-oom"),
]
