"""The kernel gates of the newest GPUs and the sparse-MLA / MLA models that push them.

What these rules read, from the code that raises it:

- vLLM's sparse-MLA backends for SM12x (FLASHINFER_MLA_SPARSE_SM120, SPARSE_MLA_SM120, B12X_MLA_SPARSE) assert in
  their Impl that the layer has a sparse-MLA indexer: "<BACKEND> requires a sparse-MLA indexer (model with
  index_topk in its config)". A dense MLA model forced onto one fails there, and so did GLM-5.2's skip layers (an
  index_topk pattern builds the indexer on some layers only) until the backends took the shared top-k buffer.
- FlashInfer's MLA wrappers refuse a cache or query dtype in plan(): "MLA kv_data_type torch.uint8 is not
  supported[ by the fa2 backend]. Supported dtypes: [...]" (vLLM handing the fp8 cache's uint8 storage dtype).
- FlashInfer's TRT-LLM-gen attention kernels (Blackwell) check their tile: "Expect (32 <= headDim <= 2048) &&
  (numTokensPerPage <= 128), got ..." (older cubin headers: "<= 1024", or "Expect (headDim <= 2048) && ..."): a KV
  block larger than 128 tokens, which vLLM picks for hybrid (mamba) models to match the state size.
- Kimi-K3's MLA prefill asserts "Kimi-K3 fp8 KV cache requires an fp8 prefill query; enable --attention-config
  '{"use_prefill_query_quantization": true}'" - the flag is honoured only by the Blackwell prefill backends.
- FlashInfer's NVFP4 weight shuffle for the TRT-LLM MoE/GEMM kernels asserts the scale-factor matrix is 128-row
  aligned (get_shuffle_matrix_sf_a_row_indices: bare `assert M % 128 == 0` / `assert K % 4 == 0`;
  get_shuffle_matrix_a_row_indices: "input_tensor.shape[0] must be multiples of 16|32"): a per-rank expert size
  that tensor parallelism left unaligned.
- CUTLASS's Python DSL (CuTe DSL: FA4 attention, FlashInfer's cute_dsl kernels) raises DSLRuntimeError when it
  cannot lower a kernel at JIT time ("Failed to create dynamic if", "ICE IR Verification Failed", "Expected an
  MLIR object (got OpResultList)"): the kernel source and the installed nvidia-cutlass-dsl are out of step.
- DeepGEMM asserts "Unsupported architecture" on any GPU it has no kernel for. Below SM90 (Ampere and older)
  no DeepGEMM build has one, so the GPU itself is below what the model's kernels need; on SM12x it is a
  DeepGEMM build question (kernels.deepgemm_jit_failed).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.attention.explain import sparse_evidence
from triage.rules.base import Rule
from triage.rules.gpu import NAME_CC, _gpu_cc
from triage.rules.kernels import DEEPGEMM_ARCH_REFUSED

_DEEPGEMM_REFUSED = lazy(DEEPGEMM_ARCH_REFUSED)
# a GPU's architecture said in words ("sm_80 / Ampere GPUs", "A800", "compute capability 8.6")
_SM = lazy(r"\bsm_?(\d{2,3})[af]?\b", re.IGNORECASE)
_FAMILY = {"volta": (7, 0), "turing": (7, 5), "ampere": (8, 0), "ada": (8, 9), "hopper": (9, 0), "blackwell": (10, 0)}
_FAMILY_RE = lazy(r"\b(Volta|Turing|Ampere|Ada Lovelace|Hopper|Blackwell)\b")


def _named_ccs(scan: Scan) -> set[tuple[int, int]]:
    """The compute capabilities the log's words name: sm_XX tokens, GPU model names, architecture families."""
    found: set[tuple[int, int]] = set()
    for ln in scan.lines:
        t = ln.text
        for m in _SM.finditer(t):
            n = m.group(1)
            found.add((int(n[:-1]), int(n[-1])))
        for m in _FAMILY_RE.finditer(t):
            found.add(_FAMILY[m.group(1).split()[0].lower()])
        for key, cc in NAME_CC:
            # a model number may follow a series name ("RTX 30" in "RTX 3090"): same generation either way
            if re.search(rf"\b{re.escape(key)}\d*\b", t):
                found.add(cc)
    return found


