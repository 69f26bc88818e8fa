"""Predictions: what vLLM would refuse on this machine, from the model's config and the machine's facts.

Each check mirrors a check vLLM makes at start-up (named in its comment) and speaks the diagnosis
vocabulary of spec/report.md, so a prediction reads like the diagnosis the failed log would get, with
the config keys and machine facts that decided it as evidence.
"""

from __future__ import annotations

import ast
import re
from dataclasses import replace
from typing import Any

from triage import versions
from triage.model import Diagnosis, Evidence, Fix
from triage.preflight.launch import Launch
from triage.preflight.machine import Machine
from triage.preflight.model import ModelFiles
from triage.rules.attention.explain import BACKENDS, DSA_ARCHES

GIB = 1 << 30
SHM_ENOUGH = 1 << 30  # NCCL and vLLM's queues fit; Docker's 64 MB default does not
# vLLM's get_min_capability() of each method, for when the installed source cannot be read
# (vllm/model_executor/layers/quantization/*.py).
MIN_CAPABILITY = {"awq": 75, "gptq": 60, "bitsandbytes": 70, "fp8": 80, "awq_marlin": 80, "gptq_marlin": 80,
                  "marlin": 80, "fbgemm_fp8": 80, "modelopt": 89, "modelopt_fp4": 100, "gguf": 60,
                  "compressed-tensors": 70, "experts_int8": 80, "mxfp4": 80}
QUANT_FILES = {"awq": "awq.py", "gptq": "gptq.py", "bitsandbytes": "bitsandbytes.py", "fp8": "fp8.py",
               "awq_marlin": "awq_marlin.py", "gptq_marlin": "gptq_marlin.py", "fbgemm_fp8": "fbgemm_fp8.py",
               "modelopt": "modelopt.py", "gguf": "gguf.py", "experts_int8": "experts_int8.py", "mxfp4": "mxfp4.py"}
DTYPE_BYTES = {"float32": 4, "float": 4, "bfloat16": 2, "float16": 2, "half": 2}


def _ev(text: str) -> Evidence:
    return Evidence(0, text)  # a prediction has no log line: 0 says so


def _diag(category: str, sig: str, title: str, conf: float, evidence: list[str], fix: str, playbook: str | None,
          facts: dict[str, Any] | None = None) -> Diagnosis:
    f = {"predicted": True, **(facts or {})}
    return Diagnosis(category=category, signature=f"preflight.{sig}", title=title, confidence=conf,
                     evidence=[_ev(e) for e in evidence], facts=f, fix=Fix(fix, playbook), first_line=0)


def model_dtype(launch: Launch, cfg: dict[str, Any]) -> str:
    if launch.dtype not in ("auto", ""):
        return {"half": "float16", "float": "float32"}.get(launch.dtype, launch.dtype)
    d = str(cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16")
    return d.replace("torch.", "")


def attention_shape(cfg: dict[str, Any]) -> dict[str, Any]:
    """What vLLM's selector is asked: head size, MLA, DSA sparse (from the model config)."""
    arch = (cfg.get("architectures") or [""])[0]
    mla = bool(cfg.get("kv_lora_rank"))
    sparse = mla and (bool(cfg.get("index_topk")) or arch in DSA_ARCHES)
    if mla:
        head = int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)
    else:
        heads = int(cfg.get("num_attention_heads") or 1)
        head = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // heads))
    return {"architecture": arch, "use_mla": mla, "use_sparse": sparse, "head_size": head}


