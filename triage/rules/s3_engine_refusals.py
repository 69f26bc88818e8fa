"""Engine features vLLM refuses for this process, platform or model runner before serving starts.

Sleep mode (`enable_sleep_mode`, which RL frameworks such as verl, TRL and OpenRLHF turn on for colocated rollout):
- ModelConfig refuses it where the platform has no sleep-mode allocator: "Sleep mode is only supported on CUDA
  devices." (config.py, 0.7.x) and "Sleep mode is not supported on current platform." (0.8 .. 0.33, config/model.py,
  a pydantic "Value error, ..." from 0.10). Users and framework threads retell it as "sleep mode is not supported for
  AMD devices / on ROCm".
- The worker's weights memory pool is a per-process singleton (CuMemAllocator, vllm-ascend's CaMemAllocator):
  a second engine with sleep mode in the same process trips
  `AssertionError: Sleep mode can only be used for one instance per process.` (gpu_worker.py, 0.7.3 .. 0.33).

Model Runner V2's pooling runner (vllm/v1/worker/gpu/pool/pooling_runner.py, 0.2x) accepts only some pooling tasks:
"Model Runner V2 supports pooling tasks [...], but this model selects 'embed&token_classify' from [...]. Set ..."
and "... but this model supports [...]. Set VLLM_USE_V2_MODEL_RUNNER=0 to use this model." Both are the runner's
limit, not the model's: the legacy runner serves the model.

A multimodal item larger than the step's token budget (v1/core/encoder_cache_manager.py, 0.10+): when chunked MM
input is off (vLLM forces --disable-chunked-mm-input for bidirectional-attention encoders such as Gemma 3/4), one
image or audio item must fit in max_num_batched_tokens: "Chunked MM input disabled but max_tokens_per_mm_item (2496)
is larger than max_num_batched_tokens (2048). Please increase max_num_batched_tokens."

Dual-batch overlap (--enable-dbo, micro-batching) runs only on DeepEP-style all2all backends (config/vllm.py): "Microbatching
currently only supports the deepep_low_latency all2all backend. ... set the VLLM_ALL2ALL_BACKEND environment variable"
(0.11), "... the deepep_low_latency and deepep_high_throughput all2all backend. X is not supported. To fix use
--all2all-backend=..." (0.12 .. 0.17), "... deepep_high_throughput, and nixl_ep all2all backends." (later).
Sequence parallelism on vllm-ascend (platform.py) needs TP > 1, and expert parallelism on MoE models: "Sequence
parallelism is only supported when tp_size > 1.", "Sequence parallelism requires enable_expert_parallel=True for MoE
models."
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.wrapped import read_wrapped_messages, wrapped_texts

MM_ITEM_PATTERN = (r"Chunked MM input disabled but max_tokens_per_mm_item \((?P<item_tokens>\d+)\) is larger than "
                   r"max_num_batched_tokens \((?P<budget>\d+)\)")

RULES = [
    Rule(signature="config.sleep_mode_unsupported_platform", category="engine_config",
         title="Sleep mode (enable_sleep_mode) is not available on this platform{where}",
         fix="This vLLM has no sleep-mode allocator for this device: start the engine without enable_sleep_mode "
             "(`--enable-sleep-mode` off; in verl `actor_rollout_ref.rollout.enable_sleep_mode=False` and "
             "`actor_rollout_ref.rollout.free_cache_engine=False`), or use a vLLM build whose platform supports sleep "
             "mode (CUDA, or a newer release/plugin for ROCm or Ascend).",
         patterns=[r"Sleep mode is (?:only supported on CUDA devices|not supported on current platform)",
                   # a thread's own wording of the same refusal ("... for AMD devices", "... on ROCm")
                   r"(?i)\bsleep[ _]mode (?:is )?not supported (?:for|on) (?P<device>AMD|ROCm|NPU|XPU|TPU|CPU|Ascend)\b"],
         facts=lambda m, line, scan: {"where": f" ({m.group('device')})" if m.groupdict().get("device") else ""},
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.sleep_mode_one_instance", category="engine_config",
         title="Sleep mode allows one vLLM engine per process, and a second one was created",
         fix="vLLM's sleep-mode memory pool is one per process: create only one LLM/engine with enable_sleep_mode in "
             "a process (start the other engine in its own process, e.g. a separate Ray actor), or turn sleep mode off "
             "for the extra engines; delete a finished engine before building the next.",
         patterns=[r"Sleep mode can only be used for one instance per process"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.mrv2_pooling_task_unsupported", category="engine_config",
         title="Model Runner V2 does not run this model's pooling task ({task})",
         fix="The V2 model runner's pooling support is narrower than the model's: start with "
             "`VLLM_USE_V2_MODEL_RUNNER=0` (the V1 runner serves it), or pick a task V2 supports for this model "
             "(one of {supported}) if your requests only need that.",
         patterns=[r"Model Runner V2 supports pooling tasks (?P<supported>\[[^\]]{0,200}\]), but this model "
                   r"(?:selects (?P<task>'[^']{1,60}')|supports (?P<tasks>\[[^\]]{0,200}\]))"],
         facts=lambda m, line, scan: {"task": m.group("task") or f"it supports {m.group('tasks')}"},
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.dbo_all2all_backend", category="engine_config",
         title="Dual-batch overlap (--enable-dbo) needs a DeepEP all2all backend{backend_note}",
         fix="Micro-batching runs only on the all2all backends the message lists: start with "
             "`--all2all-backend deepep_low_latency` (or deepep_high_throughput; on 0.11 set "
             "`VLLM_ALL2ALL_BACKEND=deepep_low_latency`) with the DeepEP kernels installed, or drop --enable-dbo.",
         patterns=[r"Microbatching currently only supports the (?P<supported>[\w, ]{3,120}?) all2all backends?"
                   r"(?:\. (?P<backend>[\w-]+) is not supported)?",
                   # the message's first row when a paste broke it after the first backend's name
                   r"Microbatching currently only supports the deepep_\w+,?\s*$"],
         facts=lambda m, line, scan: {"backend_note": f" ({m.groupdict()['backend']} is not one)"
                                      if m.groupdict().get("backend") else ""},
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.sequence_parallel_refused", category="engine_config",
         title="Sequence parallelism cannot run with these parallel sizes ({reason})",
         fix="Sequence parallelism splits activations across tensor-parallel ranks: enable it only with "
             "--tensor-parallel-size above 1 and, for a MoE model, with --enable-expert-parallel; otherwise turn it "
             "off (the pass/flag that enabled it, e.g. the compilation config's enable_sp or the platform's "
             "sequence-parallel switch).",
         patterns=[r"Sequence parallelism (?P<reason>is only supported when tp_size > 1|requires "
                   r"enable_expert_parallel=True for MoE models)"],
         playbook="engine-config", confidence=0.88),
    Rule(signature="config.mm_item_exceeds_batched_tokens", category="engine_config",
         title="One multimodal item ({item_tokens} tokens) does not fit --max-num-batched-tokens ({budget})",
         fix="Chunked multimodal input is off for this model, so one image/audio item must fit in a step: start with "
             "`--max-num-batched-tokens {item_tokens}` or more (a power of two such as 4096 or 8192), or lower the "
             "item size (smaller images, --mm-processor-kwargs) or drop the modality (--limit-mm-per-prompt).",
         patterns=[MM_ITEM_PATTERN], playbook="engine-config", confidence=0.9),
]

# a message a paste wrapped over lines still reaches every pattern here
read_wrapped_messages(RULES)

MM_ITEM_RULE = RULES[-1]
MM_ITEM_RE = lazy(MM_ITEM_PATTERN)


def _mm_item(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    """The budget message is long: pastes and prose wrap it ("... is larger" / "than max_num_batched_tokens"),
    with or without the ValueError in front, so it is read joined with the rows after it."""
    d = MM_ITEM_RULE.match_lines(scan)
    if d is not None:
        return d
    for ln, text in wrapped_texts(scan, "max_tokens_per_mm_item ("):
        m = MM_ITEM_RE.search(text)
        if m is not None:
            return MM_ITEM_RULE.diagnosis(scan, [(ln, m)])
    return None


MM_ITEM_RULE.check = _mm_item
