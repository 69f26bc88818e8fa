"""Checks the installed backend through vLLM itself, the way vLLM's engine uses it. Runs in the
Python environment that runs vLLM: `python -m triage_sparse_mla.vllm_check [--heads N] [--topk K]`
prints one line `TRIAGE-VLLM-CHECK {json}` and exits 0 when every check passed, 1 otherwise.

Checks, in order (a later one needs the earlier ones):
  loader      vLLM's plugin loader runs the entry point and it registers the CUSTOM slot
  registry    the registry resolves CUSTOM to TriageSparseMLABackend
  abstract    no abstract method of this release's backend / impl / builder bases is left
  config      a real VllmConfig for a DSA model with the given dimensions (a config.json on disk)
  selected:<dtype>/<kv>   the MLA layer, built as DeepSeek-V3.2's attention builds it, asks vLLM's
              selector (CUSTOM requested) and gets this backend, and constructs the impl itself
  kv_cache:<dtype>/<kv>   the layer's KV cache spec, the cache shape the engine derives from it
              (656-byte rows for fp8_ds_mla), the kernel block sizes asked as the engine asks
  builder:<dtype>/<kv>    the metadata builder built from that VllmConfig builds a batch
  block_size_selection    the engine's block-size rule picks the kernel's 64-token blocks
Used by `triage apply sparse-mla` after installing, and by the conformance suite against real wheels.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import socket
import sys
import tempfile
import traceback
import types

CHECKS: dict[str, dict] = {}
CLASS_PATH = "triage_sparse_mla.backend.TriageSparseMLABackend"
DIMS = {"heads": 4, "nope": 128, "rope": 64, "v": 128, "rank": 512, "topk": 64}


def _scale() -> float:
    return (DIMS["nope"] + DIMS["rope"]) ** -0.5


def check(name: str):
    def run(fn):
        try:
            detail = fn()
            CHECKS[name] = {"ok": True, "detail": detail}
        except Exception as exc:  # recorded, the next checks still run
            CHECKS[name] = {"ok": False, "detail": f"{type(exc).__name__}: {exc}"[:600],
                            "trace": traceback.format_exc()[-2500:]}
        return fn
    return run


# ---------------------------------------------------------------- a DSA model config on disk

def model_config() -> dict:
    return {
    "architectures": ["TriageProbeDSAForCausalLM"], "model_type": "deepseek_v32",
    "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": DIMS["heads"], "num_key_value_heads": DIMS["heads"], "n_routed_experts": 4,
    "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "q_lora_rank": 64, "kv_lora_rank": DIMS["rank"],
    "qk_nope_head_dim": DIMS["nope"], "qk_rope_head_dim": DIMS["rope"], "v_head_dim": DIMS["v"], "index_topk": DIMS["topk"],
    "index_n_heads": 4, "index_head_dim": 128, "max_position_embeddings": 4096, "rope_theta": 10000,
    "rms_norm_eps": 1e-6, "vocab_size": 1024, "torch_dtype": "bfloat16", "hidden_act": "silu",
    "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1,
    }


def _register_probe_model() -> None:
    """A model class registered in-process: ModelConfig then inspects it here instead of importing
    DeepSeek's modules in a subprocess (which needs CUDA ops at import)."""
    import torch
    from vllm import ModelRegistry

    class TriageProbeDSAForCausalLM(torch.nn.Module):
        def __init__(self, *, vllm_config=None, prefix=""):
            super().__init__()

        def forward(self, input_ids, positions, intermediate_tensors=None, inputs_embeds=None):
            raise NotImplementedError

        def embed_input_ids(self, input_ids):
            raise NotImplementedError

        def compute_logits(self, hidden_states):
            raise NotImplementedError

    ModelRegistry.register_model("TriageProbeDSAForCausalLM", TriageProbeDSAForCausalLM)


def _vllm_config(model_dir: str, dtype: str, kv: str):
    from vllm.config import AttentionConfig, CacheConfig, ModelConfig, VllmConfig

    mc = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype=dtype, max_model_len=max(1024, 2 * DIMS["topk"]))
    cc = CacheConfig(block_size=64, cache_dtype=kv)
    return VllmConfig(model_config=mc, cache_config=cc, attention_config=AttentionConfig(backend="CUSTOM"))


def _init_distributed(vc) -> None:
    from vllm.config import set_current_vllm_config
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    with set_current_vllm_config(vc):
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method=f"tcp://127.0.0.1:{port}", backend="gloo")
        ensure_model_parallel_initialized(1, 1)


