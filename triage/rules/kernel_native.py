"""A kernel library's own C++ error, recognised by the format its exception class prints.

- FlashInfer: `flashinfer::Error` (include/flashinfer/exception.h, FLASHINFER_ERROR / FLASHINFER_CHECK) prints
  "Error in function '<func>' at <file>:<line>: <message>", whatever the check;
- DeepGEMM: `DGException` (csrc/utils/exception.hpp, DG_HOST_ASSERT / DG_CUDA_*_CHECK) prints
  "<kind> error (<file>:<line>): <reason>"; counted when the file is plainly DeepGEMM's (its source tree or its
  jit_kernels/ directory): other files of that form are left to the traceback's frames.

Specific checks (a scale layout, an unsupported architecture, out of memory) keep their own rules, which
rank above these; these name the library for every other check, as pasted without the Python frames.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

FLASHINFER_ERROR_RE = lazy(r"Error in function '(?P<func>[\w:<>~]+)' at (?P<file>\S+?):(?P<line>\d+): (?P<msg>.{1,300})",
                           needles=("Error in function '",))
DEEPGEMM_ERROR_RE = lazy(r"(?P<kind>Assertion|CUDA runtime|CUDA driver|NVRTC|NVCC|Compilation|Runtime|Unknown) error "
                         r"\((?P<file>[^()\s]*(?:deep_?gemm|DeepGEMM|jit_kernels/)[^()\s]*"
                         r":\d+)\): (?P<msg>.{1,300})",
                         needles=(" error (",))
# failures other rules name better, whatever library printed them
OTHER_CAUSES = ("out of memory", "no kernel image", "illegal memory access", "Unknown SF transformation",
                "Unknown recipe", "Unsupported architecture")


def _library_error(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for ln in scan.lines:
        t = ln.text
        lib = pkg = msg = where = ""
        if "Error in function '" in t:
            m = FLASHINFER_ERROR_RE.search(t)
            if m is not None:
                lib, pkg = "FlashInfer", "flashinfer-python"
                msg, where = m.group("msg").strip(), f"{m.group('file').rsplit('/', 1)[-1]}:{m.group('line')} ({m.group('func')})"
        if not lib and " error (" in t:
            m = DEEPGEMM_ERROR_RE.search(t)
            if m is not None:
                lib, pkg = "DeepGEMM", "deep_gemm"
                msg, where = m.group("msg").strip(), m.group("file").rsplit("/", 1)[-1]
        if not lib or any(w in t for w in OTHER_CAUSES):
            continue
        return Diagnosis(
            category="kernel_library", signature="kernels.library_check_failed",
            title=f"A check inside {lib} failed ({where}): {msg[:120]}", confidence=0.75,
            evidence=[Evidence(ln.no, ln.shown)], facts={"library": lib, "where": where, "message": msg[:300]},
            fix=Fix(f"{lib}'s own kernel code refused these inputs or this GPU ({msg[:160]}). The {lib} release "
                    f"installed is likely not the one this vLLM release pins, or this model / dtype / GPU needs a path "
                    f"{lib} does not have: install the {pkg} version vLLM pins, or route around it (another "
                    "--attention-backend / --moe-backend, VLLM_USE_DEEP_GEMM=0, VLLM_USE_FLASHINFER_SAMPLER=0), and report "
                    f"the message to {lib} if the versions already match.", "kernel-library"),
            first_line=ln.no)
    return None


RULES = [
    Rule(signature="kernels.library_check_failed", category="kernel_library",
         title="A check inside a kernel library failed", fix="", check=_library_error, confidence=0.75,
         playbook="kernel-library"),
]
