"""A --chat-template path that does not exist where vLLM runs.

vLLM reads --chat-template as a file when the value looks like a path (no Jinja characters) and refuses one that is
not there: "The supplied chat template ({t}) looks like a file path, but it failed to be opened. Reason: {e}"
(chat_utils.load_chat_template, 0.4.2 .. 0.6), then "The supplied chat template string ({t}) appears path-like, but
doesn't exist!" (validate_chat_template), with " Tried: {t} and {vllm/transformers_utils/chat_templates/t}" once
vLLM looks for the name among its packaged templates too. Recipes name templates by their place in vLLM's source
tree (examples/tool_chat_template_*.jinja), which a pip-installed wheel or a container does not have.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="tokenizer.chat_template_path_missing", category="tokenizer_chat_template",
         title="The --chat-template file {template} does not exist where vLLM runs",
         fix="vLLM takes a path-like --chat-template as a file and cannot find it (relative paths are resolved from "
             "the directory vLLM starts in, inside the container when it runs in one). Download the template (the "
             "recipes' examples/*.jinja live in vLLM's GitHub repository, not in the wheel) and pass its absolute path, "
             "mounted into the container if needed; or drop the flag to use the tokenizer's own template.",
         patterns=[r"The supplied chat template(?: string)? \((?P<template>[^)]*)\) (?:appears path-like, but doesn't "
                   r"exist|looks like a file path, but it failed to be opened)"],
         playbook="tokenizer-chat-template", confidence=0.9),
]
