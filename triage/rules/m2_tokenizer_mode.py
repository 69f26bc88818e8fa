"""A tokenizer mode the installed vLLM does not have.

Models with their own tokenizer classes are served with `--tokenizer-mode <name>` (deepseek_v32, deepseek_v4,
kimi_audio, grok2, qwen_vl, mistral, ...); vLLM looks the name up in its tokenizer registry
(vllm/tokenizers/registry.py, 0.12+) and raises `No tokenizer registered for tokenizer_mode='<name>'.` for one it
does not register: a mode added by a later release, or renamed between releases (deepseek_v32 was 'deepseekv32' in
0.12.0). Without the mode the model's chat template is usually missing too, so the "default chat template is no
longer allowed" error that follows a retry without the flag is the same cause and ranks below this.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="tokenizer.mode_not_registered", category="tokenizer_chat_template",
         title="This vLLM has no tokenizer mode '{mode}'",
         fix="The model's recipe asks for `--tokenizer-mode {mode}`, which this vLLM release does not register (added "
             "or renamed in a later release): install the vLLM version the model's recipe names (`pip install -U "
             "vllm`), or use the name this release has for it (`vllm serve --help=ModelConfig` lists the choices).",
         patterns=[r"No tokenizer registered for tokenizer_mode='(?P<mode>[\w.-]+)'"],
         playbook="tokenizer-chat-template", confidence=0.92),
]
