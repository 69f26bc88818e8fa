"""First launches of the newest model families: a tokenizer format newer than the installed mistral_common, and a
hybrid model's KV cache groups that the LMCache connector will not carry.

Mistral-format repos (Devstral, Magistral, Mistral Small/Medium 3.x, Ministral 3) ship `tekken.json` (or
`tokenizer.model.v*`) whose version field names the tokenizer generation (v11, v13, v15, ...). With
`--tokenizer-mode mistral` vLLM hands the file to mistral_common, whose Tekkenizer.from_file raises
`Unknown version: v13 in <path>. Make sure to use a valid version string: ['v1', 'v2', 'v3', 'v7', 'v11']` for a
version its TokenizerVersion enum does not list (the same wording in every release since 1.3), and whose SentencePiece
path raises `Unrecognized tokenizer filename: <path>.v13` / `Unrecognized tokenizer version: ...`: the installed
mistral_common predates the model (vLLM images pin their own copy, often older than a model released after them).

LMCache's vLLM integration (lmcache/integration/vllm/kv_cache_group_edits.py, 0.5+) validates the KV cache groups
before registering them and raises one aggregated `LMCache cannot serve this model's KV cache groups: group N:
MambaSpec with mamba_cache_mode='all' (only 'align' keeps reusable state snapshots); group M: CrossAttentionSpec`:
a Mamba / linear-attention hybrid (Qwen3-Next, Qwen3.5, Nemotron-H, Kimi Linear) is only served when vLLM caches
its recurrent state in 'align' mode (--enable-prefix-caching --mamba-cache-mode align), and an encoder-decoder
cache not at all. The vLLM-side refusal of the same setup (the connector turning the hybrid KV cache manager off)
is config.hybrid_kv_cache_disabled.

Models whose config.json names a model_type that vLLM loads through another config class (DeepSeek-V3.2's
deepseek_v32 and Kimi K2's kimi_k2 read as deepseek_v3) make transformers' PretrainedConfig warn "You are using a model
of type X to instantiate a model of type Y. This is not supported for all configurations of models and can yield
errors." on every healthy start: a note, never the failure.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule, next_row_text

_MODE = lazy(r"mamba_cache_mode='(?P<mode>\w+)'")


def _lmcache_groups(m: re.Match[str], line: Line, scan: Scan) -> dict[str, Any]:
    # The aggregated list may be wrapped onto the next row by the paste ("...groups: group 0:" / "MambaSpec with ...").
    text = m.group("groups") or ""
    if "Spec" not in text:
        text = f"{text} {next_row_text(scan, line.no)}"
    facts: dict[str, Any] = {"groups": text.strip().rstrip(".") or "see the log"}
    mode = _MODE.search(text)
    if mode:
        facts["mamba_cache_mode"] = mode.group("mode")
    facts["cross_attention"] = "CrossAttentionSpec" in text
    return facts


RULES = [
    Rule(signature="tokenizer.mistral_version_unknown", category="tokenizer_chat_template",
         title="The installed mistral_common does not know this model's tokenizer version ({version})",
         fix="The model's Mistral-format tokenizer (tekken.json / tokenizer.model.v*) is a newer generation than the "
             "installed mistral_common reads: upgrade it where vLLM runs (`pip install -U 'mistral_common[image]'`; "
             "in a vllm/vllm-openai image add that to a derived Dockerfile) or use the vLLM release the model card "
             "names, then start again with --tokenizer-mode mistral.",
         patterns=[r"Unknown version: (?P<version>v\d+\w*) in (?P<path>\S+?)\.(?:\s|$)"
                   r"(?:\s*Make sure to use a valid version string: (?P<known>\[[^\]]*\]))?",
                   # SentencePiece tokenizers carry the version in the file name (tokenizer.model.v13)
                   r"Unrecognized tokenizer filename: (?P<path>\S*tokenizer\.model\.(?P<version>v\d+\w*))",
                   r"Unrecognized tokenizer version: (?:TokenizerVersion\.)?(?P<version>v\d+\w*)"],
         playbook="tokenizer-chat-template", confidence=0.9),
    Rule(signature="config.lmcache_kv_groups_unsupported", category="engine_config",
         title="LMCache refuses this model's KV cache groups ({groups})",
         fix="LMCache only carries a Mamba / linear-attention hybrid (Qwen3-Next, Qwen3.5, Nemotron-H, Kimi Linear) "
             "whose recurrent state vLLM caches in 'align' mode: start vLLM with `--enable-prefix-caching "
             "--mamba-cache-mode align` (a vLLM that has the flag) next to the LMCache connector. An encoder-decoder "
             "cache (CrossAttentionSpec) cannot go through LMCache: drop --kv-transfer-config or use another "
             "connector (OffloadingConnector, MooncakeStoreConnector).",
         patterns=[r"LMCache cannot serve this model's KV cache groups:?\s*(?P<groups>.*)$"],
         facts=_lmcache_groups, playbook="engine-config", confidence=0.92),
    Rule(signature="harmless.config_model_type_mismatch", category="", harmless=True,
         title="transformers reads this model's config through a related config class (model type {given} as {used}); "
               "harmless on its own",
         fix="", patterns=[r"You are using a model of type (?P<given>[\w.-]+) to instantiate a model of type "
                           r"(?P<used>[\w.-]*)\. This is not supported for all configurations"]),
]
