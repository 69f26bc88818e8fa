"""Launch arguments and engine configuration that cannot work."""

from __future__ import annotations

import re
from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.lazyre import lazy
from triage.rules.base import Rule
from triage.rules.c2_engine_args import advice
from triage.rules.wrapped import read_wrapped_messages, wrapped_texts


KEYWORD_ARG_RE = lazy(r"(?P<name>[A-Za-z_]\w*)=(?P<value>\S+)")


def _argv_hint(m, line, scan) -> dict:
    """What usually produced the unknown argument: a removed flag, or arguments glued into one token."""
    # a flag quoted in prose or markdown ends in its closing quote and the sentence's stop
    flag = (m.groupdict().get("flag") or "").strip().rstrip("`'\".,;:)”’」")
    out = _argv_advice(flag, line)
    if flag:
        out["flag"] = flag
    return out


def _argv_advice(flag: str, line) -> dict:
    first = flag.split(" ", 1)[0]
    if first in ("bash", "sh", "/bin/bash", "/bin/sh", "python", "python3") or first.startswith(("/bin/", "/usr/bin/")):
        return {"hint": "The image's entrypoint is the API server, so the shell command was passed to it as arguments: "
                        "pass only vLLM's arguments after the image, or override the entrypoint "
                        "(`docker run --entrypoint /bin/bash IMAGE -c '...'`; `entrypoint:` in docker compose)."}
    if first == "serve" or line.text.startswith("api_server.py"):
        return {"hint": "The image's entrypoint already starts the API server: drop the leading `serve` (and pass the "
                        "model as --model) or run the `vllm serve` entrypoint; in docker compose put each flag and its "
                        "value in separate list items (or write --flag=value)."}
    known = " ".join(a for a in (advice(t.split("=", 1)[0].lstrip("-"), cli=True) for t in flag.split() if t.startswith("--"))
                     if a)
    if flag.count("--") > 1:
        return {"hint": "Several flags are listed: each one is unknown to this vLLM (renamed or removed), or they were "
                        "passed as one quoted string." + (" " + known if known else "")}
    if known:
        return {"hint": known}
    # an engine keyword written as Python's `name=value` (the model card's LLM(...) call): argparse takes the word as
    # a positional and rejects it; on the command line every option is a `--flag`
    kw = KEYWORD_ARG_RE.fullmatch(first)
    if kw is not None:
        opt = "--" + kw.group("name").replace("_", "-")
        value = kw.group("value").strip("'\"")
        as_flag = opt if value in ("True", "true") else f"--no-{opt[2:]}" if value in ("False", "false") else f"{opt} {value}"
        return {"hint": f"`{first}` is a Python keyword, not a command-line option: `vllm serve` takes `{as_flag}` "
                        "(options start with --; a boolean one takes no value)."}
    return {"hint": f"{flag} was removed or renamed in this vLLM version (or is misspelled): check `vllm serve --help` "
                    "for the current name and drop or rename it."}


# Short spellings people pass for vLLM's choice values (argparse takes only the listed spelling).
CHOICE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32", "float": "float32",
                  "fp8_e4m3fn": "fp8_e4m3", "e4m3": "fp8_e4m3", "e5m2": "fp8_e5m2", "int8": "fp8"}


def _choices(text: str) -> list[str]:
    """argparse's list: "'auto', 'pt'" (Python <= 3.12) or "auto, pt" (newer)."""
    return [c.strip().strip("'\"") for c in text.split(",") if c.strip().strip("'\"")]


def _invalid_choice(m, line, scan) -> dict:
    """The flag exists; its value does not: name the value, the valid ones, and the closest."""
    import difflib

    gd = m.groupdict()
    value, flag = gd.get("value") or "", gd.get("flag") or ""
    choices = _choices(gd.get("choices") or "")
    if not choices:
        shown = f"'{value}'" if value else "the value given"
        return {"value_q": shown, "advice": f"{flag} exists, but {shown} is not one of its values in this vLLM: "
                                            f"`vllm serve --help` lists the values {flag} takes."}
    out: dict = {"value_q": f"'{value}'", "choices": choices, "valid": ", ".join(choices) if len(choices) <= 24 else
                 ", ".join(choices[:24]) + f", ... ({len(choices)} in all)"}
    low = {c.lower(): c for c in choices}
    closest = low.get(value.lower()) or low.get(CHOICE_ALIASES.get(value.lower(), ""))
    if closest is None:
        near = difflib.get_close_matches(value.lower(), list(low), n=1, cutoff=0.6)
        closest = low[near[0]] if near else None
    if closest:
        out["closest"] = closest
        out["advice"] = (f"{flag} exists, but '{value}' is not one of its values in this vLLM: use {flag} {closest} "
                         f"(the valid values are: {out['valid']}).")
    else:
        out["advice"] = (f"{flag} exists, but '{value}' is not one of its values in this vLLM (the valid values are: "
                         f"{out['valid']}). Values are added and removed between releases: pick one of these, or use "
                         f"the vLLM version whose documentation names '{value}'.")
    return out