def _build_layer(vc, dtype, index: int, topk_buffer):
    """The sparse MLA layer as DeepSeek-V3.2's attention builds it: it asks the selector for the
    backend and constructs the impl itself."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.layers.attention import mla_attention

    kwargs = dict(num_heads=DIMS["heads"], scale=_scale(), qk_nope_head_dim=DIMS["nope"], qk_rope_head_dim=DIMS["rope"],
                  v_head_dim=DIMS["v"], q_lora_rank=64, kv_lora_rank=DIMS["rank"],
                  # only stored at construction (used when weights load)
                  kv_b_proj=torch.nn.Linear(DIMS["rank"], DIMS["heads"] * (DIMS["nope"] + DIMS["v"]), bias=False),
                  cache_config=vc.cache_config, prefix=f"model.layers.{index}.self_attn.attn",
                  use_sparse=True, indexer=None, topk_indices_buffer=topk_buffer)
    params = inspect.signature(mla_attention.MLAAttention.__init__).parameters
    if "topk_indices_buffer" not in params:
        # Up to 0.2x the impl reads the buffer from the model's DSA indexer module, which the
        # model passes as `indexer`; this stands for that module (its one attribute read here).
        kwargs["indexer"] = types.SimpleNamespace(topk_indices_buffer=topk_buffer)
    kwargs = {k: v for k, v in kwargs.items() if k in params}
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with set_current_vllm_config(vc):
            return mla_attention.MLAAttention(**kwargs)
    finally:
        torch.set_default_dtype(old)


def _common_metadata(seq_lens, query_lens, block_table, block_size):
    """vLLM's CommonAttentionMetadata for a batch, filled field by field from what the release has."""
    import dataclasses

    import torch
    from vllm.v1.attention import backend as B

    cam = getattr(B, "CommonAttentionMetadata", None)
    if cam is None:
        from vllm.v1.attention.backends.utils import CommonAttentionMetadata as cam  # type: ignore

    qsl = torch.tensor([0] + list(itertools_accumulate(query_lens)), dtype=torch.int32)
    seq = torch.tensor(seq_lens, dtype=torch.int32)
    slots = []
    for r, (s, q) in enumerate(zip(seq_lens, query_lens)):
        for p in range(s - q, s):
            slots.append(int(block_table[r, p // block_size]) * block_size + p % block_size)
    values = {
        "query_start_loc": qsl, "query_start_loc_cpu": qsl.clone(), "seq_lens": seq,
        "seq_lens_cpu": seq.clone(), "num_computed_tokens_cpu": seq - torch.tensor(query_lens, dtype=torch.int32),
        "num_reqs": len(seq_lens), "num_actual_tokens": sum(query_lens), "max_query_len": max(query_lens),
        "max_seq_len": max(seq_lens), "block_table_tensor": block_table,
        "slot_mapping": torch.tensor(slots, dtype=torch.int64), "causal": True,
        "seq_lens_cpu_upper_bound": seq.clone(), "_seq_lens_cpu": seq.clone(),
        "_num_computed_tokens_cpu": seq - torch.tensor(query_lens, dtype=torch.int32),
    }
    kwargs, missing = {}, []
    for f in dataclasses.fields(cam):
        if not f.init:
            continue
        if f.name in values:
            kwargs[f.name] = values[f.name]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            missing.append(f.name)
    if missing:
        raise TypeError(f"CommonAttentionMetadata needs fields this probe does not know: {missing}")
    return cam(**kwargs), slots


def itertools_accumulate(xs):
    total = 0
    for x in xs:
        total += x
        yield total


def _engine_block_sizes(backend, spec) -> list:
    """get_supported_kernel_block_sizes called as this release's engine calls it."""
    from vllm.v1.attention.backend import AttentionBackend

    takes_spec = len(inspect.signature(AttentionBackend.get_supported_kernel_block_sizes).parameters) > 0
    return list(backend.get_supported_kernel_block_sizes(spec) if takes_spec
                else backend.get_supported_kernel_block_sizes())


def _engine_kv_cache(backend, spec, num_blocks: int, dtype_override=None):
    """The per-layer cache tensor the engine hands the layer, with the shape and stride order it
    has in this release, zero-filled; dtype_override allocates the same layout in another float
    type (the plumbing check runs float32)."""
    import torch
    from vllm.v1 import kv_cache_interface as K
    from vllm.v1.attention.backend import AttentionBackend

    dtype = dtype_override or spec.dtype
    item = torch.empty((), dtype=spec.dtype).element_size()
    if "get_kv_cache_shape" in vars(AttentionBackend):  # <= 0.29: the backend decides the shape
        cache_dtype = getattr(spec, "cache_dtype_str", None) or "auto"
        shape = tuple(backend.get_kv_cache_shape(num_blocks, spec.block_size, spec.num_kv_heads,
                                                 spec.head_size, cache_dtype_str=cache_dtype))
        assert math.prod(shape) * item == num_blocks * spec.page_size_bytes, (shape, spec.page_size_bytes)
        try:
            order = tuple(backend.get_kv_cache_stride_order())
            assert len(order) == len(shape)
        except (AttributeError, NotImplementedError):
            order = tuple(range(len(shape)))
        inv = [order.index(i) for i in range(len(order))]
        phys = tuple(shape[i] for i in order)
        cache = torch.zeros(phys, dtype=dtype).permute(*inv)
        return cache, {"get_kv_cache_shape": list(shape), "stride_order": list(order)}
    # >= 0.30: the spec decides, [B, H, N, C] with C in bytes; the MLA layer squeezes H
    b, h, n, c = K.compute_layer_kv_cache_shape_bytes(spec, num_blocks)
    assert c % item == 0
    cache = torch.zeros(b, h, n, c // item, dtype=dtype).squeeze(1)
    return cache, {"shape_bytes": [b, h, n, c]}


# ---------------------------------------------------------------- the checks


def run_checks(state: dict) -> dict:
    """Every check, recorded in CHECKS; returns CHECKS. `state` keeps what later code reuses."""
    import torch


    @check("loader")
    def _():
        from importlib import metadata

        eps = [e for e in metadata.entry_points(group="vllm.general_plugins") if e.name == "triage_sparse_mla"]
        assert eps, "no vllm.general_plugins entry point triage_sparse_mla in this environment"
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        from triage_sparse_mla import plugin

        outcome = plugin._state.get("outcome")
        assert outcome in ("registered", "already registered"), f"the plugin's register() said {outcome!r}"
        return outcome

    @check("registry")
    def _():
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        custom = AttentionBackendEnum.CUSTOM
        assert custom.get_path() == CLASS_PATH, custom.get_path()
        cls = custom.get_class()
        assert f"{cls.__module__}.{cls.__qualname__}" == CLASS_PATH
        assert AttentionBackendEnum[cls.get_name()] is custom
        state["backend"] = cls
        return CLASS_PATH

    @check("abstract")
    def _():
        from vllm.v1.attention import backend as B

        cls = state["backend"]
        missing = {}
        for role, c in (("backend", cls), ("impl", cls.get_impl_cls()), ("builder", cls.get_builder_cls())):
            if inspect.isabstract(c):
                missing[role] = sorted(c.__abstractmethods__)
        assert not missing, f"abstract methods left: {missing}"
        impl = cls.get_impl_cls()
        sparse_base = getattr(B, "SparseMLAAttentionImpl", None)
        base = sparse_base or B.MLAAttentionImpl
        assert issubclass(impl, base), f"{impl.__name__} does not subclass {base.__name__}"
        return {"impl_base": base.__name__}

    tmp = tempfile.mkdtemp(prefix="triage-probe-")
    with open(os.path.join(tmp, "config.json"), "w") as fh:
        json.dump(model_config(), fh)

    @check("config")
    def _():
        _register_probe_model()
        vc = _vllm_config(tmp, "bfloat16", "auto")
        assert vc.model_config.use_mla, "the DSA model config is not MLA in this release"
        _init_distributed(vc)
        state["vc"] = vc
        return {"max_num_batched_tokens": vc.scheduler_config.max_num_batched_tokens}

    combos = [(d, k) for d in ("float16", "bfloat16") for k in ("auto", "fp8_ds_mla")]
    for i, (dname, kv) in enumerate(combos):
        key = f"{dname}/{kv}"

        @check(f"selected:{key}")
        def _(dname=dname, kv=kv, i=i, key=key):
            vc = _vllm_config(tmp, dname, kv)
            buf = torch.full((vc.scheduler_config.max_num_batched_tokens, DIMS["topk"]), -1, dtype=torch.int32)
            layer = _build_layer(vc, getattr(torch, dname), i, buf)
            backend = state["backend"]
            assert layer.attn_backend is backend, f"the selector chose {layer.attn_backend.__name__}"
            impl = layer.impl
            assert isinstance(impl, backend.get_impl_cls())
            assert impl.is_sparse is True or getattr(impl, "is_sparse", None)
            assert impl.kv_cache_dtype == kv and impl.scale == _scale() and impl.kv_lora_rank == DIMS["rank"]
            assert impl.topk_indices_buffer is buf, "the layer's top-k buffer did not reach the impl"
            state[key] = (vc, layer, buf)
            return {"backend": backend.get_name(), "impl": type(impl).__name__}

        @check(f"kv_cache:{key}")
        def _(key=key, kv=kv, dname=dname):
            vc, layer, _buf = state[key]
            backend = state["backend"]
            spec = layer.get_kv_cache_spec(vc)
            row = 656 if kv == "fp8_ds_mla" else (DIMS["rank"] + DIMS["rope"]) * 2
            assert spec.head_size == DIMS["rank"] + DIMS["rope"], spec
            assert spec.page_size_bytes == spec.block_size * row, (spec.page_size_bytes, spec.block_size, row)
            cache, how = _engine_kv_cache(backend, spec, num_blocks=3)
            assert cache.shape[0] == 3 and cache.shape[1] == spec.block_size, (tuple(cache.shape), how)
            assert cache.shape[-1] * cache.element_size() == row, (tuple(cache.shape), cache.dtype, how)
            if kv == "fp8_ds_mla":
                assert cache.element_size() == 1, cache.dtype
            sizes = _engine_block_sizes(backend, spec)
            state[key + ":spec"] = spec
            return {"spec": type(spec).__name__, "cache": list(cache.shape), "dtype": str(cache.dtype),
                    "block_sizes": [str(s) for s in sizes], **how}

        @check(f"builder:{key}")
        def _(key=key):
            vc, layer, _buf = state[key]
            spec = state[key + ":spec"]
            backend = state["backend"]
            builder = backend.get_builder_cls()(spec, [layer.layer_name], vc, torch.device("cpu"))
            cg = backend.get_builder_cls().get_cudagraph_support(vc, spec)
            bt = torch.tensor([[2, 0], [1, -1]], dtype=torch.int32)
            cm, _slots = _common_metadata([70, 5], [3, 1], bt, spec.block_size)
            md = builder.build(common_prefix_len=0, common_attn_metadata=cm)
            assert md.num_decode_tokens == 4 and md.num_prefills == 0, md
            assert md.req_id_per_token.tolist() == [0, 0, 0, 1]
            return {"cudagraph": str(cg), "metadata": type(md).__name__}

    @check("block_size_selection")
    def _():
        backend = state["backend"]
        spec = state["bfloat16/auto:spec"]
        try:  # importing it runs a compiled op in some releases (fp8 probing at module level)
            from vllm.v1.worker import utils as U
        except Exception:
            U = None
        if U is not None and hasattr(U, "select_common_block_size"):
            params = inspect.signature(U.select_common_block_size).parameters
            if "kv_cache_specs" in params:
                chosen = U.select_common_block_size(128, [backend], [spec])
            else:
                chosen = U.select_common_block_size(128, [backend])
            where = "vllm.v1.worker.utils.select_common_block_size"
        else:
            sizes = _engine_block_sizes(backend, spec)
            chosen = max(s for s in sizes if isinstance(s, int) and 128 % s == 0)
            where = "GPUModelRunner.select_common_block_size's rule"
        assert chosen == 64, chosen
        return {"manager_block_128_gives": chosen, "via": where}

    return CHECKS


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m triage_sparse_mla.vllm_check")
    for k in ("heads", "topk", "rank", "rope", "nope", "v"):
        p.add_argument(f"--{k}", type=int, default=DIMS[k])
    args = p.parse_args(argv)
    DIMS.update({k: getattr(args, k) for k in DIMS})
    os.environ.pop("VLLM_PLUGINS", None)  # the check loads this plugin whatever the launch restricts
    result: dict = {"checks": CHECKS}
    try:
        from importlib import metadata

        result["vllm"] = metadata.version("vllm")
        run_checks({})
    finally:
        print("TRIAGE-VLLM-CHECK " + json.dumps(result, default=str), flush=True)
    return 0 if CHECKS and all(c["ok"] for c in CHECKS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
