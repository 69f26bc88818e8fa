"""A request naming a model the OpenAI-compatible server does not serve.

vLLM's server answers every request whose `model` is neither a served name nor a loaded LoRA adapter's name with a
404 (serving_engine `_check_model`, every release): "The model `{request.model}` does not exist." (err_type
NotFoundError; a later release appends "Served models: a, b."). The served name is --served-model-name, or, without
it, the --model argument exactly as given (a local path such as /root/models/Qwen2.5-7B-Instruct, not its last
part). The engine is healthy: the client (or a framework's config) sends another name. It is usually pasted from
the client's side: openai.NotFoundError: Error code: 404 - {'object': 'error', 'message': 'The model `x` does not
exist.', ...}.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

# What the log says the server serves: the args/config line's served_model_name, else the launch's --model.
_SERVED = [lazy(r"--served-model-name[ =]+['\"]?(?P<n>[^\s'\"]+)"),
           lazy(r"served_model_name[=:]\s*\[?['\"]?(?P<n>[^'\",)\]\s]+)"),
           lazy(r"(?:--model[ =]+|\bmodel=')(?P<n>[^\s'\"]+)")]


def _served(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    for rx in _SERVED:
        for ln in scan.lines:
            hit = rx.search(ln.text)
            if hit and hit.group("n") not in ("None", "null"):
                return {"served": hit.group("n"),
                        "served_note": f" (the log shows it serves `{hit.group('n')}`)"}
    return {"served_note": ""}


RULES = [
    Rule(signature="serving.model_not_served", category="engine_config",
         title="The request asks for model `{name}`, a name this vLLM server does not serve{served_note}",
         fix="Send the name the server lists at `curl http://HOST:PORT/v1/models` (without --served-model-name it "
             "is the --model argument exactly as given, e.g. the full local path), or restart the server with "
             "`--served-model-name {name}`; a LoRA adapter is addressed by its --lora-modules name.",
         patterns=[r"The model `(?P<name>[^`]{1,300})` does not exist\."], facts=_served,
         playbook="engine-config", confidence=0.8),
]