def _reasons(name: str, spec: dict[str, Any], shape: dict[str, Any], dtype: str, kv: str,
             cc: tuple[int, int] | None, vllm: str | None, installed: dict[str, str]) -> list[str]:
    why = []
    if spec.get("since") and vllm and versions.lt(vllm, spec["since"]):
        why.append(f"not in vLLM {vllm} (added in {spec['since']})")
    if name == "TRITON_MLA_SPARSE" and "triage-sparse-mla" not in installed:
        why.append("not in any vLLM release (open pull requests); triage's bundled backend provides it")
    if shape["use_sparse"] and not spec.get("sparse"):
        why.append("sparse not supported")
    if not shape["use_sparse"] and spec.get("sparse"):
        why.append("dense model")
    if spec.get("cc") is not None and cc and cc[0] not in spec["cc"]:
        why.append("compute capability not supported")
    if dtype not in spec.get("dtypes", []):
        why.append(f"dtype {dtype} not supported")
    if spec.get("kv") and kv not in spec["kv"]:
        why.append(f"kv cache dtype {kv} not supported")
    if spec.get("heads") and shape["head_size"] not in spec["heads"]:
        why.append(f"head size {shape['head_size']} not supported")
    return why


# Architectures whose attention layers carry learned sinks (vLLM passes has_sink=True for them).
SINK_ARCHES = ("GptOssForCausalLM",)


def selector_fields(launch: Launch, cfg: dict[str, Any]) -> dict[str, Any]:
    """The AttentionSelectorConfig vLLM builds for the model's layers (vllm/attention/layer.py)."""
    shape = attention_shape(cfg)
    sliding = bool(cfg.get("sliding_window")) and cfg.get("use_sliding_window") is not False
    return {"head_size": shape["head_size"], "dtype": model_dtype(launch, cfg), "kv_cache_dtype": launch.kv_cache_dtype,
            "block_size": launch.block_size, "use_mla": shape["use_mla"], "use_sparse": shape["use_sparse"],
            "has_sink": shape["architecture"] in SINK_ARCHES, "has_sliding_window": sliding}


