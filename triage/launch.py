"""The `vllm serve` command line, rebuilt from the `non-default args: {...}` vLLM logs at start-up.

One place for this: the playbooks relaunch with it (as an argv list, never shell text) and the
upstream bug report shows it. Every value comes from a log, so none may land in option position: a
model starting with `-` goes after `--`, a value starting with `-` is joined to its flag
(`--flag=-x`), and a key that is not a plain option name is dropped.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from triage.lazyre import lazy

POSITIONAL = ("model_tag", "model")
_KEY = lazy(r"^-{0,2}[A-Za-z0-9][A-Za-z0-9_.-]*$")
_NUMBER = lazy(r"^-\d+(\.\d+)?$")


def _dashed(value: str) -> bool:
    return value.startswith("-") and not _NUMBER.match(value)


def serve_argv(launch_args: dict[str, Any], *, vllm: str = "vllm", model: str | None = None) -> list[str]:
    args = dict(launch_args)
    model = model or args.get("model_tag") or args.get("model")
    argv = [vllm, "serve"]
    late = model is not None and _dashed(str(model))
    if model and not late:
        argv.append(str(model))
    for key, value in args.items():
        if key in POSITIONAL or not _KEY.match(str(key)):
            continue
        flag = key if key.startswith("-") else "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is False or value is None:
            continue  # vLLM logs only non-defaults; False/None here means "off", the default
        elif isinstance(value, (list, tuple)):
            items = [str(v) for v in value if not _dashed(str(v))]
            if items:
                argv.append(flag)
                argv.extend(items)  # nargs="+" flags such as --served-model-name
        elif isinstance(value, dict):
            argv.extend([flag, json.dumps(value, separators=(",", ":"))])  # JSON-valued configs
        elif _dashed(str(value)):
            argv.append(f"{flag}={value}")
        else:
            argv.extend([flag, str(value)])
    if late:
        argv += ["--", str(model)]
    return argv


def shown(argv: list[str]) -> str:
    """For display only: a shell-quoted rendering."""
    return shlex.join(argv)
