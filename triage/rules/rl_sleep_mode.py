"""vLLM's sleep-mode allocator running out of GPU memory, the colocated-trainer OOM of RL frameworks.

With `enable_sleep_mode` (verl's hybrid engine, OpenRLHF's --vllm_enable_sleep, TRL's vllm_enable_sleep_mode,
NeMo-RL colocated) vLLM allocates weights and KV cache through its CuMemAllocator (csrc/cumem_allocator.cpp):
`sleep()` unmaps them and `wake_up()` maps them again. When the trainer sharing the GPU still holds that memory,
the driver call fails and the extension formats it as "CUDA Error: %s at %s:%d" (file and line of the build:
"/workspace/csrc/cumem_allocator.cpp:62"). Since vLLM 0.7.3 (#12981) that is a RuntimeError; before, the C++ side
only printed it, followed by "invalid argument" lines for the same handle and a crash on the unmapped memory.
torch's own "CUDA out of memory" wording never appears, so the generic OOM rule does not see it.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

_WAKE_RE = lazy(r"\bwake_up\b|to wake up")


def _phase(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    funcs = [f.func for e in scan.exceptions if e.line.no == line.no for f in e.frames]
    waking = "wake_up" in funcs or any(_WAKE_RE.search(ln.text) for ln in scan.lines if ln.no <= line.no)
    return {"phase": "waking up from sleep mode" if waking else "allocating through the sleep-mode allocator"}


RULES = [
    Rule(signature="oom.sleep_mode_allocator", category="gpu_oom",
         title="CUDA out of memory in vLLM's sleep-mode allocator ({phase})",
         fix="vLLM could not map its weights/KV cache back onto a GPU the colocated trainer still uses. Lower the "
             "rollout's gpu_memory_utilization (verl actor_rollout_ref.rollout.gpu_memory_utilization, OpenRLHF "
             "--vllm_gpu_memory_utilization, TRL vllm_gpu_memory_utilization), free the trainer's memory before "
             "wake_up (offload parameters/optimizer, torch.cuda.empty_cache()), or wake weights and KV cache in two "
             "steps (wake_up(tags=['weights']), then ['kv_cache'], vLLM >= 0.8.3).",
         patterns=[r"CUDA Error: out of memory at \S*cumem_allocator\.cpp:\d+"],
         facts=_phase, playbook="gpu-oom", confidence=0.9),
]
