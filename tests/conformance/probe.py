"""Runs inside one real vLLM release (PYTHONPATH from vllm_envs.release_paths plus the installed
plugin) and checks the bundled backend the way vLLM's engine uses it. Prints one line
`PROBE {json}`: {"vllm": version, "stubbed": [...], "checks": {name: {"ok", "detail"}}}.

Replaced, and nothing else: vLLM's compiled extension modules whose import fails on this machine
(no CUDA libraries), and the platform's device query (compute capability 12.0, an RTX PRO 6000).
Everything else is vLLM's own code: plugin loader, registry, selector, configs, the MLA layer that
constructs the impl, the KV cache spec, and the engine's block-size and cache-shape calls.

    python probe.py [--plumbing]      (--plumbing also runs forward_mqa; set TRITON_INTERPRET=1)
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import json
import math
import os
import socket
import sys
import tempfile
import traceback
import types

STUBBED: list[str] = []
CHECKS: dict[str, dict] = {}
CLASS_PATH = "triage_sparse_mla.backend.TriageSparseMLABackend"
HEADS, NOPE, ROPE, V_DIM, RANK, TOPK = 4, 128, 64, 128, 512, 64
SCALE = (NOPE + ROPE) ** -0.5


# ---------------------------------------------------------------- only what cannot load here


class _StubOnFailure(importlib.abc.Loader):
    def __init__(self, real):
        self.real = real

    def create_module(self, spec):
        try:
            return self.real.create_module(spec)
        except (ImportError, OSError):
            STUBBED.append(spec.name)
            return types.ModuleType(spec.name)

    def exec_module(self, module):
        if module.__name__ not in STUBBED:
            self.real.exec_module(module)


class _CompiledVllmModules(importlib.abc.MetaPathFinder):
    """vLLM's extension modules load normally; one whose import raises becomes an empty module."""

    def find_spec(self, name, path, target=None):
        if not name.startswith("vllm"):
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.origin and spec.origin.endswith(".so"):
                    spec.loader = _StubOnFailure(spec.loader)
                return spec
        return None


def _mock_device() -> None:
    import vllm.platforms as platforms
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    base = getattr(cuda, "NvmlCudaPlatform", None) or cuda.CudaPlatform

    class RtxPro6000(base):  # the device query only
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(12, 0)

        @classmethod
        def has_device_capability(cls, capability, device_id: int = 0):
            cap = cls.get_device_capability(device_id)
            if isinstance(capability, tuple):
                return (cap.major, cap.minor) >= tuple(capability)
            return cap.to_int() >= capability

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "NVIDIA RTX PRO 6000 Blackwell Workstation Edition"

    platforms._current_platform = RtxPro6000()


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

