"""The `vllm serve ...` command a user is about to run, read as the settings that decide its fate."""

from __future__ import annotations

from dataclasses import dataclass, field

# flag -> (setting, kind); aliases included. Anything else is kept verbatim in `other`.
FLAGS = {
    "--model": ("model", str), "--tensor-parallel-size": ("tp", int), "-tp": ("tp", int),
    "--pipeline-parallel-size": ("pp", int), "-pp": ("pp", int), "--dtype": ("dtype", str),
    "--kv-cache-dtype": ("kv_cache_dtype", str), "--max-model-len": ("max_model_len", int),
    "--gpu-memory-utilization": ("gpu_memory_utilization", float), "--quantization": ("quantization", str),
    "-q": ("quantization", str), "--attention-backend": ("attention_backend", str),
    "--block-size": ("block_size", int), "--max-num-seqs": ("max_num_seqs", int),
    "--data-parallel-size": ("dp", int), "-dp": ("dp", int), "--served-model-name": ("served_model_name", str),
}
BOOL_FLAGS = {"--enforce-eager", "--trust-remote-code", "--enable-expert-parallel"}


class LaunchError(ValueError):
    """The command is not a vLLM launch triage can read."""


@dataclass(slots=True)
class Launch:
    model: str
    tp: int = 1
    pp: int = 1
    dp: int = 1
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    max_model_len: int | None = None
    gpu_memory_utilization: float = 0.9
    quantization: str | None = None
    attention_backend: str | None = None
    block_size: int | None = None
    max_num_seqs: int | None = None
    served_model_name: str | None = None
    switches: set[str] = field(default_factory=set)
    other: list[str] = field(default_factory=list)


def parse_launch(argv: list[str]) -> Launch:
    """`vllm serve MODEL [ARGS]`, `python -m vllm.entrypoints.openai.api_server --model MODEL [ARGS]`."""
    args = list(argv)
    if args[:2] == ["vllm", "serve"] or (args and args[0].endswith("/vllm") and args[1:2] == ["serve"]):
        args = args[2:]
    elif len(args) >= 3 and args[1] == "-m" and args[2].startswith("vllm.entrypoints"):
        args = args[3:]
    elif args[:1] == ["serve"]:
        args = args[1:]
    values: dict[str, object] = {}
    switches: set[str] = set()
    other: list[str] = []
    positional: list[str] = []
    i = 0
    while i < len(args):
        a = args[i]
        name, eq, inline = a.partition("=")
        if name in FLAGS:
            key, kind = FLAGS[name]
            if eq:
                raw = inline
            elif i + 1 < len(args):
                i += 1
                raw = args[i]
            else:
                raise LaunchError(f"{name} needs a value")
            try:
                values[key] = kind(raw)
            except ValueError:
                raise LaunchError(f"{name} {raw!r} is not a valid {kind.__name__}") from None
        elif a in BOOL_FLAGS:
            switches.add(a)
        elif a.startswith("-"):
            other.append(a)
        else:
            (other if other and not other[-1].startswith("--no-") and "=" not in other[-1] else positional).append(a)
        i += 1
    model = values.pop("model", None) or (positional[0] if positional else None)
    if not model:
        raise LaunchError("no model in the command: `vllm serve MODEL ...` or `--model MODEL`")
    return Launch(model=str(model), switches=switches, other=other, **values)  # type: ignore[arg-type]
