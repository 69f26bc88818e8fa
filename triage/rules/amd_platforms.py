"""Non-CUDA platforms: what their builds and devices lack, as vLLM and the libraries under it raise it.

- The CPU backend registers its ISA-dependent ops only where the build's compiler flags allow them
  (csrc/cpu/torch_bindings.cpp): the oneDNN W8A8 ops (create_onednn_scaled_mm_handler, onednn_scaled_mm, with
  static/dynamic_scaled_int8_quant) were under `#ifdef __AVX512F__` until AVX2 and Arm builds got them, and the
  shared-memory collectives TP uses on one host (init_shm_manager, shm_allreduce, ...) are x86 AVX512 (or Arm /
  Power) only. Python then finds no such op on torch.ops._C: "'_OpNamespace' '_C' object has no attribute
  '<op>'". For these ops that is the CPU's instruction set, not a vLLM install of mixed versions.
- torch.xpu.mem_get_info (vLLM's XPU worker sizes the KV cache with it) raises "The device (<name>) doesn't
  support querying the available free memory" (torch 2.8+; "The device does not have the ext_intel_free_memory
  aspect" before) on Intel client and integrated GPUs whose driver does not report free memory.
- vLLM's ROCm kernels (csrc/rocm/skinny_gemms.cu, attention.cu) compile their bodies only for the Instinct
  architectures (__HIP__MI300_MI250__ / gfx9); elsewhere the body is UNREACHABLE_CODE, `assert(false)`, and a
  Radeon GPU that reaches it prints "<file>.hip:<line>: <kernel>: Device-side assertion `false' failed."
- The HPU fork and vllm-gaudi support Gaudi 2 and later; first-generation Gaudi (HL-205) fails inside the Habana
  bridge (PT_LAZY / synapse errors) with nothing in the message about the device.
- vLLM's ROCM_AITER_MLA backend asserted the per-GPU head count (v1/attention/backends/mla/rocm_aiter_mla.py:
  "Aiter MLA only supports 16 or 128 number of heads.\nProvided N number of heads.\nTry adjusting
  tensor_parallel_size value."; AITER's own decode kernel under V0: "nhead=N not supported"); March 2026 (vllm PR
  35850) relaxed it to 4, 8 and multiples of 16 by repeating heads.
- FP4 formats need gfx950 (MI350/MI355): AITER's FP4 paths refuse older Instinct GPUs ("MXFP4 quantization is not
  supported on gfx942"), and VLLM_ROCM_USE_AITER_FP4BMM defaults to on in the releases that added it.
- Out-of-tree platforms refuse attention variants they do not implement ("NotImplementedError: Sparse Attention
  is not supported on HPU." in vllm-gaudi).
- vLLM finds ROCm through amdsmi (rocm_platform_plugin: amdsmi_init, then the processor handles). Under WSL2 the
  Radeon GPU is exposed through /dev/dxg without the amdgpu/KFD driver, amdsmi cannot initialise, and detection
  ends in "Failed to infer device type" / UnspecifiedPlatform although torch sees the GPU (a torch fallback came
  with vllm PR 38434).
- A ROCm wheel resolved for another torch (TheRock runtimes, nightly indexes) is reported in words more often than
  with the loader's line: "_C ABI mismatch — ... undefined HIP symbols", "_C / _rocm_C extensions fail to import
  with undefined HIP/c10 symbols" (the loader's own "undefined symbol: X" is install.undefined_symbol's).
- NumPy 2 removed aliases (np.float_, np.complex_, np.NaN, ...): "`np.float_` was removed in the NumPy 2.0
  release. Use `np.float64` instead."; NumPy 1.24 the builtin aliases ("`np.float` was a deprecated alias for the
  builtin `float`"). The code using them was written for an older NumPy (CANN's Python tools need numpy<2).
"""

from __future__ import annotations

import re

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, next_row_text
from triage.rules.environment import DETECTION_FAILED_RE
from triage.rules.vendor import vendor