MODEL_CONFIG = {
    "architectures": ["TriageProbeDSAForCausalLM"], "model_type": "deepseek_v32",
    "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": HEADS, "num_key_value_heads": HEADS, "n_routed_experts": 4,
    "n_shared_experts": 1, "num_experts_per_tok": 2, "first_k_dense_replace": 1, "moe_layer_freq": 1,
    "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": True,
    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "q_lora_rank": 64, "kv_lora_rank": RANK,
    "qk_nope_head_dim": NOPE, "qk_rope_head_dim": ROPE, "v_head_dim": V_DIM, "index_topk": TOPK,
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

    mc = ModelConfig(model=model_dir, skip_tokenizer_init=True, dtype=dtype, max_model_len=1024)
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

    kwargs = dict(num_heads=HEADS, scale=SCALE, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE,
                  v_head_dim=V_DIM, q_lora_rank=64, kv_lora_rank=RANK,
                  # only stored at construction (used when weights load)
                  kv_b_proj=torch.nn.Linear(RANK, HEADS * (NOPE + V_DIM), bias=False),
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


def main() -> int:
    plumbing = "--plumbing" in sys.argv
    sys.meta_path.insert(0, _CompiledVllmModules())
    os.environ.pop("VLLM_PLUGINS", None)
    from importlib import metadata

    version = metadata.version("vllm")
    result = {"vllm": version, "stubbed": STUBBED, "checks": CHECKS}
    try:
        _run(plumbing)
    finally:
        print("PROBE " + json.dumps(result, default=str))
    return 0


def _run(plumbing: bool) -> None:
    _mock_device()
    import torch

    state: dict = {}

    @check("loader")
    def _():
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        from triage_sparse_mla import plugin

        outcome = plugin._state.get("outcome")
        assert outcome == "registered", f"the plugin's register() said {outcome!r}"
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
        json.dump(MODEL_CONFIG, fh)

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
            buf = torch.full((vc.scheduler_config.max_num_batched_tokens, TOPK), -1, dtype=torch.int32)
            layer = _build_layer(vc, getattr(torch, dname), i, buf)
            backend = state["backend"]
            assert layer.attn_backend is backend, f"the selector chose {layer.attn_backend.__name__}"
            impl = layer.impl
            assert isinstance(impl, backend.get_impl_cls())
            assert impl.is_sparse is True or getattr(impl, "is_sparse", None)
            assert impl.kv_cache_dtype == kv and impl.scale == SCALE and impl.kv_lora_rank == RANK
            assert impl.topk_indices_buffer is buf, "the layer's top-k buffer did not reach the impl"
            state[key] = (vc, layer, buf)
            return {"backend": backend.get_name(), "impl": type(impl).__name__}

        @check(f"kv_cache:{key}")
        def _(key=key, kv=kv, dname=dname):
            vc, layer, _buf = state[key]
            backend = state["backend"]
            spec = layer.get_kv_cache_spec(vc)
            row = 656 if kv == "fp8_ds_mla" else (RANK + ROPE) * 2
            assert spec.head_size == RANK + ROPE, spec
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

    if plumbing:
        @check("plumbing")
        def _():
            return _plumbing(state)


def _plumbing(state) -> dict:
    """vLLM's metadata (builder output from a real CommonAttentionMetadata) and the engine-shaped
    cache, through the impl's forward_mqa, against float64 attention computed from positions."""
    import torch

    vc, layer, buf = state["bfloat16/auto"]
    spec = state["bfloat16/auto:spec"]
    backend = state["backend"]
    bs = spec.block_size
    builder = backend.get_builder_cls()(spec, [layer.layer_name], vc, torch.device("cpu"))
    seq_lens, query_lens = [70, 5], [3, 2]
    bt = torch.tensor([[2, 0], [1, -1]], dtype=torch.int32)
    cm, slots = _common_metadata(seq_lens, query_lens, bt, bs)
    md = builder.build(common_prefix_len=0, common_attn_metadata=cm)
    g = torch.Generator().manual_seed(0)
    cache, _how = _engine_kv_cache(backend, spec, num_blocks=3, dtype_override=torch.float32)
    flat = cache.reshape(-1, cache.shape[-1]) if cache.is_contiguous() else None
    assert flat is not None and flat.data_ptr() == cache.data_ptr()
    flat.copy_(torch.randn(flat.shape, generator=g) * 0.5)
    T = sum(query_lens)
    # the indexer's request-local positions, -1 padded, one repeated on purpose
    topk = torch.full((T, TOPK), -1, dtype=torch.int32)
    req_of = [0, 0, 0, 1, 1]
    for t in range(T):
        r = req_of[t]
        pos = torch.randperm(seq_lens[r], generator=g)[: min(seq_lens[r], 20)].to(torch.int32)
        topk[t, : pos.numel()] = pos
        topk[t, pos.numel()] = pos[0]
    buf[:T] = topk
    q_nope = torch.randn(T, HEADS, RANK, generator=g)
    q_pe = torch.randn(T, HEADS, ROPE, generator=g)
    out, lse = layer.impl.forward_mqa((q_nope, q_pe), cache, md, layer)
    q = torch.cat([q_nope, q_pe], -1).double()
    ref = torch.zeros(T, HEADS, RANK, dtype=torch.float64)
    for t in range(T):
        r = req_of[t]
        rows = []
        for p in topk[t].tolist():
            if p < 0:
                continue
            rows.append(int(bt[r, p // bs]) * bs + p % bs)
        kv = flat.double()[rows]
        s = SCALE * q[t] @ kv.T
        ref[t] = torch.softmax(s, -1) @ kv[:, :RANK]
    err = (out.double().reshape(T, HEADS, RANK) - ref).abs().max().item()
    assert err <= 1e-4, f"max abs error {err}"
    # the slot mapping the builder handed on is vLLM's, and it addresses the same rows
    assert md.slot_mapping.tolist() == slots
    return {"max_abs_err": err, "tokens": T, "cache": list(cache.shape)}


if __name__ == "__main__":
    sys.exit(main())
