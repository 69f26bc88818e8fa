"""Runs inside one real vLLM release (PYTHONPATH from vllm_envs.release_paths) and asks vLLM's own
CUDA selector about a grid of layer shapes: reads a JSON list of cases on stdin, prints one line
`ORACLE {json}` with, per case, the backends vLLM finds valid (in priority order) and the reasons it
gives for each one it turns away, exactly as `get_attn_backend_cls` would put them in its
"No valid attention backend found" error.

The device is mocked the way probe.py mocks it (compiled extensions that fail to load become empty
modules), with the capability taken from each case; tensors a backend module allocates at import
land on the CPU. The model config the backends consult (index_topk, qk_nope_head_dim) is the case's.
"""

from __future__ import annotations

import inspect
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import probe  # noqa: E402

CAPABILITY = [12, 0]
HF_CONFIG = types.SimpleNamespace()


def _cpu_tensors() -> None:
    import torch

    for name in ("empty", "zeros", "ones", "full", "tensor", "arange"):
        real = getattr(torch, name)
        setattr(torch, name, (lambda f: lambda *a, **k: f(*a, **{x: y for x, y in k.items() if x != "device"}))(real))


def _mock_device() -> type:
    import vllm.platforms as platforms
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    base = getattr(cuda, "NvmlCudaPlatform", None) or cuda.CudaPlatform

    class Mocked(base):
        @classmethod
        def get_device_capability(cls, device_id: int = 0):
            return DeviceCapability(*CAPABILITY)

        @classmethod
        def has_device_capability(cls, capability, device_id: int = 0):
            cap = cls.get_device_capability(device_id)
            if isinstance(capability, tuple):
                return (cap.major, cap.minor) >= tuple(capability)
            return cap.to_int() >= capability

        @classmethod
        def is_device_capability(cls, capability, device_id: int = 0):
            cap = cls.get_device_capability(device_id)
            if isinstance(capability, tuple):
                return (cap.major, cap.minor) == tuple(capability)
            return cap.to_int() == capability

        @classmethod
        def get_device_name(cls, device_id: int = 0) -> str:
            return "NVIDIA mocked"

        @classmethod
        def num_compute_units(cls, device_id: int = 0) -> int:
            return 132

    platforms._current_platform = Mocked()
    return Mocked


def main() -> int:
    sys.meta_path.insert(0, probe._CompiledVllmModules())
    _cpu_tensors()
    import torch

    platform = _mock_device()
    # the device queries vLLM makes through torch itself (FA's version check, a workspace's SM count)
    torch.cuda.get_device_capability = lambda device=None: tuple(CAPABILITY)
    torch.cuda.get_device_properties = lambda device=None: types.SimpleNamespace(
        multi_processor_count=132, major=CAPABILITY[0], minor=CAPABILITY[1], total_memory=80 << 30, name="NVIDIA mocked")
    import vllm.config as vllm_config
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.selector import AttentionSelectorConfig

    # what preflight assumes of the launch: one GPU's layout, no context parallelism (vLLM's defaults)
    parallel = types.SimpleNamespace(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1,
                                     decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                     cp_kv_cache_interleave_size=1)
    cache = types.SimpleNamespace(cache_dtype="auto", mamba_ssm_cache_dtype="auto", mamba_cache_dtype="auto")
    model = types.SimpleNamespace(hf_text_config=HF_CONFIG, hf_config=HF_CONFIG, is_hybrid=False)
    current = types.SimpleNamespace(model_config=model, parallel_config=parallel, cache_config=cache)
    vllm_config.get_current_vllm_config = lambda: current
    takes_heads = "num_heads" in inspect.signature(platform.get_valid_backends).parameters
    out = []
    for case in json.load(sys.stdin):
        CAPABILITY[:] = case["capability"]
        HF_CONFIG.__dict__.clear()
        HF_CONFIG.__dict__.update(case.get("hf_config") or {})
        cache.cache_dtype = case["selector"]["kv_cache_dtype"]
        fields = {k: v for k, v in case["selector"].items() if k in AttentionSelectorConfig._fields}
        fields["dtype"] = getattr(torch, fields["dtype"])
        cfg = AttentionSelectorConfig(**fields)
        kw = {"num_heads": case.get("num_heads")} if takes_heads else {}
        try:
            valid, invalid = platform.get_valid_backends(DeviceCapability(*CAPABILITY), cfg, **kw)
        except Exception as exc:  # a crash is an answer too: the grid reports it
            out.append({"error": f"{type(exc).__name__}: {exc}"})
            continue
        names = [getattr(c, "backend", c[0] if isinstance(c, tuple) else c).name for c in valid]
        reasons = {}
        for backend, value in invalid.items():
            reasons[backend.name] = list(value[1] if isinstance(value, tuple) else value)
        out.append({"valid": names, "invalid": reasons})
    print("ORACLE " + json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
