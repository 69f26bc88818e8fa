"""gpt-oss's Harmony encoding, whose vocabulary is fetched at run time.

vLLM renders and parses gpt-oss chats through openai_harmony (`load_harmony_encoding(HARMONY_GPT_OSS)`, at
API-server start in some releases, at the first chat request in others). The Rust loader reads the o200k_base
tiktoken vocabulary from TIKTOKEN_ENCODINGS_BASE when set, else downloads it from openaipublic.blob.core.windows.net
into a cache (TIKTOKEN_RS_CACHE_DIR, default /tmp/tiktoken-rs-cache). Every failure there is one HarmonyError,
"error downloading or loading vocab file: <cause>": "failed to download or load vocab file" offline, behind a
firewall or a TLS-intercepting proxy; "an underlying IO error occurred while creating file ...: Permission denied
(os error 13)" when the shared /tmp cache belongs to another user. The model weights and tokenizer.json are not
involved, so the first is the tokenizer's missing vocabulary; the second is the host's directory permissions.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

VOCAB = r"error downloading or loading vocab file"
# the cache file could not be created: another user's /tmp/tiktoken-rs-cache, a read-only mount
NOT_WRITABLE = r"(?:Permission denied|os error 13|Read-only file system|os error 30)"


def _vocab_check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    if HARMONY_CACHE_NOT_WRITABLE.match_lines(scan) is not None:
        return None
    return HARMONY_VOCAB_UNAVAILABLE.match_lines(scan)


HARMONY_CACHE_NOT_WRITABLE: Rule = Rule(
    signature="environment.harmony_cache_not_writable", category="environment",
    title="openai_harmony cannot write its vocabulary cache (gpt-oss Harmony encoding)",
    fix="The tiktoken cache directory openai_harmony writes to is not writable by this user (the default "
        "/tmp/tiktoken-rs-cache is shared by everyone on the node): point it at a directory of your own, "
        "`export TIKTOKEN_RS_CACHE_DIR=$HOME/.cache/tiktoken-rs-cache`, or pre-stage the vocabulary and set "
        "TIKTOKEN_ENCODINGS_BASE.",
    patterns=[VOCAB + r".*" + NOT_WRITABLE],
    playbook="environment", confidence=0.88)

HARMONY_VOCAB_UNAVAILABLE: Rule = Rule(
    signature="tokenizer.harmony_vocab_unavailable", category="tokenizer_chat_template",
    title="openai_harmony could not download or load the o200k_base vocabulary gpt-oss's chat format needs",
    fix="The Harmony encoding downloads its tiktoken vocabulary at run time, which fails offline or behind a "
        "firewall/TLS proxy. Download it where there is network, `wget "
        "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken "
        "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken -P /etc/encodings`, mount that "
        "directory and start vLLM with `TIKTOKEN_ENCODINGS_BASE=/etc/encodings`.",
    patterns=[VOCAB],
    playbook="tokenizer-chat-template", confidence=0.85,
    check=_vocab_check)

RULES = [HARMONY_CACHE_NOT_WRITABLE, HARMONY_VOCAB_UNAVAILABLE]
