"""Version gates the Chinese-ecosystem models meet in vLLM and transformers.

- vLLM dispatches MiniCPM-V by the checkpoint's `version` (vllm/model_executor/models/minicpmv.py) and refuses one
  it has no class for: "Currently, MiniCPMV only supports versions 2.0, 2.5, and 2.6" (0.5.4 .. 0.10.0), then
  "Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)" (the supported list is
  built from _SUPPORT_VERSION since 0.10.1; 4.0 arrived in 0.10.1, 4.5 in 0.10.2). The model is newer than vLLM.
- vLLM's max-length check (config.py _get_and_verify_max_len, 0.2 .. 0.6) asserts `"factor" in rope_scaling`
  for any rope_scaling it does not special-case: a model whose config uses a newer RoPE form, or a config a newer
  transformers rewrote (4.45.0.dev0 turned Qwen2-VL's `mrope` into `default`), has none. The log shows only the
  source line and a bare AssertionError.
- transformers 4.34 made PreTrainedTokenizer.__init__ add special tokens, which calls get_vocab() before the
  remote tokenizers of ChatGLM2/3, Baichuan, InternLM or Yayi have loaded their SentencePiece model: their
  tokenization_*.py then fails with "'ChatGLMTokenizer' object has no attribute 'tokenizer'" (or 'sp_model',
  'sp_tokenizer'), or a paste ends inside get_vocab under _add_tokens.
- transformers 4.45 passes padding_side to _pad(): "ChatGLM4Tokenizer._pad() got an unexpected keyword argument
  'padding_side'" from GLM-4 / ChatGLM3 remote tokenizers written before it.
- A model newer than vLLM: transformers too old for the model type and, once upgraded, clashing with a config vLLM
  registers itself ("'aimv2' is already used by a Transformers config") — vLLM is the one to upgrade.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule


def _minicpmv_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    got = f"{m.group('major')}.{m.group('minor')}" if m.group("major") else ""
    return {"version": got, "got": f" (MiniCPM-V {got})" if got else ""}


MINICPMV_VERSION = Rule(
    signature="model_support.minicpmv_version_unsupported", category="model_support",
    title="This vLLM does not know the checkpoint's MiniCPM-V version{got}; it supports {supported}",
    fix="vLLM picks the MiniCPM-V implementation by the checkpoint's version and this release predates it: upgrade "
        "vLLM (`pip install -U vllm`; MiniCPM-V 4.0 needs v0.10.1, 4.5 needs v0.10.2 or later), or serve a MiniCPM-V "
        "version this release lists.",
    patterns=[r"Currently, MiniCPMV only supports versions (?P<supported>\d+\.\d+(?:,? (?:and )?\d+\.\d+)*)"
              r"(?:\. Got version: \((?P<major>\d+), (?P<minor>\d+)\))?"],
    facts=_minicpmv_facts, playbook="model-support", confidence=0.9)

ROPE_FACTOR = Rule(
    signature="model_support.rope_scaling_factor_missing", category="model_support",
    title="This vLLM's max-length check needs a rope_scaling 'factor' the model's config does not have",
    fix="This vLLM asserts that the config's rope_scaling has a factor, and the model's RoPE form (or the form the "
        "installed transformers rewrote it into) has none: install the transformers version your vLLM release pins "
        "or that the model's README names (Qwen2-VL on vLLM 0.6.1: the commit Qwen pins), or upgrade vLLM to a "
        "release that supports the model.",
    patterns=[r"assert [\"']factor[\"'] in rope_scaling"],
    playbook="model-support", confidence=0.85)

# The attributes remote SentencePiece tokenizers set in __init__ after calling super().__init__() (ChatGLM2/3:
# self.tokenizer, Baichuan/InternLM/Yayi: self.sp_model, ChatGLM-6B: self.sp_tokenizer).
REMOTE_ATTR_RE = lazy(r"'(?P<cls>\w+Tokenizer)' object has no attribute '(?P<attr>tokenizer|sp_model|sp_tokenizer)'")
# Tokenizer classes that exist only as remote code (a fast or in-library tokenizer of that name is another story).
REMOTE_TOKENIZERS = ("ChatGLMTokenizer", "ChatGLM4Tokenizer", "BaichuanTokenizer", "InternLMTokenizer",
                     "InternLM2Tokenizer", "YayiTokenizer", "XverseTokenizer", "AquilaTokenizer", "OrionTokenizer")
TOKENIZER_FIX = ("transformers 4.34 made the tokenizer's __init__ call get_vocab() before the model's own tokenizer "
                 "code (ChatGLM2/3, Baichuan, InternLM, ...) has loaded its vocabulary: replace tokenization_*.py in "
                 "the model directory with the current one from the model's repository, or pin transformers below "
                 "4.34 (`pip install transformers==4.33.2`) if your vLLM release accepts it.")


def _remote_tokenizer(scan: Scan) -> Diagnosis | None:
    joined = scan.joined_text()
    if "object has no attribute" in joined:
        for ln in scan.lines:
            m = REMOTE_ATTR_RE.search(ln.text)
            if m and (m.group("cls") in REMOTE_TOKENIZERS or "transformers_modules" in joined):
                return Diagnosis(
                    category="tokenizer_chat_template", signature=REMOTE_TOKENIZER.signature,
                    title=f"The model's own tokenizer code ({m.group('cls')}) does not run on this transformers",
                    confidence=0.9, evidence=[Evidence(ln.no, ln.shown)],
                    facts={"tokenizer": m.group("cls"), "attribute": m.group("attr")},
                    fix=Fix(TOKENIZER_FIX, "tokenizer-chat-template"), first_line=ln.no)
    # A paste that ends inside the remote tokenizer's get_vocab/vocab_size, entered from transformers' _add_tokens
    # (the message itself cut off).
    for exc in [*scan.exceptions, *scan.cut_tracebacks]:
        names = [(f.file, f.func) for f in exc.frames]
        for i, (file, func) in enumerate(names[:-1]):
            if func != "_add_tokens" or not file.endswith("tokenization_utils.py"):
                continue
            later = [(f, fn) for f, fn in names[i + 1:] if "transformers_modules" in f and "tokenization" in f]
            if later:
                where = later[0][0].rsplit("/", 1)[-1]
                line = exc.line if exc.line is not None else scan.lines[-1]
                return Diagnosis(
                    category="tokenizer_chat_template", signature=REMOTE_TOKENIZER.signature,
                    title=f"The model's own tokenizer code ({where}) fails inside transformers' _add_tokens",
                    confidence=0.8, evidence=[Evidence(line.no, line.shown)],
                    facts={"file": where, "function": later[0][1]},
                    fix=Fix(TOKENIZER_FIX, "tokenizer-chat-template"), first_line=line.no)
    return None


REMOTE_TOKENIZER = Rule(
    signature="tokenizer.remote_code_transformers_434", category="tokenizer_chat_template",
    title="The model's own tokenizer code does not run on this transformers", fix=TOKENIZER_FIX,
    check=lambda scan, env: _remote_tokenizer(scan), playbook="tokenizer-chat-template", confidence=0.9)

# A model newer than the installed vLLM pinches transformers from both sides: the release vLLM pins does not know
# the model type (configuration_auto: "model type `qwen3_vl` but Transformers does not recognize this
# architecture"), and a release that knows it also ships a config vLLM registers itself (vllm/transformers_utils
# configs -> AutoConfig.register: "'aimv2' is already used by a Transformers config, pick another name"). Both in one
# log mean no transformers version helps: vLLM is what is too old.
UNKNOWN_TYPE_RE = lazy(r"model type [`'\"]?(?P<model_type>[\w.-]+)[`'\"]?\s+but [Tt]ransformers does not recognize")
CONFIG_CLASH_RE = lazy(r"'(?P<name>[\w.-]+)' is already used by a Transformers config")


def _vllm_older_than_model(scan: Scan) -> Diagnosis | None:
    joined = scan.joined_text()
    if "does not recognize" not in joined or "is already used by a Transformers config" not in joined:
        return None
    unknown = next(((ln, m) for ln in scan.lines if (m := UNKNOWN_TYPE_RE.search(ln.text))), None)
    clash = next(((ln, m) for ln in scan.lines if (m := CONFIG_CLASH_RE.search(ln.text))), None)
    if unknown is None or clash is None:
        return None
    model_type, name = unknown[1].group("model_type"), clash[1].group("name")
    return Diagnosis(
        category="model_support", signature=VLLM_OLDER.signature,
        title=f"This vLLM is older than the model ({model_type}): the transformers it pins does not know the model, "
              f"a newer one clashes with vLLM's own '{name}' config",
        confidence=0.95, evidence=[Evidence(ln.no, ln.shown) for ln, _ in sorted((unknown, clash), key=lambda x: x[0].no)],
        facts={"model_type": model_type, "config_clash": name},
        fix=Fix(VLLM_OLDER.fix, "model-support"), first_line=min(unknown[0].no, clash[0].no))


VLLM_OLDER = Rule(
    signature="model_support.vllm_older_than_model", category="model_support",
    title="This vLLM is older than the model",
    fix="No transformers version fixes this: upgrade vLLM to a release that supports the model (`pip install -U vllm`, "
        "which installs the transformers it pins; Qwen3-VL needs vLLM 0.11 or later) and keep transformers at that pin.",
    check=lambda scan, env: _vllm_older_than_model(scan), playbook="model-support", confidence=0.95)

# transformers 4.45 passes padding_side to the tokenizer's _pad(); remote tokenizers that override _pad with the old
# signature (ChatGLM3, GLM-4's tokenization_chatglm.py before their update) fail on the first padded encode.
REMOTE_PAD = Rule(
    signature="tokenizer.remote_code_pad_padding_side", category="tokenizer_chat_template",
    title="The model's own tokenizer code{cls_in} does not take transformers 4.45's padding_side",
    fix="transformers 4.45 passes padding_side to the tokenizer's _pad(), which the model's tokenization_*.py overrides "
        "with the old signature: replace that file in the model directory with the current one from the model's "
        "repository (ChatGLM3 and GLM-4 were updated). Pinning transformers below 4.45 (4.44.2) only works with a vLLM "
        "that accepts it (vLLM 0.6.2 and later require 4.45+).",
    patterns=[r"(?:(?P<cls>\w+Tokenizer)\.)?_pad\(\) got an unexpected keyword argument 'padding_side'"],
    facts=lambda m, line, scan: {"cls_in": f" ({m.group('cls')})" if m.group("cls") else ""},
    playbook="tokenizer-chat-template", confidence=0.9)

RULES = [MINICPMV_VERSION, ROPE_FACTOR, REMOTE_TOKENIZER, VLLM_OLDER, REMOTE_PAD]
