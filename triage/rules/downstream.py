"""vLLM driven by another project (an RL or fine-tuning trainer, an evaluation harness, a serving stack):
failures that come from the two packages' releases not fitting each other.

Such a project calls vLLM's Python API (`LLM(...)`, `EngineArgs(...)`, `llm.llm_engine.model_executor`) and
imports it behind a guard. When the installed vLLM is another release than the project was written for,
the call fails right at the boundary: a keyword the engine no longer takes, an attribute its objects no
longer have, or a name the guarded import never defined.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.logread.traceback import ExceptionRecord, Frame
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# What `from vllm import ...` defines (vllm/__init__.py __all__, 0.6-0.33, stable across releases).
VLLM_NAMES = ("LLM", "SamplingParams", "LLMEngine", "AsyncLLMEngine", "EngineArgs", "AsyncEngineArgs",
              "RequestOutput", "CompletionOutput", "PoolingParams", "TextPrompt", "TokensPrompt", "ModelRegistry",
              "PoolingOutput", "PoolingRequestOutput", "initialize_ray_cluster")

# Projects that drive vLLM through its Python API (their package folder in a path).
FRAMEWORKS = ("verl", "openrlhf", "trl", "lm_eval", "lmms_eval", "lighteval", "opencompass", "llamafactory",
              "unsloth", "unsloth_zoo", "swift", "nemo_rl", "skyrl_train", "areal", "easyr1", "open_instruct",
              "vllm_ascend", "lmcache", "kserve", "huggingfaceserver")
_PKG_RE = lazy(r"[/\\](?:site|dist)-packages[/\\](?P<pkg>[A-Za-z_]\w*)[/\\]")
_FRAMEWORK_RE = lazy(r"[/\\](?P<pkg>" + "|".join(FRAMEWORKS) + r")[/\\]")
# vLLM's own classes a caller reaches into (the engine, its executor and workers, its configs).
VLLM_CLASSES = ("LLM", "LLMEngine", "AsyncLLMEngine", "AsyncLLM", "EngineCoreClient", "SyncMPClient",
                "AsyncMPClient", "InprocClient", "Worker", "GPUModelRunner", "ModelRunner", "WorkerWrapperBase",
                "MultiprocExecutor", "UniProcExecutor", "RayDistributedExecutor", "ExecutorWithExternalLauncher",
                "VllmConfig", "ModelConfig", "CacheConfig", "ParallelConfig", "SchedulerConfig", "EngineArgs",
                "AsyncEngineArgs", "SamplingParams", "RequestOutput", "CompletionOutput")
_CALL_RE = lazy(r"(?P<callee>[\w.]+)\(\) (?P<how>got an unexpected keyword argument '(?P<arg>\w+)'"
                r"|got multiple values for argument '(?P<arg2>\w+)'|missing \d+ required (?:positional|keyword-only) "
                r"arguments?: '(?P<arg3>\w+)')")
_ATTR_RE = lazy(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'")
MAX_VLLM_DEPTH = 3  # vLLM frames between the caller's call and the raise: deeper is vLLM's own code failing


def _is_vllm(f: Frame) -> bool:
    p = "/" + f.file.replace("\\", "/")
    return "/vllm/" in p and not _FRAMEWORK_RE.search(p)


def _caller(f: Frame) -> str | None:
    """The package a frame belongs to when it is another project's code that calls vLLM (None for vLLM,
    Python's own and plumbing libraries)."""
    p = f.file.replace("\\", "/")
    m = _FRAMEWORK_RE.search(p)
    if m:
        return m.group("pkg")
    m = _PKG_RE.search(p)
    if m and m.group("pkg") not in ("vllm", "torch", "ray", "transformers", "asyncio", "concurrent", "uvloop",
                                    "multiprocessing", "importlib", "runpy", "functools", "contextlib"):
        return m.group("pkg")
    return None


