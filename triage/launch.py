"""The `vllm serve` command line, rebuilt from the `non-default args: {...}` vLLM logs at start-up.

One place for this: the playbooks relaunch with it (as an argv list, never shell text) and the
upstream bug report shows it.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

POSITIONAL = ("model_tag", "model")


def serve_argv(launch_args: dict[str, Any], *, vllm: str = "vllm", model: str | None = None) -> list[str]:
    args = dict(launch_args)
    model = model or args.get("model_tag") or args.get("model")
    argv = [vllm, "serve"]
    if model:
        argv.append(str(model))
    for key, value in args.items():
        if key in POSITIONAL:
            continue
        flag = key if key.startswith("-") else "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue  # vLLM logs only non-defaults; False/None here means "off", the default
        elif isinstance(value, (list, tuple)):
            argv.append(flag)
            argv.extend(str(v) for v in value)  # nargs="+" flags such as --served-model-name
        elif isinstance(value, dict):
            argv.extend([flag, json.dumps(value, separators=(",", ":"))])  # JSON-valued configs
        else:
            argv.extend([flag, str(value)])
    return argv


def shown(argv: list[str]) -> str:
    """For display only: a shell-quoted rendering."""
    return shlex.join(argv)
