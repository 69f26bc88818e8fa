"""vLLM general plugin: registers the sparse MLA Triton backend in the CUSTOM attention slot.

vLLM calls `register()` in every process it starts (API server, engine core, each worker), maybe
more than once per process. So it is idempotent, imports neither torch nor triton, never raises,
and logs at most one line. Outside the supported vLLM range (support.SUPPORTED_VLLM) it logs one
clear line and changes nothing.

Registry facts this code relies on (vllm-project/vllm, registry.py read at 0033bf03abd6):
- module vllm/v1/attention/backends/registry.py (every supported release)
- `register_backend(AttentionBackendEnum.CUSTOM, "pkg.mod.Class")` stores an override;
  `AttentionBackendEnum.CUSTOM.get_path()` then returns it
- CUSTOM's value is None since PR #30869 (v0.14.0); before, CUSTOM = "" aliased TORCH_SDPA
- the attention layer looks the backend up with `AttentionBackendEnum[backend.get_name()]`, so the
  class's get_name() returns "CUSTOM"
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os

from .support import BACKEND_CLASS_PATH, BACKEND_SLOT, SUPPORTED_VLLM, vllm_supported

_REGISTRY_MODULES = (
    "vllm.v1.attention.backends.registry",
)
# The sparse MLA layer that calls `impl.forward_mqa(q, kv_cache, attn_metadata, layer)`; its file
# is checked on disk (importing it would pull in torch and half of vLLM).
_LAYER_FILES = (("model_executor", "layers", "attention", "mla_attention.py"),)

_state: dict[str, str] = {}  # "outcome" -> what happened, once per process

logger = logging.getLogger("triage_sparse_mla")


def _log(level: int, msg: str, *args: object) -> None:
    # vLLM's own logger when present (same format and destination as its other lines).
    try:
        from vllm.logger import init_logger

        init_logger("triage_sparse_mla").log(level, msg, *args)
    except Exception:
        logger.log(level, msg, *args)


def _installed_vllm_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def _vllm_dir() -> str | None:
    spec = importlib.util.find_spec("vllm")
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _has_forward_mqa_layer(vllm_dir: str) -> bool:
    return any(os.path.exists(os.path.join(vllm_dir, *parts)) for parts in _LAYER_FILES)


def _registry():
    for name in _REGISTRY_MODULES:
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


def register() -> str:
    """Register the backend as CUSTOM. Returns what happened (also logged once): 'registered',
    'already registered', or 'skipped: <reason>'."""
    if "outcome" in _state:
        return _state["outcome"]
    try:
        outcome = _register()
    except Exception as exc:  # a plugin must never take vLLM down
        outcome = f"skipped: unexpected error {type(exc).__name__}: {exc}"
        _log(logging.WARNING, "triage_sparse_mla: %s", outcome)
    _state["outcome"] = outcome
    return outcome


def _register() -> str:
    version = _installed_vllm_version()
    if version is None:
        return _skip("vLLM is not installed in this environment")
    ok, reason = vllm_supported(version)
    if not ok:
        return _skip(reason)
    vdir = _vllm_dir()
    if vdir is None or not _has_forward_mqa_layer(vdir):
        return _skip(
            f"vLLM {version} has no MLA layer with the forward_mqa interface this backend implements"
        )
    reg = _registry()
    if reg is None:
        return _skip(f"vLLM {version} has no attention backend registry")
    enum = reg.AttentionBackendEnum
    custom = enum.__members__.get(BACKEND_SLOT)
    # Before PR #30869 CUSTOM was an alias of TORCH_SDPA (same value ""): registering would
    # silently replace TORCH_SDPA.
    if custom is None or custom.name != BACKEND_SLOT or custom.value is not None:
        return _skip(f"vLLM {version}: the CUSTOM attention slot is missing or aliased (needs vLLM >= 0.14)")
    overrides = getattr(reg, "_ATTN_OVERRIDES", None)
    current = overrides.get(custom) if isinstance(overrides, dict) else None
    if current == BACKEND_CLASS_PATH:
        return "already registered"
    if current:
        return _skip(f"the CUSTOM attention slot already holds {current}; not replacing it")
    reg.register_backend(custom, BACKEND_CLASS_PATH)
    _log(
        logging.INFO,
        "triage_sparse_mla: registered the Triton sparse MLA backend as CUSTOM "
        "(select it with --attention-backend CUSTOM; vLLM %s, supported %s)",
        version,
        SUPPORTED_VLLM,
    )
    return "registered"


def _skip(reason: str) -> str:
    _log(logging.WARNING, "triage_sparse_mla: not registering the sparse MLA backend: %s", reason)
    return f"skipped: {reason}"


def _reset_for_tests() -> None:
    _state.clear()
