"""Tokenizers that do not fit what uses them: the Mistral tokenizer mode on the wrong checkpoint, a tool or reasoning
parser made for another model's tokenizer, a tokenizer_config.json written by a newer transformers.

With --tokenizer-mode mistral (set by hand, by a recipe, or chosen automatically for a Mistral-looking repo) vLLM
builds its MistralTokenizer (vllm/transformers_utils/tokenizers/mistral.py, later vllm/tokenizers/mistral.py), a
wrapper of mistral_common, instead of a Hugging Face tokenizer. Code written for HF tokenizers (transformers'
processors such as PixtralProcessor, a tool parser, a chat template path) then reads an attribute the wrapper does
not have; on a folder without Mistral's tokenizer files (tekken.json, tokenizer.model.v*) mistral_common's loader
(transformers' MistralCommonTokenizer, MistralCommonBackend in transformers 5) finds nothing to load.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

MISTRAL_CLASSES = r"MistralTokenizer|MistralCommonTokenizer|MistralCommonBackend"


def _facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    attr = m.groupdict().get("attr")
    if attr:
        return {"headline": f"The Mistral tokenizer (tokenizer mode mistral) lacks '{attr}', which Hugging Face code "
                            "expects",
                "advice": (f"vLLM's Mistral tokenizer has no '{attr}': something written for a Hugging Face tokenizer "
                           "(the model's HF processor, a tool parser) got it. For a checkpoint in Hugging Face format "
                           "(config.json, tokenizer.json) serve with --tokenizer-mode auto (or hf); for Mistral's "
                           "own format pass all of --tokenizer-mode mistral --config-format mistral --load-format "
                           "mistral; a vLLM release that bridges both fixes it too.")}
    return {"headline": "The Mistral tokenizer was chosen for a folder without Mistral tokenizer files",
            "advice": ("mistral_common looked for tekken.json or tokenizer.model.v* and found neither: the model is not "
                       "in Mistral's format. Drop --tokenizer-mode mistral (use auto or hf) for this model, or point "
                       "--tokenizer at the repository that has the Mistral tokenizer files.")}


RULES: list[Rule] = [
    Rule(signature="tokenizer.mistral_mode_mismatch", category="tokenizer_chat_template",
         title="{headline}", fix="{advice}", facts=_facts,
         patterns=[r"'(?:" + MISTRAL_CLASSES + r")' object has no attribute '(?P<attr>\w+)'",
                   r"\b(?:" + MISTRAL_CLASSES + r") has no attribute (?P<attr>\w+)",
                   r"No tokenizer file found in directory: \S+"],
         playbook="tokenizer-chat-template", confidence=0.88),
]


# vLLM's tool and reasoning parsers (entrypoints/openai/tool_parsers, tool_parsers/, reasoning/, 0.6 .. 0.33) look up
# their model's special tokens in the served tokenizer at start-up or on the first request and raise "<Name> Tool
# parser could not locate tool call start/end tokens in the tokenizer!" (reasoning parsers: "think start/end tokens")
# when it has none: the parser was made for another model family. (The "Falling back to string matching" form is a
# warning: the parser then works without them.)
PARSER_RE = (r"(?P<parser>[\w.-]+(?: [\w.-]+){0,3}?)(?: (?:[Tt]ool [Pp]arser|[Tt]ool extractor|reasoning parser|"
             r"reasoning extractor|[Pp]arser))? could not locate (?P<what>[^!]{1,80}?) (?:tokens? )?in (?:the )?"
             r"tokenizer(?!\. Falling back)")


def _parser_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    parser = m.group("parser").strip()
    kind = "reasoning" if "reasoning" in m.group(0) or "think" in m.group("what") else "tool-call"
    flag = "--reasoning-parser" if kind == "reasoning" else "--tool-call-parser"
    return {"parser": parser, "kind": kind, "flag": flag}


# transformers 5 writes tokenizer_config.json in its own form ("extra_special_tokens" as a list, "backend",
# "tokenizer_class": "TokenizersBackend"); a checkpoint saved by a trainer on transformers 5 then fails under a vLLM
# that runs transformers 4.x, in tokenization_utils_base._set_model_specific_special_tokens: 'list' object has no
# attribute 'keys'.
V5_CONFIG_RE = r"_set_model_specific_special_tokens|SPECIAL_TOKENS_ATTRIBUTES \+ list\(special_tokens\.keys\(\)\)"

RULES += [
    Rule(signature="tokenizer.parser_tokens_missing", category="tokenizer_chat_template",
         title="The {kind} parser {parser} does not fit this model's tokenizer (its special tokens are missing)",
         fix="{flag} {parser} looks for the special tokens of the model family it was written for, and this model's "
             "tokenizer has none of them: pick the parser vLLM's docs name for this model (a Qwen-based distill needs "
             "Qwen's parser, hermes needs <tool_call> tokens), or drop the flag; a parser for a newer model may also "
             "need the model's own chat template (--chat-template).",
         facts=_parser_facts, patterns=[PARSER_RE], playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="tokenizer.config_from_newer_transformers", category="tokenizer_chat_template",
         title="The tokenizer_config.json was written by a newer transformers (5.x) than the one vLLM runs",
         fix="The checkpoint's tokenizer_config.json has transformers 5's form (\"extra_special_tokens\" as a list, "
             "\"backend\", tokenizer_class TokenizersBackend) and the installed transformers 4.x cannot read it. Copy "
             "the tokenizer files of the base model over the saved ones (or turn extra_special_tokens back into a "
             "mapping and set tokenizer_class to the model's tokenizer class), or use a vLLM release that supports "
             "transformers 5 with it.",
         patterns=[V5_CONFIG_RE], playbook="tokenizer-chat-template", confidence=0.8),
]


# A chat template is Jinja code: what it raises while rendering a request (a Python TypeError or AttributeError on the
# messages it was given) comes out of jinja2's render with the template's own frame, 'File "<template>", line N, in
# top-level template code'. The usual cause is message content in a shape the template does not handle: a list of
# parts (the "openai" content format, images, tool results) where the template concatenates strings.
TEMPLATE_FRAME_FILES = ("<template>", "/jinja2/environment.py", "/jinja2/runtime.py", "chat_template_utils.py")
CONTENT_SHAPE_RE = lazy(r"can only concatenate (?:str \(not \"(?:list|dict|NoneType)\"\) to str|list \(not \"str\"\) "
                        r"to list)|'(?:list|dict)' object has no attribute '(?:strip|split|startswith|endswith|"
                        r"replace|lower)'")
TEMPLATE_WORDS = ("template", "Template", "jinja", "Jinja")
NEAR = 5  # lines around a bare message where the paste must speak of a template


def _template_raised(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    hit = None
    for exc in scan.exceptions:
        if exc.short_type in ("TypeError", "AttributeError", "KeyError", "IndexError", "ValueError") and any(
                f.file.replace("\\", "/").endswith(TEMPLATE_FRAME_FILES) for f in exc.frames[-3:]):
            hit = (exc.line, f"{exc.type}: {exc.message}"[:200])
            break
    if hit is None:
        lines = scan.lines
        for i, ln in enumerate(lines):
            m = CONTENT_SHAPE_RE.search(ln.text)
            if m is None:
                continue
            near = lines[max(0, i - NEAR): i + NEAR + 1]
            if any(w in x.text for x in near for w in TEMPLATE_WORDS):
                hit = (ln, m.group(0))
                break
    if hit is None:
        return None
    line, what = hit
    return Diagnosis(
        category="tokenizer_chat_template", signature="tokenizer.template_raised",
        title=f"The chat template failed while rendering the request ({what})",
        confidence=0.8, evidence=[Evidence(line.no, line.shown)], facts={"error": what},
        fix=Fix("The model's chat template (Jinja) raised on the messages it was given: usually content in a shape it "
                "does not handle, e.g. a list of parts (images, tool results, --chat-template-content-format openai) "
                "where it joins strings, or a field it expects missing. Send plain-string content (or set "
                "--chat-template-content-format string), or serve a template that handles this message form "
                "(--chat-template).", "tokenizer-chat-template"),
        first_line=line.no)


RULES += [
    Rule(signature="tokenizer.template_raised", category="tokenizer_chat_template",
         title="The chat template failed while rendering the request", fix="", check=_template_raised,
         playbook="tokenizer-chat-template", confidence=0.8),
]