def _suggested_tp(m, line, scan) -> dict:
    """The largest tensor parallel size not above the requested one that divides the head count."""
    gd = m.groupdict()
    try:
        heads, tp = int(gd["num_attention_heads"]), int(gd["tensor_parallel_size"])
    except (KeyError, TypeError, ValueError):
        return {}
    fits = [d for d in range(1, max(tp, 1) + 1) if heads % d == 0]
    return {"suggested_tp": fits[-1]} if fits else {}

# pydantic wraps what a config class's validator or __post_init__ raised: "1 validation error for ModelConfig" then
# "  Value error, <the ValueError's message> [type=value_error, input_value=...]" ("Assertion failed, ..." for an
# assert). That inner message is the failure (an architecture, a rope or quantization config, a size), whatever
# the class: the rules and the message catalogue read it as the exception's own words.
INNER_ERROR_RE = lazy(r"\b(?:Value error|Assertion failed), (?P<msg>\S.*?)(?: \[type=\w+.*)?$",
                      needles=("Value error, ", "Assertion failed, "))
INNER_SPAN = 4  # the inner message follows its header within a few lines (a field name line may come between)
INNER_CONFIDENCE = 0.55


def _validation_error(scan: Scan) -> Diagnosis | None:
    """vLLM rejected a config class; when pydantic's block carries the raised message, that message is the
    evidence (not the header), so a rule or the message catalogue that knows it is read beside this
    generic refusal, which is secondary and yields to it."""
    d = VALIDATION_RULE.match_lines(scan)
    if d is None:
        return None
    at = next((i for i, ln in enumerate(scan.lines) if ln.no == d.first_line), None)
    if at is None:
        return d
    for ln in scan.lines[at:at + 1 + INNER_SPAN]:
        m = INNER_ERROR_RE.search(ln.text)
        if m is not None:
            inner = m.group("msg").strip()
            # below any hand rule reading the same line (they share it: the surer one is kept)
            return VALIDATION_RULE.diagnosis(scan, [(ln, m)], facts={"detail": f"{d.facts.get('detail', '')}: {inner}",
                                                                     "message": inner}, confidence=INNER_CONFIDENCE)
    return d


def _read_wrapped(rule: Rule, scan: Scan, needle: str) -> Diagnosis | None:
    """The rule's patterns on each line, else on the message its first line starts, joined over a paste's wraps."""
    d = rule.match_lines(scan)
    if d is not None:
        return d
    for ln, text in wrapped_texts(scan, needle):
        for pattern in rule.patterns:
            m = re.search(pattern, text)
            if m is not None:
                return rule.diagnosis(scan, [(ln, m)])
    return None


