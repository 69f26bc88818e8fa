"""A minimal stand-in for the parts of vLLM the plugin and backend touch, written to disk as a
package (optionally with a .dist-info so importlib.metadata sees it).

It reproduces, in our own words, the semantics of vLLM's attention registry as read in
vllm-project/vllm vllm/v1/attention/backends/registry.py @ 0033bf03abd6dfdaa158a75e0973eead61875ad0
(v0.15+ location; v0.14 kept the same code in vllm/attention/backends/registry.py):
- AttentionBackendEnum values are class paths; TORCH_SDPA = "" ; CUSTOM = None (PR #30869), or
  CUSTOM = "" in the pre-0.14 variant, which Python's Enum turns into an alias of TORCH_SDPA
- the metaclass's __getitem__ raises ValueError("Unknown attention backend: ...") for unknown names
- get_path() returns the override from _ATTN_OVERRIDES or the value, and raises ValueError for an
  unregistered CUSTOM; get_class() resolves the path; register_backend(member, path) stores it
and of vllm/v1/attention/backend.py @ 0014ca6b9929614f1b72c4bb11e5238de49cba89: the
AttentionBackend base with validate_configuration's checks, AttentionCGSupport, the metadata
builder and MLA impl bases, CommonAttentionMetadata's fields the backend reads.
"""

from __future__ import annotations

import os
import textwrap

REGISTRY = '''
import importlib
from enum import Enum, EnumMeta


def _resolve(qualname):
    module, _, obj = qualname.rpartition(".")
    return getattr(importlib.import_module(module), obj)


class _Meta(EnumMeta):
    def __getitem__(cls, name):
        try:
            return super().__getitem__(name)
        except KeyError:
            raise ValueError(
                f"Unknown attention backend: '{name}'. Valid options are: {', '.join(cls.__members__)}"
            ) from None


class AttentionBackendEnum(Enum, metaclass=_Meta):
    FLASH_ATTN = "vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"
    TRITON_MLA = "vllm.v1.attention.backends.mla.triton_mla.TritonMLABackend"
    FLASHMLA_SPARSE = "vllm.v1.attention.backends.mla.flashmla_sparse.FlashMLASparseBackend"
    TORCH_SDPA = ""
    CUSTOM = @CUSTOM@

    def get_path(self, include_classname=True):
        path = _ATTN_OVERRIDES.get(self, self.value)
        if not path:
            raise ValueError(
                f"Backend {self.name} must be registered before use. "
                f"Use register_backend(Backend.{self.name}, 'your.module.YourClass')"
            )
        return path if include_classname else path.rsplit(".", 1)[0]

    def get_class(self):
        return _resolve(self.get_path())

    def is_overridden(self):
        return self in _ATTN_OVERRIDES

    def clear_override(self):
        _ATTN_OVERRIDES.pop(self, None)


_ATTN_OVERRIDES = {}


def register_backend(backend, class_path=None, is_mamba=False):
    def decorator(cls):
        _ATTN_OVERRIDES[backend] = f"{cls.__module__}.{cls.__qualname__}"
        return cls

    if class_path is not None:
        _ATTN_OVERRIDES[backend] = class_path
        return lambda x: x
    return decorator
'''

