"""Kernel libraries (FlashInfer, FlashAttention, DeepGEMM) and Triton compilation."""

from __future__ import annotations

import re
if False:  # for type checkers only (importing typing costs start-up time)
    from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule
from triage.rules.wrappers import is_wrapper

# Errors of Python itself inside FlashInfer's own code: the installed FlashInfer release does not run
# on this interpreter / with these packages (a broken or mismatched release), not a vLLM bug.
_FI_CODE_ERRORS = ("TypeError", "SyntaxError", "NameError", "AttributeError", "ImportError", "ModuleNotFoundError")


def _flashinfer_crashed(scan: Scan) -> Diagnosis | None:
    for exc in scan.exceptions:
        if is_wrapper(exc.text) or exc.short_type not in _FI_CODE_ERRORS or not exc.frames:
            continue
        last = exc.frames[-1]
        if "/flashinfer/" not in last.file:
            continue
        where = "flashinfer/" + last.file.rsplit("/flashinfer/", 1)[-1]
        return Diagnosis(
            category="kernel_library", signature="kernels.flashinfer_crashed",
            title=f"FlashInfer's own code fails in {where}: {exc.text[:120]}",
            confidence=0.75, evidence=[Evidence(exc.line.no, exc.line.shown)],
            facts={"exception": exc.type, "message": exc.message[:300], "where": where},
            fix=Fix("The installed FlashInfer release does not run in this environment (Python version or a "
                    "dependency it expects): install the flashinfer-python (and flashinfer-cubin / jit-cache) "
                    "version this vLLM pins, or the next patch release that fixes it; `pip show flashinfer-python` "
                    "and `python -V` show what is there.", "kernel-library"),
            first_line=exc.line.no)
    return None


def _smem_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    out: dict[str, Any] = {"need": ""}
    if gd.get("required") and gd.get("limit"):
        req, lim = int(gd["required"]), int(gd["limit"])
        out["shared_required"] = req
        out["shared_limit"] = lim
        out["need"] = f" ({req} > {lim} bytes)"
        # SM120/SM121 (RTX PRO 6000, RTX 50xx, GB10) have ~99 KB per block, far below Hopper's 227 KB:
        # configs tuned on H100 overflow there.
        if lim <= 101376:
            out["note"] = "this GPU has at most ~99 KB of shared memory per block (SM8.6/8.9/12.x class)"
    # the kernel that failed, from the traceback frames around it
    for exc in scan.exceptions:
        if exc.line.no >= line.no - 2 and exc.frames:
            for fr in reversed(exc.frames):
                if "/vllm/" in fr.file:
                    out["kernel_caller"] = f"{fr.file.split('/vllm/', 1)[-1]}:{fr.line} ({fr.func})"
                    break
            break
    return out


# Where vLLM calls DeepGEMM, by the traceback: the DSA "lightning indexer" of DeepSeek-V3.2/V4 and
# GLM-5.x (vllm/model_executor/layers/sparse_attn_indexer.py -> vllm/utils/deep_gemm.py fp8_mqa_logits /
# fp8_paged_mqa_logits; newer releases refuse to build it: "Sparse Attention Indexer CUDA op requires
# DeepGEMM ..."), the start-up kernel warm-up (model_executor/warmup/deep_gemm_warmup.py, run even for bf16
# models: vllm#41849), or the FP8 block-scaled GEMMs / MoE.
DSA_INDEXER_FUNCS = ("fp8_mqa_logits", "fp8_paged_mqa_logits", "sparse_attn_indexer", "get_paged_mqa_logits_metadata")
DSA_ARCHS = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration",
             "DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM")


