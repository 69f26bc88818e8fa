"""Diagnoses the upstream tests share, built the way the rules build them."""

from __future__ import annotations

from triage.model import Diagnosis, Evidence, Fix, Report

SM120_LINE = (
    "(Worker_TP4_EP4 pid=2532) ERROR 12-29 15:21:11 [multiproc_executor.py:751] ValueError: No valid attention backend "
    "found for cuda with AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype=auto, "
    "block_size=None, use_mla=True, has_sink=False, use_sparse=True, use_mm_prefix=False, attn_type=decoder). "
    "Reasons: {FLASH_ATTN_MLA: [sparse not supported, compute capability not supported, FlashAttention MLA not "
    "supported on this device], FLASHMLA: [sparse not supported, compute capability not supported, FlashMLA Sparse "
    "is only supported on Hopper and Blackwell devices.], FLASHINFER_MLA: [sparse not supported, compute capability "
    "not supported], TRITON_MLA: [sparse not supported], FLASHMLA_SPARSE: [compute capability not supported]}."
)

SM120_REJECTED = {
    "FLASH_ATTN_MLA": ["sparse not supported", "compute capability not supported",
                       "FlashAttention MLA not supported on this device"],
    "FLASHMLA": ["sparse not supported", "compute capability not supported",
                 "FlashMLA Sparse is only supported on Hopper and Blackwell devices."],
    "FLASHINFER_MLA": ["sparse not supported", "compute capability not supported"],
    "TRITON_MLA": ["sparse not supported"],
    "FLASHMLA_SPARSE": ["compute capability not supported"],
}


def sm120_diagnosis(kv_cache_dtype: str = "auto") -> Diagnosis:
    return Diagnosis(
        category="attention_backend",
        signature="attention.no_valid_backend",
        title="No attention backend can run sparse MLA (DSA) on this GPU",
        confidence=0.95,
        evidence=[Evidence(412, SM120_LINE)],
        facts={"head_size": 576, "dtype": "torch.bfloat16", "kv_cache_dtype": kv_cache_dtype, "block_size": None,
               "use_mla": True, "use_sparse": True, "has_sink": False, "rejected": SM120_REJECTED},
        fix=Fix("Install the bundled sparse MLA Triton backend or upgrade vLLM", "sparse-mla-sm120"),
        first_line=412,
    )


def sm120_env(**over) -> dict:
    env = {
        "vllm_version": "0.13.0",
        "vllm_install": {"kind": "wheel", "base": "0.13.0"},
        "model": "/data/models/acme-secret/DeepSeek-V3.2",
        "architecture": "DeepseekV32ForCausalLM",
        "compute_capability": "12.0",
        "gpus": [{"name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_capability": "12.0"}] * 8,
        "driver_version": "580.95.05",
        "cuda_version": "12.9",
        "torch_version": "2.9.0+cu129",
        "packages": {"vllm": "0.13.0", "flashinfer-python": "0.5.3", "torch": "2.9.0+cu129"},
        "patched_files": ["vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/flashmla_sparse.py"],
        "python": {"executable": "/home/alice/venvs/vllm/bin/python", "version": "3.12.3",
                   "read_from": "interpreter"},
    }
    env.update(over)
    return env


def sm120_report(**env_over) -> Report:
    return Report(source="vllm.log", bytes=123456, lines=900, diagnoses=[sm120_diagnosis()], environment=sm120_env(**env_over))