OP_MISSING_RE = lazy(r"'_OpNamespace' '_C' object has no attribute '(?P<op>\w+)'|No such operator _C::(?P<op2>\w+)")
# CPU-only op names: seen missing, only a CPU build can be meant
W8A8_CPU_OPS = frozenset({"create_onednn_scaled_mm_handler", "onednn_scaled_mm"})
# the int8 quantisation ops exist in CUDA builds too: on the CPU backend only with the log saying so
W8A8_SHARED_OPS = frozenset({"static_scaled_int8_quant", "dynamic_scaled_int8_quant"})
SHM_OPS = frozenset({"init_shm_manager", "join_shm_manager", "shm_allreduce", "shm_gather", "shm_all_gather",
                     "shm_send_tensor_list", "shm_recv_tensor_list"})
CPU_BACKEND_RE = lazy(r"detected platform cpu|cpu_worker|cpu_model_runner|CPU backend|\+cpu\b|"
                      r"VLLM_TARGET_DEVICE=cpu|--device[= ]cpu", re.I)


# the same missing op told in prose ("init_shm_manager is not implemented when NOT AVX512_FOUND")
OP_PROSE_RE = lazy(r"\b(?P<op>\w+) is not (?:implemented|registered|defined|available)\b")


def _missing_op(scan: Scan, ops: frozenset[str], shared: frozenset[str] = frozenset()):
    cpu = any(CPU_BACKEND_RE.search(ln.text) for ln in scan.lines)
    for ln in scan.lines:
        m = OP_MISSING_RE.search(ln.text)
        op = (m.group("op") or m.group("op2")) if m else None
        if op is None:
            p = OP_PROSE_RE.search(ln.text)
            op = p.group("op") if p and p.group("op") in ops else None
        if op is not None and (op in ops or (cpu and op in shared)):
            return ln, op
    return None


def _cpu_w8a8_isa(scan: Scan) -> Diagnosis | None:
    hit = _missing_op(scan, W8A8_CPU_OPS, W8A8_SHARED_OPS)
    if hit is None:
        return None
    ln, op = hit
    return Diagnosis(
        category="quantization", signature="quant.cpu_w8a8_isa",
        title=f"This CPU build of vLLM has no W8A8 (int8) kernels: op {op} is missing",
        confidence=0.88, evidence=[Evidence(ln.no, ln.shown)], facts={"op": op},
        fix=Fix("vLLM's CPU backend compiles its oneDNN W8A8 kernels only for the instruction sets its build "
                "allows (AVX512 on x86 in the releases before AVX2 builds got them), so an int8 (W8A8) checkpoint "
                "cannot run on this CPU with this build. Check the CPU (`grep -o -m1 avx512f /proc/cpuinfo`): without "
                "AVX512 serve an unquantized (bf16) or weight-only quantized model, or upgrade to a vLLM release whose "
                "CPU build registers these ops for AVX2; with AVX512, rebuild the CPU backend on this machine "
                "(`VLLM_TARGET_DEVICE=cpu pip install . --no-build-isolation`).", "quantization"),
        first_line=ln.no)


def _cpu_shm_isa(scan: Scan) -> Diagnosis | None:
    hit = _missing_op(scan, SHM_OPS)
    if hit is None:
        return None
    ln, op = hit
    return Diagnosis(
        category="distributed", signature="distributed.cpu_shm_isa",
        title=f"This CPU build of vLLM has no shared-memory collectives for tensor parallelism (op {op} missing)",
        confidence=0.88, evidence=[Evidence(ln.no, ln.shown)], facts={"op": op},
        fix=Fix("vLLM's CPU backend builds the shared-memory all-reduce its tensor parallelism uses only for AVX512 "
                "x86 (and Arm / Power) CPUs, and this build or CPU has none. Run with --tensor-parallel-size 1 (one "
                "process can use all cores: set VLLM_CPU_OMP_THREADS_BIND), or use a CPU with AVX512 "
                "(`grep -o -m1 avx512f /proc/cpuinfo`).", "distributed"),
        first_line=ln.no)


# Gaudi 1 (HL-205) named by the user or hl-smi; the failure itself comes from the Habana bridge
GAUDI1_RE = lazy(r"\bGaudi[ -]?1\b(?![.\d])|\bHL-205\b|\bfirst[- ]gen(?:eration)? Gaudi\b", re.I)
HPU_FAILURE_RE = lazy(r"FATAL ERROR|synStatus \d+|Graph compile failed|Traceback|\w*Error\b|Exception\b")


