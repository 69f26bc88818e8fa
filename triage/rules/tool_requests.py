"""Structured outputs, tool use and sampling parameters: what a request (or the client sending it) asks of a server
that cannot give it.

- Per-request logits processors. V0's multi-step worker asserted that a sequence group carried none ("Logits
  Processors are not supported in multi-step decoding", 0.6-0.9; guided decoding is one, so --num-scheduler-steps > 1
  plus response_format killed the engine). LLMEngine.add_request raised the same words as a ValueError when
  num_scheduler_steps > 1 (0.7-0.10.0) and, from 0.10.1, for every request carrying logits_processors: then the
  caller (outlines' vLLM integration, logits-processor-zoo) needs vLLM <= 0.10.0 or the V1 logits-processor interface.
  The V1 input processor refuses them outright ("vLLM V1 does not support per request user provided logits
  processors.", 0.8+; VLLM_USE_V1=0 while V0 existed).
- Token ids beyond the vocabulary in a request's sampling parameters. The V1 processor validates logit_bias
  ("token_id(s) [...] in logit_bias contain out-of-vocab token ids. Vocabulary size: N") and allowed_token_ids
  ("allowed_token_ids contains out-of-vocab token id!"), the sampler logit_bias ("token_id N in logit_bias contains
  out-of-vocab token id"), stop_token_ids only since PR 54196 (2026, same form): before that an out-of-vocab stop id
  reached the device as a logits index (CANN's bounds check: "Index out of range in dimension 1: index value N
  exceeds bounds M", every rank dies). The GPU model runner's logit-bias state holds at most 1024 allowed/biased ids
  and 128 stop ids ("Too many allowed token IDs: 2000. The max size is 1024.") and, before PR 55164, raised it inside
  EngineCore.
- The Responses API's store: off unless VLLM_ENABLE_RESPONSES_API_STORE=1 (PR 22137, 0.10.1+), so a
  previous_response_id (LiteLLM's /ui/chat chains turns with it) is "Response with id '...' not found." and
  store=True is refused with "`store=True` (default) is not supported".
- Mistral (mistral_common) tokenizers take no Jinja template: a request's chat_template or chat_template_kwargs is
  refused ("chat_template is not supported for Mistral tokenizers."), and transformers' MistralCommonTokenizer refuses
  kwargs it does not know ("Kwargs ['reasoning_effort'] are not supported by
  `MistralCommonTokenizer.apply_chat_template`", which vLLM 0.18 passed on every request for tokenizer version >= 15,
  fixed by PRs 38448/41251).
- A request with "tools": [] (Open WebUI 0.10.2 sends it): vLLM's request validation refuses the empty array.
- The structured-output libraries' API below vLLM: llguidance/xgrammar/outlines-core calls vLLM makes with another
  release's signature ("LLMatcher.validate_grammar() got some positional-only arguments passed as keyword arguments",
  fixed by the llguidance vLLM pins).
- xgrammar's JSON-schema converter refusing an integer bound it cannot hold ("RuntimeError: maximum must be an
  integer" for le=20_000_000_000, vLLM 0.8.5; xgrammar took int64 later) inside the engine.
"""

from __future__ import annotations

import dataclasses
import re

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