def _deepgemm_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    funcs: set[str] = set()
    files: set[str] = set()
    texts = [line.text]
    for exc in scan.exceptions:
        if "DeepGEMM" in exc.message or "deep_gemm" in exc.message:
            texts.append(exc.message)
            for fr in exc.frames:
                funcs.add(fr.func)
                files.add(fr.file.rsplit("/vllm/", 1)[-1])
    for ln in scan.lines:  # torch.compile'd graphs print the op call, not a frame
        if "sparse_attn_indexer" in ln.text:
            funcs.add("sparse_attn_indexer")
            break
    indexer = (any("Sparse Attention Indexer" in t for t in texts) or bool(funcs & set(DSA_INDEXER_FUNCS))
               or any("sparse_attn_indexer" in f or f.endswith("indexer.py") for f in files))
    warmup = any("warmup" in f for f in files) or any("warmup" in f for f in funcs)
    arch = scan.facts.get("architecture")
    out: dict[str, Any] = {"library": "deep_gemm"}
    if indexer:
        out.update(dsa_indexer=True, use_sparse=True, what="the DSA sparse indexer (fp8_mqa_logits / fp8_paged_mqa_logits)",
                   advice=("The DSA indexer of this sparse-attention model scores tokens with DeepGEMM; the attention "
                           "backend alone does not replace it. DeepGEMM has these kernels for SM90/SM100 (and SM120 since "
                           "deepseek-ai/DeepGEMM#324): install the DeepGEMM this vLLM pins in its environment. On SM8x no "
                           "vLLM release has another indexer (Triton fallbacks only in open PRs #38476/#47629)."))
    elif warmup:
        out.update(dsa_indexer=False, what="the DeepGEMM kernel warm-up at start-up",
                   advice=("vLLM warms up DeepGEMM's FP8 kernels at start-up even when the model does not use them: "
                           "install the deep_gemm vLLM pins, or skip it with VLLM_DEEP_GEMM_WARMUP=skip "
                           "(VLLM_USE_DEEP_GEMM=0 turns DeepGEMM off)."))
    else:
        out.update(dsa_indexer=False, what="FP8 block-scaled GEMMs / MoE",
                   advice=("DeepGEMM's FP8 block GEMMs exist for SM90/SM100: install the deep_gemm this vLLM pins, or run "
                           "without it (VLLM_USE_DEEP_GEMM=0 picks the Triton/CUTLASS FP8 kernels)."))
    if arch in DSA_ARCHS and not indexer:
        out["dsa_model"] = True
        out["advice"] += (" This is a DSA model: once DeepGEMM is off, its sparse indexer still needs DeepGEMM on "
                          "every vLLM release.")
    return out