BACKEND_BASE = '''
from abc import ABC, abstractmethod
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, Generic, TypeVar

import torch


class AttentionCGSupport(Enum):
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


class MultipleOf:
    def __init__(self, base):
        self.base = base


class AttentionBackend(ABC):
    supported_dtypes: ClassVar[list] = [torch.float16, torch.bfloat16]
    supported_kv_cache_dtypes: ClassVar[list] = ["auto", "float16", "bfloat16"]

    @staticmethod
    def get_supported_kernel_block_sizes():
        return [MultipleOf(1)]

    @staticmethod
    @abstractmethod
    def get_name(): ...

    @staticmethod
    @abstractmethod
    def get_impl_cls(): ...

    @staticmethod
    @abstractmethod
    def get_builder_cls(): ...

    @staticmethod
    @abstractmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size, cache_dtype_str="auto"): ...

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
                             use_sparse, use_mm_prefix, device_capability):
        return None

    @classmethod
    def supports_block_size(cls, block_size):
        if block_size is None:
            return True
        for s in cls.get_supported_kernel_block_sizes():
            base = s.base if isinstance(s, MultipleOf) else s
            if block_size % base == 0:
                return True
        return False

    @classmethod
    def validate_configuration(cls, head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink,
                               use_sparse, use_mm_prefix, use_per_head_quant_scales,
                               device_capability, attn_type, **_):
        r = []
        heads = cls.get_supported_head_sizes()
        if heads and head_size not in heads:
            r.append("head_size not supported")
        if dtype not in cls.supported_dtypes:
            r.append("dtype not supported")
        if kv_cache_dtype is not None and kv_cache_dtype not in cls.supported_kv_cache_dtypes:
            r.append("kv_cache_dtype not supported")
        if not cls.supports_block_size(block_size):
            r.append("block_size not supported")
        if use_mla != cls.is_mla():
            r.append("MLA not supported" if use_mla else "non-MLA not supported")
        if has_sink and not cls.supports_sink():
            r.append("attention sinks not supported")
        if use_sparse != cls.is_sparse():
            r.append("sparse not supported" if use_sparse else "non-sparse not supported")
        if not cls.supports_compute_capability(device_capability):
            r.append("compute capability not supported")
        c = cls.supports_combination(head_size, dtype, kv_cache_dtype, block_size, use_mla, has_sink,
                                     use_sparse, use_mm_prefix, device_capability)
        if c is not None:
            r.append(c)
        return r


class AttentionMetadata:
    pass


class AttentionLayer:
    pass


T = TypeVar("T")


class AttentionMetadataBuilder(ABC, Generic[T]):
    _cudagraph_support: ClassVar = AttentionCGSupport.NEVER


class MLAAttentionImpl(ABC, Generic[T]):
    pass


@dataclass
class CommonAttentionMetadata:
    query_start_loc: Any
    query_start_loc_cpu: Any
    seq_lens: Any
    num_reqs: int
    num_actual_tokens: int
    max_query_len: int
    max_seq_len: int
    block_table_tensor: Any
    slot_mapping: Any
'''

LOGGER = '''
import logging


def init_logger(name):
    return logging.getLogger(name)
'''


def make_fake_vllm(site: str, version: str, layout: str = "v1", custom: str = "None",
                   mla_layer: bool = True, dist_info: bool = True) -> str:
    """Write package `vllm` into directory `site`. layout "v1" (>= 0.15) or "legacy" (0.14:
    registry in vllm/attention/backends, bases in vllm/attention/backends/abstract.py)."""
    root = os.path.join(site, "vllm")

    def put(rel: str, text: str) -> None:
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text))

    put("__init__.py", f'__version__ = "{version}"\n')
    put("logger.py", LOGGER)
    registry = REGISTRY.replace("@CUSTOM@", custom)
    for pkg in ("v1", "v1/attention", "v1/attention/backends", "attention", "attention/backends",
                "model_executor", "model_executor/layers", "model_executor/layers/attention"):
        put(f"{pkg}/__init__.py", "")
    if layout == "v1":
        put("v1/attention/backends/registry.py", registry)
        put("v1/attention/backend.py", BACKEND_BASE)
    else:
        put("attention/backends/registry.py", registry)
        put("attention/backends/abstract.py", BACKEND_BASE)
        put("v1/attention/backends/utils.py",
            "from vllm.attention.backends.abstract import AttentionCGSupport, AttentionMetadataBuilder, "
            "CommonAttentionMetadata\n")
    if mla_layer:
        put("model_executor/layers/attention/mla_attention.py", "# the shared MLA layer lives here\n")
    if dist_info:
        di = os.path.join(site, f"vllm-{version}.dist-info")
        os.makedirs(di, exist_ok=True)
        with open(os.path.join(di, "METADATA"), "w") as f:
            f.write(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
        with open(os.path.join(di, "RECORD"), "w") as f:
            f.write("")
    return root
