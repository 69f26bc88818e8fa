"""Preflight reads vLLM's selector from source: a vLLM-shaped package written here (the conformance tier
runs the same code against the real wheels), walked without importing or running anything."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from triage.preflight.launch import parse_launch
from triage.preflight.machine import Machine, given_gpus, read_environment
from triage.preflight.model import read_model
from triage.preflight.predict import predict
from triage.preflight.selector import SelectorUnreadable, SourceSelector
from triage.preflight.source_eval import Evaluator, Session, Undecided, World

FILES = {
    "vllm/__init__.py": "",
    "vllm/platforms/__init__.py": "current_platform = None\n",
    "vllm/platforms/interface.py": """
        from typing import NamedTuple

        class DeviceCapability(NamedTuple):
            major: int
            minor: int

            def __ge__(self, other):
                return (self.major, self.minor) >= (other.major, other.minor)

            def to_int(self) -> int:
                return self.major * 10 + self.minor

        class Platform:
            @classmethod
            def is_device_capability_family(cls, capability: int, device_id: int = 0) -> bool:
                return cls.get_device_capability(device_id=device_id).to_int() // 10 == capability // 10
    """,
    "vllm/platforms/cuda.py": """
        from vllm.platforms.interface import DeviceCapability, Platform
        from vllm.v1.attention.backends.registry import AttentionBackendEnum

        def _get_backend_priorities(use_mla, device_capability):
            if use_mla:
                if device_capability.major == 12:
                    return [AttentionBackendEnum.TRITON_MLA, AttentionBackendEnum.SPARSE_SM120]
                return [AttentionBackendEnum.TRITON_MLA]
            return [AttentionBackendEnum.FLASH_ATTN, AttentionBackendEnum.FLASHINFER,
                    AttentionBackendEnum.TRITON_ATTN]

        class CudaPlatformBase(Platform):
            @classmethod
            def get_valid_backends(cls, device_capability, attn_selector_config):
                valid_backends_priorities = []
                invalid_reasons = {}
                backend_priorities = _get_backend_priorities(attn_selector_config.use_mla, device_capability)
                for priority, backend in enumerate(backend_priorities):
                    try:
                        backend_class = backend.get_class()
                        invalid_reasons_i = backend_class.validate_configuration(
                            device_capability=device_capability, **attn_selector_config._asdict())
                    except ImportError:
                        invalid_reasons_i = ["ImportError"]
                    if invalid_reasons_i:
                        invalid_reasons[backend] = invalid_reasons_i
                    else:
                        valid_backends_priorities.append((backend, priority))
                return valid_backends_priorities, invalid_reasons

        class NvmlCudaPlatform(CudaPlatformBase):
            pass
    """,
    "vllm/utils/import_utils.py": """
        import importlib

        def resolve_obj_by_qualname(qualname):
            module_name, obj_name = qualname.rsplit(".", 1)
            return getattr(importlib.import_module(module_name), obj_name)
    """,
    "vllm/v1/attention/selector.py": """
        from typing import NamedTuple
        import torch

        class AttentionSelectorConfig(NamedTuple):
            head_size: int
            dtype: torch.dtype
            kv_cache_dtype: str | None
            block_size: int | None
            use_mla: bool = False
            has_sink: bool = False
            use_sparse: bool = False
    """,
    "vllm/v1/attention/backends/registry.py": """
        from enum import Enum
        from vllm.utils.import_utils import resolve_obj_by_qualname

        class AttentionBackendEnum(Enum):
            FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
            FLASHINFER = "vllm.v1.attention.backends.flashinfer.FlashInferBackend"
            TRITON_ATTN = "vllm.v1.attention.backends.triton_attn.TritonAttentionBackend"
            TRITON_MLA = "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
            SPARSE_SM120 = "vllm.v1.attention.backends.mla.sparse.SparseSM120Backend"

            def get_class(self):
                return resolve_obj_by_qualname(self.value)
    """,
    "vllm/v1/attention/backend.py": """
        from typing import ClassVar
        import torch

        class MultipleOf:
            def __init__(self, base: int):
                self.base = base

        class AttentionBackend:
            supported_dtypes: ClassVar[list] = [torch.float16, torch.bfloat16]
            supported_kv_cache_dtypes: ClassVar[list] = ["auto", "float16", "bfloat16"]

            @staticmethod
            def get_supported_kernel_block_sizes():
                return [MultipleOf(1)]

            @classmethod
            def get_supported_head_sizes(cls):
                return []

            @classmethod
            def is_mla(cls):
                return False

            @classmethod
            def is_sparse(cls):
                return False

            @classmethod
            def supports_sink(cls):
                return False

            @classmethod
            def supports_compute_capability(cls, capability):
                return True

            @classmethod
            def supports_combination(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink,
                                     use_sparse, device_capability):
                return None

            @classmethod
            def supports_block_size(cls, block_size):
                if block_size is None:
                    return True
                for s in cls.get_supported_kernel_block_sizes():
                    if isinstance(s, MultipleOf):
                        s = s.base
                    if block_size % s == 0:
                        return True
                return False

            @classmethod
            def validate_configuration(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink,
                                       use_sparse, device_capability):
                invalid_reasons = []
                heads = cls.get_supported_head_sizes()
                if heads and head_size not in heads:
                    invalid_reasons.append("head_size not supported")
                if dtype not in cls.supported_dtypes:
                    invalid_reasons.append("dtype not supported")
                if kv_cache_dtype not in cls.supported_kv_cache_dtypes:
                    invalid_reasons.append("kv_cache_dtype not supported")
                if not cls.supports_block_size(block_size):
                    invalid_reasons.append("block_size not supported")
                if use_mla != cls.is_mla():
                    invalid_reasons.append("MLA not supported" if use_mla else "non-MLA not supported")
                if has_sink and not cls.supports_sink():
                    invalid_reasons.append("attention sinks not supported")
                if use_sparse != cls.is_sparse():
                    invalid_reasons.append("sparse not supported" if use_sparse else "non-sparse not supported")
                if not cls.supports_compute_capability(device_capability):
                    invalid_reasons.append("compute capability not supported")
                combination = cls.supports_combination(head_size, dtype, kv_cache_dtype, block_size, use_mla,
                                                       has_sink, use_sparse, device_capability)
                if combination is not None:
                    invalid_reasons.append(combination)
                return invalid_reasons
    """,
    "vllm/v1/attention/backends/flash_attn.py": """
        from vllm.platforms.interface import DeviceCapability
        from vllm.v1.attention.backend import AttentionBackend, MultipleOf

        class FlashAttentionBackend(AttentionBackend):
            @staticmethod
            def get_supported_kernel_block_sizes():
                return [MultipleOf(16)]

            @classmethod
            def supports_compute_capability(cls, capability):
                return capability >= DeviceCapability(8, 0)

            @classmethod
            def supports_sink(cls):
                from vllm.platforms import current_platform
                return current_platform.is_device_capability_family(90)
    """,
    "vllm/v1/attention/backends/flashinfer.py": """
        from flashinfer import BatchDecodeWithPagedKVCacheWrapper
        from vllm.v1.attention.backend import AttentionBackend

        class FlashInferBackend(AttentionBackend):
            pass
    """,
    "vllm/v1/attention/backends/triton_attn.py": """
        import torch
        from vllm.v1.attention.backend import AttentionBackend

        class TritonAttentionBackend(AttentionBackend):
            supported_dtypes = [torch.float16, torch.bfloat16, torch.float32]
            supported_kv_cache_dtypes = ["auto", "float16", "bfloat16", "fp8"]
    """,
    "vllm/v1/attention/backends/mla/triton_mla.py": """
        from vllm.v1.attention.backend import AttentionBackend

        class TritonMLABackend(AttentionBackend):
            @classmethod
            def is_mla(cls):
                return True
    """,
    "vllm/v1/attention/backends/mla/sparse.py": """
        import torch
        from vllm.v1.attention.backend import AttentionBackend

        class SparseSM120Backend(AttentionBackend):
            supported_dtypes = [torch.bfloat16]
            supported_kv_cache_dtypes = ["auto", "fp8_ds_mla"]

            @classmethod
            def is_mla(cls):
                return True

            @classmethod
            def is_sparse(cls):
                return True

            @classmethod
            def get_supported_head_sizes(cls):
                return [576]

            @classmethod
            def supports_compute_capability(cls, capability):
                return capability.major == 12

            @classmethod
            def supports_combination(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink,
                                     use_sparse, device_capability):
                from vllm.config import get_current_vllm_config
                hf = get_current_vllm_config().model_config.hf_text_config
                index_topk = getattr(hf, "index_topk", None)
                if index_topk is None:
                    return "SPARSE_SM120 requires a model with index_topk config"
                if int(index_topk) != 2048:
                    return f"SPARSE_SM120 requires index_topk=2048; got {index_topk}"
                return None
    """,
}


@pytest.fixture()
def site(tmp_path: Path) -> Path:
    root = tmp_path / "site"
    for rel, text in FILES.items():
        f = root / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(textwrap.dedent(text))
    (root / "vllm-9.9.0.dist-info").mkdir()
    (root / "vllm-9.9.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 9.9.0\n\n")
    return root


def _ask(site, cc, **fields):
    base = {"head_size": 128, "dtype": "bfloat16", "kv_cache_dtype": "auto", "block_size": None}
    hf = fields.pop("hf_config", {})
    return SourceSelector([str(site)]).select(cc, {**base, **fields}, hf_config=hf)


def test_the_priority_order_and_each_backends_own_gates(site):
    s = _ask(site, (9, 0), has_sink=True)
    # FlashInfer's module imports a package that is not installed: vLLM says ImportError, so does preflight
    assert s.valid == ["FLASH_ATTN"] and s.chosen == "FLASH_ATTN"
    assert s.invalid == {"FLASHINFER": ["ImportError"], "TRITON_ATTN": ["attention sinks not supported"]}
    s = _ask(site, (8, 0), has_sink=True)  # sinks only on the 9.x family: no backend left
    assert s.valid == [] and s.invalid["FLASH_ATTN"] == ["attention sinks not supported"]
    assert s.message("NVIDIA A100").startswith("No valid attention backend found for NVIDIA A100. Reasons: {FLASH_ATTN: [")
    s = _ask(site, (7, 5), dtype="float32", block_size=8)
    assert s.invalid["FLASH_ATTN"] == ["dtype not supported", "block_size not supported", "compute capability not supported"]
    assert s.valid == ["TRITON_ATTN"]


def test_sparse_mla_on_sm120_reads_the_models_config(site):
    dsa = {"head_size": 576, "use_mla": True, "use_sparse": True}
    s = _ask(site, (12, 0), **dsa, hf_config={"index_topk": 2048})
    assert s.valid == ["SPARSE_SM120"] and s.invalid == {"TRITON_MLA": ["sparse not supported"]}
    s = _ask(site, (12, 0), **dsa, hf_config={"index_topk": 1024})
    assert s.invalid["SPARSE_SM120"] == ["SPARSE_SM120 requires index_topk=2048; got 1024"]
    s = _ask(site, (12, 0), **dsa, dtype="float16", hf_config={"index_topk": 2048})
    assert s.invalid["SPARSE_SM120"] == ["dtype not supported"]
    s = _ask(site, (9, 0), **dsa, hf_config={"index_topk": 2048})  # the 9.x order has no sparse backend at all
    assert s.order == ["TRITON_MLA"] and s.valid == []


def test_forced_backend_is_checked_alone(site):
    s = SourceSelector([str(site)]).select((8, 0), {"head_size": 128, "dtype": "float16", "kv_cache_dtype": "fp8",
                                                    "block_size": None}, forced="FLASH_ATTN")
    assert s.order == ["FLASH_ATTN"] and s.invalid == {"FLASH_ATTN": ["kv_cache_dtype not supported"]}
    with pytest.raises(SelectorUnreadable):
        SourceSelector([str(site)]).select((8, 0), {"head_size": 128, "dtype": "float16", "kv_cache_dtype": "auto",
                                                    "block_size": None}, forced="NO_SUCH_BACKEND")


def test_nothing_in_the_source_is_run(site, tmp_path):
    marker = tmp_path / "ran"
    (site / "vllm" / "v1" / "attention" / "backends" / "triton_attn.py").write_text(textwrap.dedent(f"""
        import os
        from vllm.v1.attention.backend import AttentionBackend

        class TritonAttentionBackend(AttentionBackend):
            @classmethod
            def supports_compute_capability(cls, capability):
                os.system("touch {marker}")
                open("{marker}", "w").write("x")
                return True
    """))
    s = _ask(site, (8, 0))
    assert "TRITON_ATTN" in s.undecided and not marker.exists()
    ev = Evaluator(World([str(site)]))
    with Session(ev), pytest.raises(Undecided):
        ev.call(ev.module("vllm.v1.attention.backends.triton_attn").ns["TritonAttentionBackend"].ns[
            "supports_compute_capability"], [None, None], {})
    assert not marker.exists()


def _sm120_machine_on(site, tmp_path) -> Machine:
    """One RTX PRO 6000 and a venv whose site-packages is `site` (its python is never run)."""
    prefix = tmp_path / "venv"
    (prefix / "lib" / "python3.12").mkdir(parents=True)
    (prefix / "lib" / "python3.12" / "site-packages").symlink_to(site)
    (prefix / "bin").mkdir()
    (prefix / "bin" / "python").write_text("#!/bin/sh\nexit 99\n")
    m = Machine(gpus=given_gpus("NVIDIA RTX PRO 6000 Blackwell", 1, "12.0", 96.0))
    read_environment(m, str(prefix / "bin" / "python"))
    return m


def test_preflight_says_which_gates_came_from_source(site, tmp_path):
    m = _sm120_machine_on(site, tmp_path)
    d = tmp_path / "glm"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "num_attention_heads": 64,
        "num_hidden_layers": 78, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048,
        "torch_dtype": "float16"}))
    launch = parse_launch(["vllm", "serve", str(d)])
    att = next(x for x in predict(launch, read_model(str(d)), m) if x.category == "attention_backend")
    assert "vLLM 9.9.0's own selector" in att.facts["gates_from"]
    assert att.facts["rejected"] == {"TRITON_MLA": ["sparse not supported"], "SPARSE_SM120": ["dtype not supported"]}
    launch = parse_launch(["vllm", "serve", str(d), "--dtype", "bfloat16"])
    found: dict = {}
    assert not [x for x in predict(launch, read_model(str(d)), m, found) if x.category == "attention_backend"]
    assert found["attention_backend"] == "SPARSE_SM120" and "own selector" in found["gates_from"]


def test_a_selector_it_cannot_read_falls_back_to_the_table(site, tmp_path):
    cuda = site / "vllm" / "platforms" / "cuda.py"
    cuda.write_text(cuda.read_text().replace("def get_valid_backends", "def renamed_in_a_new_release"))
    m = _sm120_machine_on(site, tmp_path)
    d = tmp_path / "dsv32"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({
        "architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "num_attention_heads": 128,
        "num_hidden_layers": 61, "kv_lora_rank": 512, "qk_rope_head_dim": 64, "index_topk": 2048,
        "torch_dtype": "float16"}))
    launch = parse_launch(["vllm", "serve", str(d)])
    att = next(x for x in predict(launch, read_model(str(d)), m) if x.category == "attention_backend")
    assert att.facts["gates_from"].startswith("triage's capability table")
    assert "no get_valid_backends" in att.facts["gates_from"]
