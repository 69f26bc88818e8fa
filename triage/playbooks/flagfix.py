"""The one launch change an engine-config refusal calls for, from the diagnosis' own facts.

vLLM refuses a configuration in many ways (about 90 rules), but the remedies come in a few kinds: set a
flag to a value the message names (`--max-lora-rank 32`), drop a flag that cannot combine with the rest
(`--enable-prefix-caching` on a Mamba model), set an environment variable, or change the request rather
than the server (a prompt longer than the context). The engine-config playbook has one step per kind;
this table says, per signature, which kind and which flag, and where the value comes from.

A value read from a log reaches the user only through `shlex.join`, as one argument: a log that holds
`8; rm -rf ~` shows it quoted, never as shell text to paste.
"""

from __future__ import annotations

import shlex
from typing import Any

# signature -> (kind, the change as argv-like elements). An element "{fact}" takes the diagnosis' fact
# (the change is left out when the fact is missing); "{fact+}" the fact rounded up to a power of two.
CHANGES: dict[str, tuple[str, tuple[str, ...]]] = {
    # a flag and the value the message names
    "config.lora_rank": ("set", ("--max-lora-rank", "{rank}")),
    "config.batched_tokens_lt_max_len": ("set", ("--max-num-batched-tokens", "{max_model_len}")),
    "config.mm_item_exceeds_batched_tokens": ("set", ("--max-num-batched-tokens", "{item_tokens+}")),
    "config.mm_item_exceeds_encoder_cache": ("set", ("--max-num-batched-tokens", "{item_tokens+}")),
    "lora.batched_tokens_limit": ("set", ("--max-num-batched-tokens", "{limit}")),
    "lora.added_vocab_over_limit": ("set", ("--lora-extra-vocab-size", "256")),
    "config.tp_exceeds_gpus": ("set", ("--tensor-parallel-size", "{gpus}")),
    "tpu.mesh_devices_short": ("set", ("--tensor-parallel-size", "{found}")),
    "serving.model_not_served": ("set", ("--served-model-name", "{name}")),
    "config.dbo_all2all_backend": ("set", ("--all2all-backend", "deepep_low_latency")),
    "config.fp8_e5m2_kv_quantized_checkpoint": ("set", ("--kv-cache-dtype", "fp8")),
    "config.turboquant_kv_hybrid_model": ("set", ("--kv-cache-dtype", "fp8")),
    "sampling.generation_config_top_k_zero": ("set", ("--generation-config", "vllm")),
    "engine_args.swap_space_too_large": ("set", ("--swap-space", "1")),
    "ascend.acl_graph_model_refused": ("set", ("--enforce-eager",)),
    "moe.redundant_experts_without_eplb": ("set", ("--enable-eplb", "--enable-expert-parallel")),
    "config.kv_connector_without_hma": ("set", ("--disable-hybrid-kv-cache-manager",)),
    "config.prefix_caching_unsupported": ("set", ("--no-enable-prefix-caching",)),
    "config.nixl_hybrid_prefix_caching": ("set", ("--no-enable-prefix-caching",)),
    "config.ascend_prefix_chunked_unsupported": ("set", ("--no-enable-prefix-caching",)),
    "ascend.torchair_chunked_prefill": ("set", ("--no-enable-chunked-prefill",)),
    # a flag to take out of the launch
    "engine_args.removed_flag_in_command": ("drop", ("{flag}",)),
    "config.hybrid_kv_cache_disabled": ("drop", ("--disable-hybrid-kv-cache-manager",)),
    "hyb.hma_off_unify_cut": ("drop", ("--disable-hybrid-kv-cache-manager",)),
    "config.mamba_align_needs_chunked_prefill": ("drop", ("--no-enable-chunked-prefill",)),
    "hyb.mamba_block_chunk_misaligned": ("drop", ("--mamba-block-size",)),
    "moe.backend_not_for_quant": ("drop", ("--moe-backend",)),
    "moe.eplb_unsupported": ("drop", ("--enable-eplb",)),
    "config.async_scheduling_unsupported": ("drop", ("--async-scheduling",)),
    "config.logits_processors_multi_step": ("drop", ("--num-scheduler-steps",)),
    "config.sleep_mode_unsupported_platform": ("drop", ("--enable-sleep-mode",)),
    "config.pp_unsupported_model": ("drop", ("--pipeline-parallel-size",)),
    "config.lora_unsupported_model": ("drop", ("--enable-lora",)),
    # an environment variable
    "config.mrv2_pooling_task_unsupported": ("env", ("VLLM_USE_V2_MODEL_RUNNER=0",)),
    "config.responses_store_disabled": ("env", ("VLLM_ENABLE_RESPONSES_API_STORE=1",)),
}

# Refusals of a request, not of the launch: the server is up, one request was turned away.
REQUEST_SIDE = {
    "config.prompt_too_long", "config.max_tokens_exceeds_context", "sampling.max_tokens_below_one",
    "config.logprobs_over_limit", "config.tool_choice_without_tools", "config.tools_empty_array",
    "config.tool_call_parse_failed", "config.request_token_ids_over_limit", "config.request_token_ids_device_index",
    "config.request_token_ids_out_of_vocab", "config.json_schema_integer_bound", "config.structured_output_unsupported",
    "config.structured_output_compile_crash", "config.mm_limit_exceeded", "sampling.best_of_refused",
    "sampling.params_invalid", "lora.adapter_not_found",
}


def _value(element: str, facts: dict[str, Any]) -> str | None:
    if not (element.startswith("{") and element.endswith("}")):
        return element
    name = element[1:-1]
    up = name.endswith("+")
    v = facts.get(name.rstrip("+"))
    if v is None or v == "" or isinstance(v, (dict, list)):
        return None
    s = str(v).strip()
    if up:
        try:
            n = int(s)
        except ValueError:
            return None
        p = 1
        while p < n:
            p *= 2
        return str(p)
    return s or None


def change_facts(signature: Any, facts: dict[str, Any]) -> dict[str, Any]:
    """`refusal_kind` (set | drop | env | request) and, for a launch change, `flag_change`: the change as
    a user types it, each element quoted for a POSIX shell."""
    sig = str(signature or "")
    if sig in REQUEST_SIDE:
        return {"refusal_kind": "request"}
    kind_change = CHANGES.get(sig)
    if kind_change is None:
        return {}
    kind, elements = kind_change
    argv = [_value(e, facts) for e in elements]
    if any(a is None for a in argv):
        return {}
    words = [a for a in argv if a is not None]
    if kind == "env":
        name, _, val = words[0].partition("=")
        return {"refusal_kind": "env", "flag_change": f"{name}={shlex.quote(val)}"}
    return {"refusal_kind": kind, "flag_change": shlex.join(words)}
