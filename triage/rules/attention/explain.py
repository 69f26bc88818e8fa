"""What vLLM's attention backends need, and why each one turned this launch away, in words.

The table (BACKENDS) is the capability data; the functions read parsed rejection reasons against it.
"""

from __future__ import annotations

import re

from triage.computecap import parse_cc
from triage.lazyre import lazy
from typing import Any


#     sparse MLA decode API and index_topk == 2048; head 512 only in releases after GLM-5.3 support).
BACKENDS: dict[str, dict[str, Any]] = {
    "CUTLASS_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA_SPARSE": {"cc": [10], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)",
                              "kv": ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3"], "heads": [576]},
    "FLASHMLA": {"cc": [9, 10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)"},
    "FLASHMLA_SPARSE": {"cc": [9, 10], "sparse": True, "dtypes": ["bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)",
                        "kv": ["auto", "bfloat16", "fp8_ds_mla", "fp8"], "heads": [576]},
    "FLASH_ATTN_MLA": {"cc": [9], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)"},
    "FLASH_ATTN_MLA_SPARSE": {"cc": [9], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)",
                              "kv": ["auto", "float16", "bfloat16"]},
    "TRITON_MLA": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "any CUDA GPU"},
    "FLASHINFER_MLA_SPARSE_SM120": {"cc": [12], "sparse": True, "dtypes": ["bfloat16"],
                                    "gpus": "RTX PRO 6000 / RTX 50xx / GB10 (SM12x), in vLLM 0.24.0 and newer (PR #43477)",
                                    "kv": ["auto", "fp8", "fp8_e4m3", "fp8_ds_mla"], "heads": [576],
                                    # its impl raises unless the cache is fp8_ds_mla; only newer releases
                                    # rewrite auto/fp8 to it (vllm PR #47527), so name it outright
                                    "kv_fix": "fp8_ds_mla",
                                    # the first release with it (PyPI wheels: absent in 0.23.0, present in 0.24.0)
                                    "since": "0.24.0"},
    "TRITON_MLA_SPARSE": {"cc": None, "sparse": True, "dtypes": ["float16", "bfloat16"],
                          "gpus": "any CUDA GPU (open PRs #38476/#47629 only, not in a release)",
                          "kv": ["auto", "float16", "bfloat16"], "heads": [576]},
    "FLASH_ATTN": {"cc": [8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM80 and newer"},
    "FLASHINFER": {"cc": [7, 8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM75 to SM121"},
    "TRITON_ATTN": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any CUDA GPU"},
    "FLEX_ATTENTION": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any"},
}
# A backend was turned away for the GPU itself (not for a flag): these reasons say so.
GPU_REJECTIONS = ("compute capability not supported", "only supported on", "not supported on this device")
# DSA (sparse-attention) architectures: DeepSeek-V3.2, GLM-5/5.1/5.2, GLM-5.3-Flash (NoPE), DeepSeek-V4/V4.1.
DSA_ARCHES = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration",
              "DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM")


def cc_major(env: dict[str, Any]) -> int | None:
    cc = parse_cc(env.get("compute_capability"))
    return cc.major if cc else None


def rejects_gpu(reasons: list[str]) -> bool:
    """The backend turned this GPU away (as opposed to a flag or a missing library)."""
    return any(any(g in r for g in GPU_REJECTIONS) for r in reasons)


def kv_suggestion(name: str, kv: Any) -> str | None:
    """The --kv-cache-dtype value a sparse backend takes instead of `kv`: its own cache format where it has
    only one (SM120: fp8_ds_mla), else `auto` (a cache in the model dtype; FLASHMLA_SPARSE also stores
    `fp8` as fp8_ds_mla, but `auto` is the choice reported to start: vllm-project/recipes#565)."""
    info = BACKENDS.get(name, {})
    ok = info.get("kv")
    if not ok or kv in ok:
        return None
    return info.get("kv_fix", "auto")


def explain(fields: dict[str, Any], rejected: dict[str, list[str]], env: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Backend by backend: why it was rejected and what would make it acceptable."""
    lines: list[str] = []
    would: dict[str, str] = {}
    cc = env.get("compute_capability")
    sparse = fields.get("use_sparse") is True
    dtype = fields.get("dtype")
    kv = fields.get("kv_cache_dtype")
    head = fields.get("head_size")
    for name, reasons in rejected.items():
        info = BACKENDS.get(name, {})
        needs: list[str] = []
        parts: list[str] = []
        for r in reasons:
            if r.startswith("sparse not supported"):
                parts.append("a dense MLA backend; this model uses DSA sparse attention")
                needs.append("never, for this model")
            elif r.startswith("non-sparse not supported"):
                parts.append("sparse-only; this model is dense")
                needs.append("never, for this model")
            elif any(g in r for g in GPU_REJECTIONS):
                gpus = info.get("gpus")
                here = f" (this GPU: compute capability {cc})" if cc else ""
                parts.append(f"needs {gpus}{here}" if gpus else f"rejects this GPU's compute capability{here}")
                if gpus:
                    needs.append(f"on {gpus}")
            elif r.startswith("dtype not supported"):
                ok = info.get("dtypes")
                parts.append(f"does not take dtype {dtype}" + (f" (takes {', '.join(ok)})" if ok else ""))
                if ok:
                    needs.append(f"with --dtype {ok[-1]}")
            elif r.startswith("kv_cache_dtype not supported") or "does not support fp8_ds_mla" in r:
                ok = info.get("kv")
                parts.append((f"does not take KV-cache dtype {kv}" if kv is not None else
                              "does not take this launch's KV-cache dtype (the message does not print it)")
                             + (f" (takes {', '.join(ok)})" if ok else ""))
                alt = kv_suggestion(name, kv)
                needs.append(f"with --kv-cache-dtype {alt}" if alt else
                             "with another --kv-cache-dtype (or a vLLM version that accepts it)")
            elif r.startswith("head_size not supported"):
                heads = info.get("heads")
                nope = (" (head size 512 = 512-wide latent with no RoPE part: a NoPE model such as GLM-5.3-Flash,"
                        " qk_rope_head_dim 0)") if head == 512 else ""
                parts.append((f"does not take head size {head}" if head is not None else
                              "does not take this model's head size (the message does not print it)")
                             + (f" (takes {', '.join(map(str, heads))})" if heads else "") + nope)
                if sparse and head == 512:
                    needs.append("with a vLLM whose sparse backend takes NoPE head size 512")
            elif r.startswith("block_size not supported"):
                parts.append(f"does not take block size {fields.get('block_size')}")
                needs.append("with another --block-size (sparse MLA backends use 64)" if sparse else "with another --block-size")
            elif "sparse MLA decode API" in r:
                # vllm/utils/flashinfer.py has_flashinfer_sparse_mla_sm120(): FlashInfer importable, with
                # trtllm_batch_decode_sparse_mla_dsv4 and the TRT-LLM MLA decode; has_flashinfer() is also
                # false when neither flashinfer-cubin nor nvcc+ninja is there for its JIT.
                parts.append("its FlashInfer has no SM120 sparse MLA decode API: FlashInfer is missing, too old, or "
                             "disabled (no flashinfer-cubin and no nvcc/ninja for its JIT)")
                needs.append("with a FlashInfer that has the SM120 sparse MLA decode (and flashinfer-cubin, or nvcc+ninja)")
            elif "index_topk=" in r or "index_topk 2048" in r:
                m = re.search(r"got (\d+)", r)
                parts.append("its kernel handles index_topk 2048 only" + (f"; this model has {m.group(1)}" if m else ""))
                needs.append("never, for this model's index_topk")
            elif "qk_nope_head_dim" in r:
                parts.append(r)
                needs.append("with a vLLM version whose kernel accepts this qk_nope_head_dim")
            elif "is not available" in r or r.startswith("ImportError"):
                parts.append(f"its kernel library is missing from this build ({r})")
                needs.append("with a vLLM build that includes it for this GPU")
            elif "index_topk" in r:
                parts.append("needs a DSA model (index_topk in the config)")
            else:
                parts.append(r)
        lines.append(f"{name}: " + "; ".join(dict.fromkeys(parts)))
        if needs:
            would[name] = "; ".join(dict.fromkeys(needs))
    if sparse and not any(BACKENDS.get(n, {}).get("sparse") for n in rejected):
        lines.append("None of the listed backends is a sparse MLA backend: this vLLM build has none that was tried.")
    # What is missing for this GPU (compute capability, version, install) is added by triage.enrich,
    # which knows the probed machine.
    return lines, would


def sparse_here(rejected: dict[str, list[str]]) -> dict[str, list[str]]:
    """Sparse backends that accept this GPU but turned this configuration away, with their reasons."""
    return {n: rs for n, rs in rejected.items()
            if BACKENDS.get(n, {}).get("sparse") and rs and not rejects_gpu(rs)
            and not any(r.startswith("sparse not supported") for r in rs)}


def blocker_of(reasons: list[str]) -> str:
    """What kind of thing a GPU-compatible sparse backend refused: flag | library | head_size | model."""
    if any("sparse MLA decode API" in r or "is not available" in r or r.startswith("ImportError") for r in reasons):
        return "library"
    if any(r.startswith("head_size not supported") for r in reasons):
        return "head_size"
    if any("index_topk" in r or "qk_nope_head_dim" in r for r in reasons):
        return "model"
    return "flag"


def flag_fix(name: str, reasons: list[str], fields: dict[str, Any]) -> tuple[str, str] | None:
    """The one launch flag that makes `name` accept this configuration, when one does."""
    info = BACKENDS.get(name, {})
    other = [r for r in reasons if not (r.startswith("dtype not supported") or r.startswith("kv_cache_dtype not supported")
                                        or "does not support fp8_ds_mla" in r)]
    if other:
        return None  # a library, a head size or the model itself: no flag helps
    if any(r.startswith("dtype not supported") for r in reasons):
        if any(r.startswith("kv_cache_dtype not supported") for r in reasons):
            return None  # two flags; the explanation names both
        return "--dtype", (info.get("dtypes") or ["bfloat16"])[-1]
    alt = kv_suggestion(name, fields.get("kv_cache_dtype"))
    return ("--kv-cache-dtype", alt) if alt else None


def infer_sparse(fields: dict[str, Any], rejected: dict[str, list[str]], arch: Any) -> None:
    """An explicit-backend rejection carries no config: the reasons and the architecture still say
    whether the model is sparse (a sparse backend is told `non-sparse not supported` by a dense model).
    What it was read from goes in `sparse_inferred_from`, for the walk to say."""
    if "use_sparse" in fields:
        return
    reasons = [r for rs in rejected.values() for r in rs]
    sparse_names = [n for n in rejected if BACKENDS.get(n, {}).get("sparse")]
    if any(r.startswith("non-sparse not supported") for r in reasons):
        fields["use_sparse"] = False
        fields["sparse_inferred_from"] = "a sparse backend's rejection `non-sparse not supported`"
    elif arch in DSA_ARCHES:
        fields.update(use_sparse=True, sparse_inferred_from=f"the architecture {arch}, a DSA model")
        fields.setdefault("use_mla", True)
    elif any(r.startswith("sparse not supported") for r in reasons):
        fields.update(use_sparse=True, sparse_inferred_from="the rejections `sparse not supported` (the selector was asked for sparse)")
        fields.setdefault("use_mla", True)
    elif sparse_names:
        fields.update(use_sparse=True, sparse_inferred_from="the rejected backends naming sparse MLA ones ("
                      + ", ".join(sparse_names) + ")")
        fields.setdefault("use_mla", True)


# DSA model names as people write them (DeepSeek-V3.2[-Exp], GLM-5 / 5.1 / 5.2 / 5.3-Flash, DeepSeek-V4).
DSA_MODEL_RE = lazy(r"(?i)deepseek[-_ ]?v3[._]2|deepseek[-_ ]?v4|\bglm[-_ ]?5(?:[._]\d)?(?:[-_]|\b)(?!v)")
INDEX_TOPK_RE = lazy(r"['\"]?index_topk['\"]?\s*[:=]\s*(\d+)")


def sparse_evidence(scan: Any, backend: str | None = None, also: str | None = None) -> dict[str, Any]:
    """use_mla/use_sparse for a failure line that states neither (a sparse backend's own refusal, the
    fp8_ds_mla cache kernel), read from the other evidence: a backend that serves only sparse MLA, the
    architecture, the model's name, index_topk in its config. `sparse_inferred_from` says which."""
    facts = getattr(scan, "facts", {}) or {}
    arch = facts.get("architecture")
    model = str(facts.get("model") or "")
    said: list[str] = [also] if also else []
    if backend and (BACKENDS.get(backend, {}).get("sparse") or "SPARSE" in backend.upper()
                    or "sparse" in backend.lower()):
        said.append(f"the backend {backend}, which serves sparse MLA (DSA) models only")
    if arch in DSA_ARCHES:
        said.append(f"the architecture {arch}, a DSA model")
    elif model and DSA_MODEL_RE.search(model.rsplit("/", 1)[-1]):
        said.append(f"the model name {model.rsplit('/', 1)[-1]} (DeepSeek-V3.2 / GLM-5 family)")
    elif not model:
        # a report that names the model only in its prose ("I want to run GLM-5.2 on ...")
        for ln in getattr(scan, "lines", [])[:200]:
            m = DSA_MODEL_RE.search(ln.text) if ("glm" in ln.text.lower() or "deepseek" in ln.text.lower()) else None
            if m:
                said.append(f"the log naming {m.group(0).strip('-_ ')} (DeepSeek-V3.2 / GLM-5 family)")
                break
    for ln in getattr(scan, "lines", []):
        if "index_topk" in ln.text:
            m = INDEX_TOPK_RE.search(ln.text)
            if m:
                said.append(f"index_topk {m.group(1)} in the model's config (the DSA indexer)")
                break
    if not said:
        return {}
    return {"use_mla": True, "use_sparse": True, "sparse_inferred_from": "; ".join(said)}