def source_selection(launch: Launch, cfg: dict[str, Any], m: Machine):
    """vLLM's own selector walked in the installed source (triage.preflight.selector), or None with why."""
    from triage.preflight.selector import SelectorUnreadable, SourceSelector

    cc = m.cc
    if not cc or "vllm" not in m.packages or not m.source("vllm/platforms/cuda.py"):
        return None, "no installed vLLM source to read"
    forced = (launch.attention_backend or "").upper() or None
    heads = int(cfg.get("num_attention_heads") or 0) // max(1, launch.tp) or None
    try:
        return SourceSelector(m.site_dirs).select(cc, selector_fields(launch, cfg), num_heads=heads, hf_config=cfg,
                                                  device=m.gpu_name, forced=forced), None
    except SelectorUnreadable as exc:
        return None, str(exc)
    except (RecursionError, MemoryError, ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        # source the walk cannot follow (deep recursion, a construct it mis-reads): the table answers instead
        return None, f"the source walk stopped: {type(exc).__name__}"


def _table_rejections(launch: Launch, shape: dict[str, Any], dtype: str, m: Machine,
                      names: list[str] | None = None) -> dict[str, list[str]]:
    kv, cc, vllm = launch.kv_cache_dtype, m.cc, m.packages.get("vllm")
    if names is None:
        names = [n for n, s in BACKENDS.items() if bool(s.get("sparse")) == shape["use_sparse"]
                 and ("MLA" in n) == shape["use_mla"]]
    return {n: _reasons(n, BACKENDS.get(n, {}), shape, dtype, kv, cc, vllm, m.packages) for n in names}


def attention(launch: Launch, model: ModelFiles, m: Machine, found: dict[str, Any] | None = None) -> Diagnosis | None:
    """vLLM's attention selector (vllm/platforms/cuda.py get_attn_backend_cls): some backend must accept
    the model's layers on this GPU; a forced one (--attention-backend) must accept them itself.
    Asked of the installed vLLM's own source where it can be read; triage's table answers the rest."""
    cfg = model.config
    if not cfg:
        return None
    shape = attention_shape(cfg)
    dtype, kv, cc = model_dtype(launch, cfg), launch.kv_cache_dtype, m.cc
    vllm = m.packages.get("vllm")
    basis = "triage's capability table"
    if launch.attention_backend and launch.attention_backend.upper() == "CUSTOM":
        if "triage-sparse-mla" in m.packages:
            return None
        rejected = {"CUSTOM": ["nothing registered in the CUSTOM slot (no plugin installed)"]}
    else:
        sel, why_not = source_selection(launch, cfg, m)
        if sel is not None and sel.error is None:
            if sel.valid:
                if found is not None:  # what vLLM will pick, for the report of a launch that passes
                    found["attention_backend"] = sel.chosen
                    found["attention_backends_valid"] = sel.valid
                    found["gates_from"] = f"vLLM {vllm}'s own selector, read from its source ({sel.files_read} files)"
                return None
            rejected = dict(sel.invalid)
            if sel.undecided:  # what the source walk could not settle, the table answers
                table = _table_rejections(launch, shape, dtype, m, list(sel.undecided))
                if any(not w for w in table.values()):
                    return None
                rejected.update({n: [*w, "(triage's table: the source needs a running process here)"]
                                 for n, w in table.items()})
                basis = f"vLLM {vllm}'s own source ({sel.files_read} files), triage's table for {', '.join(sel.undecided)}"
            else:
                basis = f"vLLM {vllm}'s own selector, read from its source ({sel.files_read} files)"
        else:
            names = [launch.attention_backend.upper()] if launch.attention_backend else None
            rejected = _table_rejections(launch, shape, dtype, m, names)
            if sel is not None and sel.error:
                basis += f" (the installed source raised {sel.error})"
            elif why_not and m.site_dirs:
                basis += f" (the installed vLLM's selector could not be read: {why_not})"
            if any(not why for why in rejected.values()):
                return None
    where = f"{m.gpu_name} (compute capability {cc[0]}.{cc[1]})" if cc else m.gpu_name
    evidence = [f"config.json: architectures={shape['architecture']}, " + (
        f"kv_lora_rank + qk_rope_head_dim = head size {shape['head_size']}" if shape["use_mla"]
        else f"head size {shape['head_size']}") + (", index_topk (DSA sparse attention)" if shape["use_sparse"] else ""),
        f"dtype {dtype}, kv cache dtype {kv}", f"GPU: {where}; vLLM {vllm or 'not found in the named environment'}",
        f"backend gates from {basis}"]
    evidence += [f"{n}: {', '.join(w)}" for n, w in rejected.items()]
    if shape["use_sparse"]:
        fix = ("No sparse MLA backend of this vLLM runs this model on this GPU. On SM12x, vLLM 0.24+ has "
               "FLASHINFER_MLA_SPARSE_SM120 (bf16, --kv-cache-dtype fp8_ds_mla); otherwise install triage's "
               "bundled backend (`triage apply sparse-mla`, then --attention-backend CUSTOM).")
        playbook = "attention-sparse-mla"
    else:
        fix = "Pick a backend that takes this head size and dtype on this GPU, or drop --attention-backend."
        playbook = "attention-backend"
    forced = bool(launch.attention_backend)
    title = (f"--attention-backend {launch.attention_backend} will be refused for this model on this GPU" if forced
             else "vLLM will find no attention backend for this model on this GPU")
    return _diag("attention_backend", "attention_backend", title, 0.9, evidence, fix, playbook,
                 {**shape, "dtype": dtype, "kv_cache_dtype": kv, "rejected": rejected, "gates_from": basis})


def sliding_layers(cfg: dict[str, Any]) -> tuple[int, int | None]:
    """How many layers attend only to a sliding window, and its size (layer_types, or Gemma's
    sliding_window_pattern: every Nth layer full, the rest sliding)."""
    window = cfg.get("sliding_window")
    if not isinstance(window, int) or window <= 0 or cfg.get("use_sliding_window") is False:
        return 0, None
    types = cfg.get("layer_types")
    if isinstance(types, list) and types:
        return sum(1 for t in types if t == "sliding_attention"), window
    pattern = cfg.get("sliding_window_pattern")
    layers = int(cfg.get("num_hidden_layers") or 0)
    if isinstance(pattern, int) and pattern > 1:
        return layers - layers // pattern, window
    return 0, None  # a window on every layer (Mistral-style) is left to the full-length estimate


def kv_per_token(cfg: dict[str, Any], launch: Launch, dtype: str) -> int:
    """Bytes of KV cache one token takes on one GPU, all layers (vllm/v1/kv_cache_interface.py page sizes)."""
    layers = max(1, int(cfg.get("num_hidden_layers") or 1) // max(1, launch.pp))
    return layers * kv_per_layer_token(cfg, launch, dtype)


def kv_per_layer_token(cfg: dict[str, Any], launch: Launch, dtype: str) -> int:
    kv = launch.kv_cache_dtype
    elt = 1 if kv.startswith("fp8") else DTYPE_BYTES.get(dtype, 2)
    if cfg.get("kv_lora_rank"):
        if kv == "fp8_ds_mla":
            return 656
        return (int(cfg["kv_lora_rank"]) + int(cfg.get("qk_rope_head_dim") or 0)) * elt
    heads = int(cfg.get("num_attention_heads") or 1)
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    head_dim = int(cfg.get("head_dim") or (int(cfg.get("hidden_size") or 0) // heads))
    per_gpu_heads = max(1, -(-kv_heads // max(1, launch.tp)))
    return 2 * per_gpu_heads * head_dim * elt


# vLLM's scheduler default for online serving: a sliding-window layer holds its window plus one step's tokens
SLIDING_STEP_TOKENS = 8192


def kv_budget(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """vLLM's memory profiling and check_enough_kv_cache_memory (vllm/v1/core/kv_cache_utils.py): the
    weights must fit in gpu_memory_utilization of the GPU, and the rest must hold one max_model_len request."""
    cfg, mem = model.config, m.gpu_mem_bytes
    if not cfg or not mem or not model.weight_bytes:
        return None
    shards = max(1, launch.tp * launch.pp)
    weights = model.weight_bytes / shards
    budget = mem * launch.gpu_memory_utilization
    overhead = max(1 * GIB, 0.04 * mem)  # activations and the profiling peak: an estimate
    free = budget - weights - overhead
    dtype = model_dtype(launch, cfg)
    per_token = kv_per_token(cfg, launch, dtype)
    max_len = launch.max_model_len or int(cfg.get("max_position_embeddings") or 0)
    facts = {"weights_gib_per_gpu": round(weights / GIB, 1), "budget_gib": round(budget / GIB, 1),
             "kv_bytes_per_token": per_token, "max_model_len": max_len}
    ev = [f"weights: {model.weight_bytes / GIB:.1f} GiB over {shards} GPU(s) = {weights / GIB:.1f} GiB each",
          f"GPU memory {mem / GIB:.1f} GiB x --gpu-memory-utilization {launch.gpu_memory_utilization} = "
          f"{budget / GIB:.1f} GiB; about {overhead / GIB:.1f} GiB goes to activations"]
    if weights > budget:
        return _diag("gpu_oom", "weights_do_not_fit",
                     f"The weights ({weights / GIB:.1f} GiB per GPU) will not fit in {budget / GIB:.1f} GiB",
                     0.85, ev, "Spread the model over more GPUs (--tensor-parallel-size / --pipeline-parallel-size), "
                     "use a quantized checkpoint, or raise --gpu-memory-utilization if nothing else uses the GPU.",
                     "gpu-oom", facts)
    if free <= 0:
        return _diag("kv_cache_memory", "no_kv_memory", "No memory will be left for the KV cache", 0.8, ev,
                     "Raise --gpu-memory-utilization, or use more GPUs / a quantized checkpoint.",
                     "kv-cache-memory", facts)
    layers = max(1, int(cfg.get("num_hidden_layers") or 1) // max(1, launch.pp))
    sliding, window = sliding_layers(cfg)
    sliding = sliding // max(1, launch.pp)
    full = max(0, layers - sliding)
    per_layer = kv_per_layer_token(cfg, launch, dtype)
    held = min(window + SLIDING_STEP_TOKENS, max_len) if window and max_len else 0
    if sliding and full:  # vLLM's check: full layers hold the whole length, sliding ones their window
        fits = int((free / per_layer - sliding * held) // full) // 16 * 16
        facts["sliding_window_layers"] = sliding
    else:
        fits = int(free // per_token) // 16 * 16
    facts["largest_max_model_len"] = max(fits, 0)
    window_note = (f" ({sliding} of the {layers} layers keep only a {window}-token window)"
                   if sliding and full else "")
    ev.append(f"KV cache: {free / GIB:.1f} GiB left, {per_token} bytes a token on each GPU{window_note}: "
              f"room for {fits} tokens")
    if max_len and fits < max_len:
        return _diag("kv_cache_memory", "max_len_exceeds_kv",
                     f"max_model_len {max_len} will not fit in the KV cache (room for about {fits} tokens)", 0.75,
                     ev, f"Lower --max-model-len to at most {fits}, raise --gpu-memory-utilization, use "
                     "--kv-cache-dtype fp8, or spread the model over more GPUs.", "kv-cache-memory", facts)
    return None


QUANT_PKG = "vllm/model_executor/layers/quantization"


def _parse(src: str | None) -> ast.Module | None:
    try:
        return ast.parse(src) if src else None
    except SyntaxError:
        return None


def _quant_class(m: Machine, method: str) -> tuple[str, str] | None:
    """(file, class) of a method's config, from get_quantization_config's own method_to_config table and the
    imports beside it (vllm/model_executor/layers/quantization/__init__.py); the file names change by release."""
    tree = _parse(m.source(f"{QUANT_PKG}/__init__.py"))
    fn = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config"),
              None) if tree else None
    if fn is None:
        return None
    where: dict[str, str] = {}
    cls = None
    for node in ast.walk(fn):
        if isinstance(node, ast.ImportFrom) and node.module:
            rel = node.module.replace(".", "/")
            if node.level == 0:
                rel = rel.removeprefix(QUANT_PKG + "/") if rel.startswith(QUANT_PKG) else ""
            for a in node.names:
                if rel:
                    where[a.asname or a.name] = rel
        elif isinstance(node, ast.Dict):
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and k.value == method and isinstance(v, ast.Name):
                    cls = v.id
    if cls is None or cls not in where:
        return None
    return where[cls], cls


def quant_methods(m: Machine) -> set[str] | None:
    """QuantizationMethods = Literal[...] of the installed vLLM: the methods `--quantization` and a checkpoint's
    quant_method may name (anything else: 'Invalid quantization method')."""
    tree = _parse(m.source(f"{QUANT_PKG}/__init__.py"))
    for node in ast.walk(tree) if tree else ():
        if (isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Subscript)
                and any(isinstance(t, ast.Name) and t.id == "QuantizationMethods"
                        for t in (node.targets if isinstance(node, ast.Assign) else [node.target]))):
            elts = node.value.slice.elts if isinstance(node.value.slice, ast.Tuple) else [node.value.slice]
            out = {e.value for e in elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            return out or None
    return None


def _min_capability_from_source(m: Machine, method: str) -> int | None:
    """The method's config class's get_min_capability(), when it returns a constant (read, never imported)."""
    found = _quant_class(m, method)
    klass: ast.AST | None
    if found:
        rel, cls = found
        tree = next((t for t in (_parse(m.source(f"{QUANT_PKG}/{rel}.py")),
                                 _parse(m.source(f"{QUANT_PKG}/{rel}/__init__.py"))) if t), None)
        klass = next((n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == cls), None) if tree else None
    else:
        fn = QUANT_FILES.get(method)
        klass = _parse(m.source(f"{QUANT_PKG}/{fn}")) if fn else None
    for node in ast.walk(klass) if klass else ():
        if isinstance(node, ast.FunctionDef) and node.name == "get_min_capability":
            returns = [r.value for r in ast.walk(node) if isinstance(r, ast.Return)]
            if len(returns) == 1 and isinstance(returns[0], ast.Constant) and isinstance(returns[0].value, int):
                return returns[0].value
            return None  # computed: the table answers
    return None


def quantization(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """vllm/config verify_quantization: the method's get_min_capability() against the GPU."""
    qc = model.config.get("quantization_config") if model.config else None
    method = launch.quantization or (qc.get("quant_method") if isinstance(qc, dict) else None)
    cc = m.cc
    if not method:
        return None
    method = str(method).lower()
    known = quant_methods(m)
    if known is not None and method not in known:
        return _diag("quantization", "invalid_method", f"Invalid quantization method: {method}", 0.85,
                     [f"quantization: {method} ({'--quantization' if launch.quantization else 'config.json quant_method'})",
                      f"not in the installed vLLM {m.packages.get('vllm', '')}'s QuantizationMethods"],
                     "Use a vLLM release that supports this quantization method (or a checkpoint quantized with one "
                     "this release knows).", "quantization", {"method": method})
    if not cc:
        return None
    need = _min_capability_from_source(m, method)
    basis = "the installed vLLM's source"
    if need is None:
        need, basis = MIN_CAPABILITY.get(method), "triage's table"
    have = cc[0] * 10 + cc[1]
    if need is None or have >= need:
        return None
    return _diag("quantization", "min_capability",
                 f"The quantization method {method} needs compute capability {need / 10:.1f}; this GPU has {cc[0]}.{cc[1]}",
                 0.85, [f"quantization: {method} (minimum capability {need}, from {basis})", f"GPU: {m.gpu_name}"],
                 "Use a checkpoint quantized with a method this GPU runs (AWQ/GPTQ on 7.5+, fp8 via Marlin on 8.0+), "
                 "or a GPU of that generation.", "quantization", {"method": method, "min_capability": need})


def dtype(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """vllm/config _check_valid_dtype: bfloat16 needs compute capability 8.0."""
    cc = m.cc
    if not model.config or not cc:
        return None
    d = model_dtype(launch, model.config)
    if d == "bfloat16" and cc[0] < 8:
        return _diag("dtype_unsupported", "bf16_before_ampere",
                     f"bfloat16 needs compute capability 8.0; {m.gpu_name} has {cc[0]}.{cc[1]}", 0.9,
                     [f"dtype {d} ({'--dtype' if launch.dtype != 'auto' else 'config.json torch_dtype'})"],
                     "Add --dtype half (float16).", "dtype-unsupported", {"dtype": d})
    if launch.kv_cache_dtype.startswith("fp8") and cc[0] * 10 + cc[1] < 89 and launch.kv_cache_dtype != "fp8_e5m2":
        return _diag("dtype_unsupported", "fp8_kv_before_ada",
                     f"An fp8 KV cache ({launch.kv_cache_dtype}) needs compute capability 8.9 here",
                     0.6, [f"--kv-cache-dtype {launch.kv_cache_dtype}", f"GPU: {m.gpu_name}"],
                     "Drop --kv-cache-dtype or use fp8_e5m2 where the backend takes it.", "dtype-unsupported")
    return None


def parallelism(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """vllm/config verify_with_parallel_config and the executor's world size check."""
    cfg = model.config
    world = launch.tp * launch.pp * launch.dp
    if m.gpus and world > len(m.gpus):
        return _diag("engine_config", "world_exceeds_gpus",
                     f"{world} GPUs asked for (TP {launch.tp} x PP {launch.pp} x DP {launch.dp}); {len(m.gpus)} visible",
                     0.9, [f"GPUs: {len(m.gpus)} x {m.gpu_name}"],
                     "Lower --tensor-parallel-size / --pipeline-parallel-size to the GPUs there are.",
                     "engine-config", {"world_size": world, "gpus": len(m.gpus)})
    heads = int(cfg.get("num_attention_heads") or 0) if cfg else 0
    if heads and heads % launch.tp:
        return _diag("engine_config", "tp_heads_not_divisible",
                     f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({launch.tp})",
                     0.9, [f"config.json: num_attention_heads={heads}"],
                     f"Use a --tensor-parallel-size that divides {heads}.", "engine-config")
    layers = int(cfg.get("num_hidden_layers") or 0) if cfg else 0
    if layers and launch.pp > layers:
        return _diag("engine_config", "pp_exceeds_layers",
                     f"Pipeline parallel size {launch.pp} is larger than the {layers} layers", 0.85,
                     [f"config.json: num_hidden_layers={layers}"], "Lower --pipeline-parallel-size.", "engine-config")
    return None


def _vllm_config_types(m: Machine) -> set[str]:
    """Model types vLLM brings its own config class for (vllm/transformers_utils/config.py _CONFIG_REGISTRY)."""
    src = m.source("vllm/transformers_utils/config.py")
    try:
        tree = ast.parse(src) if src else None
    except SyntaxError:
        return set()
    out: set[str] = set()
    for node in ast.walk(tree) if tree else ():
        if not isinstance(node, (ast.Assign, ast.AnnAssign)):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) else node.target
        if not (isinstance(target, ast.Name) and target.id == "_CONFIG_REGISTRY"):
            continue
        value = node.value
        if isinstance(value, ast.Call):
            out |= {k.arg for k in value.keywords if k.arg}
            value = value.args[0] if value.args else None
        if isinstance(value, ast.Dict):
            out |= {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    return out


def support(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """vllm/model_executor/models/registry.py and transformers' CONFIG_MAPPING_NAMES: is the model known?"""
    cfg = model.config
    arch = (cfg.get("architectures") or [None])[0] if cfg else None
    mtype = cfg.get("model_type") if cfg else None
    registry = m.source("vllm/model_executor/models/registry.py")
    if arch and registry and f'"{arch}"' not in registry and "--trust-remote-code" not in launch.switches:
        return _diag("model_support", "architecture_unsupported",
                     f"Model architectures ['{arch}'] are not supported by vLLM {m.packages.get('vllm', '')}".strip(),
                     0.8, [f"config.json: architectures={arch}", "not in the installed vllm/model_executor/models/registry.py"],
                     "Upgrade vLLM to a release that supports this architecture.", "model-support")
    auto = m.source("transformers/models/auto/configuration_auto.py")
    if (mtype and auto and not cfg.get("gguf") and not re.search(rf'\(\s*"{re.escape(str(mtype))}"\s*,', auto)
            and str(mtype) not in _vllm_config_types(m) and "--trust-remote-code" not in launch.switches):
        return _diag("model_support", "model_type_unknown",
                     f"transformers {m.packages.get('transformers', '')} does not know model type {mtype}".replace("  ", " "),
                     0.75, [f"config.json: model_type={mtype}", "not in the installed transformers' CONFIG_MAPPING_NAMES"],
                     "Upgrade transformers (and vLLM with it) to a release that knows this model type.", "model-support")
    return None


def shared_memory(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """More than one GPU process talks through /dev/shm (vLLM's message queue, NCCL's buffers); a container's
    default 64 MB ends in 'Bus error' once they start."""
    world = launch.tp * launch.pp
    if world <= 1 or not m.in_container or m.shm_bytes is None or m.shm_bytes >= SHM_ENOUGH:
        return None
    return _diag("distributed", "shm_too_small",
                 f"/dev/shm is {m.shm_bytes / (1 << 20):.0f} MiB in this container; {world} GPU workers need more",
                 0.7, [f"/dev/shm: {m.shm_bytes / (1 << 20):.0f} MiB (inside a container)",
                       f"TP {launch.tp} x PP {launch.pp} = {world} worker processes"],
                 "Start the container with --ipc=host or --shm-size=16g (Kubernetes: an emptyDir with medium Memory "
                 "mounted at /dev/shm).", "distributed", {"shm_bytes": m.shm_bytes, "world_size": world})


def chat_template(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """`vllm serve` answers /v1/chat/completions; without a template transformers refuses every chat request."""
    if model.chat_template is not False or "--chat-template" in launch.other or any(
            o.startswith("--chat-template=") for o in launch.other):
        return None
    return _diag("tokenizer_chat_template", "no_chat_template",
                 "Chat requests will fail: the tokenizer has no chat template", 0.55,
                 ["tokenizer_config.json has no chat_template and there is no chat_template.jinja"],
                 "Pass --chat-template <file.jinja> (the model card or vLLM's examples/ folder has one), or use the "
                 "completions endpoint for base models.", "tokenizer-chat-template")


def _cuda_of_torch(version: str | None) -> tuple[int, int] | None:
    """torch's local version tag (2.9.0+cu128) as the CUDA it was built for."""
    mt = re.search(r"\+cu(\d{2,3})(\d)\b", version or "")
    return (int(mt.group(1)), int(mt.group(2))) if mt else None


def installation(launch: Launch, model: ModelFiles, m: Machine) -> Diagnosis | None:
    """The driver against torch's CUDA build, and vLLM's compiled extension against the torch installed
    (vLLM pins the torch it was built with; another one fails with undefined symbols)."""
    torch_v = m.packages.get("torch")
    built = _cuda_of_torch(torch_v)
    drv = re.match(r"(\d+)\.(\d+)", m.cuda_driver_version or "")
    if built and drv and built > (int(drv.group(1)), int(drv.group(2))):
        return _diag("cuda_driver", "driver_too_old",
                     f"The NVIDIA driver runs CUDA up to {m.cuda_driver_version}; torch {torch_v} was built for CUDA "
                     f"{built[0]}.{built[1]}", 0.85,
                     [f"driver: CUDA {m.cuda_driver_version} (NVML)", f"torch {torch_v} (its +cu tag)"],
                     "Upgrade the NVIDIA driver to one that supports the CUDA version torch/vLLM were built for, or "
                     "install torch/vLLM built for an older CUDA.", "cuda-driver",
                     {"cuda_driver_version": m.cuda_driver_version, "torch_cuda_version": f"{built[0]}.{built[1]}"})
    want = m.torch_pin
    if want and torch_v and torch_v.split("+")[0] != want:
        return _diag("install_mismatch", "torch_version_pin",
                     f"vLLM {m.packages.get('vllm')} was built for torch {want}; torch {torch_v} is installed", 0.75,
                     [f"vllm {m.packages.get('vllm')} METADATA: Requires-Dist torch=={want}", f"installed: torch {torch_v}"],
                     "Install the torch version this vLLM release pins (see `pip show vllm` Requires), ideally by "
                     "reinstalling vLLM into a clean environment.", "install-mismatch", {"want": want, "have": torch_v})
    return None


CHECKS = (installation, parallelism, shared_memory, support, dtype, quantization, attention, kv_budget, chat_template)


def text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """vLLM's hf_text_config: a multimodal checkpoint's language model keys (text_config), over the top level."""
    inner = cfg.get("text_config") if isinstance(cfg, dict) else None
    if not isinstance(inner, dict):
        return cfg
    merged = {**cfg, **inner}
    for key in ("architectures", "quantization_config"):
        if key in cfg:
            merged[key] = cfg[key]
    merged.setdefault("torch_dtype", cfg.get("torch_dtype"))
    return merged


def predict(launch: Launch, model: ModelFiles, m: Machine, found: dict[str, Any] | None = None) -> list[Diagnosis]:
    """The failures vLLM would stop with, most certain first; `found` collects what a passing check learnt
    (the attention backend vLLM will pick)."""
    model = replace(model, config=text_config(model.config)) if model.config else model
    out = [d for d in (check(launch, model, m, found) if check is attention else check(launch, model, m)
                       for check in CHECKS) if d is not None]
    return sorted(out, key=lambda d: -d.confidence)
