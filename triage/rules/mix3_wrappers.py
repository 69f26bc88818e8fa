"""Serving stacks that drive vLLM from the inside, failing where they meet it.

Triton's vLLM backend, KServe's huggingfaceserver, BentoML's services and Ray Serve LLM do not run `vllm serve`:
they rebuild its OpenAI front end from vLLM's entrypoint internals (`build_async_engine_client_from_engine_args`,
`init_app_state`, `OpenAIServingChat(...)`, `OpenAIServingModels`, `BaseModelPath`). Those are not a stable API:
vLLM changes their parameters between releases (0.4.1 `served_model` -> `served_model_names`, 0.7 the
`models=OpenAIServingModels` argument, 0.10 `stat_loggers`), so a wrapper and a vLLM from different releases fail
with Python's call error on one of these names (`X() got an unexpected keyword argument 'a'`, `X.__init__()
missing 1 required positional argument: 'a'`, `'X' object has no attribute 'a'`), often relayed inside the
wrapper's own log line. The name is vLLM's, so no frame is needed to know whose release does not fit.

NVIDIA Dynamo's Rust launcher (dynamo-run `out=vllm`, 0.1-0.3) imports the `vllm` Python module itself and panics
with `Failed to import python 'vllm' module. Are we running in the correct venv? <error>`: vLLM does not import
in the environment Dynamo runs (not installed there, or a vllm next to Dynamo's patched ai_dynamo_vllm).

Triton's compiler asserts `mma -> mma layout conversion is only supported on Ampere` (lib/Analysis/Allocation.cpp,
getCvtOrder; Triton 2.x-3.1) when a kernel converts between two tensor-core layouts on a GPU whose MMA layout is not
Ampere's, and the process aborts: on Volta/Turing (V100, T4) vLLM's Triton prefix-prefill attention kernel, used for
chunked prefill and prefix caching, does this; on Hopper (H100) Triton releases before triton-lang/triton#4492
(which added the Hopper case to the assertion) do it too.
"""

from __future__ import annotations

import re
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

# vLLM's OpenAI-server internals that wrappers call (vllm/entrypoints/openai/api_server.py, serving_*.py,
# serving_models.py, cli_args.py, entrypoints/logger.py; 0.4-0.33). Names only vLLM defines: generic ones
# (LLM, Worker) are downstream.vllm_api_mismatch's, which wants the caller's frame.
ENTRYPOINT_NAMES = (
    "build_async_engine_client_from_engine_args", "build_async_engine_client", "init_app_state", "run_server_worker",
    "setup_server", "build_app", "make_arg_parser", "validate_parsed_serve_args",
    r"OpenAIServing(?:Chat|Completion|Embedding|Models|Tokenization|Pooling|Scores|Transcription|Translation|"
    r"Responses|Classification)?", "ServingScores", "ServingClassification", "BaseModelPath",
    "LoRAModulePath", "PromptAdapterPath", "RequestLogger",
)
_NAMES = "|".join(ENTRYPOINT_NAMES)
_CALL = (r"(?<![\w.])(?P<callee>" + _NAMES + r")(?:\.__init__)?\(\) (?:got an unexpected keyword argument "
         r"'(?P<arg>\w+)'|got multiple values for argument '(?P<arg2>\w+)'|missing \d+ required (?:positional|"
         r"keyword-only) arguments?: '(?P<arg3>\w+)')")
_ATTR = r"'(?P<callee>" + _NAMES + r")' object has no attribute '(?P<arg>\w+)'"


def _api_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    g = m.groupdict()
    arg = g.get("arg") or g.get("arg2") or g.get("arg3") or "?"
    return {"callee": g["callee"], "arg": arg}


def _import_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    return {"error": (m.group("error") or "").strip().rstrip('"') or "see the line"}


RULES = [
    Rule(signature="downstream.entrypoint_api_mismatch", category="install_mismatch",
         title="The serving wrapper calls vLLM's {callee}() with '{arg}', which the installed vLLM does not have",
         fix="The wrapper (Triton's vLLM backend, KServe huggingfaceserver, a BentoML/Ray Serve service) rebuilds "
             "vLLM's OpenAI server from its internals, which change between vLLM releases: install the vLLM version "
             "that wrapper release pins (e.g. the Triton container's own vLLM, `pip install 'kserve[huggingface]'`), "
             "or a wrapper release made for the installed vLLM.",
         patterns=[_CALL, _ATTR], facts=_api_facts, playbook="install-mismatch", confidence=0.8),
    Rule(signature="install.dynamo_vllm_import_failed", category="install_mismatch",
         title="Dynamo could not import vLLM in its environment ({error})",
         fix="Run `python -c 'import vllm'` in the venv Dynamo runs to see the import error, then install the vLLM "
             "build that Dynamo release pins (`pip install 'ai-dynamo[vllm]'`, its patched ai_dynamo_vllm) and "
             "remove any other vllm from that venv (`pip list | grep vllm` should show one).",
         patterns=[r"Failed to import python '?vllm'? module\.?(?: Are we running in the correct venv\?)?"
                   r"(?P<error>[^\"\n]*)"],
         facts=_import_facts, playbook="install-mismatch", confidence=0.85),
    Rule(signature="triton.mma_layout_conversion", category="triton_compile",
         title="Triton aborted compiling a kernel: its mma -> mma layout conversion is only implemented for Ampere",
         fix="On a Volta/Turing GPU (V100, T4) turn off what runs vLLM's Triton prefix-prefill kernel: "
             "`--no-enable-chunked-prefill` (`--enable-chunked-prefill=False` on older releases) and "
             "`--no-enable-prefix-caching`, or serve on an Ampere or newer GPU. On Hopper (H100) the assertion is a "
             "Triton bug fixed by triton-lang/triton#4492: upgrade torch/Triton (a newer vLLM image brings both).",
         patterns=[r"mma -> mma layout conversion is only supported on Ampere"],
         playbook="triton-compile", confidence=0.85),
]