def _boundary(exc: ExceptionRecord) -> tuple[str, Frame] | None:
    """(caller package, its frame) when the exception was raised within a few vLLM frames of another
    project's call into vLLM, or in that project's own frame."""
    frames = exc.frames
    if not frames:
        return None
    depth = 0
    for f in reversed(frames):
        if _is_vllm(f):
            depth += 1
            if depth > MAX_VLLM_DEPTH:
                return None
            continue
        pkg = _caller(f)
        return (pkg, f) if pkg else None
    return None


def _api_mismatch(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for exc in scan.exceptions:
        what = ""
        if exc.short_type == "TypeError":
            m = _CALL_RE.search(exc.message)
            if m and (m.group("callee").split(".")[0] in VLLM_CLASSES or m.group("callee").split(".")[0] in VLLM_NAMES):
                arg = m.group("arg") or m.group("arg2") or m.group("arg3")
                what = f"{m.group('callee')}() and its argument '{arg}'"
        elif exc.short_type == "AttributeError":
            m = _ATTR_RE.search(exc.message)
            if m and m.group("cls") in VLLM_CLASSES:
                what = f"{m.group('cls')}.{m.group('attr')}"
        if not what:
            continue
        hit = _boundary(exc)
        if hit is None and (exc.frames or exc.short_type != "TypeError"):
            continue
        # A TypeError quoted with no traceback at all (a ticket, a PR description): a vLLM class's method refusing
        # its caller's arguments is the caller's release, less sure without the caller's frame.
        pkg, frame = hit if hit else ("the calling code", None)
        where = f"{pkg} ({frame.file.rsplit('/', 1)[-1]})" if frame else pkg
        return Diagnosis(
            category="install_mismatch", signature="downstream.vllm_api_mismatch",
            title=(f"{pkg} calls a vLLM API the installed vLLM does not have ({what})" if frame else
                   f"The code calling vLLM uses an API the installed vLLM does not have ({what})"),
            confidence=0.75 if frame else 0.6, evidence=[Evidence(exc.line.no, exc.line.shown)],
            facts={"framework": pkg, "what": what, "exception": exc.type,
                   **({"called_from": f"{frame.file}:{frame.line} in {frame.func}"} if frame else {})},
            explanation=[f"{where} calls into vLLM, and the call fails at once on "
                         f"{what}: the two packages come from releases that do not fit"],
            fix=Fix(f"{pkg} was written against another vLLM release than the one installed: install the vLLM "
                    f"version {pkg} pins (its requirements or install extra, e.g. `pip install '{pkg}[vllm]'`), or a "
                    f"{pkg} release made for this vLLM. Where {pkg} offers it, the older engine may be selected "
                    "(VLLM_USE_V1=0 on vLLM 0.8-0.10)." if frame else
                    "The project calling vLLM was written against another vLLM release than the one installed: "
                    "install the vLLM version it pins (its requirements or `[vllm]` extra), or a release of the "
                    "project made for this vLLM.", "install-mismatch"),
            first_line=exc.line.no)
    return None


def _guard_facts(m: Any, line: Any, scan: Scan) -> dict:
    return {"where": next((f.file.rsplit("/", 1)[-1] for e in scan.exceptions if e.line.no == line.no
                           for f in e.frames[-1:]), "the project's code")}


RULES = [
    # lm-eval, lmms-eval and others wrap `from vllm import LLM, SamplingParams` in try/except: when vLLM (or
    # what it imports) fails to import, the name stays undefined and the first use raises NameError.
    Rule(signature="downstream.vllm_import_failed", category="install_mismatch",
         title="vLLM did not import in this environment: {name} was never defined ({where})",
         fix="The project imports vLLM behind a guard and went on without it. Run `python -c 'import vllm'` in the "
             "same environment to see why it fails (not installed, or a torch/CUDA build it does not fit), then "
             "install the vLLM release the project supports (often its `[vllm]` extra).",
         patterns=[r"NameError: name '(?P<name>" + "|".join(VLLM_NAMES) + r")' is not defined"],
         facts=_guard_facts, playbook="install-mismatch", confidence=0.7),
    Rule(signature="downstream.vllm_api_mismatch", category="install_mismatch", title="", fix="",
         playbook="install-mismatch", check=_api_mismatch),
]
