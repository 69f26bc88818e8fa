"""vLLM's compiled quantization kernels refusing a call from their own C++ checks (csrc/quantization/...).

A TORCH_CHECK in vLLM's C++ raises RuntimeError with its message, and often without one: then the message is
only the function and the source location ("dispatch_scaled_mm, /workspace/csrc/libtorch_stable/quantization/
w8a8/cutlass/c3x/scaled_mm_helper.hpp:17"), or torch's "Exception raised from <func> at <file>:<line>". The
file says which kernel family refused: under csrc/quantization it is the quantized GEMM/MoE kernel for the
checkpoint's scheme, and on a GPU generation its build has no kernel for (INT8 or block-scaled FP8 on SM12x
Blackwell, FP4 before Blackwell) that is the usual reason.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# csrc/quantization/w8a8/cutlass/c3x/scaled_mm_helper.hpp (0.11+), scaled_mm_entry.cu: the int8 path is compiled
# out for SM100+ ("Int8 not supported for this architecture", newer: "Int8 not supported on SM120. Use FP8 ...").
INT8_ARCH = Rule(
    signature="quant.int8_arch_unsupported", category="quantization",
    title="vLLM's INT8 (W8A8) GEMM has no kernel for this GPU{sm_suffix}",
    fix="vLLM's CUTLASS int8 scaled_mm is compiled only for GPUs before SM100: on Blackwell (B200, RTX 50xx, RTX "
        "PRO 6000, GB10) an INT8 W8A8 checkpoint cannot run. Use an FP8 or INT4 (W4A16 / AWQ / GPTQ) checkpoint of "
        "the model, or run this one on an older GPU.",
    patterns=[r"Int8 not supported (?:for this architecture|on SM ?(?P<sm>\d+))"],
    playbook="quantization", confidence=0.9,
    facts=lambda m, line, scan: {"sm_suffix": f" (SM{m.group('sm')})" if m.group("sm") else ""})

# A vLLM C++ source file under a quantization kernel folder, with the line the check is on.
QUANT_SOURCE_RE = lazy(r"(?P<file>csrc/(?:libtorch_stable/)?(?:quantization|moe/marlin\w*)/[\w/.-]+?"
                       r"\.(?:cu|cuh|hpp|h|cpp|cc)):(?P<line>\d+)", needles=("csrc/",))
# The C++ function the failed check is in: "Exception raised from <func> at", or "<func>, <file>:<line>".
FUNC_BEFORE_RE = lazy(r"(?:Exception raised from (?P<a>\w+) at|(?P<b>\w+),\s*$)")
# A compiler's diagnostic about the same file (a source build failing), not a kernel's run-time refusal.
COMPILER_RE = lazy(r"\.(?:cu|cuh|hpp|h|cpp|cc)(?:\(\d+\)|:\d+:\d+):? ?(?:fatal )?(?:error|warning)|nvcc|ninja|"
                   r"FAILED:|Building CUDA|error: ")
WINDOW = 2  # lines from the exception line a check's location may be printed on (a wrapped message)


def _native_check(scan: Scan) -> Diagnosis | None:
    exc_lines = {e.line.no: e for e in scan.exceptions}
    lines = scan.lines
    for i, ln in enumerate(lines):
        m = QUANT_SOURCE_RE.search(ln.text)
        if m is None or COMPILER_RE.search(ln.text):
            continue
        near = [lines[j] for j in range(max(0, i - WINDOW), i + 1)]
        exc = next((exc_lines[x.no] for x in reversed(near) if x.no in exc_lines), None)
        raised_from = "Exception raised from" in ln.text
        if exc is None and not raised_from:
            continue
        if any(COMPILER_RE.search(x.text) for x in near):
            continue
        func = None
        for x in reversed(near):
            f = FUNC_BEFORE_RE.search(x.text[: x.text.find(m.group("file"))] if x is ln else x.text)
            if f:
                func = f.group("a") or f.group("b")
                break
        src = m.group("file")
        facts: dict[str, Any] = {"file": src, "source_line": int(m.group("line")), "function": func or "?"}
        where = f"{func} in {src.rsplit('/', 1)[-1]}" if func else src.rsplit("/", 1)[-1]
        ev = [Evidence(x.no, x.shown) for x in near if x.no == ln.no or (exc and x.no == exc.line.no)]
        return Diagnosis(
            category="quantization", signature="quant.native_check_failed",
            title=f"A quantized kernel of vLLM refused this call ({where})",
            confidence=0.75, evidence=sorted(ev, key=lambda e: e.line), facts=facts,
            fix=Fix("vLLM's compiled quantization kernel stopped at its own check (" + src + "): most often the "
                    "installed build has no kernel of this scheme for this GPU generation (INT8 or block-scaled FP8 "
                    "on SM12x Blackwell, FP4 before Blackwell). Upgrade vLLM, or run a checkpoint in another format "
                    "(or let vLLM pick another kernel: VLLM_DISABLED_KERNELS=<the kernel its log says it selected>).",
                    "quantization"),
            first_line=min(e.line for e in ev))
    return None


RULES = [
    INT8_ARCH,
    Rule(signature="quant.native_check_failed", category="quantization",
         title="A quantized kernel of vLLM refused this call", fix="",
         check=lambda scan, env: _native_check(scan), playbook="quantization", confidence=0.75),
]
