"""The vLLM attention backend around sparse_mla_fwd (imported by vLLM only when CUSTOM is chosen).

The shared MLA layer (vllm/model_executor/layers/attention/mla_attention.py) absorbs W_UK into the
query, writes the KV cache, and calls `impl.forward_mqa(q, kv_cache, metadata, layer)`; W_UV is
applied after. Like vLLM's XPU sparse backend, every token (prefill too) goes through the sparse MQA
path: the metadata reports all tokens as decode tokens, so the layer never takes its dense-MHA
prefill branch. The releases this runs in, and the per-era differences, are in support.py; each is
checked against the real wheel by tests/conformance (loader, registry, selector, the layer building
the impl, KV cache spec and shape, block sizes, metadata builder, one forward_mqa with numbers).

Not run on a GPU yet. What it does not do: decode context parallelism (DCP), attention sinks. The
DSA indexer is not part of it: see support.indexer_note().
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from vllm.v1.attention import backend as _vllm_backend
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionCGSupport,
    AttentionLayer,
    AttentionMetadata,
    AttentionMetadataBuilder,
    CommonAttentionMetadata,
    MLAAttentionImpl,
)

try:
    from vllm.model_executor.layers.attention.sparse_mla_attention import SharedTopkIndicesBuffer
except ImportError:  # older: each impl keeps the indexer's buffer itself

    class SharedTopkIndicesBuffer:  # type: ignore[no-redef]
        topk_indices_buffer: torch.Tensor | None = None

        def init_topk_indices_buffer(self, indexer: Any, topk_indices_buffer: torch.Tensor | None) -> None:
            buf = getattr(indexer, "topk_indices_buffer", None) if indexer is not None else None
            self.topk_indices_buffer = buf if buf is not None else topk_indices_buffer


from .indices import req_local_to_global
from .kernel import sparse_mla_fwd
from .support import BACKEND_SLOT, KV_CACHE_DTYPES

# The impl's base, by interface era (see support.py for the releases each was proven on):
# 0.16-0.25 have SparseMLAAttentionImpl (forward_mqa only) and the MLA layer routes a sparse impl by
# `isinstance(impl, SparseMLAAttentionImpl)`; from 0.26 that class is gone, MLAAttentionImpl's
# forward_mha is optional and the layer routes by `impl.is_sparse`.
_ImplBase: Any = getattr(_vllm_backend, "SparseMLAAttentionImpl", None) or MLAAttentionImpl

FP8_DS_MLA = "fp8_ds_mla"
KERNEL_BLOCK_SIZE = 64


class TriageSparseMLABackend(AttentionBackend):
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float16, torch.bfloat16]
    supported_kv_cache_dtypes: ClassVar[list[Any]] = list(KV_CACHE_DTYPES)

    @staticmethod
    def get_name() -> str:
        # The layer does AttentionBackendEnum[backend.get_name()]: this must be the slot's name.
        return BACKEND_SLOT

    @staticmethod
    def get_metadata_cls() -> type["TriageSparseMLAMetadata"]:
        return TriageSparseMLAMetadata

    @staticmethod
    def get_builder_cls() -> type["TriageSparseMLAMetadataBuilder"]:
        return TriageSparseMLAMetadataBuilder

    @staticmethod
    def get_impl_cls() -> type["TriageSparseMLAImpl"]:
        return TriageSparseMLAImpl

    @staticmethod  # asked by the engine up to 0.28; from 0.29 the KV cache spec decides (656-byte rows)
    def get_kv_cache_shape(
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_size: int,
        cache_dtype_str: str = "auto",
    ) -> tuple[int, ...]:
        if cache_dtype_str == FP8_DS_MLA:
            return (num_blocks, block_size, 656)
        return (num_blocks, block_size, head_size)

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec: Any = None) -> list[Any]:
        # vLLM >= 0.31 passes the layer's KV cache spec (vllm/v1/worker/utils.py); older ones
        # pass nothing. The kernel pages in 64-token blocks whatever the spec.
        return [KERNEL_BLOCK_SIZE]

    @classmethod
    def is_mla(cls) -> bool:
        return True

    @classmethod
    def is_sparse(cls) -> bool:
        return True

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return [576, 512]

    @classmethod
    def supports_compute_capability(cls, capability: Any) -> bool:
        return capability.major >= 8

    @classmethod
    def supports_combination(cls, head_size, dtype, kv_cache_dtype, *args: Any, **kwargs: Any) -> str | None:
        if kv_cache_dtype == FP8_DS_MLA and head_size != 576:
            return "fp8_ds_mla needs head size 576"
        return None


@dataclass
class TriageSparseMLAMetadata(AttentionMetadata):
    num_reqs: int
    max_query_len: int
    max_seq_len: int
    num_actual_tokens: int
    query_start_loc: torch.Tensor
    slot_mapping: torch.Tensor
    block_table: torch.Tensor
    req_id_per_token: torch.Tensor
    block_size: int = KERNEL_BLOCK_SIZE
    topk_tokens: int = 2048
    # Read by the shared MLA layer for every MLA backend: all tokens are "decode" tokens here, so
    # the layer's dense-MHA prefill branch (which needs fields this backend lacks) is never taken.
    num_decodes: int = 0
    num_prefills: int = 0
    num_decode_tokens: int = 0


class TriageSparseMLAMetadataBuilder(AttentionMetadataBuilder[TriageSparseMLAMetadata]):
    # Full CUDA graphs for batches of single-token decodes: forward_mqa makes no host sync and no
    # data-dependent launch (grid and splits follow the shapes only), and everything it reads lives
    # in persistent buffers (block table, the indexer's top-k buffer, req_id_per_token below).
    # Mixed prefill/decode batches run attention eagerly between piecewise graphs.
    _cudagraph_support: ClassVar[Any] = AttentionCGSupport.UNIFORM_SINGLE_TOKEN_DECODE

    def __init__(self, kv_cache_spec: Any, layer_names: list[str], vllm_config: Any, device: torch.device):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        self.device = device
        self.topk_tokens = int(vllm_config.model_config.hf_text_config.index_topk)
        max_tokens = vllm_config.scheduler_config.max_num_batched_tokens
        self.req_id_per_token_buffer = torch.zeros(max_tokens, dtype=torch.int32, device=device)

    def build(self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata,
              fast_build: bool = False) -> TriageSparseMLAMetadata:
        cm = common_attn_metadata
        starts = np.asarray(cm.query_start_loc_cpu, dtype=np.int64)
        req_ids = np.repeat(np.arange(len(starts) - 1, dtype=np.int32), np.diff(starts))
        buf = self.req_id_per_token_buffer
        buf.fill_(0)
        buf[: req_ids.shape[0]].copy_(torch.from_numpy(req_ids), non_blocking=True)
        return TriageSparseMLAMetadata(
            num_reqs=cm.num_reqs,
            max_query_len=cm.max_query_len,
            max_seq_len=cm.max_seq_len,
            num_actual_tokens=cm.num_actual_tokens,
            query_start_loc=cm.query_start_loc,
            slot_mapping=cm.slot_mapping,
            block_table=cm.block_table_tensor,
            req_id_per_token=buf[: cm.num_actual_tokens],
            block_size=self.kv_cache_spec.block_size,
            topk_tokens=self.topk_tokens,
            num_decodes=cm.num_reqs,
            num_prefills=0,
            num_decode_tokens=cm.num_actual_tokens,
        )


class TriageSparseMLAImpl(_ImplBase, SharedTopkIndicesBuffer):
    is_sparse = True
    # vLLM >= 0.33: no dense-MHA prefill here, every token takes the top-k MQA path.
    supports_dense_mha_prefill = False

    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int,
        alibi_slopes: list[float] | None,
        sliding_window: int | None,
        kv_cache_dtype: str,
        logits_soft_cap: float | None,
        attn_type: str,
        kv_sharing_target_layer_name: str | None,
        topk_indices_buffer: torch.Tensor | None = None,
        indexer: Any = None,
        **mla_args: Any,
    ) -> None:
        if alibi_slopes is not None or sliding_window is not None or logits_soft_cap is not None:
            raise NotImplementedError("triage_sparse_mla: alibi, sliding window and soft-cap are not supported")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)  # the layer's scale (qk_nope + rope)^-0.5 * mscale^2, never D^-0.5
        self.num_kv_heads = num_kv_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.kv_lora_rank: int = mla_args.get("kv_lora_rank", 512)
        self.init_topk_indices_buffer(indexer, topk_indices_buffer)

    def forward_mqa(
        self,
        q: torch.Tensor | tuple[torch.Tensor, torch.Tensor],
        kv_c_and_k_pe_cache: torch.Tensor,
        attn_metadata: TriageSparseMLAMetadata,
        layer: AttentionLayer,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        if isinstance(q, tuple):  # (ql_nope [T, H, 512], q_pe [T, H, 64])
            q = torch.cat(q, dim=-1)
        num_tokens = q.shape[0]
        assert self.topk_indices_buffer is not None, "the DSA indexer's top-k buffer was not handed over"
        slots = req_local_to_global(
            attn_metadata.req_id_per_token,
            attn_metadata.block_table,
            self.topk_indices_buffer[:num_tokens],
            block_size=attn_metadata.block_size,
        )
        fmt = FP8_DS_MLA if self.kv_cache_dtype == FP8_DS_MLA else "auto"
        # [num_blocks, block_size, D] (or 656 bytes), blocks possibly strided: indices are slots.
        out, _lse = sparse_mla_fwd(q, kv_c_and_k_pe_cache, slots, self.scale,
                                   d_v=self.kv_lora_rank, kv_format=fmt)
        return out, None
