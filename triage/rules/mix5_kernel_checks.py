"""FlashAttention-3's own CUDA check, printed just before the process exits.

FA3's hopper/ sources wrap every launch in CHECK_CUDA / CHECK_CUTLASS (hopper/cuda_check.h): on failure they print
"CUDA error (<__FILE__>:<line>): <cudaGetErrorString>" (or "CUTLASS error (...)") to stderr and call exit(1), so no
Python exception follows, only the parent's "engine died" traceback. The file path names which FA3 build ran: the
copy xFormers bundles (xformers/third_party/flash-attention/hopper/, which vLLM's MultiHeadAttention used for
encoders and ViTs), vLLM's own vllm-flash-attn, or a separately installed flash-attn hopper build. Those kernels are
compiled for Hopper (sm_90): on Blackwell (sm_100/sm_120) and other GPUs the launch fails with "no kernel image" or
"invalid argument". The library's build is what is wrong, not the GPU or vLLM's own kernels.
"""

from __future__ import annotations

from typing import Any

from triage.rules.base import Rule

_XFORMERS_ADVICE = (
    "vLLM ran this model's encoder attention (MultiHeadAttention: ViT / audio encoders) through xFormers, whose "
    "bundled FlashAttention-3 kernels are built for Hopper (sm_90) only. Upgrade vLLM (`pip install -U vllm`): newer "
    "releases send that attention to torch SDPA on GPUs xFormers cannot serve (vllm-project/vllm#21077). On a "
    "Hopper GPU this error instead means the xformers wheel does not match the installed torch: reinstall the "
    "xformers version vLLM pins.")
_VLLM_FA_ADVICE = (
    "vLLM's bundled FlashAttention-3 kernels (vllm-flash-attn, Hopper sm_90 only) ran on a GPU they were not built "
    "for: set VLLM_FLASH_ATTN_VERSION=2 to use FlashAttention-2, or pick another backend with --attention-backend "
    "(VLLM_ATTENTION_BACKEND on older vLLM), and upgrade vLLM, whose selection avoids FA3 off Hopper.")
_PACKAGE_ADVICE = (
    "A separately installed FlashAttention-3 build (flash-attn's hopper/ package, module flash_attn_interface) ran "
    "on a GPU it has no kernels for: its kernels target Hopper (sm_90). Uninstall it so the caller uses "
    "FlashAttention-2 or torch SDPA, or build it for this GPU's architecture.")


def _fa3_facts(m, line, scan) -> dict[str, Any]:
    path = m.group("path").replace("\\", "/").lower()
    if "xformers" in path:
        return {"build": "xFormers' bundled FlashAttention-3", "advice": _XFORMERS_ADVICE}
    if "vllm-flash-attn" in path or "vllm_flash_attn" in path:
        return {"build": "vLLM's FlashAttention-3 (vllm-flash-attn)", "advice": _VLLM_FA_ADVICE}
    return {"build": "The installed FlashAttention-3 build", "advice": _PACKAGE_ADVICE}


RULES = [
    Rule(signature="kernel.fa3_cuda_check_failed", category="kernel_library",
         title="{build} kernel failed on this GPU ({error})",
         fix="{advice}",
         # hopper/cuda_check.h (flash-attention 2.7 .. 3.x, vendored by xformers 0.0.28+ and vllm-flash-attn)
         patterns=[r"(?:CUDA|CUTLASS) error \((?P<path>[^()\s]*hopper/[\w.-]+\.(?:h|hpp|cu|cuh|cpp)):\d+\): "
                   r"(?P<error>no kernel image is available for execution on the device|invalid argument|"
                   r"invalid device function|too many resources requested for launch|Error Arch Mismatch|"
                   r"Error Internal)"],
         facts=_fa3_facts, playbook="kernel-library", confidence=0.95),
]