def _gaudi1(scan: Scan) -> Diagnosis | None:
    named = next((ln for ln in scan.lines if GAUDI1_RE.search(ln.text)), None)
    if named is None:
        return None
    failed = next((ln for ln in scan.lines if ln.no != named.no and HPU_FAILURE_RE.search(ln.text)), None)
    if failed is None:
        return None
    return Diagnosis(
        category="unsupported_gpu", signature="gpu.gaudi1_unsupported",
        title="vLLM's Gaudi backend does not support first-generation Gaudi (Gaudi 1 / HL-205)",
        confidence=0.85, evidence=[Evidence(named.no, named.shown), Evidence(failed.no, failed.shown)],
        facts={"device": "Gaudi 1"},
        fix=Fix("The HPU backend (HabanaAI/vllm-fork, vllm-gaudi) is built and tested for Gaudi 2 and Gaudi 3 only; on "
                "a first-generation Gaudi its graphs fail inside the Habana bridge whatever the model. Run on Gaudi 2 "
                "or later (`hl-smi` shows HL-225 / HL-325), or serve this model with another engine on Gaudi 1 (e.g. "
                "optimum-habana).", "unsupported-gpu"),
        first_line=min(named.no, failed.no))


WSL_RE = lazy(r"microsoft-standard-WSL2|\bWSL2?\b")


def _rocm_wsl(scan: Scan) -> Diagnosis | None:
    failed = next((ln for ln in scan.lines if DETECTION_FAILED_RE.search(ln.text)), None)
    if failed is None or vendor(scan) != "amd":
        return None
    wsl = next((ln for ln in scan.lines if WSL_RE.search(ln.text)), None)
    if wsl is None and not WSL_RE.search(str(scan.facts.get("os") or "") + str(scan.facts.get("platform") or "")):
        return None
    ev = [Evidence(failed.no, failed.shown)] + ([Evidence(wsl.no, wsl.shown)] if wsl is not None else [])
    return Diagnosis(
        category="environment", signature="environment.rocm_wsl_detection",
        title="vLLM cannot detect the AMD GPU under WSL2 (its ROCm detection needs amdsmi, which WSL2 does not support)",
        confidence=0.93, evidence=ev, facts={"detail": "ROCm under WSL2"},
        fix=Fix("Under WSL2 the Radeon GPU is reached through /dev/dxg, without the amdgpu/KFD driver that amdsmi needs, "
                "so vLLM's ROCm platform check fails even though torch sees the GPU "
                "(`python -c 'import torch; print(torch.cuda.is_available())'`). Run vLLM on native Linux with ROCm, or "
                "use a vLLM release whose ROCm detection falls back to torch when amdsmi is unavailable (vllm PR "
                "38434), with the WSL2 ROCm driver AMD documents for Radeon.", "environment"),
        first_line=min(e.line for e in ev))


def _heads(m: re.Match[str], line, scan: Scan) -> str:
    """The head count: in the match, or on the assertion message's next row ("Provided 32 number of heads.")."""
    if m.group("heads"):
        return m.group("heads")
    nxt = re.search(r"Provided (\d+) number of heads", next_row_text(scan, line.no))
    return nxt.group(1) if nxt else "not 16 or 128"


