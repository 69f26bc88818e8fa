"""Kernels that refuse this GPU's generation or this model's shapes, in the words their own checks print.

- A kernel built for some GPU generations only, run on another: AITER's Gluon / assembly kernels assert the
  gfx target ("mla_gluon requires gfx950 (CDNA4), got gfx942"), its JIT refuses the arch list ("One of GPU
  archs of ['gfx1151'] is invalid or not supported"), CUTLASS / FlashInfer / FlashMLA gates say
  "requires sm_100a, got sm_120". An attention kernel (MLA, paged / flash attention, prefill / decode) is the
  attention backend's choice; any other is the kernel library's.
- An attention kernel without an instantiation for the model's head dimensions (FlashInfer's dispatch
  macros "Unsupported head dimensions: head_dim_qk=256, head_dim_vo=256", "Unsupported head_dim: 72",
  FlashAttention-3's "Only support head size 64, 128, and 256").
- The KV cache a backend asked for does not fit the tensor the runner allocated
  (GPUModelRunner._reshape_kv_cache_tensors: "shape '[2, 84738, 16, 1, 576]' is invalid for input of size"):
  the backend's kv_cache_shape disagrees with the block size / KV dtype the cache was sized for, which is what
  a forced backend (or a block size it does not take) does.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

ARCH = r"(?:gfx\d{3,4}\w*|sm_?\d{2,3}[af]?|SM ?\d{2,3}[af]?|compute_\d{2,3}[af]?)"
# "<kernel> requires <arch> [(family)], got|but got|found|current device is <arch>"
NEEDS_ARCH_RE = lazy(rf"(?P<what>[\w.]+(?:::\w+)*(?: [\w.]+){{0,3}}) (?:requires|needs|only supports?|is only supported on) "
                     rf"(?P<need>{ARCH}(?:\s*(?:\([\w ]+\)|or|and|/|,)\s*{ARCH})*)[^;]{{0,40}}?,?\s*"
                     rf"(?:but )?(?:got|found|current device is|this device is|device is) (?:compute capability )?"
                     rf"(?P<have>{ARCH})",
                     needles=("requires", "needs", "only support"))
# AITER's JIT: "One of GPU archs of ['gfx1151'] is invalid or not supported [with VLLM_ROCM_USE_AITER: 1]"
ARCH_LIST_RE = lazy(r"GPU archs? (?:of )?\[?(?P<have>[^\]]*gfx\w+[^\]]*)\]? (?:is|are) (?:invalid or )?not supported",
                    needles=("GPU arch",))
ATTENTION_KERNEL_RE = lazy(r"(?i)mla|attn|attention|fmha|paged|flash|prefill|decode|\bpa_",
                           needles=("mla", "attn", "attention", "fmha", "paged", "flash", "prefill", "decode", "pa_"))
QUANT_WORDS_RE = lazy(r"(?i)nvfp4|mxfp|fp8|fp4|int4|int8|w4a|w8a|quant|moe|marlin|awq|gptq",
                      needles=("nvfp4", "mxfp", "fp8", "fp4", "int4", "int8", "w4a", "w8a", "quant", "moe", "marlin",
                               "awq", "gptq"))
LIBRARY_HINTS = (("aiter", "AITER"), ("AITER", "AITER"), ("flashinfer", "FlashInfer"), ("FlashInfer", "FlashInfer"),
                 ("deep_gemm", "DeepGEMM"), ("DeepGEMM", "DeepGEMM"), ("flashmla", "FlashMLA"), ("flash_mla", "FlashMLA"),
                 ("FlashMLA", "FlashMLA"), ("cutlass", "CUTLASS"), ("CUTLASS", "CUTLASS"), ("gluon", "AITER"))


def _library(text: str) -> str:
    return next((name for hint, name in LIBRARY_HINTS if hint in text), "a kernel library")


def _arch_refused(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for ln in scan.lines:
        t = ln.text
        # a note in passing (a selector choosing another kernel) is not the failure
        if t.startswith((" ", "\t")) or ln.level in ("INFO", "WARNING", "DEBUG"):
            continue
        what = need = have = ""
        m = NEEDS_ARCH_RE.search(t) if ("requires" in t or "needs" in t or "only support" in t) else None
        if m is not None and "fall" not in t.lower():
            what, need, have = m.group("what"), m.group("need"), m.group("have")
        elif "GPU arch" in t:
            m2 = ARCH_LIST_RE.search(t)
            if m2 is not None:
                what, have = ("AITER" if "AITER" in t or "aiter" in t else "a kernel library's JIT"), m2.group("have")
                have = have.replace("'", "").replace('"', "").strip()
        if not have or QUANT_WORDS_RE.search(t) is not None:
            continue  # a quantized GEMM / MoE kernel's gate is the quantization method's (rules/gpu.py, catalogue)
        lib = _library(t + " " + what)
        attention = ATTENTION_KERNEL_RE.search(what) is not None
        shown = f"{what} needs {need}" if need else f"{what} has no kernels for {have}"
        if attention:
            return Diagnosis(
                category="attention_backend", signature="attention.kernel_arch_unsupported",
                title=f"The attention kernel {what} does not run on this GPU ({have}{'; needs ' + need if need else ''})",
                confidence=0.8, evidence=[Evidence(ln.no, ln.shown)],
                facts={"kernel": what, "need": need, "have": have, "library": lib},
                fix=Fix(f"The attention backend in use calls {what} ({lib}), which exists only for "
                        f"{need or 'other GPU generations'}; this GPU is {have}. Turn that backend off (on ROCm: "
                        "VLLM_ROCM_USE_AITER_MLA=0 / VLLM_ROCM_USE_AITER_MHA=0, or VLLM_ROCM_USE_AITER=0) or pick another "
                        "one with --attention-backend (TRITON_MLA / TRITON_ATTN run everywhere), or use a GPU of the "
                        "generation the kernel was built for.", "attention-backend"),
                first_line=ln.no)
        return Diagnosis(
            category="kernel_library", signature="kernels.arch_unsupported",
            title=f"{lib} has no kernel for this GPU ({shown}; this GPU is {have})" if lib != what
            else f"{what} has no kernels for this GPU ({have})",
            confidence=0.8, evidence=[Evidence(ln.no, ln.shown)],
            facts={"kernel": what, "need": need, "have": have, "library": lib},
            fix=Fix(f"{lib} was built for {need or 'other GPU generations'}, not {have}: switch its use off for this GPU "
                    "(ROCm: VLLM_ROCM_USE_AITER=0 or the per-op VLLM_ROCM_USE_AITER_* flag; CUDA: VLLM_USE_DEEP_GEMM=0, "
                    "another --moe-backend / --attention-backend), or install a build of the library that includes "
                    f"{have}.", "kernel-library"),
            first_line=ln.no)
    return None


# FlashInfer's dispatch (DISPATCH_head_dim / the CUTLASS FMHA table), FlashAttention-3, xformers, AITER:
# an attention kernel compiled for a fixed set of head dimensions.
HEAD_DIM_RE = lazy(r"(?:Unsupported|Invalid|[Uu]nexpected) head[ _](?:dim(?:ension)?s?|sizes?)(?:_\w+)?\b\s*[:=]?"
                   r"(?P<dims>[\w=, ]{0,60})|"
                   r"head[ _](?:dim(?:ension)?s?|sizes?)(?:_qk|_vo)?[ =]*(?P<dim>\d+)? (?:is |are )?not supported|"
                   r"Only support head (?:size|dim)s? (?P<allowed>[\d, and]+)|"
                   # vLLM's CPU attention dispatch (csrc/cpu): "Unsupported CPU attention configuration: head_dim=512 isa=1"
                   r"Unsupported [\w -]{0,30}attention configuration:[^\n]{0,80}?\bhead_(?:dim|size)=(?P<cfgdim>\d+)",
                   needles=("nsupported head", "nvalid head", "nexpected head", "not supported", "Only support head",
                            "attention configuration"))


def _head_dims_refused(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    raised = {e.line.no for e in scan.exceptions}
    short = scan.lines_total <= 40
    for ln in scan.lines:
        t = ln.text
        if ln.no not in raised and ln.level not in ("ERROR", "CRITICAL") and not (short and not ln.level):
            continue
        if t.startswith((" ", "\t")) or ("head" not in t and "Head" not in t):
            continue
        m = HEAD_DIM_RE.search(t)
        if m is None or "fall" in t.lower() or "Using " in t:
            continue
        dims = (m.group("dims") or m.group("dim") or m.group("allowed") or
                (f"head_dim={m.group('cfgdim')}" if m.group("cfgdim") else "")).strip(" :,")
        return Diagnosis(
            category="attention_backend", signature="attention.kernel_head_dim_unsupported",
            title=f"The attention kernel has no variant for this model's head dimensions{' (' + dims + ')' if dims else ''}",
            confidence=0.75, evidence=[Evidence(ln.no, ln.shown)],
            facts={"dims": dims, "message": t.strip()[:300]},
            fix=Fix("The attention backend vLLM chose (or was told to use) calls a kernel compiled for a fixed set of "
                    "head dimensions, and this model's are not among them. Pick a backend that takes them "
                    "(--attention-backend TRITON_ATTN / FLEX_ATTENTION, or TRITON_MLA for MLA models), unset a forced "
                    "backend or prefill backend, or upgrade vLLM, whose selector checks head sizes before choosing.",
                    "attention-backend"),
            first_line=ln.no)
    return None


# torch's view/reshape refusal, in the runner's step that lays the backend's KV-cache shape over the
# allocated blocks (V1 GPUModelRunner, 0.8 .. 0.33; the 0.2x runner keeps the name).
RESHAPE_RE = lazy(r"shape '\[(?P<shape>[\d, ]+)\]' is invalid for input of size (?P<size>\d+)",
                  needles=("is invalid for input of size",))
KV_RESHAPE_FRAMES = ("_reshape_kv_cache_tensors", "initialize_kv_cache_tensors", "_reshape_kv_cache")


def _kv_layout_mismatch(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    if "is invalid for input of size" not in scan.joined_text():
        return None
    in_kv = any(f in scan.joined_text() for f in KV_RESHAPE_FRAMES) or any(
        getattr(fr, "func", "") in KV_RESHAPE_FRAMES for e in scan.exceptions for fr in e.frames)
    if not in_kv:
        return None
    for ln in scan.lines:
        m = RESHAPE_RE.search(ln.text)
        if m is None:
            continue
        return Diagnosis(
            category="attention_backend", signature="attention.kv_layout_mismatch",
            title=f"The attention backend's KV-cache layout does not fit the allocated cache (shape [{m.group('shape')}])",
            confidence=0.7, evidence=[Evidence(ln.no, ln.shown)],
            facts={"shape": m.group("shape"), "size": m.group("size")},
            fix=Fix("vLLM sized the KV cache for one block size / KV dtype and the attention backend lays it out for "
                    "another: this is what a forced backend (--attention-backend / VLLM_ATTENTION_BACKEND) that needs "
                    "its own block size does (FlashMLA 64, CUTLASS_MLA 128, FlashInfer-MLA 32/64), or a --block-size / "
                    "--kv-cache-dtype it does not take. Unset the forced backend, or give the block size it requires.",
                    "attention-backend"),
            first_line=ln.no)
    return None


def _arch_of(category: str):
    def check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
        d = _arch_refused(scan, env)
        return d if d is not None and d.category == category else None
    return check


RULES = [
    Rule(signature="kernels.arch_unsupported", category="kernel_library",
         title="A kernel library has no kernel for this GPU's generation", fix="", check=_arch_of("kernel_library"),
         confidence=0.8, playbook="kernel-library"),
    Rule(signature="attention.kernel_arch_unsupported", category="attention_backend",
         title="An attention kernel does not run on this GPU's generation", fix="", check=_arch_of("attention_backend"),
         confidence=0.8, playbook="attention-backend"),
    Rule(signature="attention.kernel_head_dim_unsupported", category="attention_backend",
         title="The attention kernel has no variant for this model's head dimensions", fix="",
         check=_head_dims_refused, confidence=0.75, playbook="attention-backend"),
    Rule(signature="attention.kv_layout_mismatch", category="attention_backend",
         title="The attention backend's KV-cache layout does not fit the allocated cache", fix="",
         check=_kv_layout_mismatch, confidence=0.7, playbook="attention-backend"),
]
