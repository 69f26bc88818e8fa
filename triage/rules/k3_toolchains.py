"""Kernel libraries and their toolchains out of step with the GPU or the environment.

(Triton's bundled ptxas older than the GPU is triton.ptxas_failed's, in kernels.py.)

CUTLASS's Python DSL (nvidia-cutlass-dsl, behind FlashInfer's cute-dsl GEMM/MoE/attention kernels and FA4) turns
the device into a member of its `Arch` enum when it compiles (`Arch[name]` in cute.compile): a DSL release older
than the GPU has no such member and Python's enum raises a bare `KeyError: 'sm_107a'` from enum.py, with no
FlashInfer or vLLM frame saying why. A library picking its cute-dsl backend by capability alone (FlashInfer before
its arch gate) gets there on a new GPU. FlashAttention 4's SM100 forward kernel (vllm_flash_attn/cute/
flash_fwd_sm100.py) asserts `sm_100 <= arch <= sm_110f` on the arch the DSL reports ("Only SM 10.x and 11.x are
supported"): on an SM10x part that means a DSL build that misreports it (the non-cu13 nvidia-cutlass-dsl aliases
sm_110f to sm_101f, so B300/SM103 fails; a mixed install loads another release's native files), elsewhere that FA4
was picked for a GPU it does not run on.

FlashInfer JIT-compiles its modules with the nvcc it finds (CUDA_HOME, /usr/local/cuda, PATH) and caches the
shared object under ~/.cache/flashinfer/<version>/<arch>/cached_ops/. Built with a newer toolkit than the
environment's torch, the module links a newer libcudart; a process whose driver or compat libraries only serve
the older CUDA then fails inside FlashInfer with cudaErrorInsufficientDriver although torch itself ran. That is
FlashInfer's build, not a driver too old for torch/vLLM.

FlashInfer's entry points declare which backends (cudnn, cutlass, trtllm, cute-dsl, ...) run on which compute
capability (flashinfer/utils.py, backend_requirement); asked for one this GPU lacks they raise BackendSupportedError:
"mm_fp4 does not support backend 'cute-dsl' with capability 120", or "No suitable auto backends found for mm_fp4".
The caller (vLLM's kernel selection, a fork, a plugin) chose a backend the installed FlashInfer has no kernel of
here: a kernel library's verdict, though the message says "backend".
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

INSUFFICIENT_RE = lazy(r"cudaErrorInsufficientDriver|CUDA driver version is insufficient for CUDA runtime version"
                       r"|CUDA_ERROR_INSUFFICIENT_DRIVER",
                       needles=("nsufficient", "INSUFFICIENT"))
# FlashInfer's JIT at work: its logger ("flashinfer.jit: Loading JIT ops: sampling"), its cache tree, its jit
# package in a frame, or a thread saying so
FLASHINFER_JIT_RE = lazy(r"flashinfer\.jit: (?:Finished )?[Ll]oading JIT ops|\.cache[/\\]flashinfer[/\\]"
                         r"|flashinfer[/\\]jit[/\\]|cached_ops[/\\]|FlashInfer JIT",
                         needles=("flashinfer", "cached_ops", "FlashInfer"))
# the DSL at work: its package in a frame, or a thread naming it
CUTE_DSL_RE = lazy(r"(?i)cutlass|\bcute[._ -]")
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


def _cute_dsl_arch_missing(scan: Scan) -> Diagnosis | None:
    """A KeyError of an sm_ name is the DSL's only where the DSL is in the log; another table's is not this rule's."""
    if not any(CUTE_DSL_RE.search(ln.text) for ln in scan.lines):
        return None
    return CUTE_DSL_ARCH_MISSING.match_lines(scan)


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
    JIT_OTHER_CUDA,
    # vLLM's Triton kernels (fused_moe.get_moe_configs, fp8_utils / int8_utils block-scaled GEMM) look up tuned
    # configs per GPU and fall back to defaults, saying so on every worker: slower, never a failure
    Rule(signature="harmless.default_kernel_config", category="", harmless=True,
         title="No tuned Triton kernel config for this GPU: vLLM uses its defaults (harmless; possibly slower)",
         fix="", patterns=[r"Using default [\w -]{1,40}config\. Performance might be sub-optimal!"]),
    Rule(signature="kernels.cute_dsl_arch_missing", category="kernel_library",
         title="The installed CUTLASS DSL does not know this GPU's architecture ({arch})",
         fix="A CuTe DSL kernel (FlashInfer's cute-dsl backends, FA4) was compiled for {arch}, which the installed "
             "nvidia-cutlass-dsl predates. Upgrade nvidia-cutlass-dsl (and FlashInfer) to releases that list {arch}, "
             "point the DSL at the architecture family it does know (`export CUTE_DSL_ARCH=sm_100f` for an SM10x "
             "part), or choose a backend that does not use CuTe DSL (another --moe-backend / FP4-FP8 GEMM backend, "
             "or --attention-backend).",
         patterns=[r"\bKeyError: '(?P<arch>sm_\d+[a-z]?)'"],
         check=lambda scan, env: _cute_dsl_arch_missing(scan), playbook="kernel-library", confidence=0.85),
]
CUTE_DSL_ARCH_MISSING = RULES[-1]


def _flashinfer_backend_facts(m: "re.Match[str]", line: Any, scan: Scan) -> dict[str, Any]:
    g = m.groupdict()  # each pattern names its own groups
    op, backend, cap = g.get("op") or g.get("op2"), g.get("backend"), g.get("cap")
    if backend is None:
        return {"what": f"FlashInfer found no backend of {op} that runs here"}
    return {"what": f"FlashInfer's {op} has no '{backend}' kernel for this GPU"
                    + (f" (compute capability {cap})" if cap else "")}


RULES += [
    Rule(signature="kernels.flashinfer_backend_unsupported", category="kernel_library",
         title="{what}",
         fix="The caller (vLLM's kernel selection, a fork or plugin) asked FlashInfer for a kernel backend the installed "
             "FlashInfer does not provide on this GPU. Choose another backend for that path (the MoE backend with "
             "--moe-backend, the FP4/FP8 GEMM or attention backend setting, or the VLLM_USE_FLASHINFER_* switch that "
             "routes it to FlashInfer), or install the vLLM and FlashInfer releases made for each other and this GPU.",
         patterns=[r"(?:BackendSupportedError: )?(?P<op>\w+) does not support backend '(?P<backend>[\w-]+)'"
                   r"(?: with capability (?P<cap>\d+))?",
                   r"No suitable auto backends found for (?P<op2>\w+)"],
         facts=_flashinfer_backend_facts, playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.fa4_arch_refused", category="kernel_library",
         title="FlashAttention 4 (CuTe DSL) refused the GPU architecture the DSL reports",
         fix="FA4's kernels run on SM10x/SM11x only, as nvidia-cutlass-dsl reports the device. On a Blackwell "
             "B200/B300 (SM10x) the DSL misreports it: reinstall it cleanly in the CUDA 13 build vLLM pins "
             "(`pip install --force-reinstall 'nvidia-cutlass-dsl[cu13]==VERSION'` with the VERSION `pip show "
             "nvidia-cutlass-dsl` reports, and no second copy of its native libraries on the path). On any other GPU FA4 does not apply: use FlashAttention "
             "2/3 (VLLM_FLASH_ATTN_VERSION=2 or 3) or another --attention-backend.",
         patterns=[r"Only SM 10\.x and 11\.x are supported"],
         playbook="kernel-library", confidence=0.85),
]
