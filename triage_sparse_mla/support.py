"""What the bundled backend supports, in plain data: used by the plugin, by `triage apply` and by
the diagnosis/playbook. Pure Python, no torch: cheap to import anywhere.
"""

from __future__ import annotations

import re

# The vLLM releases the conformance suite (tests/conformance) runs the backend in: the first of
# every interface era and the newest. Eras, read from the wheels: 0.16-0.25 SparseMLAAttentionImpl
# and isinstance routing; 0.26 impl.is_sparse routing; 0.27-0.28 also supports_dense_mha_prefill;
# 0.29-0.30 the KV cache spec shapes the cache (no get_kv_cache_shape on the base); 0.31-0.33 kernel
# block sizes asked with the spec. Older: 0.15 has no forward_mqa-only impl (its MLA impls implement
# the whole forward), 0.14 no MLA layer. The supported range is derived from this list, nothing else.
PROVEN_VLLM = ("0.16.0", "0.25.1", "0.26.0", "0.28.0", "0.29.0", "0.31.0", "0.33.0")


def _line(v: str) -> tuple[int, int]:
    major, minor = v.split(".")[:2]
    return int(major), int(minor)


MIN_VLLM = _line(PROVEN_VLLM[0])
MAX_VLLM_EXCLUSIVE = (_line(PROVEN_VLLM[-1])[0], _line(PROVEN_VLLM[-1])[1] + 1)
SUPPORTED_VLLM = f">={MIN_VLLM[0]}.{MIN_VLLM[1]},<{MAX_VLLM_EXCLUSIVE[0]}.{MAX_VLLM_EXCLUSIVE[1]}"

# The registry slot the backend takes and the flag users add to `vllm serve`.
BACKEND_SLOT = "CUSTOM"
LAUNCH_FLAG = "--attention-backend CUSTOM"
BACKEND_CLASS_PATH = "triage_sparse_mla.backend.TriageSparseMLABackend"
PLUGIN_ENTRY_POINT = ("vllm.general_plugins", "triage_sparse_mla", "triage_sparse_mla.plugin:register")
DISTRIBUTION = "triage-sparse-mla"

KV_CACHE_DTYPES = ("auto", "float16", "bfloat16", "fp8_ds_mla")
MODEL_DTYPES = ("float16", "bfloat16")
HEAD_SIZES = (576, 512)
# Compute capabilities the kernel targets: everything Triton supports from Ampere on. fp8_ds_mla
# decodes fp8 with integer bit math below SM89 (no hardware e4m3 conversion there).
MIN_COMPUTE_CAPABILITY = (8, 0)


def parse_version(text: str) -> tuple[int, int, int] | None:
    """'0.14.1', '0.16.0rc2.dev313+g662205d34', '0.13.0+faa43dbf.nv26.01' -> (0, 14, 1) etc.

    Pre-releases count as their release line: a 0.14.0rc1 has the 0.14 registry.
    """
    m = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not m:
        return None
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def vllm_supported(version: str) -> tuple[bool, str]:
    """(ok, reason) for a vLLM version string."""
    v = parse_version(version)
    if v is None:
        return False, f"cannot read the vLLM version {version!r}"
    if v[:2] < MIN_VLLM:
        return False, (
            f"vLLM {version} is older than {MIN_VLLM[0]}.{MIN_VLLM[1]}: its MLA layer has no sparse "
            f"forward_mqa-only interface for this backend; upgrade vLLM to use triage_sparse_mla "
            f"(supported {SUPPORTED_VLLM})"
        )
    if v[:2] >= MAX_VLLM_EXCLUSIVE:
        return False, (
            f"vLLM {version} is newer than the releases triage_sparse_mla was checked against "
            f"({SUPPORTED_VLLM}); its sparse MLA interface may have changed"
        )
    return True, f"vLLM {version} is in the supported range {SUPPORTED_VLLM}"


def indexer_note(compute_capability: tuple[int, int] | None = None) -> str | None:
    """What else a DSA model needs on this GPU, or None when nothing more is known to be missing.

    The attention backend replaces only the sparse attention kernel. DeepSeek-V3.2/V4 and GLM-5.x also
    run the DSA "lightning indexer", whose logits kernels (fp8_mqa_logits / fp8_paged_mqa_logits) come
    from DeepGEMM in every vLLM release: built for SM90/SM100, and for SM120 since deepseek-ai/DeepGEMM#324
    (the kernels vLLM's own SM12x sparse path, PR #43477, relies on). SM8x has none, and the Triton
    indexer of vLLM PRs #38476/#47629 is not in a release (as of late 2026).
    """
    major = compute_capability[0] if compute_capability is not None else None
    if major in (9, 10):
        return None
    tail = ("triage_sparse_mla replaces the sparse attention kernel only; if the launch then fails with "
            "'DeepGEMM backend is not available' or 'Sparse Attention Indexer CUDA op requires DeepGEMM', that "
            "is the indexer.")
    if major == 12:
        return ("The DSA indexer of DeepSeek-V3.2/V4/GLM-5 scores tokens with DeepGEMM: on SM12x it needs a "
                "DeepGEMM with the SM120 kernels of deepseek-ai/DeepGEMM#324 in vLLM's environment. " + tail)
    if major is not None:
        return ("The DSA indexer of DeepSeek-V3.2/V4/GLM-5 scores tokens with DeepGEMM, which has no kernels for "
                f"compute capability {major}.x, and no vLLM release has another indexer (a Triton one is only in "
                "vLLM PRs #38476/#47629): on this GPU the model still fails in the indexer. " + tail)
    return ("The DSA indexer of DeepSeek-V3.2/V4/GLM-5 needs DeepGEMM, which has kernels for SM90/SM100 and, "
            "with deepseek-ai/DeepGEMM#324, SM120; on SM8x no vLLM release has another indexer (Triton one "
            "only in vLLM PRs #38476/#47629). " + tail)


def requirements_text() -> str:
    return (
        f"vLLM {SUPPORTED_VLLM}, torch and triton in the same environment, an NVIDIA GPU of compute "
        f"capability >= {MIN_COMPUTE_CAPABILITY[0]}.{MIN_COMPUTE_CAPABILITY[1]}, model dtype "
        f"{'/'.join(MODEL_DTYPES)}, kv-cache dtype {'/'.join(KV_CACHE_DTYPES)}"
    )
