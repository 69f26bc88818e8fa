"""Kernel toolchains that predate the GPU or the environment they run in.

Triton assembles every kernel it compiles with a ptxas it bundles (triton/backends/nvidia/bin/ptxas, and since
the Blackwell split ptxas-blackwell; TRITON_PTXAS_PATH / TRITON_PTXAS_BLACKWELL_PATH override them). A GPU newer
than that ptxas (GB10 sm_121, Jetson Thor sm_110, Rubin sm_107, ...) makes `make_cubin` raise
`PTXASError: PTXAS error: Internal Triton PTX codegen error` with ptxas's own stderr below it:
`ptxas fatal   : Value 'sm_121a' is not defined for option 'gpu-name'` (the `ptxas-blackwell fatal` spelling
on newer Triton); threads restate it as "ptxas \"sm_107a is not defined\"". The cure is the ptxas of an
installed CUDA toolkit that knows the architecture, not another vLLM flag.

FlashInfer JIT-compiles its modules with the nvcc it finds (CUDA_HOME, /usr/local/cuda, PATH) and caches the
shared object under ~/.cache/flashinfer/<version>/<arch>/cached_ops/. Built with a newer toolkit than the
environment's torch, the module links a newer libcudart; a process whose driver or compat libraries only serve
the older CUDA then fails inside FlashInfer with cudaErrorInsufficientDriver although torch itself ran. That is
FlashInfer's build, not a driver too old for torch/vLLM.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# The oldest CUDA toolkit whose ptxas knows each architecture (CUDA release notes).
PTXAS_SINCE = {"100": "12.8", "101": "12.8", "120": "12.8", "103": "12.9", "121": "12.9", "110": "13.0"}


def _ptxas_facts(m: "re.Match[str]", line: Any, scan: Scan) -> dict[str, Any]:
    arch = m.group("arch")
    digits = re.sub(r"\D", "", arch)
    since = PTXAS_SINCE.get(digits)
    return {"need": f" (CUDA {since} or newer)" if since else " (a CUDA toolkit released for this GPU)"}


INSUFFICIENT_RE = lazy(r"cudaErrorInsufficientDriver|CUDA driver version is insufficient for CUDA runtime version"
                       r"|CUDA_ERROR_INSUFFICIENT_DRIVER",
                       needles=("nsufficient", "INSUFFICIENT"))
# FlashInfer's JIT at work: its logger ("flashinfer.jit: Loading JIT ops: sampling"), its cache tree, its jit
# package in a frame, or a thread saying so
FLASHINFER_JIT_RE = lazy(r"flashinfer\.jit: (?:Finished )?[Ll]oading JIT ops|\.cache[/\\]flashinfer[/\\]"
                         r"|flashinfer[/\\]jit[/\\]|cached_ops[/\\]|FlashInfer JIT",
                         needles=("flashinfer", "cached_ops", "FlashInfer"))
# torch's own refusal of the driver: then the driver is too old for everything, FlashInfer included
TORCH_DRIVER_RE = lazy(r"The NVIDIA driver on your system is too old", needles=("too old",))


def _flashinfer_jit_other_cuda(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    jit_at = next((ln.no for ln in scan.lines if FLASHINFER_JIT_RE.search(ln.text)), None)
    if jit_at is None or any(TORCH_DRIVER_RE.search(ln.text) for ln in scan.lines):
        return None
    hit = next((ln for ln in scan.lines if ln.no >= jit_at and INSUFFICIENT_RE.search(ln.text)), None)
    if hit is None:
        return None
    jit = next(ln for ln in scan.lines if ln.no == jit_at)
    shown = sorted({jit.no: jit, hit.no: hit}.values(), key=lambda x: x.no)
    return Diagnosis(
        category="kernel_library", signature=JIT_OTHER_CUDA.signature, title=JIT_OTHER_CUDA.title,
        confidence=JIT_OTHER_CUDA.confidence, evidence=[Evidence(x.no, x.shown) for x in shown], facts={},
        fix=Fix(JIT_OTHER_CUDA.fix, JIT_OTHER_CUDA.playbook), first_line=hit.no)


JIT_OTHER_CUDA = Rule(
    signature="kernels.flashinfer_jit_other_cuda", category="kernel_library",
    title="A FlashInfer JIT module built with another CUDA toolkit than torch's fails to load its runtime",
    fix="FlashInfer compiled (and cached) this module with a newer nvcc than the CUDA this torch/vLLM runs on, so "
        "it needs a newer driver than the process has. Remove the cached build (`rm -rf ~/.cache/flashinfer`), "
        "point CUDA_HOME/PATH at the toolkit matching `python -c 'import torch; print(torch.version.cuda)'` on "
        "every node, or install flashinfer-jit-cache for this FlashInfer and CUDA so nothing is compiled at run "
        "time; VLLM_USE_FLASHINFER_SAMPLER=0 avoids the sampler module meanwhile.",
    check=_flashinfer_jit_other_cuda, playbook="kernel-library", confidence=0.96)

RULES = [
    Rule(signature="triton.ptxas_unknown_arch", category="triton_compile",
         title="Triton's ptxas does not know this GPU's architecture ({arch})",
         fix="Triton assembles kernels with the ptxas it bundles, which predates {arch}. Point it at the ptxas of an "
             "installed CUDA toolkit that knows the GPU{need}: `export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas "
             "TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas` (in a container: `-e` both), or upgrade "
             "triton/torch (and vLLM, which sets this itself on newer releases) to ones built for this GPU.",
         patterns=[r"Value '(?P<arch>sm_\d+[af]?)' is not defined for option 'gpu-name'",
                   # a thread or title restating it: ptxas "sm_107a is not defined"
                   r"\bptxas[\w-]*\W{1,4}(?:fatal\W{1,6})?(?P<arch>sm_\d+[af]?)\W{0,2} is not defined"],
         facts=_ptxas_facts, playbook="triton-compile", confidence=0.9),
    JIT_OTHER_CUDA,
]