RULES = [
    Rule(signature="config.tp_heads_not_divisible", category="engine_config",
         title="{num_attention_heads} attention heads cannot be split over tensor parallel size {tensor_parallel_size}",
         fix="Use a --tensor-parallel-size that divides {num_attention_heads} (e.g. 2, 4 or 8 where it divides), or combine "
             "a smaller TP with --pipeline-parallel-size.",
         patterns=[r"Total number of attention heads \((?P<num_attention_heads>\d+)\) must be divisible by tensor parallel size \((?P<tensor_parallel_size>\d+)\)",
                   r"Total number of (?:key-value|kv) heads \((?P<num_attention_heads>\d+)\) must be divisible by tensor parallel size \((?P<tensor_parallel_size>\d+)\)"],
         facts=_suggested_tp, playbook="engine-config", confidence=0.95),
    Rule(signature="config.pp_layers_not_divisible", category="engine_config",
         title="{layers} layers cannot be split over pipeline parallel size {pp}",
         fix="Choose a --pipeline-parallel-size that divides the layer count, or set VLLM_PP_LAYER_PARTITION.",
         patterns=[r"Total number of hidden layers \((?P<layers>\d+)\) must be divisible by pipeline parallel size \((?P<pp>\d+)\)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.unrecognized_argument", category="engine_config",
         title="The launch command has an argument this vLLM does not know: {flag}",
         fix="{hint}",
         patterns=[r"error:\s?unrecognized arguments:\s?(?P<flag>.+)", r"error: ambiguous option: (?P<flag>--[\w-]+)"],
         facts=_argv_hint, playbook="engine-config", confidence=0.95),
    Rule(signature="config.invalid_choice", category="engine_config",
         title="{flag} does not accept {value_q} in this vLLM",
         fix="{advice}",
         # argparse: the flag is known, the value is not one of its choices (the message lists them)
         # (--quantization is quant.invalid_method: a method this vLLM does not have)
         patterns=[r"error: argument (?P<flag>--(?!quantization\b)[\w-]+)(?:/[\w-]+)*: invalid choice: '(?P<value>[^']*)'(?: \(choose from (?P<choices>[^)]*))?",
                   r"error: argument (?P<flag>--(?!quantization\b)[\w-]+)(?:/[\w-]+)*: invalid choice: (?P<value>[^\s'(]+)(?: \(choose from (?P<choices>[^)]*))?",
                   # cut by a narrow terminal before the value ended
                   r"error: argument (?P<flag>--(?!quantization\b)[\w-]+)(?:/[\w-]+)*: invalid choice"],
         facts=_invalid_choice, playbook="engine-config", confidence=0.95),
    Rule(signature="config.max_model_len_too_large", category="engine_config",
         title="--max-model-len {max_model_len} exceeds the model's maximum context ({max_position_embeddings})",
         fix="Lower --max-model-len to at most {max_position_embeddings}, or (if the model really supports more, e.g. with RoPE "
             "scaling) set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 knowingly.",
         patterns=[r"User-specified max_model_len \((?P<max_model_len>\d+)\) is greater than the derived max_model_len \((?:max_position_embeddings|[\w=]+)=(?P<max_position_embeddings>[\d.]+)"],
         check=lambda scan, env: _read_wrapped(MAX_LEN_RULE, scan, "User-specified max_model_len"),
         playbook="engine-config", confidence=0.95),
    Rule(signature="config.validation_error", category="engine_config",
         title="vLLM rejected the configuration ({detail})",
         fix="The configuration has a value vLLM refuses; the message says which field: correct that launch argument.",
         patterns=[r"(?P<detail>\d+ validation errors? for \w+)"], check=lambda scan, env: _validation_error(scan),
         playbook="engine-config", confidence=0.7, secondary=True),
    Rule(signature="config.lora_rank", category="engine_config",
         title="LoRA adapter rank {rank} exceeds --max-lora-rank {max_rank}",
         fix="Raise --max-lora-rank to at least the adapter's rank.",
         # (a thread may write the rank as a placeholder: "LoRA rank XXX is greater than max_lora_rank 16")
         patterns=[r"LoRA rank (?P<rank>\d+|[A-Z]{1,3}) (?:is greater than|exceeds) max_lora_rank (?P<max_rank>\d+)",
                   r"LoRA rank (?P<rank>\d+) must be less than or equal to (?P<max_rank>\d+)"],
         playbook="engine-config", confidence=0.95),
    Rule(signature="config.tool_choice_flags", category="engine_config",
         title="Automatic tool choice needs --enable-auto-tool-choice and --tool-call-parser",
         fix="Start vLLM with --enable-auto-tool-choice --tool-call-parser <parser for this model>.",
         patterns=[r"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser",
                   r"--enable-auto-tool-choice requires --tool-call-parser"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.tool_parser_unknown", category="engine_config",
         title="--tool-call-parser {parser} is not a parser this vLLM knows",
         fix="Pick one of the parsers the error lists for this model family, or upgrade vLLM if the parser is newer "
             "than this version (e.g. gpt-oss's `openai`); a custom parser needs --tool-parser-plugin.",
         patterns=[r"invalid tool call parser: (?P<parser>[\w.-]+) \(cho(?:o)?se from",
                   # 0.6-0.33: the name given was not among the registered parsers
                   r"--enable-auto-tool-choice requires tool_parser:'(?P<parser>[^']*)' which has not been registered",
                   # 0.25+: the parser manager's lookup (ToolParserManager.get_tool_parser)
                   r"Tool parser '(?P<parser>[\w.-]+)' not found"],
         playbook="engine-config", confidence=0.9),
    # --reasoning-parser: the CLI's check (0.9-0.33) and the manager's lookup (0.10: "reasoning helper", 0.25+)
    Rule(signature="config.reasoning_parser_unknown", category="engine_config",
         title="--reasoning-parser {parser} is not a parser this vLLM knows",
         fix="Pick one of the reasoning parsers the error lists (they are named after model families: deepseek_r1, "
             "qwen3, ...), or upgrade vLLM if the parser is newer than this release; a custom parser needs "
             "--reasoning-parser-plugin.",
         patterns=[r"invalid reasoning parser: (?P<parser>[\w.-]+) \(cho(?:o)?se from",
                   r"Reasoning parser '(?P<parser>[\w.-]+)' not found\. Available parsers",
                   r"reasoning helper: '(?P<parser>[\w.-]+)' not found in reasoning_parsers"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.async_scheduling_unsupported", category="engine_config",
         title="--async-scheduling cannot be combined with this configuration ({detail})",
         fix="Drop --async-scheduling (or the feature it conflicts with), or upgrade to a vLLM whose async scheduler "
             "supports it (pipeline parallel and speculative decoding came in 2026 releases).",
         patterns=[r"Async scheduling is not supported with (?P<detail>\w[\w-]*(?: [\w-]+)*(?: > \d+)?)",
                   r"(?P<detail>speculative decoding) is not supported with async scheduling",
                   r"Async scheduling is not (?:yet )?(?:supported|compatible) (?:with|for) (?P<detail>\w[\w -]*)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.tp_exceeds_gpus", category="engine_config",
         title="The parallel layout needs more GPUs than are available",
         fix="Reduce --tensor-parallel-size / --pipeline-parallel-size to the number of visible GPUs, or make the "
             "other GPUs visible (CUDA_VISIBLE_DEVICES, docker --gpus all).",
         patterns=[r"please set tensor_parallel_size(?: \((?P<tensor_parallel_size>\d+)\))? to less than max local gpu count(?: \((?P<gpus>\d+)\))?",  # 0.5.0: no numbers
                   r"Tensor parallel size \((?P<tensor_parallel_size>\d+)\) cannot be larger than the number of available GPUs \((?P<gpus>\d+)\)",  # 0.11-0.12
                   r"please ensure that world_size \((?P<tensor_parallel_size>\d+)\) is less than (?:than )?max local gpu count \((?P<gpus>\d+)\)",
                   r"tensor_parallel_size \((?P<tensor_parallel_size>\d+)\) .{0,40}(?:larger|greater) than .{0,40}(?:available|visible) GPUs",
                   r"[Ww]orld[_ ]size \((?P<tensor_parallel_size>\d+)\) is (?:larger|greater) than the number of (?:available GPUs|GPUs available)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.batched_tokens_lt_max_len", category="engine_config",
         title="--max-num-batched-tokens {tokens} is smaller than max_model_len {max_model_len}",
         fix="Raise --max-num-batched-tokens to at least max_model_len, or enable chunked prefill.",
         patterns=[r"max_num_batched_tokens \((?P<tokens>\d+)\) is smaller than max_model_len \((?P<max_model_len>\d+)\)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.value_invalid", category="engine_config",
         title="A launch value is invalid: {detail}",
         fix="Correct the launch argument the message names.",
         patterns=[r"(?P<detail>gpu_memory_utilization must be (?:between|less than|in)[^.]*)",
                   # CacheConfig of 0.2-0.8: "GPU memory utilization must be less than 1.0. Got 1.2."
                   r"(?P<detail>GPU memory utilization must be less than (?:[^.]|\.\d)*)",
                   r"(?P<detail>max_num_seqs \(\d+\) must be[^.]*)",
                   # SchedulerConfig of 0.2-0.x
                   r"(?P<detail>max_num_batched_tokens \(\d+\) must be greater than or equal to max_num_seqs \(\d+\))",
                   r"(?P<detail>Unknown (?:dtype|kv cache dtype|kv_cache_dtype): \S+)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.prefix_caching_unsupported", category="engine_config",
         title="Prefix caching cannot be used with this model or configuration ({what})",
         fix="Launch without --enable-prefix-caching (or with --no-enable-prefix-caching where it is on by default), "
             "or upgrade to a vLLM that supports prefix caching for this model type (Mamba/hybrid support came in v0.11).",
         patterns=[r"Prefix caching is not supported for (?P<what>[\w /-]+?)(?: yet)?\.?$",
                   r"(?P<what>[\w /-]+?) does not support prefix caching",
                   # sliding window: config.prefix_caching_sliding_window (triage.rules.msg_raise_sites)
                   r"(?P<what>[Pp]refix caching) (?:is )?not supported with (?!sliding window)[\w -]+"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.hybrid_kv_cache_disabled", category="engine_config",
         title="This hybrid model needs the hybrid KV-cache manager, which is disabled",
         fix="The model mixes attention types (sliding window, Mamba, full attention): remove "
             "--disable-hybrid-kv-cache-manager, or drop the option/connector that forces it off (some KV connectors do).",
         patterns=[r"Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.lora_unsupported_model", category="engine_config",
         title="This model does not support LoRA in this vLLM ({model})",
         fix="vLLM has no LoRA support for this architecture: serve without --enable-lora (merge the adapter into the "
             "weights instead), or upgrade vLLM if a newer release lists LoRA support for it.",
         patterns=[r"(?P<model>\w+) does not support LoRA yet", r"LoRA is not supported for (?P<model>[\w ]+?)(?: yet)?\.?$",
                   r"Model (?P<model>\w+) does not support LoRA, but LoRA is enabled"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.lora_unsupported_weight", category="engine_config",
         title="The LoRA adapter has weights vLLM cannot apply ({module})",
         fix="The adapter was trained with modules vLLM's LoRA does not support (modules_to_save such as lm_head or "
             "embed_tokens, or target modules outside the model's LoRA-capable layers): retrain without them, or merge "
             "the adapter into the base model (peft merge_and_unload) and serve the merged weights.",
         patterns=[r"(?P<module>[\w.]+) is unsupported LoRA weight",
                   r"(?P<module>While loading [\w./-]+, expected target modules in \[.{0,120})"],
         playbook="engine-config", confidence=0.9),
    # LoRAConfig's own checks of the LoRA launch settings and the combinations it refuses (vllm/config.py 0.6-0.10,
    # vllm/config/lora.py 0.11+, vllm/lora/ managers): the setting is named in the message
    Rule(signature="config.lora_settings_invalid", category="engine_config",
         title="A LoRA launch setting is refused ({setting})",
         fix="vLLM's LoRA configuration refused {setting}: adjust --max-loras / --max-cpu-loras / --max-lora-rank / "
             "--lora-extra-vocab-size to the values the message allows (max_cpu_loras >= max_loras, a rank from the "
             "listed sizes), or drop the LoRA option this release does not combine with the rest of the launch "
             "(long-context LoRA, CPU offload, fully sharded LoRA, the chosen MoE backend).",
         patterns=[r"(?P<setting>max_cpu_loras) \(\d+\) must be (?:>=|greater than or equal to) max_loras",
                   r"(?P<setting>max_loras) \(\d+\) must be (?:>= ?1|less than or equal to max_cpu_loras)",
                   r"(?P<setting>max_lora_rank) \(\d+\) must be one of",
                   r"(?P<setting>lora_extra_vocab_size) \(\d+\) must be one of",
                   r"(?P<setting>fully_sharded_loras) isn't compatible with",
                   r"V1 LoRA does not support (?P<setting>long LoRA)", r"V0 LoRA does not support (?P<setting>CPU offload)",
                   r"LoRA is not supported with (?P<setting>moe_backend=\S+)",
                   r"(?P<setting>LoRA rank `r`) must be a positive integer",
                   # the scheduler ran out of adapter slots: more distinct adapters in one batch than --max-loras
                   r"(?P<setting>No free lora slots)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.mm_limit_exceeded", category="engine_config",
         title="More {modality} inputs than --limit-mm-per-prompt allows ({limit})",
         fix="Raise the limit at launch, e.g. --limit-mm-per-prompt '{{\"{modality}\": N}}' (more memory is reserved per "
             "request), or send fewer {modality} items per request.",
         patterns=[r"At most (?P<limit>\d+) (?P<modality>image|video|audio)\(s\) may be provided in one (?:request|prompt)",
                   r"You set (?:or defaulted to )?'?\{?'?(?P<modality>image|video|audio)'?: ?(?P<limit>\d+)\}?'? in `--limit-mm-per-prompt`, but passed \d+",
                   # 0.6-0.8 (multimodal/processing.py): "You set image=2 (or defaulted to 1) in `--limit-mm-per-prompt`"
                   r"You set (?P<modality>image|video|audio)=(?P<limit>\d+) \(or defaulted to 1\) in .--limit-mm-per-prompt., but passed \d+"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="config.structured_output_unsupported", category="engine_config",
         title="The structured-output backend cannot handle this request ({detail})",
         fix="The JSON schema/grammar uses features this backend lacks: simplify the schema, or choose another backend "
             "with --structured-outputs-config.backend (older: --guided-decoding-backend) guidance or outlines.",
         patterns=[r"(?P<detail>The provided JSON schema contains features not supported by \w+)",
                   r"(?P<detail>\w+ does not support (?:regex|Lark|EBNF|JSON schema|structural tag)[\w ]*)",
                   r"(?P<detail>Invalid (?:structured output|guided decoding) backend[^.]*)",
                   r"(?P<detail>xgrammar\.[\w.]*Error: .{0,120})"],
         playbook="engine-config", confidence=0.8),
]

# A request longer than the context the server was started with (the server stays up; the request fails).
RULES += [
    Rule(signature="config.prompt_too_long", category="engine_config",
         title="A request is longer than the server's max_model_len ({max_model_len} tokens)",
         fix="Send shorter prompts (or fewer max_tokens), or restart with a larger --max-model-len if the "
             "model and the KV-cache memory allow it.",
         patterns=[r"The decoder prompt \(length (?P<prompt>\d+)\) is longer than the maximum model length of (?P<max_model_len>\d+)",
                   # V1 input_processor (newer releases): a prompt exactly max_model_len long leaves no room for one output token
                   r"The decoder prompt \(length (?P<prompt>\d+)\) plus the number of requested output tokens "
                   r"\(at least 1\) is longer than the maximum model length of (?P<max_model_len>\d+)",
                   r"maximum context length is (?P<max_model_len>\d+) tokens\. However, you requested (?P<prompt>\d+) tokens",
                   # 0.10-0.19 "your request has N input tokens", 0.32+ "your prompt contains N input tokens"
                   r"maximum context length is (?P<max_model_len>\d+) tokens\. However, your (?:request has|prompt contains) (?P<prompt>\d+) input tokens",
                   r"maximum context length is (?P<max_model_len>\d+) tokens\. However, you requested \d+ output tokens and your prompt contains (?P<prompt>\d+) input tokens",
                   r"maximum context length is (?P<max_model_len>\d+) tokens\. However, your prompt contains \d+ characters",
                   r"Input prompt \((?P<prompt>\d+) tokens\) is too long and exceeds limit of (?P<max_model_len>\d+)"],
         playbook="engine-config", confidence=0.85),
]

RULES += [
    Rule(signature="config.pp_unsupported_model", category="engine_config",
         title="This model cannot be split with pipeline parallelism in this vLLM",
         fix="The model class does not implement pipeline parallelism (SupportsPP): drop "
             "--pipeline-parallel-size and use --tensor-parallel-size (or data parallelism) instead, or upgrade "
             "vLLM if a newer release adds it.",
         # ModelConfig.verify_with_parallel_config (0.6 .. 0.33); the second sentence ("Supported models implement
         # the `SupportsPP` interface.") is often pasted on its own line. 0.5.1-0.6.0 checked a fixed list instead:
         # "Pipeline parallelism is only supported for the following  architectures: [...]"
         patterns=[r"Pipeline parallelism is not supported for this model\.",
                   r"Pipeline parallelism is only supported for the following\s+architectures"],
         playbook="engine-config", confidence=0.9),
]


# ModelConfig._init_multimodal_config (0.6 .. 0.10): a multimodal option on a model the registry does not call
# multimodal. Either the model is text-only (drop the option), or it is a vision/audio model whose architecture this
# vLLM does not register yet (registry.is_multimodal_model is False for unknown architectures), so the option is
# refused before the architecture itself is.
MM_ONLY_RE = lazy(r"`(?P<opt>limit_mm_per_prompt|mm_processor_kwargs|disable_mm_preprocessor_cache|media_io_kwargs)` "
                  r"is only supported for multimodal models")
MULTIMODAL_NAME_RE = lazy(
    r"(?i)VL\b|VL-|-VL|vision|omni|llava|pixtral|idefics|paligemma|mllama|molmo|internvl|minicpm-?[vo]|\d(?:\.\d)?V\b|"
    r"-V-|audio|whisper|voxtral|ultravox|gemma-?3n|gemma-3-(?:4|12|27)b|llama-?4|deepseek-vl|janus|fuyu|chameleon|"
    r"blip|smolvlm|nvlm|glm-?4v|kimi-vl|phi-?4-multimodal")


# A script's own name for the checkpoint it hands to LLM(...): MODEL_PATH = "/models/Qwen2.5-Omni-7B", model="..."
MODEL_ASSIGNED_RE = lazy(r"\b(?:MODEL_(?:PATH|NAME|ID)|model_(?:path|name|id)|model)\s*=\s*[\"']([^\"']+)[\"']")
# A model id a ticket names in its prose ("the model (Qwen2.5-Omni-7B) is not recognised"): a hyphenated name
MODEL_ID_RE = lazy(r"(?<![\w./-])(?:[\w.-]+/)?[A-Za-z][\w.]*-[\w.-]*\w")


def _model_named(scan: Scan) -> str:
    model = scan.facts.get("model")
    if model:
        return str(model)
    for ln in scan.lines:
        # the command line, or vLLM's own echo of it (Namespace(model='...'), non-default args: {'model': '...'})
        m = re.search(r"vllm serve\s+([^\s-]\S*)|--model[= ](\S+)|\bmodel(?:_tag)?='([^']+)'|'model(?:_tag)?': '([^']+)'",
                      ln.text) or MODEL_ASSIGNED_RE.search(ln.text)
        if m:
            return next(g for g in m.groups() if g)
    # no launch names it: a multimodal model id the ticket mentions is the model it is about
    for ln in scan.lines:
        for m in MODEL_ID_RE.finditer(ln.text):
            if MULTIMODAL_NAME_RE.search(m.group()):
                return m.group()
    return ""


def _mm_option(scan: Scan, env: dict[str, Any], multimodal: bool) -> Diagnosis | None:
    for ln in scan.lines:
        m = MM_ONLY_RE.search(ln.text)
        if m is None:
            continue
        opt, model = m.group("opt"), _model_named(scan)
        flag = "--" + opt.replace("_", "-")
        if bool(model and MULTIMODAL_NAME_RE.search(model)) != multimodal:
            return None
        if multimodal:
            return Diagnosis(
                category="model_support", signature="model_support.multimodal_not_recognised",
                title=f"This vLLM does not recognise {model} as a multimodal model (so {flag} is refused)",
                confidence=0.85, evidence=[Evidence(ln.no, ln.shown)], facts={"option": opt, "model": model},
                fix=Fix(f"{model} is a vision/audio model, but this vLLM's model registry has no multimodal class for "
                        f"its architecture, so it treats the model as text-only and refuses {flag}. The vLLM release "
                        "predates the model: upgrade vLLM to one that lists the architecture under supported "
                        "multimodal models (the model card names the version; new models may need a nightly "
                        "build).", "model-support"),
                first_line=ln.no)
        return Diagnosis(
            category="engine_config", signature="config.mm_option_text_only",
            title=f"{flag} was given for a model this vLLM treats as text-only",
            confidence=0.85, evidence=[Evidence(ln.no, ln.shown)], facts={"option": opt, "model": model},
            fix=Fix(f"{flag} only applies to multimodal (image/audio/video) models, and vLLM's registry does not list "
                    f"{model or 'this model'}'s architecture as one: drop {flag} for a text-only model; if the model "
                    "does take images or audio, this vLLM predates its multimodal support, so upgrade vLLM.",
                    "engine-config"),
            first_line=ln.no)
    return None


RULES += [
    Rule(signature="config.mm_option_text_only", category="engine_config",
         title="A multimodal option was given for a text-only model", fix="",
         check=lambda scan, env: _mm_option(scan, env, multimodal=False), playbook="engine-config", confidence=0.85),
    Rule(signature="model_support.multimodal_not_recognised", category="model_support",
         title="This vLLM does not recognise the model as multimodal", fix="",
         check=lambda scan, env: _mm_option(scan, env, multimodal=True), playbook="model-support", confidence=0.85),
]


# argparse's other refusals ("argument --flag: <message>", Lib/argparse.py): a value of the wrong type ("invalid int
# value: '32k'"), a flag without its value ("expected one argument"), and vLLM's own type parsers, whose
# ArgumentTypeError text replaces argparse's (engine/arg_utils.py parse_type: "Value X cannot be converted to T.";
# JSON options: the json/pydantic error itself). "invalid choice" is config.invalid_choice.
ARG_ERROR_RE = r"error: argument (?P<flag>--?[\w.-]+)(?:/-?[\w.-]+)*: (?!invalid choice)(?P<detail>.{1,200})"


def _argument_advice(m, line, scan) -> dict:
    flag, detail = m.group("flag"), m.group("detail").strip()
    typed = re.match(r"invalid (?P<type>\w+) value: (?P<value>.+)", detail)
    if typed:
        kind = {"int": "a whole number", "float": "a number", "human_readable_int": "a number (32768, or 32k / 1M)",
                "loads": "JSON", "parse_int": "a whole number"}.get(typed.group("type"), f"a {typed.group('type')} value")
        if typed.group("type") == "loads":
            return {"what": "not valid JSON", "advice": _json_advice(flag)}
        value = typed.group("value")
        if re.fullmatch(r"'?(?:\d+:\d+|/[^:']*:/[^']*)'?`?", value.strip()):
            # docker's -p 8000:8000 or -v /host:/ctr written after the image name reach vLLM's parser
            return {"what": f"{value} is a docker option's value",
                    "advice": f"{value} is a docker port or volume mapping: docker options written after the image name "
                              f"are passed to vLLM, which read this one as {flag}. Put -p/-v/-e and the other docker "
                              "options before the image name."}
        return {"what": f"{value} is not {kind}",
                "advice": f"{flag} takes {kind}; {value} is not one. Pass the value in that form."}
    if detail.startswith("expected") and "argument" in detail:
        return {"what": "its value is missing",
                "advice": f"{flag} needs a value right after it: put it there (quote values with spaces or JSON; in a "
                          "docker compose or Kubernetes list, the value goes in the next list item or as "
                          f"{flag}=VALUE)."}
    if re.search(r"JSON|[Ee]xpecting (?:property name|value|',' delimiter)|loads|Extra data", detail):
        return {"what": "not valid JSON", "advice": _json_advice(flag)}
    if "validation error" in detail:
        return {"what": "a field it does not accept",
                "advice": f"The value of {flag} was parsed, but vLLM's config refuses a field in it (the lines after "
                          f"this name the field and the expected form): fix that field; keys and shapes of {flag} "
                          "change between releases, so check `vllm serve --help=all` of the installed version."}
    return {"what": detail[:80],
            "advice": f"{flag} exists, but the value given cannot be read ({detail[:120]}): pass it in the form "
                      "`vllm serve --help=all` of this vLLM shows."}


def _json_advice(flag: str) -> str:
    return (f"{flag} takes JSON: single-quote the whole value for the shell and use double quotes inside, e.g. "
            f"{flag} '{{\"key\": 1}}' (in docker compose or YAML, quote it once more); newer vLLM also takes "
            f"{flag}.key=value.")


RULES += [
    Rule(signature="config.argument_invalid", category="engine_config",
         title="vLLM cannot read the value of {flag} ({what})",
         fix="{advice}", patterns=[ARG_ERROR_RE], facts=_argument_advice,
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.argument_missing", category="engine_config",
         title="The launch command lacks a required argument ({args})",
         fix="{advice}",
         patterns=[r"error: the following arguments are required: (?P<args>[\w ,/-]+)"],
         facts=lambda m, line, scan: {"advice": (
             f"argparse needs {m.group('args').strip()}: for `vllm serve` the model is the first positional argument "
             "(`vllm serve ORG/MODEL [options]`); in an image whose entrypoint already runs the server, pass it as "
             "--model.")},
         playbook="engine-config", confidence=0.9),
    # Python's Enum: a config value older vLLM kept as an enum (LoadFormat, ConfigFormat, TokenizerMode, ...)
    Rule(signature="config.enum_value_invalid", category="engine_config",
         title="'{value}' is not a {enum} this vLLM knows",
         fix="{advice}",
         patterns=[r"ValueError: '(?P<value>[^']{1,60})' is not a valid (?P<enum>(?!Quant)[A-Z]\w+)\s*$"],
         facts=lambda m, line, scan: {"advice": (
             f"'{m.group('value')}' is not one of this vLLM's {m.group('enum')} values (added in a later release, or "
             "misspelt): use a value `vllm serve --help=all` lists for the option, or upgrade vLLM if its "
             f"documentation names '{m.group('value')}'.")},
         playbook="engine-config", confidence=0.75),
]


# config/vllm.py _validate_v2_model_runner / _validate_v1_model_runner (0.2x .. 0.33): the model runner that was
# asked for lacks a feature of this launch. When the missing feature is a speculative-decoding one, it is that
# method the user must change, so the diagnosis is speculative decoding's.
RUNNER_RE = lazy(r"Model Runner (?P<runner>V[12]) does (?:not yet|not) support: (?P<features>.{3,300}?)(?: \[type=|$)")
SPEC_FEATURE_RE = lazy(r"(?i)speculat|draft|MTP|eagle|ngram|dflash|dspark|xpress")


def _runner_unsupported(scan: Scan, env: dict[str, Any], spec: bool) -> Diagnosis | None:
    if "Model Runner V" not in scan.joined_text():
        return None
    for ln in scan.lines:
        m = RUNNER_RE.search(ln.text)
        if m is None:
            continue
        features, runner = m.group("features").strip().rstrip("."), m.group("runner")
        if bool(SPEC_FEATURE_RE.search(features)) != spec:
            return None
        other = "V1" if runner == "V2" else "V2"
        env_hint = ("unset VLLM_USE_V2_MODEL_RUNNER (or set it to 0)" if runner == "V2"
                    else "set VLLM_USE_V2_MODEL_RUNNER=1")
        fix = (f"The {runner} model runner this launch selected does not support {features}: {env_hint} to use the "
               f"{other} model runner, or drop that feature from the launch.")
        return Diagnosis(
            category="speculative_decoding" if spec else "engine_config",
            signature="speculative.model_runner_unsupported" if spec else "config.model_runner_unsupported",
            title=f"Model runner {runner} does not support {features}",
            confidence=0.88, evidence=[Evidence(ln.no, ln.shown)], facts={"runner": runner, "features": features,
                                                                           "advice": fix},
            fix=Fix(fix, "speculative-decoding" if spec else "engine-config"),
            first_line=ln.no)
    return None


RULES += [
    Rule(signature="config.model_runner_unsupported", category="engine_config",
         title="The model runner does not support this launch", fix="",
         check=lambda scan, env: _runner_unsupported(scan, env, spec=False), playbook="engine-config", confidence=0.88),
]

VALIDATION_RULE: Rule = next(r for r in RULES if r.signature == "config.validation_error")
MAX_LEN_RULE: Rule = next(r for r in RULES if r.signature == "config.max_model_len_too_large")

# a message a paste wrapped over lines still reaches every plain pattern rule here
read_wrapped_messages(RULES)
