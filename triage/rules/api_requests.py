"""Failures of one request while vLLM serves: what the OpenAI-compatible server refuses, and what breaks mid-request.

These happen after a clean start-up. The server answers 400/404 (or 500) with vLLM's message in a JSON body,
and clients (openai SDK, LangChain4j, LiteLLM, TRL) paste that body rather than the server log:

- the output budget: serving_engine / renderer check `max_tokens + prompt <= max_model_len` and answer
  "'max_tokens' or 'max_completion_tokens' is too large: N. This model's maximum context length is M tokens and
  your request has P input tokens (N > M - P)." (0.10+; 0.3-0.9 said "However, you requested ... in the
  completion", which config.prompt_too_long reads);
- tool choice without tools: the request validator (protocol.py) refuses `tool_choice` when `tools` is absent
  ("When using `tool_choice`, `tools` must be set.", "Tools cannot be empty if tool choice is set to a specific
  tool."), which LiteLLM's hosted_vllm provider sent on every call (litellm#6228);
- logprobs beyond the server's cap: --max-logprobs (default 20) bounds `logprobs`, `top_logprobs` and
  `prompt_logprobs` ("Requested sample|prompt logprobs of N, which is greater than max allowed: M", V1; "Cannot
  request more than N logprobs.", V0, where 0.4.x's OpenAI server also capped at 5 whatever --max-logprobs said
  until PR 5312), and the request validator refused -1 ("`prompt_logprobs` must be a positive value.") until
  PR 24956 made it mean the whole vocabulary;
- TRL's GRPO server mode talks to `trl vllm-serve`, whose extra routes (/get_world_size/, /init_communicator/)
  a plain `vllm serve` lacks: trl's vllm_client raises "Request failed: 404, {"detail":"Not Found"}";
- a prompt token id above the vocabulary: the input processor raises "Token id N is out of vocabulary" (the
  same words since V0's llm_engine); since vllm PR 22471 the bound is the larger of the tokenizer's last id and
  the model's vocab size, before it the tokenizer's alone, so Qwen's padded ids (151669..151935) sampled in one
  RL turn and fed back as the next prompt were refused;
- a tool-call parser that cannot read the model's output: every parser logs "Error in extracting tool call from
  response." (streaming: "Error trying to handle streaming tool call.") and returns the text as content, so the
  client sees no tool_calls (a parser for another format, e.g. hermes for Qwen3-Coder's XML-style calls);
- the incremental detokenizer given an id the tokenizer cannot decode (a negative or garbage sampled id):
  tokenizers' DecodeStream raises OverflowError "out of range integral type conversion attempted", and since
  tokenizers 0.22.1 TypeError "argument 'id': StreamInput must be either an integer or a list of integers",
  which vLLM 0.11.0's guard (OverflowError only) let through (vllm PR 26445 catches both);
- a message order the Mistral tokenizer refuses (--tokenizer-mode mistral): mistral_common's validator raises
  InvalidMessageStructureException "Unexpected role 'user' after role 'tool'" / "Expected last role User or Tool
  (or Assistant with prefix True) for serving but got assistant"; vLLM answered 500 until PR 16769 turned it into
  a ValueError (400) with the same words;
- a structured-output grammar that fails to compile: the backend's compile (V1 `_async_create_grammar` in 0.8,
  `compile_grammar` since) raised inside EngineCore and killed the engine (an invalid JSON schema until 0.9.0,
  CVE-2025-48942 / PR 17623; other compile failures until PR 47312), so a pasted traceback often holds only
  those frames and xgrammar's C++ check message.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# trl/extras/vllm_client.py: every route it calls raises this on a non-200 answer.
_TRL_404 = lazy(r"Request failed: 404, \{\s*\"detail\"\s*:\s*\"Not Found\"\s*\}")
# What marks the caller as TRL's client (its module, the routes only `trl vllm-serve` adds).
_TRL_CLIENT = lazy(r"vllm_client|init_communicator|get_world_size|update_named_param|close_communicator")


def _trl_server_routes(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    if not _TRL_CLIENT.search(scan.joined_text()):
        return None  # a 404 from some other client says nothing about trl vllm-serve
    for ln in scan.lines:
        if _TRL_404.search(ln.text):
            return Diagnosis(
                category="engine_config", signature="config.trl_server_routes_missing",
                title="TRL's vLLM client got 404 from the server: it is not a `trl vllm-serve` of this TRL release",
                confidence=0.8, evidence=[Evidence(ln.no, ln.shown)], facts={},
                fix=Fix("GRPO's vllm_mode=\"server\" needs the server TRL starts, with its weight-sync routes: run "
                        "`CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model <model>` (not `vllm serve`), with the same "
                        "TRL version on the server and the trainer.", "engine-config"),
                first_line=ln.no)
    return None


_PARSER = lazy(r"(?P<parser>\w+)_tool_parser\.py")


def _parser_facts(m: "re.Match[str]", ln: Any, scan: Scan) -> dict[str, Any]:
    # the logger's source (`[hermes_tool_parser.py:157]`), else a frame of the parser's module
    p = _PARSER.search(ln.src) or _PARSER.search(ln.shown) or _PARSER.search(scan.joined_text())
    return {"parser": p.group("parser")} if p else {}


DETOKENIZER_INVALID_TOKEN = Rule(
    signature="tokenizer.detokenizer_invalid_token", category="tokenizer_chat_template",
    title="vLLM's detokenizer was given a token id the tokenizer cannot decode",
    fix="The model sampled an invalid id (negative or past the vocabulary, usually from garbage logits). vLLM "
        "0.11.1+ logs and skips such ids under every tokenizers release (0.11.0 only caught OverflowError, and "
        "tokenizers 0.22.1 raises TypeError): upgrade vLLM, or pin tokenizers<0.22.1 meanwhile; if outputs are "
        "garbage too, suspect the quantization or --kv-cache-dtype.",
    patterns=[r"argument 'id': StreamInput must be either an integer or a list of integers",
              # the older tokenizers' wording; HF decode raises it elsewhere too, so only beside vLLM's detokenizer
              r"OverflowError: out of range integral type conversion attempted"],
    playbook="tokenizer-chat-template", confidence=0.75, check=lambda scan, env: _detokenizer(scan))


def _detokenizer(scan: Scan) -> Diagnosis | None:
    d = DETOKENIZER_INVALID_TOKEN.match_lines(scan)
    if d is None or "StreamInput" in d.evidence[0].text:
        return d
    return d if _DETOKENIZER.search(scan.joined_text()) else None


_DETOKENIZER = lazy(r"detokenizer|detokenize_incrementally|DecodeStream|decode_next")


RULES = [
    Rule(signature="config.max_tokens_exceeds_context", category="engine_config",
         title="The request's max_tokens ({max_tokens}) does not fit beside its {prompt}-token prompt in "
               "max_model_len {max_model_len}",
         fix="Ask for fewer output tokens (max_tokens <= max_model_len - prompt tokens; leave max_tokens unset to "
             "get the rest of the context), or restart vLLM with a larger --max-model-len if the model and the "
             "KV-cache memory allow it.",
         patterns=[r"'max_tokens' or 'max_completion_tokens' is too large: (?P<max_tokens>\d+)\. This model's "
                   r"maximum context length is (?P<max_model_len>\d+) tokens and your request has (?P<prompt>\d+) "
                   r"input tokens",
                   # a client that cut the body after the first sentence
                   r"'max_tokens' or 'max_completion_tokens' is too large: (?P<max_tokens>\d+)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.tool_choice_without_tools", category="engine_config",
         title="The request sets tool_choice but sends no tools",
         fix="Send `tools` with `tool_choice`, or leave tool_choice out. Through LiteLLM's hosted_vllm provider, "
             "upgrade LiteLLM (older releases sent tool_choice=\"auto\" with no tools, a null, on every call) or list "
             "tool_choice in drop_params.",
         patterns=[r"When using `tool_choice`, `tools` must be set",
                   r"Tools cannot be empty if tool choice is set to a specific tool"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.logprobs_over_limit", category="engine_config",
         title="The request asks for more logprobs than this vLLM server allows",
         fix="Ask for at most --max-logprobs (default 20) logprobs/top_logprobs/prompt_logprobs, or restart vLLM with "
             "a larger --max-logprobs (-1: no cap, memory grows with it). vLLM 0.4.x's OpenAI server capped at 5 "
             "whatever the flag said (fixed in 0.5.0), and -1 for the whole vocabulary needs a vLLM with PR 24956 "
             "plus --max-logprobs -1.",
         patterns=[r"Requested (?P<kind>sample|prompt) logprobs of (?P<requested>-?\d+), which is greater than max "
                   r"allowed: (?P<max_logprobs>-?\d+)",
                   r"Cannot request more than (?P<max_logprobs>\d+) logprobs",
                   r"`(?P<kind>prompt_logprobs|logprobs|top_logprobs)` must be a positive value"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.trl_server_routes_missing", category="engine_config", title="", fix="",
         playbook="engine-config", check=_trl_server_routes),
    Rule(signature="tokenizer.token_id_out_of_vocab", category="tokenizer_chat_template",
         title="A prompt carries token id {token_id}, above this model's vocabulary",
         fix="The prompt's ids do not come from this model's tokenizer: check the chat template/tokenizer the "
             "caller applies (LlamaFactory: the --template that belongs to the model, e.g. deepseek3 for "
             "DeepSeek-R1 distills). In multi-turn RL rollouts that feed sampled ids back as the next prompt, the "
             "model sampled one of its padded, unused ids: upgrade vLLM (since PR 22471 ids up to the model's vocab "
             "size pass) or decode and re-encode each turn.",
         patterns=[r"Token id (?P<token_id>-?\d+) is out of vocabulary"],
         playbook="tokenizer-chat-template", confidence=0.8),
    Rule(signature="config.tool_call_parse_failed", category="engine_config",
         title="The {parser} tool-call parser could not read the model's output; the call came back as plain text",
         fix="Use the --tool-call-parser the model card names (Qwen3-Coder: qwen3_coder; Llama 3.x JSON calls: "
             "llama3_json; Mistral: mistral; Qwen2.5/Qwen3/Hermes: hermes) with the model's own chat template. If "
             "the parser is the right one, the model wrote a malformed call: raise max_tokens, lower the "
             "temperature, or use tool_choice=\"required\" for structured calls.",
         patterns=[r"Error in extracting tool call from response",
                   r"Error trying to handle streaming tool call"],
         facts=_parser_facts, playbook="engine-config", confidence=0.7),
    DETOKENIZER_INVALID_TOKEN,
    Rule(signature="tokenizer.mistral_message_order", category="tokenizer_chat_template",
         title="The Mistral tokenizer refuses the order of the request's messages",
         fix="With --tokenizer-mode mistral, mistral_common checks the roles' order: put an assistant message "
             "between tool results and the next user message, and end with a user or tool message (an assistant "
             "one only as a prefix). Fix the client's history, or serve the model with --tokenizer-mode hf and its "
             "jinja chat template if it has one.",
         patterns=[r"Unexpected role '(?:Roles\.)?(?P<role>\w+)' after role '(?:Roles\.)?(?P<previous>\w+)'",
                   r"Expected last role User or Tool \(or Assistant with prefix True\) for serving but got "
                   r"(?:Roles\.)?(?P<role>\w+)"],
         playbook="tokenizer-chat-template", confidence=0.8),
    Rule(signature="config.structured_output_compile_crash", category="engine_config",
         title="A structured-output request's grammar failed to compile inside the engine",
         fix="The request's JSON schema/grammar is one the structured-output backend cannot compile (fix or "
             "simplify it, or pick another backend with --structured-outputs-config.backend). Older vLLM raised "
             "this inside EngineCore and lost the whole engine (invalid schemas until 0.9.0, CVE-2025-48942; other "
             "compile failures until PR 47312): upgrade vLLM so it fails only that request.",
         patterns=[r"structured_output/backend_\w+\.py\", line \d+, in compile_grammar",
                   r"structured_output/__init__\.py\", line \d+, in _async_create_grammar",
                   r"xgrammar/compiler\.py\", line \d+, in compile_(?:json_schema|grammar|regex|structural_tag)",
                   # xgrammar's C++ converters' checks, when the paste kept only the raised line
                   r"/cpp/(?:json_schema_converter|grammar_parser|regex_converter)\.cc:\d+: Check failed"],
         playbook="engine-config", confidence=0.6),
]