RULES = [
    Rule(signature="quant.cpu_w8a8_isa", category="quantization",
         title="This CPU build of vLLM has no W8A8 (int8) kernels", fix="",
         patterns=[r"'_OpNamespace' '_C' object has no attribute", r"No such operator _C::"],
         playbook="quantization", confidence=0.88, check=lambda scan, env: _cpu_w8a8_isa(scan)),
    Rule(signature="distributed.cpu_shm_isa", category="distributed",
         title="This CPU build of vLLM has no shared-memory collectives for tensor parallelism", fix="",
         patterns=[r"'_OpNamespace' '_C' object has no attribute", r"No such operator _C::", r"shm_\w+ is not"],
         playbook="distributed", confidence=0.88, check=lambda scan, env: _cpu_shm_isa(scan)),
    Rule(signature="xpu.free_memory_query_unsupported", category="unsupported_gpu",
         title="This Intel GPU's driver cannot report free memory, which vLLM's XPU worker needs ({device})",
         fix="torch.xpu.mem_get_info is not available on Intel client / integrated GPUs (Arc 140V/140T, Lunar Lake, "
             "Meteor Lake iGPUs): vLLM's XPU backend sizes the KV cache with it. Upgrade vLLM to a release whose XPU "
             "platform estimates free memory on client GPUs (and torch-xpu / the compute runtime to current ones), "
             "or run on an Intel data-center GPU (Max / Flex) or a discrete Arc with a driver that reports it.",
         patterns=[r"The device \((?P<device>[^)]*\)?)\) doesn't support querying the available free memory",
                   r"(?P<device>)doesn't support querying the available free memory",
                   r"The device does not have the (?P<device>ext_intel_free_memory) aspect"],
         playbook="unsupported-gpu", confidence=0.85),
    Rule(signature="gpu.rocm_kernel_arch_compiled_out", category="unsupported_gpu",
         title="vLLM's ROCm kernel {kernel} has no code for this GPU (its body is compiled out)",
         fix="vLLM compiles the body of this ROCm kernel ({file}) only for Instinct GPUs (MI200/MI300, gfx90a/gfx942 "
             "and later); on a Radeon (gfx11/gfx12) it is an `assert(false)` that fires when the kernel runs. Use a "
             "vLLM release or image that supports this Radeon GPU (the ROCm docs' Radeon compatibility list), or turn "
             "the path off: for the skinny GEMMs (wvSplitK / LLMM1) set VLLM_ROCM_USE_SKINNY_GEMM=0, for the custom "
             "paged attention VLLM_ROCM_CUSTOM_PAGED_ATTN=0.",
         patterns=[r"csrc/rocm/(?P<file>\w+\.(?:hip|cu)):\d+: (?:\w+ )?(?P<kernel>\w+)\b.{0,800}?: "
                   r"Device-side assertion `false' failed"],
         playbook="unsupported-gpu", confidence=0.88),
    Rule(signature="gpu.gaudi1_unsupported", category="unsupported_gpu",
         title="vLLM's Gaudi backend does not support first-generation Gaudi", fix="",
         patterns=[r"Gaudi", r"HL-205"], playbook="unsupported-gpu", confidence=0.85,
         check=lambda scan, env: _gaudi1(scan)),
    Rule(signature="attention.aiter_mla_num_heads", category="attention_backend",
         title="ROCm's AITER MLA backend does not take this many attention heads per GPU ({heads})",
         fix="vLLM's ROCM_AITER_MLA backend (and AITER's MLA decode kernel) ran only with 16 or 128 query heads per "
             "GPU, i.e. the model's heads divided by --tensor-parallel-size. Pick a tensor-parallel size that gives 16 "
             "or 128 heads per GPU (DeepSeek-V3/R1, 128 heads: TP 1 or 8), or use another MLA backend "
             "(VLLM_ROCM_USE_AITER_MLA=0, or --attention-backend TRITON_MLA), or upgrade vLLM: since March 2026 "
             "(vllm PR 35850) the backend also takes 4, 8 and multiples of 16 heads.",
         patterns=[r"Aiter MLA only supports 16 or 128 number of heads\.?(?:\s*Provided (?P<heads>\d+) number of heads)?",
                   r"AssertionError: nhead=(?P<heads>\d+) not supported",
                   # the same refusal retold in prose or a title ("... only supports `"16 or 128 number of heads."`")
                   r"(?:num_heads?|nhead)=(?P<heads>\d+)\b.{0,300}16 or 128 number of heads",
                   r"16 or 128 number of heads(?P<heads>)"],
         facts=lambda m, line, scan: {"heads": _heads(m, line, scan)},
         playbook="attention-backend", confidence=0.9),
    Rule(signature="quant.fp4_needs_gfx950", category="quantization",
         title="{fmt} needs an MI350/MI355 (gfx950); this GPU is {arch}",
         fix="FP4 formats run natively only on gfx950 (MI350X/MI355X); AITER's FP4 kernels refuse {arch}. With AITER "
             "enabled, turn its FP4 batched matmul off (`export VLLM_ROCM_USE_AITER_FP4BMM=0`, on by default in the "
             "releases that added it); for an {fmt} checkpoint on MI300-class GPUs use the FP8 or BF16 version of the "
             "model, or run it on MI350/MI355.",
         patterns=[r"(?P<fmt>MXFP4|MXFP6|NVFP4|FP4)\w*(?: quantization)? is not supported on (?P<arch>gfx9[0-4]\w*)"],
         playbook="quantization", confidence=0.88),
    Rule(signature="attention.platform_feature_unsupported", category="attention_backend",
         title="{what} is not implemented on this platform ({platform})",
         fix="The {platform} backend does not implement {what}, which this model's attention needs (DeepSeek-V3.2 / "
             "GLM-5 sparse attention, MLA, ...): check the platform plugin's supported-models list for this release "
             "(vllm-gaudi, vllm-ascend, tpu-inference, the XPU/CPU backend), upgrade the plugin if a newer release "
             "adds it, or serve the model on GPUs whose backend implements it.",
         patterns=[r"(?P<what>(?:Sparse|Sliding[- ]window|Multi-head latent|MLA|Cross|Encoder[- ]only|Chunked "
                   r"prefill|Prefix[- ]caching)?\s?[Aa]ttention(?: \w+)?) is not supported on (?P<platform>HPU|XPU|TPU|"
                   r"CPU|NPU|Gaudi|Ascend)\b"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="environment.rocm_wsl_detection", category="environment",
         title="vLLM cannot detect the AMD GPU under WSL2", fix="",
         patterns=[r"Failed to infer device type", r"No platform detected", r"Device string must not be empty"],
         playbook="environment", confidence=0.93, check=lambda scan, env: _rocm_wsl(scan)),
    Rule(signature="install.extension_abi_prose", category="install_mismatch",
         title="vLLM's compiled extensions were built for another torch / ROCm than the one installed (told in words)",
         fix="vLLM's _C / _rocm_C extensions link against one torch build: a vLLM wheel resolved for another torch or "
             "ROCm (a nightly index, a managed runtime's torch) fails to import them. Install the vLLM build made "
             "for this torch (the ROCm wheel index or the vllm/vllm-openai-rocm image of the same release), or the "
             "torch that vLLM release pins, into a clean environment; `python -c 'import vllm._C'` shows the "
             "undefined symbol.",
         patterns=[r"(?:vllm\.)?_(?:rocm_)?C\b.{0,120}(?:ABI[- ](?:mismatch|incompatib\w*)|undefined "
                   r"(?:HIP|c10|CUDA|torch)(?:/\w+)? symbols)",
                   r"\bABI[- ]incompatible with (?:that|the|this|its)\b"],
         playbook="install-mismatch", confidence=0.8),
    Rule(signature="install.numpy_removed_alias", category="install_mismatch",
         title="Code written for an older NumPy uses np.{attr}, which the installed NumPy removed",
         fix="A package in this environment (CANN's tools, an older library) still uses `np.{attr}`, which NumPy "
             "removed (the NumPy 2.0 aliases, or the builtin aliases in 1.24). Install the NumPy that package "
             "supports (`pip install 'numpy<2'`; on Ascend CANN requires numpy<2), or upgrade the package that uses "
             "the alias.",
         patterns=[r"`np\.(?P<attr>\w+)` was removed in the NumPy 2\.0 release",
                   r"`np\.(?P<attr>\w+)` was a deprecated alias for the builtin",
                   # the line above that explanation (NumPy 1.24+: the aliases of builtins are gone)
                   r"module 'numpy' has no attribute '(?P<attr>float|int|bool|object|str|complex|long|unicode)'",
                   # the same error retold in a title ("numpy AttributeError: `np.float_` removed")
                   r"[Nn]um[Pp]y\b.{0,40}`np\.(?P<attr>\w+)` (?:was )?removed"],
         playbook="install-mismatch", confidence=0.85),
]
