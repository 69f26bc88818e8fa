"""Runs inside one real vLLM release (PYTHONPATH from vllm_envs.release_paths plus the installed
plugin) on a CPU machine: vLLM's compiled extension modules whose import fails here become empty
modules, and the platform's device query answers compute capability 12.0 (an RTX PRO 6000).
Nothing else is replaced. Then it runs the package's own vLLM check (triage_sparse_mla.vllm_check,
what `triage apply` runs after installing) and, with --plumbing, one forward_mqa with numbers.
Prints one line `PROBE {json}`: {"vllm", "stubbed", "checks": {name: {"ok", "detail"}}}.

Also importable as a sitecustomize-style hook: `import probe; probe.pretend_gpu_machine()`.
"""

from __future__ import annotations

import importlib.abc
import json
import sys
import types

STUBBED: list[str] = []


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
            if isinstance(finder, (_CompiledVllmModules, _AfterPlatforms)) or not hasattr(finder, "find_spec"):
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


class _AfterPlatforms(importlib.abc.MetaPathFinder):
    """Mocks the device query right after vllm.platforms is first imported (for interpreters
    started by someone else: `triage apply`'s checks in a test venv)."""

    def find_spec(self, name, path, target=None):
        if name != "vllm.platforms" or self not in sys.meta_path:
            return None
        sys.meta_path.remove(self)
        import importlib.util

        spec = importlib.util.find_spec(name)
        real_exec = spec.loader.exec_module

        def exec_module(module):
            real_exec(module)
            _mock_device()

        spec.loader.exec_module = exec_module
        return spec


def pretend_gpu_machine(lazy: bool = False) -> None:
    if any(type(f).__name__ == "_CompiledVllmModules" for f in sys.meta_path):
        return  # a .pth hook can run twice at interpreter start
    sys.meta_path.insert(0, _CompiledVllmModules())
    if lazy:
        sys.meta_path.insert(0, _AfterPlatforms())
    else:
        _mock_device()


def main() -> int:
    pretend_gpu_machine()
    from importlib import metadata

    from triage_sparse_mla import vllm_check as chk

    result = {"vllm": metadata.version("vllm"), "stubbed": STUBBED, "checks": chk.CHECKS}
    try:
        state: dict = {}
        chk.run_checks(state)
        if "--plumbing" in sys.argv:
            chk.check("plumbing")(lambda: _plumbing(chk, state))
    finally:
        print("PROBE " + json.dumps(result, default=str), flush=True)
    return 0


def _plumbing(chk, state) -> dict:
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
    cm, slots = chk._common_metadata(seq_lens, query_lens, bt, bs)
    md = builder.build(common_prefix_len=0, common_attn_metadata=cm)
    g = torch.Generator().manual_seed(0)
    cache, _how = chk._engine_kv_cache(backend, spec, num_blocks=3, dtype_override=torch.float32)
    flat = cache.reshape(-1, cache.shape[-1]) if cache.is_contiguous() else None
    assert flat is not None and flat.data_ptr() == cache.data_ptr()
    flat.copy_(torch.randn(flat.shape, generator=g) * 0.5)
    T = sum(query_lens)
    # the indexer's request-local positions, -1 padded, one repeated on purpose
    topk = torch.full((T, chk.DIMS["topk"]), -1, dtype=torch.int32)
    req_of = [0, 0, 0, 1, 1]
    for t in range(T):
        r = req_of[t]
        pos = torch.randperm(seq_lens[r], generator=g)[: min(seq_lens[r], 20)].to(torch.int32)
        topk[t, : pos.numel()] = pos
        topk[t, pos.numel()] = pos[0]
    buf[:T] = topk
    q_nope = torch.randn(T, chk.DIMS["heads"], chk.DIMS["rank"], generator=g)
    q_pe = torch.randn(T, chk.DIMS["heads"], chk.DIMS["rope"], generator=g)
    out, lse = layer.impl.forward_mqa((q_nope, q_pe), cache, md, layer)
    q = torch.cat([q_nope, q_pe], -1).double()
    ref = torch.zeros(T, chk.DIMS["heads"], chk.DIMS["rank"], dtype=torch.float64)
    for t in range(T):
        r = req_of[t]
        rows = []
        for p in topk[t].tolist():
            if p < 0:
                continue
            rows.append(int(bt[r, p // bs]) * bs + p % bs)
        kv = flat.double()[rows]
        s = chk._scale() * q[t] @ kv.T
        ref[t] = torch.softmax(s, -1) @ kv[:, :chk.DIMS["rank"]]
    err = (out.double().reshape(T, chk.DIMS["heads"], chk.DIMS["rank"]) - ref).abs().max().item()
    assert err <= 1e-4, f"max abs error {err}"
    # the slot mapping the builder handed on is vLLM's, and it addresses the same rows
    assert md.slot_mapping.tolist() == slots
    return {"max_abs_err": err, "tokens": T, "cache": list(cache.shape)}


if __name__ == "__main__":
    sys.exit(main())
