"""A kernel library's just-in-time build failed: the compiler's own diagnostics name a file in its tree.

FlashInfer (its JIT cache ~/.cache/flashinfer/<ver>/<arch>/..., its bundled headers flashinfer/data/...,
tvm_ffi), DeepGEMM and torch C++ extensions (~/.cache/torch_extensions) compile CUDA sources at first use;
when nvcc or the host compiler fails, the log holds the compiler's lines, often without any Python
exception (a paste cut to the error, or a ninja log). The compiler's own forms, whatever the library:

- nvcc / EDG: `<file>(<line>): error: <what>` and the template context `instantiation of "..." at line <n>
  of <file>`;
- gcc / clang: `<file>:<line>:<col>: (fatal )?error: <what>`;
- ninja: `FAILED: <object>`.

The library is the one whose tree holds the file; a file in no known library's tree is not this rule's.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, next_row_text

# The compiler's diagnostic, the file it is about (group "file") and what it says (group "what").
COMPILER_DIAG_RE = lazy(
    r"(?P<file>(?:[A-Za-z]:)?[\w./~+-]*[/\\][\w.+-]+\.(?:cuh?|hpp|h|cpp|cc|cxx|inl))"
    r"(?:\((?P<line>\d+)\): (?P<sev>error|catastrophic error)|:(?P<line2>\d+):(?:\d+:)? (?P<sev2>(?:fatal )?error))"
    # the message may be wrapped onto the next row (a paste, nvcc's long lines): the row ends at "error:"
    r"(?::? (?P<what>.{1,200})|:\s*$)",
    needles=("error",))
INSTANTIATION_RE = lazy(r'instantiation of (?:class )?"[^"]{1,400}" at line \d+ of (?P<file>\S+)',
                        needles=("instantiation of",))
NINJA_FAILED_RE = lazy(r"^FAILED: (?P<file>\S+)", needles=("FAILED: ",))

# (fragment of the file's path, library, what ships it prebuilt, category): Triton's and Inductor's own
# builds (the launcher stub, Inductor's C++ wrapper) are torch.compile's, the rest kernel libraries'
LIBRARY_TREES = [
    ("flashinfer", "FlashInfer", "flashinfer-python with flashinfer-cubin / flashinfer-jit-cache", "kernel_library"),
    ("tvm_ffi", "FlashInfer", "flashinfer-python with flashinfer-cubin / flashinfer-jit-cache", "kernel_library"),
    ("deep_gemm", "DeepGEMM", "deep_gemm", "kernel_library"),
    ("deepgemm", "DeepGEMM", "deep_gemm", "kernel_library"),
    ("torch_extensions", "a torch C++ extension", "the extension's prebuilt wheel", "kernel_library"),
    ("flash_attn", "FlashAttention", "flash-attn", "kernel_library"),
    ("flash-attention", "FlashAttention", "flash-attn", "kernel_library"),
    ("xformers", "xFormers", "xformers", "kernel_library"),
    ("torchinductor", "torch.compile (Inductor)", "torch and triton in the versions this vLLM pins", "triton_compile"),
    (".triton/cache", "Triton", "the triton version this vLLM pins", "triton_compile"),
]


def _library(path: str) -> tuple[str, str, str] | None:
    low = path.replace("\\", "/").lower()
    for frag, lib, pkg, cat in LIBRARY_TREES:
        if frag in low:
            return lib, pkg, cat
    return None


def _jit_compile_error(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    hits: list[tuple[Any, tuple[str, str, str], str]] = []  # (line, (library, package, category), what it said)
    for ln in scan.lines:
        t = ln.text
        what = ""
        m = COMPILER_DIAG_RE.search(t) if "error" in t else None
        if m is not None:
            path, what = m.group("file"), (m.group("what") or next_row_text(scan, ln.no)).strip()
        else:
            m = INSTANTIATION_RE.search(t) if "instantiation of" in t else None
            if m is None:
                m = NINJA_FAILED_RE.search(t.strip()) if "FAILED: " in t else None
            if m is None:
                continue
            path = m.group("file")
        tree = _library(path)
        if tree is None:
            continue
        hits.append((ln, tree, what))
        if len(hits) >= 4:
            break
    if not hits:
        return None
    # the compiler's error line says most; template context and ninja's FAILED only where it is missing
    best = next((h for h in hits if h[2]), hits[0])
    ln, (lib, pkg, category), what = best
    shown = [h[0] for h in hits if h[0] is not ln][:3]
    facts: dict[str, Any] = {"library": lib}
    if what:
        facts["compiler_error"] = what[:200]
    title = f"{lib}'s just-in-time kernel build failed to compile" + (f": {what[:100]}" if what else "")
    fix = (f"{lib} compiles this kernel on first use and the compiler rejected it. Either the kernel variant is "
           "broken for this configuration in this release (a dtype / head size / GPU architecture combination, e.g. "
           "an FP8 KV cache on Hopper), or the toolchain is (nvcc older than the GPU, a CUDA header missing from "
           f"the include path). Install the prebuilt kernels ({pkg}) matching this vLLM, upgrade {lib} to a release "
           "that fixes the variant, or avoid it: another --attention-backend, --kv-cache-dtype auto, or the "
           "library's environment switch (e.g. VLLM_USE_FLASHINFER_SAMPLER=0, VLLM_USE_DEEP_GEMM=0).")
    return Diagnosis(
        category=category, signature="kernels.jit_compile_error", title=title, confidence=0.92,
        evidence=[Evidence(x.no, x.shown) for x in sorted([ln, *shown], key=lambda x: x.no)],
        facts=facts, fix=Fix(fix, "kernel-library" if category == "kernel_library" else "triton-compile"),
        first_line=ln.no)


RULES = [
    Rule(signature="kernels.jit_compile_error", category="kernel_library",
         title="A kernel library's just-in-time build failed to compile", fix="", check=_jit_compile_error,
         confidence=0.92, playbook="kernel-library"),
]