_MULTI_STEP_RE = lazy(r"(?P<assert>AssertionError\(?'?)?Logits [Pp]rocessors are not supported in multi-step decoding")
_MULTI_STEP_FLAG_RE = lazy(r"num[_-]scheduler[_-]steps|multi-step scheduling|multi_step")
# "My vllm version is 0.10.1.1", "vllm==0.10.1", "vLLM 0.10.1.1", "vllm/vllm-openai:v0.10.1"
_RELEASE_RE = lazy(r"\bvllm(?:-openai)?\b[^\n\d]{0,20}?v?(?P<v>\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)
UNCONDITIONAL_SINCE = (0, 10, 1)  # LLMEngine.add_request refuses every per-request logits processor from here


def _release(scan: Scan) -> tuple[int, ...] | None:
    v = scan.facts.get("vllm_version")
    texts = [str(v)] if v else []
    texts += [m.group("v") for ln in scan.lines for m in [_RELEASE_RE.search(ln.text)] if m]
    for t in texts:
        m = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", t)
        if m:
            return tuple(int(p or 0) for p in m.groups())
    return None


def _logits_processors_multi_step(scan: Scan, env: dict, removed: bool) -> Diagnosis | None:
    """The multi-step message: a scheduler setting up to 0.10.0, the removed V0 path for a library's per-request
    logits processors from 0.10.1 (the words stayed the multi-step ones). `removed`: the rule that reads the
    latter (the other returns None there)."""
    hit = next(((ln, m) for ln in scan.lines for m in [_MULTI_STEP_RE.search(ln.text)] if m), None)
    if hit is None:
        return None
    line, m = hit
    release = _release(scan)
    multi_step = any(_MULTI_STEP_FLAG_RE.search(ln.text) and ln.no != line.no for ln in scan.lines)
    if (m.group("assert") is None and not multi_step and release is not None
            and release >= UNCONDITIONAL_SINCE) != removed:
        return None
    if removed and release is not None:
        shown = ".".join(map(str, release))
        return Diagnosis(
            category="install_mismatch", signature="install.logits_processors_removed",
            title=f"vLLM {shown} no longer runs per-request logits processors, which the calling library passes",
            confidence=0.75, evidence=[Evidence(line.no, line.shown)], first_line=line.no,
            facts={"vllm_version": shown},
            explanation=["from vLLM 0.10.1 LLMEngine.add_request refuses every request carrying "
                         "SamplingParams.logits_processors, whatever the scheduler (the message kept its multi-step "
                         "words); a library built on them needs an older vLLM"],
            fix=Fix("Pin vLLM 0.10.0 for this library (`pip install vllm==0.10.0`), or move to a release of the "
                    "library that uses vLLM's V1 logits-processor interface (processors given when the engine is built) or "
                    "structured outputs (response_format / guided_json) instead of per-request processors.",
                    "install-mismatch"))
    return Diagnosis(
        category="engine_config", signature="config.logits_processors_multi_step",
        title="Logits processors (guided decoding included) cannot run with multi-step scheduling",
        confidence=0.8, evidence=[Evidence(line.no, line.shown)], first_line=line.no,
        explanation=["V0's multi-step scheduling (--num-scheduler-steps > 1) refuses any request that carries a logits "
                     "processor; guided decoding (response_format json, guided_json/regex/choice) is one"],
        fix=Fix("Drop --num-scheduler-steps (or set it to 1) on a server that takes structured-output or "
                "logits-processor requests, or send those requests to a server without multi-step scheduling.",
                "engine-config"))


# A request field that carries token ids: an out-of-vocab id in the device's index error came from one of them.
_ID_FIELDS_RE = lazy(r"\b(?:stop_token_ids|logit_bias|allowed_token_ids|bad_words)\b")
_DEVICE_INDEX_RE = lazy(r"Index out of range in dimension \d+: index value (?P<token_id>\d+) exceeds bounds "
                        r"(?P<vocab_size>\d+)")


def _device_index_from_request(scan: Scan, env: dict) -> Diagnosis | None:
    hit = next(((ln, m) for ln in scan.lines for m in [_DEVICE_INDEX_RE.search(ln.text)] if m), None)
    field = next((m.group(0) for ln in scan.lines for m in [_ID_FIELDS_RE.search(ln.text)] if m), None)
    if hit is None or field is None:
        return None
    line, m = hit
    d = TOKEN_IDS_OUT_OF_VOCAB.diagnosis(scan, [(line, m)], facts={"field": field}, confidence=0.7)
    return dataclasses.replace(d, signature="config.request_token_ids_device_index")


TOKEN_IDS_OUT_OF_VOCAB = Rule(
    signature="config.request_token_ids_out_of_vocab", category="engine_config",
    title="A request's {field} carries token id(s) outside the model's vocabulary",
    fix="Send only ids below the model's vocabulary size in stop_token_ids / logit_bias / allowed_token_ids (ids from "
        "another model's tokenizer, e.g. an older <|im_end|>, do not carry over). vLLM versions that do not validate "
        "the field lose the whole engine to one such request: upgrade (logit_bias checked since 0.8.5, stop_token_ids since PR 54196).",
    patterns=[r"token_id\(s\) (?P<token_id>\[[^\]]*\]) in (?P<field>logit_bias|stop_token_ids|allowed_token_ids|"
              r"bad_words) contain out-of-vocab token ids\. Vocabulary size: (?P<vocab_size>\d+)",
              r"token_id (?P<token_id>-?\d+) in (?P<field>logit_bias) contains out-of-vocab token id\. Vocabulary "
              r"size: (?P<vocab_size>\d+)",
              r"(?P<field>allowed_token_ids) contains out-of-vocab token id"],
    playbook="engine-config", confidence=0.85)

RULES = [
    Rule(signature="config.logits_processors_per_request_v1", category="engine_config",
         title="The V1 engine does not take per-request logits processors",
         fix="Use the V1 logits-processor interface instead (processors passed when the engine is built: "
             "LLM(logits_processors=[...]) / --logits-processors in recent releases), use "
             "structured outputs (response_format / guided_json) for constrained decoding instead of an outlines "
             "processor, or, on vLLM 0.8-0.10.0, fall back to the V0 engine with VLLM_USE_V1=0.",
         patterns=[r"vLLM V1 does not support per request user provided logits processors"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.logits_processors_multi_step", category="engine_config",
         title="Logits processors (guided decoding included) cannot run with multi-step scheduling", fix="",
         check=lambda scan, env: _logits_processors_multi_step(scan, env, removed=False),
         playbook="engine-config", confidence=0.8),
    Rule(signature="install.logits_processors_removed", category="install_mismatch",
         title="This vLLM no longer runs per-request logits processors, which the calling library passes", fix="",
         check=lambda scan, env: _logits_processors_multi_step(scan, env, removed=True),
         playbook="install-mismatch", confidence=0.75),
    TOKEN_IDS_OUT_OF_VOCAB,
    Rule(signature="config.request_token_ids_device_index", category="engine_config",
         title="A request's token id reached the device beyond the vocabulary", fix="",
         check=_device_index_from_request,
         playbook="engine-config", confidence=0.7),
    Rule(signature="config.request_token_ids_over_limit", category="engine_config",
         title="A request lists {count} {field}, more than the {max_size} the sampler holds",
         fix="Send at most {max_size} ids in that field (allowed_token_ids / logit_bias: 1024, stop_token_ids: 128); "
             "vLLM before PR 55164 raised this inside EngineCore and lost the whole server to one request, so "
             "upgrade or cap the field in the client.",
         patterns=[r"Too many (?P<field>[\w ]+?(?:IDs|ids|biases|entries)): (?P<count>\d+)\. The max size is "
                   r"(?P<max_size>\d+)"],
         playbook="engine-config", confidence=0.8),
    Rule(signature="config.responses_store_disabled", category="engine_config",
         title="The Responses API looked up a stored response, but this vLLM does not store them",
         fix="vLLM keeps no Responses API store unless started with VLLM_ENABLE_RESPONSES_API_STORE=1 (in memory: "
             "lost on restart and not shared between replicas). Set it for clients that chain turns with "
             "previous_response_id (LiteLLM's /ui/chat) or use background/retrieve, or make the client send "
             "store=false and the whole conversation each turn.",
         patterns=[r"Response with id '(?P<response_id>[^']*)' not found",
                   r"`store=True` \(default\) is not supported"],
         playbook="engine-config", confidence=0.8),
    Rule(signature="config.tools_empty_array", category="engine_config",
         title="The request sends an empty `tools` array",
         fix="Leave `tools` out of the request when there is no tool to offer (Open WebUI 0.10.2 sent \"tools\": [] "
             "and retried; upgrade it or turn native tool calling off for this model).",
         patterns=[r"`tools` must not be an empty array"],
         playbook="engine-config", confidence=0.8),
    Rule(signature="tokenizer.mistral_template_refused", category="tokenizer_chat_template",
         title="A chat template was sent to a model served with a Mistral (mistral_common) tokenizer",
         fix="Mistral-format tokenizers have no Jinja template to replace or parametrise: drop chat_template and "
             "chat_template_kwargs (e.g. Qwen's enable_thinking) from requests to this model, or serve it with "
             "--tokenizer-mode hf if its repository ships a Hugging Face tokenizer and template.",
         patterns=[r"chat_template is not supported for Mistral tokenizers"],
         playbook="tokenizer-chat-template", confidence=0.8),
    Rule(signature="tokenizer.mistral_kwargs_refused", category="tokenizer_chat_template",
         title="transformers' MistralCommonTokenizer refuses the chat-template arguments {kwargs}",
         fix="vLLM 0.18 passed reasoning_effort to Mistral tokenizers of version >= 15 on every request, even unset: "
             "upgrade vLLM (PRs 38448/41251). Other keyword arguments come from the request's chat_template_kwargs: "
             "drop them for Mistral-tokenizer models.",
         patterns=[r"Kwargs (?P<kwargs>\[[^\]]*\]) are not supported by `?MistralCommonTokenizer\.apply_chat_template"],
         playbook="tokenizer-chat-template", confidence=0.8),
    Rule(signature="install.structured_output_library_api", category="install_mismatch",
         title="{func}() has another signature than the one vLLM's structured-output backend calls",
         fix="The installed llguidance/xgrammar/outlines-core is another release than the one this vLLM pins: "
             "reinstall it at vLLM's pin (`pip install \"vllm==<your version>\"` re-resolves it; check "
             "`pip show llguidance xgrammar outlines_core`), or pick another backend with "
             "--structured-outputs-config.backend (older: --guided-decoding-backend).",
         patterns=[r"TypeError: (?P<func>(?:LLMatcher|LLTokenizer|LLInterpreter|GrammarCompiler|GrammarMatcher|"
                   r"TokenizerInfo|CompiledGrammar|Grammar)\.\w+)\(\) (?:got an unexpected keyword argument|got some "
                   r"positional-only arguments passed as keyword arguments|missing \d+ required positional "
                   r"argument|takes \d+ positional arguments? but \d+ (?:were|was) given)"],
         playbook="install-mismatch", confidence=0.8),
    Rule(signature="config.json_schema_integer_bound", category="engine_config",
         title="xgrammar cannot convert the request's JSON schema ({detail})",
         fix="An integer bound in the schema does not fit xgrammar's converter (32-bit before int64 support): drop "
             "or lower the minimum/maximum, or use another backend (--structured-outputs-config.backend guidance). "
             "vLLM 0.8.5 compiled it inside the engine and lost the server: upgrade so only the request fails.",
         patterns=[r"RuntimeError: (?P<detail>(?:exclusiveM|m)(?:aximum|inimum) must be an integer)"],
         playbook="engine-config", confidence=0.7),
]
