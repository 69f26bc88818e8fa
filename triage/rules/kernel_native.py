"""A kernel library's own C++ error, recognised by the format its exception class prints.

- FlashInfer: `flashinfer::Error` (include/flashinfer/exception.h, FLASHINFER_ERROR / FLASHINFER_CHECK) prints
  "Error in function '<func>' at <file>:<line>: <message>", whatever the check;
- DeepGEMM: `DGException` (csrc/utils/exception.hpp, DG_HOST_ASSERT / DG_CUDA_*_CHECK) prints
  "<kind> error (<file>:<line>): <reason>"; counted when the file is plainly DeepGEMM's (its source tree, its
  csrc/apis|jit|jit_kernels|utils/ layout), or FlashMLA's (which uses the same class): other files of that form are left to the
  traceback's frames.

- DeepGEMM before its exception carried parentheses (mid-2025): "Failed: Assertion error <file>:<line> '<cond>'";
- TVM-FFI, the binding layer of FlashInfer >= 0.4 (and of newer DeepGEMM and TileLang): TVM_FFI_ICHECK prints
  "Check failed: (<cond>) is false: <message>" or "Check failed: a == b (x vs. y) : <message>", raised as
  RuntimeError or tvm.error.InternalError; the library is named from the paste's paths when it says;
- a kernel's dispatch table without this case: "Unsupported <kernel> configuration: key=value ..." (FlashInfer's
  sparse-MLA and CUTLASS dispatchers print the parameters they could not match).

Specific checks (a scale layout, an unsupported architecture, out of memory) keep their own rules, which
rank above these; these name the library for every other check, as pasted without the Python frames.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, next_row_text

FLASHINFER_ERROR_RE = lazy(r"Error in function '(?P<func>[\w:<>~]+)' at (?P<file>\S+?):(?P<line>\d+): (?P<msg>.{1,300})",
                           needles=("Error in function '",))
DEEPGEMM_ERROR_RE = lazy(r"(?P<kind>Assertion|CUDA runtime|CUDA driver|NVRTC|NVCC|Compilation|Runtime|Unknown) error "
                         r"\((?P<file>[^()\s]*(?:deep_?gemm|DeepGEMM|jit_kernels/|flash_?mla|FlashMLA|"
                         # DeepGEMM's own source layout, as its relative __FILE__ prints it
                         r"csrc/(?:apis|jit|utils)/)[^()\s]*"
                         r":\d+)\): (?P<msg>.{1,300})",
                         needles=(" error (",))
DEEPGEMM_OLD_RE = lazy(r"Failed: (?P<kind>Assertion|CUDA runtime|CUDA driver|NVRTC|NVCC|Compilation|Runtime) error "
                       r"(?P<file>\S*(?:deep_?gemm|DeepGEMM|jit_kernels/|csrc/)\S*:\d+) (?P<msg>.{1,300})",
                       needles=("Failed: ",))
TVM_CHECK_RE = lazy(r"Check failed: (?P<cond>\(.{1,200}?\) is false|[^:]{1,200}?\(\S+ vs\. \S+\))\s*:?\s*(?P<msg>.{0,300})",
                    needles=("Check failed: ",))
CONFIG_UNSUPPORTED_RE = lazy(r"Unsupported (?P<what>[\w-]+(?: [\w-]+){0,3}) configuration: (?P<params>(?:\w+=\S+\s*){2,})",
                             needles=(" configuration: ",))
NOT_TVM_RE = lazy(r"ray/|ray_check|raylet|\bxla|\btpu\b|pjrt", needles=("ray", "xla", "tpu", "pjrt"))
# a paste's own words for the library behind a TVM-FFI check
TVM_LIBS = (("flashinfer", "FlashInfer", "flashinfer-python"), ("sparse-MLA", "FlashInfer", "flashinfer-python"),
            ("deep_gemm", "DeepGEMM", "deep_gemm"), ("deepgemm", "DeepGEMM", "deep_gemm"),
            ("tilelang", "TileLang", "tilelang"), ("TileLang", "TileLang", "tilelang"))
# an attention kernel's head-dimension refusal is the attention backend's (rules/kern_refusals.py)
HEAD_WORDS = ("head dim", "head_dim", "head size", "head_size")
# failures other rules name better, whatever library printed them
OTHER_CAUSES = ("out of memory", "no kernel image", "illegal memory access", "Unknown SF transformation",
                "Unknown recipe", "Unsupported architecture")


def _tvm_raised(t: str) -> bool:
    """A TVM-FFI check as Python raises it (glog's "Check failed" of Ray, XLA or NCCL plugins is not one)."""
    low = t.lower()
    return (("RuntimeError" in t or "InternalError" in t or "tvm" in low)
            and NOT_TVM_RE.search(low) is None)


def _tvm_library(scan: Scan, text: str = "") -> tuple[str, str]:
    hay = text + "\n" + scan.joined_text()
    return next(((name, pkg) for hint, name, pkg in TVM_LIBS if hint in hay), ("a kernel library (TVM-FFI)", "kernel library"))


# xgrammar (vLLM's structured-output backend) raises the same TVM-FFI checks from its grammar compilers: its C++
# converters' files on the line, or its Python frames in the paste (not the bare word: start-up configs print
# guided_decoding_backend='xgrammar' in every log)
XGRAMMAR_CHECK_RE = lazy(r"/cpp/(?:json_schema_converter|grammar_\w+|regex_converter|structural_tag\w*)\.cc:",
                         needles=("/cpp/",))
XGRAMMAR_FRAME_RE = lazy(r"xgrammar/\w+\.py\b|structured_output/backend_xgrammar\.py", needles=("xgrammar",))


def _xgrammar_check(scan: Scan, t: str) -> bool:
    return XGRAMMAR_CHECK_RE.search(t) is not None or XGRAMMAR_FRAME_RE.search(scan.joined_text()) is not None


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
                # FlashMLA's exception class is DeepGEMM's (same format): the file's tree says which
                mla = "mla" in m.group("file").lower()
                lib, pkg = ("FlashMLA", "the vLLM build (FlashMLA is bundled)") if mla else ("DeepGEMM", "deep_gemm")
                msg, where = m.group("msg").strip(), m.group("file").rsplit("/", 1)[-1]
        if not lib and "Failed: " in t:
            m = DEEPGEMM_OLD_RE.search(t)
            if m is not None and ("deep" in t.lower() or "jit_kernels/" in t or "deep_gemm" in scan.joined_text()):
                lib, pkg = "DeepGEMM", "deep_gemm"
                msg, where = m.group("msg").strip().strip("'"), m.group("file").rsplit("/", 1)[-1]
        if not lib and "Check failed: " in t and _tvm_raised(t):
            m = TVM_CHECK_RE.search(t)
            if m is not None and _xgrammar_check(scan, t):
                continue  # the request's grammar refused by xgrammar (rules/api_requests.py), no kernel's
            if m is not None:
                msg = m.group("msg").strip() or next_row_text(scan, ln.no)
                if any(w in msg.lower() for w in HEAD_WORDS):
                    continue
                lib, pkg = _tvm_library(scan)
                where = m.group("cond")[:80]
                msg = msg or m.group("cond")
        if not lib and " configuration: " in t:
            m = CONFIG_UNSUPPORTED_RE.search(t)
            # kern2: a configuration refused for its head dimensions is the attention kernel's (kern_refusals)
            if m is not None and not any(w in m.group("params") for w in HEAD_WORDS):
                lib, pkg = _tvm_library(scan, t)
                msg, where = f"Unsupported {m.group('what')} configuration: {m.group('params').strip()}", m.group("what")
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