def _deepgemm_below_sm90(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    hits = [(ln, m) for ln in scan.lines for m in [_DEEPGEMM_REFUSED.search(ln.text)] if m][:1]
    if not hits:
        return None
    cc = _gpu_cc(scan)
    if cc is None:
        named = _named_ccs(scan)
        # only a log that names one side of SM90: "use H100 instead" beside "A800" says nothing alone
        if not named or max(named) >= (9, 0):
            return None
        cc = max(named)
    if cc >= (9, 0):
        return None
    rule = next(r for r in RULES if r.signature == "gpu.deepgemm_below_sm90")
    return rule.diagnosis(scan, hits, facts={"sm": f"sm_{cc[0]}{cc[1]}"})


# Dense MLA models (no indexer on any layer) that a forced sparse backend turns away.
_DENSE_MLA_ARCHES = ("DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration",
                     "KimiVLForConditionalGeneration")


def _indexer_facts(scan: Scan) -> dict[str, Any]:
    """Whether the model is a DSA model that lacks the indexer on some layers, or a dense MLA model."""
    facts = sparse_evidence(scan)
    arch = scan.facts.get("architecture")
    if not facts and arch in _DENSE_MLA_ARCHES:
        facts = {"use_mla": True, "use_sparse": False,
                 "sparse_inferred_from": f"the architecture {arch}, a dense MLA model (no indexer)"}
    return facts


RULES = [
    Rule(signature="attention.sparse_mla_indexer_required", category="attention_backend",
         title="The sparse-MLA attention backend {backend} found no sparse-MLA indexer on a layer",
         fix="{backend} serves only sparse-attention (DSA) MLA models, whose config has index_topk. A dense MLA "
             "model (DeepSeek-V3/R1, Kimi-K2) forced onto it: drop --attention-backend / VLLM_ATTENTION_BACKEND and "
             "let vLLM pick an MLA backend. A DSA model whose index_topk pattern builds the indexer on some layers "
             "only (GLM-5.2, index_topk_freq): upgrade vLLM to a release whose SM120 sparse backends take the shared "
             "top-k buffer on the skip layers (vllm-project/vllm#46506).",
         patterns=[r"(?P<backend>[A-Z][A-Z0-9_]*(?: SM1\d\d)?) requires a sparse-MLA indexer"],
         # the backend is no evidence here: a dense MLA model forced onto it raises the same
         facts=lambda m, line, scan: _indexer_facts(scan),
         playbook="attention-sparse-mla", confidence=0.85),
    Rule(signature="attention.mla_plan_dtype_unsupported", category="attention_backend",
         title="FlashInfer's MLA attention refuses the {which} dtype {dtype}{by}",
         fix="The MLA attention kernel takes float16, bfloat16 or float8_e4m3fn. torch.uint8 is the storage of "
             "vLLM's fp8 KV cache handed over unviewed (a vLLM bug in that backend's plan(), fixed upstream for "
             "GLM-5.3's SM90 sparse backend in vllm-project/vllm#55222): start without --kv-cache-dtype fp8 "
             "(auto/bfloat16), or pick another MLA backend with --attention-backend, or upgrade vLLM.",
         patterns=[r"MLA (?P<which>kv|q)_data_type (?P<dtype>torch\.\w+) is not supported"
                   r"(?P<by> by the \w+ backend)?"],
         facts=lambda m, line, scan: {"by": m.group("by") or ""},
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.trtllm_page_size_unsupported", category="attention_backend",
         title="FlashInfer's TRT-LLM attention kernel refuses this KV block size or head size "
               "(it takes at most 128 tokens per page)",
         fix="On Blackwell FlashInfer's TRT-LLM attention kernels take KV pages of at most 128 tokens and head sizes "
             "of 32 to 2048. Pass --block-size 64 (or 32/128); hybrid (mamba) models such as Qwen3-Next get a larger "
             "attention block to match the mamba state, which newer vLLM pins for FlashInfer "
             "(vllm-project/vllm#27843) - upgrade, or use another backend (--attention-backend FLASH_ATTN / "
             "TRITON_ATTN).",
         patterns=[r"Expect \((?:32 <= )?headDim <= \d+\) && \(numTokensPerPage <= 128\)"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.fp8_kv_prefill_query_required", category="attention_backend",
         title="{model}'s MLA prefill needs an fp8 query for the fp8 KV cache",
         fix="With --kv-cache-dtype fp8 the prefill must quantize its query, which only the Blackwell MLA prefill "
             "backends do: on B200/B300 add --attention-config "
             "'{{\"use_prefill_query_quantization\": true, \"mla_prefill_backend\": \"FLASHINFER\"}}'; on Hopper "
             "and older (where that flag is ignored) start with --kv-cache-dtype auto.",
         patterns=[r"(?P<model>[\w.-]+) fp8 KV cache requires an fp8 prefill query"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="quant.fp4_shuffle_alignment", category="quantization",
         title="FlashInfer's NVFP4 weight layout needs 128-aligned rows; this shard is not",
         fix="The TRT-LLM NVFP4 MoE/GEMM kernels shuffle the weight scale factors in 128-row blocks, and this "
             "model's per-rank expert size (intermediate size / tensor parallel size) is not a multiple of it. Use "
             "a tensor-parallel size that keeps it aligned (often --tensor-parallel-size 1 or 2), shard the experts "
             "with --enable-expert-parallel instead, or pick another MoE backend (--moe-backend "
             "flashinfer_cutlass / marlin).",
         check=lambda scan, env: _fp4_shuffle(scan), playbook="quantization", confidence=0.8),
    Rule(signature="kernels.cute_dsl_compile_failed", category="kernel_library",
         title="A CUTLASS DSL (CuTe) kernel failed to compile at JIT time",
         fix="The kernel (FA4 attention, FlashInfer's cute_dsl GEMM/MoE) and the installed nvidia-cutlass-dsl are "
             "out of step: install the nvidia-cutlass-dsl release your vLLM / FlashInfer pins (`pip show "
             "nvidia-cutlass-dsl`), or a vLLM build where this kernel compiles (nightly regressions are fixed "
             "quickly), or select a backend that does not use it (--attention-config "
             "'{{\"mla_prefill_backend\": \"FLASHINFER\"}}', another --moe-backend).",
         patterns=[r"DSLRuntimeError\b", r"ICE IR Verification Failed", r"Expected an MLIR object \(got \w+\)"],
         playbook="kernel-library", confidence=0.8),
    Rule(signature="gpu.deepgemm_below_sm90", category="unsupported_gpu",
         title="DeepGEMM has no kernel for this GPU ({sm}): the model's kernels need Hopper or newer",
         fix="DeepGEMM's kernels (FP8 block GEMMs, DeepSeek-V4's hyper-connection and indexer kernels) exist for "
             "SM90 and newer only; no DeepGEMM build runs on {sm}. Serve this model on H100/H200/B200-class GPUs, or "
             "use a checkpoint and model whose kernels run here (a BF16 or INT4/INT8 quantization, another model).",
         check=_deepgemm_below_sm90, playbook="unsupported-gpu", confidence=0.9),
]

_SHUFFLE_FRAME = "get_shuffle_matrix"
_SHUFFLE_ASSERT = lazy(r"^\s*assert (?P<cond>[MK] % (?:128|4) == 0)\s*$|"
                       r"input_tensor\.shape\[0\] must be multiples of (?P<block>\d+)")


def _fp4_shuffle(scan: Scan) -> Diagnosis | None:
    # the bare assert's printed source line says which; only under FlashInfer's shuffle helpers
    if _SHUFFLE_FRAME not in scan.joined_text():
        return None
    hits = [(ln, m) for ln in scan.lines for m in [_SHUFFLE_ASSERT.search(ln.text)] if m][:3]
    if not hits:
        return None
    rule = next(r for r in RULES if r.signature == "quant.fp4_shuffle_alignment")
    return rule.diagnosis(scan, hits)
