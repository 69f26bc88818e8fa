"""Triton's @jit not finding a kernel's `def` line in the source Python hands it.

triton.runtime.jit.JITFunction.__init__ cuts the kernel's source at
`re.search(r"^def\\s+\\w+\\s*\\(", src, re.MULTILINE).start()`: when inspect.getsource() returns text without that
line the search is None and the import of the module that defines the kernel dies with
"AttributeError: 'NoneType' object has no attribute 'start'". vLLM 0.26.0 imports the MiniMax-M3 kernels
(index_topk, sparse_attn) in its kernel warmup for every model, and on Python 3.10 their source does not parse
that way, so any model fails to start there. The bare AttributeError is everywhere; it is Triton's only with
Triton's frame (runtime/jit.py) or the report naming Triton beside it.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

NONE_START_RE = lazy(r"AttributeError: 'NoneType' object has no attribute 'start'")
TRITON_FRAME_RE = lazy(r"triton/runtime/jit\.py|\bJITFunction\b")
TRITON_WORD_RE = lazy(r"\bTriton\b", re.I)
# the module that defines the kernel: the traceback's last module-level frame above the error, or the report
# naming the import
MODULE_FRAME_RE = lazy(r"File \"[^\"]*?/(?P<file>vllm/[\w/.-]+\.py)\", line \d+, in <module>")
KERNEL_FILE_RE = lazy(r"(?:importing|import of|in) [`'\"]?(?P<file>[\w/.-]+/ops/[\w.-]+\.py)")
PYTHON_RE = lazy(r"\bPython (?P<py>3\.\d+)(?:\.\d+)?\b")


def _check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "no attribute 'start'" not in joined:
        return None
    hit = next(((ln, m) for ln in scan.lines if (m := NONE_START_RE.search(ln.text))), None)
    if hit is None:
        return None
    framed = TRITON_FRAME_RE.search(joined) is not None
    if not framed and TRITON_WORD_RE.search(joined) is None:
        return None
    facts: dict[str, Any] = {}
    frames = [m.group("file") for ln in scan.lines if ln.no < hit[0].no and (m := MODULE_FRAME_RE.search(ln.text))]
    if frames:
        facts["kernel_file"] = frames[-1]
    elif (f := KERNEL_FILE_RE.search(joined)) is not None:
        facts["kernel_file"] = f.group("file")
    if (p := PYTHON_RE.search(joined)) is not None:
        facts["python"] = p.group("py")
    facts["where"] = f" in {facts['kernel_file']}" if "kernel_file" in facts else ""
    return RULES[0].diagnosis(scan, [hit], facts=facts, confidence=0.85 if framed else 0.75)


RULES = [
    Rule(signature="triton.jit_source_unparsed", category="triton_compile",
         title="Triton could not find a kernel's def line in its source{where} ('NoneType' object has no "
               "attribute 'start')",
         fix="Triton's @jit reads each kernel's source with inspect.getsource() and found no `def` line in it, so "
             "importing the module that defines the kernel failed. vLLM 0.26.0 imports the MiniMax-M3 kernels at "
             "warmup for every model and they do not parse on Python 3.10: run vLLM on Python 3.11+ or a vLLM "
             "release that no longer imports them unconditionally. Elsewhere, reinstall so the kernel's .py source "
             "is present (not a .pyc-only or zipped install).",
         check=_check, playbook="triton-compile", confidence=0.85),
]