RULES = [
    Rule(signature="kernels.flashinfer_version_mismatch", category="kernel_library",
         title="FlashInfer packages disagree: flashinfer-cubin {cubin} vs flashinfer {flashinfer}",
         fix="Install the same version of flashinfer-python and flashinfer-cubin (the ones this vLLM release "
             "pins); FLASHINFER_DISABLE_VERSION_CHECK=1 only bypasses the check.",
         patterns=[r"flashinfer-cubin version \((?P<cubin>[\w.+]+)\) does not match flashinfer version \((?P<flashinfer>[\w.+]+)\)",
                   r"flashinfer-jit-cache version \((?P<cubin>[\w.+]+)\) does not match flashinfer version \((?P<flashinfer>[\w.+]+)\)"],
         playbook="kernel-library", confidence=0.95),
    Rule(signature="kernels.flashinfer_missing", category="kernel_library",
         title="FlashInfer is missing or failed to import",
         fix="Install the FlashInfer version this vLLM pins (`pip install flashinfer-python==<ver>`), or choose "
             "a backend that does not need it (--attention-backend FLASH_ATTN / TRITON_ATTN).",
         patterns=[r"No module named 'flashinfer'", r"FlashInfer is not (?:installed|available)",
                   r"requires FlashInfer.{0,40}(?:not found|not installed|is not available)"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.flashinfer_jit_failed", category="kernel_library",
         title="FlashInfer's JIT compilation failed",
         fix="FlashInfer compiles kernels at first use: it needs nvcc from a CUDA toolkit new enough for this GPU "
             "(SM120/SM121 need CUDA 12.9+; 'FlashInfer requires GPUs with sm75 or higher' and 'No supported CUDA "
             "architectures found' mean the toolkit is too old for the GPU) on PATH / CUDA_HOME, and a writable cache "
             "(~/.cache/flashinfer). Install that toolkit or the flashinfer-cubin/jit-cache packages for this GPU, or "
             "avoid the JIT path (VLLM_USE_FLASHINFER_SAMPLER=0, --moe-backend triton, another --attention-backend).",
         patterns=[r"flashinfer.{0,80}(?:ninja: build stopped|JIT compil\w+ fail|Failed to (?:compile|build))",
                   r"FlashInfer.{0,60}nvcc.{0,30}not found", r"Could not find nvcc",
                   r"No such file or directory: '(?:[\w./-]*/)?nvcc'",
                   r"FlashInfer requires GPUs with sm\d+ or higher",
                   r"No supported CUDA architectures found for major versions \[[\d, ]+\]",
                   r"nvcc fatal\s*: Unsupported gpu architecture '(?P<arch>compute_\w+)'",
                   r"RuntimeError: Ninja build failed"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.flash_attn_missing", category="kernel_library",
         title="vLLM's FlashAttention package is missing or broken",
         fix="This vLLM build lacks vllm_flash_attn for this GPU (source builds without it, or an unsupported "
             "arch): reinstall a vLLM wheel, or use --attention-backend FLASHINFER / TRITON_ATTN.",
         patterns=[r"No module named 'vllm\.vllm_flash_attn", r"No module named 'vllm_flash_attn'",
                   r"Cannot use FlashAttention(?:-2)? backend because the vllm\.vllm_flash_attn package is not found",
                   r"flash_attn_2_cuda.{0,40}(?:undefined symbol|cannot open)", r"No module named 'flash_attn'"],
         playbook="kernel-library", confidence=0.8),
    Rule(signature="kernels.deepgemm_missing", category="kernel_library",
         title="DeepGEMM is missing or too old (needed for {what})",
         fix="{advice}",
         patterns=[r"DeepGEMM backend is not available or outdated(?:\. Please install or update the `?deep_gemm`?)?",
                   r"Sparse Attention Indexer CUDA op requires DeepGEMM",
                   r"No module named 'deep_gemm'", r"deep_gemm.{0,40}(?:is not installed|not available)"],
         facts=_deepgemm_facts, playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.deepgemm_jit_failed", category="kernel_library",
         title="A DeepGEMM JIT kernel failed to load on this GPU ({error})",
         fix="DeepGEMM's kernels target SM90/SM100 and are refused elsewhere (e.g. SM12x): set VLLM_USE_DEEP_GEMM=0 "
             "(and VLLM_MOE_USE_DEEP_GEMM=0) so vLLM uses its Triton/CUTLASS paths, or install a DeepGEMM that "
             "supports this GPU.",
         # DeepGEMM's JIT runtime (deep_gemm/include/deep_gemm/jit/handle.hpp) reports driver errors this way
         patterns=[r"CUDA driver error \([^)]*jit/handle\.hpp:\d+\): \d+ \((?P<error>CUDA_ERROR_\w+)"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.flashinfer_crashed", category="kernel_library",
         title="FlashInfer's own code fails in {where}", fix="", check=lambda scan, env: _flashinfer_crashed(scan),
         playbook="kernel-library", confidence=0.75),
    Rule(signature="kernels.flashmla_unavailable", category="kernel_library",
         title="FlashMLA kernels are not in this vLLM build",
         fix="vllm._flashmla_C was not compiled for this GPU (FlashMLA supports SM90/SM100 only): drop the FLASHMLA "
             "override (--attention-backend / VLLM_ATTENTION_BACKEND) so vLLM picks TRITON_MLA or another MLA backend, "
             "or install a vLLM wheel built with FlashMLA for this GPU. (The import warning alone is harmless.)",
         # Only hard failures: the import warning is printed on every non-Hopper GPU and is harmless there.
         patterns=[r"'_OpNamespace' '_flashmla(?:_extension)?_C' object has no attribute",
                   r"AssertionError: vllm\._flashmla(?:_extension)?_C is not available"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="triton.out_of_shared_memory", category="triton_compile",
         title="A Triton kernel needs more shared memory than this GPU has{need}",
         fix="The kernel's tile config (block sizes, num_stages) was tuned for a GPU with more shared memory "
             "(Hopper: 227 KB; SM12x: ~99 KB): use a vLLM version with configs for this GPU, a tuned config file "
             "(e.g. VLLM_TUNED_CONFIG_FOLDER for fused MoE), or --enforce-eager / another backend for the failing op.",
         patterns=[r"out of resource: shared memory, Required: (?P<required>\d+), Hardware limit: (?P<limit>\d+)",
                   r"out of resource: shared memory"],
         facts=_smem_facts, playbook="triton-compile", confidence=0.9),
    Rule(signature="triton.ptxas_failed", category="triton_compile",
         title="Triton's PTX assembler (ptxas) failed",
         fix="Triton's bundled ptxas does not know this GPU or failed: upgrade triton (Blackwell needs triton>=3.3), "
             "or point TRITON_PTXAS_PATH at the ptxas of a CUDA toolkit that supports this GPU.",
         patterns=[r"ptxas fatal\s*:.*", r"PTXASError", r"ptxas .{0,40}error", r"ptxas failed",
                   r"Value 'sm_\d+a?' is not defined for option 'gpu-name'"],
         playbook="triton-compile", confidence=0.85),
    Rule(signature="triton.no_c_compiler", category="triton_compile",
         title="Triton found no C compiler (or Python headers) to build its runtime helper",
         fix="Install a C compiler and the Python headers (`apt-get install build-essential python3-dev`) or set CC.",
         patterns=[r"Failed to find C compiler\. Please specify via CC environment variable",
                   r"Python\.h: No such file or directory", r"error: command 'gcc' failed"],
         playbook="triton-compile", confidence=0.9),
    Rule(signature="triton.compilation_error", category="triton_compile",
         title="A Triton kernel failed to compile",
         fix="A Triton kernel in this vLLM does not compile with the installed triton on this GPU: use the triton "
             "version vLLM pins, or upgrade vLLM.",
         patterns=[r"triton\.compiler\.errors\.\w*CompilationError", r"triton\.runtime\.errors\.\w+Error",
                   r"CompilationError: at \d+:\d+:"],
         playbook="triton-compile", confidence=0.7),
    Rule(signature="triton.inductor_failed", category="triton_compile",
         title="torch.compile (Inductor) failed while compiling the model",
         fix="vLLM compiles the model with torch.compile at start-up: confirm with --enforce-eager (or -O0), clear "
             "~/.cache/vllm/torch_compile_cache, and check that torch/triton are the versions this vLLM pins; report "
             "the failing op upstream.",
         patterns=[r"torch\._inductor\.exc\.(?:InductorError|LoweringException|CppCompileError)",
                   r"BackendCompilerFailed: backend='inductor' raised",
                   r"torch\._dynamo\.exc\.(?:BackendCompilerFailed|TorchRuntimeError|InternalTorchDynamoError)"],
         playbook="triton-compile", confidence=0.8),
    Rule(signature="kernels.illegal_memory_access", category="kernel_library",
         title="A GPU kernel crashed (illegal memory access / device-side assert / launch failure)",
         fix="A kernel read or wrote out of bounds: rerun with CUDA_LAUNCH_BLOCKING=1 to name the kernel, try "
             "--enforce-eager and another --attention-backend to isolate it, then report it upstream with that name.",
         patterns=[r"an illegal memory access was encountered", r"device-side assert triggered",
                   r"cudaErrorIllegalAddress", r"CUDA_ERROR_ILLEGAL_ADDRESS", r"misaligned address",
                   r"CUDA error: unspecified launch failure", r"cudaErrorLaunchFailure"],
         playbook="kernel-library", confidence=0.7),
]


# An optional kernel package a chosen backend or model needs is not installed (vLLM's own words).
RULES += [
    Rule(signature="kernels.package_missing", category="kernel_library",
         title="A kernel package this launch needs is not installed ({package})",
         fix="Install the package vLLM names, in the version your vLLM release expects (see its "
             "requirements/cuda.txt), or choose a backend that does not need it.",
         patterns=[r"FlashInfer backend is not available\. Please install the package",
                   r"Please install (?P<package>flashinfer) \(>= ?[\d.]+\)",
                   r"pip install (?P<package>flashinfer-python)",
                   r"Please install (?P<package>flash[_-]attn)",
                   r"to be installed\. Please install (?P<package>flash-attn) first",
                   r"(?P<package>tilelang) is required for \w+ but is not installed",
                   r"pip install (?P<package>fbgemm-gpu-genai)",
                   r"All2All kernels .{0,80}are not available\. See (?P<package>tools/ep_kernels)",
                   r"No module named '(?P<package>triton_kernels|flash_mla|causal_conv1d|mamba_ssm|xformers|sgl_kernel|"
                   r"deep_ep|pplx_kernels|aiter|tilelang|fla|cuda\.bindings|flashinfer_cubin|flashinfer_jit_cache)"
                   r"[\w.]*'"],
         playbook="kernel-library", confidence=0.85),
]

# A kernel built on the fly (FlashInfer, DeepGEMM, torch extensions) needs a CUDA toolchain the machine lacks,
# or Triton's compiler itself failed.
RULES += [
    Rule(signature="kernels.jit_toolchain_missing", category="kernel_library",
         title="A kernel must be compiled at start-up, but the CUDA toolchain is not there",
         fix="Install the CUDA toolkit that matches torch's CUDA (nvcc, and ninja) and set CUDA_HOME to it, use "
             "an image that ships it (vllm/vllm-openai), or install the library's precompiled wheels (e.g. "
             "flashinfer-cubin / flashinfer-jit-cache) so nothing is compiled.",
         patterns=[r"CUDA_HOME environment variable is not set", r"Ninja is required to load C\+\+ extensions",
                   r"nvcc: (?:not found|command not found)"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="triton.llvm_failed", category="triton_compile",
         title="Triton's compiler failed while lowering a kernel (LLVM / MLIR pass)",
         fix="This Triton cannot compile the kernel for this GPU: upgrade Triton with torch (new GPUs need the "
             "newest), clear ~/.triton/cache, or avoid the kernel (another --attention-backend / --moe-backend, "
             "--enforce-eager).",
         patterns=[r"PassManager::run failed", r"LLVM ERROR: (?P<detail>.{1,160})", r"LLVM Translation failed"],
         playbook="triton-compile", confidence=0.8),
]

RULES += [
    Rule(signature="kernels.flashinfer_arch_unsupported", category="kernel_library",
         title="FlashInfer cannot build this kernel for this GPU's architecture",
         fix="FlashInfer compiles some kernels only for some GPU generations, and needs an nvcc new enough for the "
             "GPU (SM 12.x needs CUDA >= 12.9): install such a CUDA toolkit and set CUDA_HOME to it, install the "
             "flashinfer-cubin / flashinfer-jit-cache wheels of your FlashInfer version, or choose a backend "
             "without FlashInfer (another --attention-backend, NVFP4 GEMM or MoE backend).",
         patterns=[r"No supported CUDA architectures found for major versions \[(?P<majors>[\d, ]+)\]",
                   r"SM (?P<sm>\d+)\.x requires CUDA >= (?P<cuda>[\d.]+)"],
         playbook="kernel-library", confidence=0.9),
]
