"""Kernel libraries (FlashInfer, FlashAttention, DeepGEMM) and Triton compilation."""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, not_in_passing
from triage.rules.library_api import LIBRARY_API
from triage.rules.vendor import vendor
from triage.rules.wrappers import is_wrapper

# Errors of Python itself inside FlashInfer's own code: the installed FlashInfer release does not run
# on this interpreter / with these packages (a broken or mismatched release), not a vLLM bug.
PIP_NAMES = {"flashinfer": "flashinfer-python", "flash_attn": "flash-attn", "triton_kernels": "triton-kernels",
             "cutlass": "nvidia-cutlass-dsl",
             "deep_gemm": "deep_gemm", "aiter": "aiter", "flash_mla": "flash_mla"}
_FI_CODE_ERRORS = ("TypeError", "SyntaxError", "NameError", "AttributeError", "ImportError", "ModuleNotFoundError")


# Python's own words for a call that does not fit the callee's signature (3.8 .. 3.13, bare or qualified).
API_MISMATCH_RE = lazy(
    r"(?:\w+\.)*(?P<func>\w+)\(\) (?P<how>got an unexpected keyword argument '\w+'|missing \d+ required "
    r"(?:positional|keyword-only) arguments?: .{1,120}|takes (?:from \d+ to )?\d+ positional arguments? but \d+ "
    r"(?:were|was) given|got multiple values for argument '\w+')")
API_IMPORT_RE = lazy(r"cannot import name '(?P<func>\w+)' from '(?P<lib>(?:" + "|".join(LIBRARY_API) + r")(?:\.\w+)*)'")
# A kernel library's module without an attribute vLLM (or the library's own code) uses: another release.
API_ATTR_RE = lazy(r"module '(?P<lib>(?:" + "|".join(LIBRARY_API) + r"|cutlass)(?:\.\w+)*)' has no attribute '(?P<func>\w+)'")


def _library_api_mismatch(scan: Scan) -> Diagnosis | None:
    """vLLM calls a kernel library's function with arguments, or imports a name, that the installed
    release of the library does not have: the library is not the release this vLLM was built against."""
    for ln in scan.lines:
        t = ln.text
        lib = func = how = None
        if "()" in t:
            m = API_MISMATCH_RE.search(t)
            # a name of vLLM's calls into the library, long enough not to be a generic one ("run", "plan")
            if m and len(m.group("func")) >= 8 and "_" in m.group("func"):
                lib = next((k for k, names in LIBRARY_API.items() if m.group("func") in names), None)
                func, how = m.group("func"), m.group("how")
        elif "cannot import name" in t:
            m = API_IMPORT_RE.search(t)
            if m:
                lib, func, how = m.group("lib").split(".", 1)[0], m.group("func"), f"is not in {m.group('lib')}"
        elif "has no attribute" in t:
            m = API_ATTR_RE.search(t)
            if m:
                lib, func, how = m.group("lib").split(".", 1)[0], m.group("func"), f"is not in {m.group('lib')}"
        if lib is None or func is None:
            continue
        pkg = PIP_NAMES.get(lib, lib)
        return Diagnosis(
            category="kernel_library", signature="kernels.library_api_mismatch",
            title=f"The installed {lib} is not the release this vLLM calls: {func}() {how}",
            confidence=0.8, evidence=[Evidence(ln.no, ln.shown)],
            facts={"library": lib, "function": func, "mismatch": how, "package": pkg},
            fix=Fix(f"vLLM calls {lib}'s {func}() as the {lib} release it pins defines it; the installed {lib} is "
                    f"older or newer. Install the {pkg} version this vLLM release requires (its requirements/cuda.txt, "
                    f"or `pip show vllm` and the pinned version in the release notes), or the vLLM release that matches "
                    f"the {lib} you have.", "kernel-library"),
            first_line=ln.no)
    return None


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


# Shared memory per block (NVIDIA) / LDS per workgroup (AMD), as Triton reports the hardware limit.
SMEM_LIMITS = {
    "nvidia": {65536: "64 KB per block (Turing: T4, RTX 20xx)", 98304: "96 KB per block (V100, SM70)",
               101376: "99 KB per block (SM86/SM89/SM12x: RTX 30/40/50, L4/L40, RTX PRO 6000, GB10)",
               166912: "163 KB per block (A100/A800, SM80)", 232448: "227 KB per block (H100/H200/B200, SM90/SM100)"},
    "amd": {65536: "64 KB of LDS per workgroup (AMD Instinct MI200/MI300, gfx90a/gfx942)",
            163840: "160 KB of LDS per workgroup (MI350/MI355, gfx950)"},
}
SMEM_NUMBERS_RE = lazy(r"Required: (?P<required>\d+), Hardware limit: (?P<limit>\d+)")


def _kernel_of(scan: Scan, line: Line) -> tuple[str | None, str | None]:
    """(kind, where) of the kernel that failed, from the innermost vLLM frame of the traceback around it
    (a kernel library's own frame, AITER's for instance, is named first when it is innermost)."""
    for exc in scan.exceptions:
        if exc.line.no >= line.no - 2 and exc.frames:
            lib = next((fr for fr in reversed(exc.frames) if "-packages/" in fr.file and not fr.file.split(
                "-packages/", 1)[-1].startswith(("triton/", "torch/", "vllm/"))), None)
            if lib is not None:
                rel = lib.file.split("-packages/", 1)[-1]
                return "library", f"{rel}:{lib.line} ({lib.func})"
            for fr in reversed(exc.frames):
                if "/vllm/" in fr.file:
                    rel = fr.file.split("/vllm/", 1)[-1]
                    where = f"{rel}:{fr.line} ({fr.func})"
                    low = f"{rel} {fr.func}".lower()
                    if "fused_moe" in low and "lora" not in low:
                        return "moe", where
                    if "decode_att" in low:
                        return "mla_decode", where
                    if "lora" in low:
                        return "lora", where
                    if "attention" in low:
                        return "attention", where
                    return "other", where
            break
    return None, None


def _smem_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    out: dict[str, Any] = {"need": ""}
    req = lim = None
    if gd.get("required") and gd.get("limit"):
        req, lim = int(gd["required"]), int(gd["limit"])
    else:  # the message wrapped: the numbers are on the next line(s) of the same process
        for ln in scan.lines:
            if line.no < ln.no <= line.no + 3 and ln.proc == line.proc:
                mm = SMEM_NUMBERS_RE.search(ln.text)
                if mm:
                    req, lim = int(mm.group("required")), int(mm.group("limit"))
                    break
    who = vendor(scan)
    if who:
        out["vendor"] = who
    if req and lim:
        out["shared_required"] = req
        out["shared_limit"] = lim
        out["need"] = f" ({req} > {lim} bytes)"
        note = SMEM_LIMITS.get(who or "nvidia", {}).get(lim)
        if note:
            out["note"] = f"this GPU has {note}"
    kind, where = _kernel_of(scan, line)
    if where:
        out["kernel_caller"] = where
    size = f"{req} bytes against this GPU's {lim}" if req and lim else "more than this GPU has"
    if kind == "mla_decode":
        out["kernel"] = "vLLM's Triton MLA decode kernel"
        out["advice"] = (f"vLLM's Triton MLA decode kernel (triton_decode_attention: a 512+64-wide latent tile, "
                         f"num_stages 2) asks {size}. The fix is in that kernel: one pipeline stage for large MLA tiles "
                         "(vllm PR #46728; ROCm already uses one): upgrade to a vLLM that has it, or apply it to "
                         "vllm/v1/attention/ops/triton_decode_attention.py. Fused-MoE configs and --enforce-eager do "
                         "not change this kernel.")
    elif kind == "library":
        owner = where.split("/", 1)[0] if where else "a kernel library"
        out["kernel"] = f"A Triton kernel of {owner}"
        out["advice"] = (f"{owner}'s Triton kernel ({where}) asks {size}: its block configuration was tuned for a GPU "
                         f"with more shared memory. Install the {owner} version this vLLM release pins for this GPU, or a "
                         f"vLLM release whose {owner} has a configuration for it; report it to {owner} with this kernel "
                         "name. vLLM's own fused-MoE configs do not change this kernel.")
    elif kind == "moe":
        out["kernel"] = "The fused-MoE Triton kernel"
        out["advice"] = (f"The fused-MoE tile config (block sizes, num_stages) asks {size}: it was tuned for a GPU with "
                         "more shared memory. Use a vLLM release with configs for this GPU, or tune one "
                         "(benchmarks/kernels/benchmark_moe.py --tune) and point VLLM_TUNED_CONFIG_FOLDER at it.")
    else:
        out["kernel"] = "A Triton kernel"
        out["advice"] = (f"A Triton kernel's tiles (block sizes, num_stages) ask {size}: use a vLLM (and the triton it "
                         "pins) with configs for this GPU, or choose another backend for the failing op; report it "
                         "upstream with the kernel name" + (f" ({where})" if where else "") + ".")
    if out.get("note"):
        out["advice"] = f"{out['note'][0].upper()}{out['note'][1:]}. {out['advice']}"
    if who == "amd":
        out["advice"] += (" On ROCm use the vLLM build for your ROCm release (its Triton and kernel configs target "
                          "the Instinct LDS size); ROCm's AITER kernels (VLLM_ROCM_USE_AITER=1) avoid several Triton "
                          "paths.")
    return out


# Where vLLM calls DeepGEMM, by the traceback: the DSA "lightning indexer" of DeepSeek-V3.2/V4 and
# GLM-5.x (vllm/model_executor/layers/sparse_attn_indexer.py -> vllm/utils/deep_gemm.py fp8_mqa_logits /
# fp8_paged_mqa_logits; newer releases refuse to build it: "Sparse Attention Indexer CUDA op requires
# DeepGEMM ..."), the start-up kernel warm-up (model_executor/warmup/deep_gemm_warmup.py, run even for bf16
# models: vllm#41849), or the FP8 block-scaled GEMMs / MoE.
DSA_INDEXER_FUNCS = ("fp8_mqa_logits", "fp8_paged_mqa_logits", "sparse_attn_indexer", "get_paged_mqa_logits_metadata")
DSA_MODEL_NAME_RE = lazy(r"(?i)deepseek-v3\.2|deepseek-v4|glm-5")
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
    model = str(scan.facts.get("model") or "")
    dsa_model = arch in DSA_ARCHS or bool(DSA_MODEL_NAME_RE.search(model)) or any(
        "index_topk" in ln.text or "FLASHMLA_SPARSE" in ln.text or "SPARSE_SM120" in ln.text for ln in scan.lines)
    out: dict[str, Any] = {"library": "deep_gemm"}
    if indexer or dsa_model:
        out.update(dsa_indexer=True, use_sparse=True,
                   what="the DSA sparse indexer (fp8_mqa_logits / fp8_paged_mqa_logits)" if indexer else
                        "the DSA sparse indexer of this DeepSeek-V3.2/GLM-5-class model",
                   advice=("Install the DeepGEMM this vLLM pins, in vLLM's own environment: the lightning indexer of "
                           "DSA sparse-attention models scores tokens with DeepGEMM's fp8_mqa_logits on NVIDIA GPUs in every vLLM "
                           "release, so VLLM_USE_DEEP_GEMM=0 cannot help here (it only switches the FP8 GEMMs/MoE to "
                           "other kernels), and the attention backend alone does not replace it. DeepGEMM has these "
                           "kernels for SM90/SM100 (SM120 since deepseek-ai/DeepGEMM#324); on SM8x no vLLM release has "
                           "another indexer (Triton fallbacks only in open PRs #38476/#47629)."))
        if not indexer:
            out["dsa_model"] = True
    elif warmup:
        out.update(dsa_indexer=False, what="the DeepGEMM kernel warm-up at start-up",
                   advice=("vLLM warms up DeepGEMM's FP8 kernels at start-up even when the model does not use them: "
                           "install the deep_gemm vLLM pins, or skip it with VLLM_DEEP_GEMM_WARMUP=skip "
                           "(VLLM_USE_DEEP_GEMM=0 turns DeepGEMM off)."))
    else:
        out.update(dsa_indexer=False, what="FP8 block-scaled GEMMs / MoE",
                   advice=("DeepGEMM's FP8 block GEMMs exist for SM90/SM100: install the deep_gemm this vLLM pins, or run "
                           "without it (VLLM_USE_DEEP_GEMM=0 picks the Triton/CUTLASS FP8 kernels)."))
    return out



# k3: ptxas refusing the GPU's architecture (ptxas / ptxas-blackwell: "Value 'sm_121a' is not defined for option
# 'gpu-name'"), which Triton prints under "PTXASError: PTXAS error: Internal Triton PTX codegen error" when its
# bundled ptxas predates the GPU (GB10 sm_121, Jetson Thor sm_110, Rubin sm_107): the cure is a newer ptxas.
PTXAS_ARCH_REFUSED = r"Value '(?P<arch>sm_\d+[af]?)' is not defined for option 'gpu-name'"
PTXAS_ARCH_RESTATED = r"\bptxas[\w-]*\W{1,4}(?:fatal\W{1,6})?(?P<arch>sm_\d+[af]?)\W{0,2} is not defined"
_PTXAS_ARCH_RE = lazy(f"{PTXAS_ARCH_REFUSED}|{PTXAS_ARCH_RESTATED}".replace("(?P<arch>", "(?:"))
# The oldest CUDA toolkit whose ptxas knows each architecture (CUDA release notes).
PTXAS_SINCE = {"100": "12.8", "101": "12.8", "120": "12.8", "103": "12.9", "121": "12.9", "110": "13.0"}
PTXAS_GENERIC = ("Triton's bundled ptxas does not know this GPU or failed: upgrade triton (Blackwell needs "
                 "triton>=3.3), or point TRITON_PTXAS_PATH at the ptxas of a CUDA toolkit that supports this GPU.")


def _ptxas_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    refused = next((r for r in (_PTXAS_ARCH_RE.search(ln.text) for ln in scan.lines if "is not defined" in ln.text)
                    if r is not None), None)
    if refused is None:
        return {"what": "Triton's PTX assembler (ptxas) failed", "advice": PTXAS_GENERIC}
    arch = re.search(r"sm_\d+[af]?", refused.group(0)).group(0)  # type: ignore[union-attr]
    since = PTXAS_SINCE.get(re.sub(r"\D", "", arch))
    need = f" (CUDA {since} or newer)" if since else " (a CUDA toolkit released for this GPU)"
    return {"arch": arch, "what": f"Triton's ptxas does not know this GPU's architecture ({arch})",
            "advice": f"Triton assembles kernels with the ptxas it bundles, which predates {arch}. Point it at the "
                      f"ptxas of an installed CUDA toolkit that knows the GPU{need}: `export "
                      "TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas TRITON_PTXAS_BLACKWELL_PATH=/usr/local/cuda/bin/ptxas` "
                      "(in a container: `-e` both), or upgrade triton/torch (and vLLM, which sets this itself on newer "
                      "releases) to ones built for this GPU."}

# DG_HOST_UNREACHABLE in DeepGEMM's dispatchers (einsum.hpp, hyperconnection.hpp, layout.hpp, ...): the kernel has no
# implementation for this GPU's architecture (also read by bw_blackwell.gpu.deepgemm_below_sm90)
DEEPGEMM_ARCH_REFUSED = r"Assertion error \([^)]*csrc/[^)]*\.hpp:\d+\): (?P<error>Unsupported architecture)"

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
                   r"flash_attn_2_cuda.{0,40}(?:undefined symbol|cannot open)", r"No module named 'flash_attn'",
                   # the package is there but not the build vLLM's FlashAttention backend imports from
                   r"cannot import name '\w+' from 'vllm\.vllm_flash_attn"],
         playbook="kernel-library", confidence=0.8),
    Rule(signature="kernels.deepgemm_missing", category="kernel_library",
         title="DeepGEMM is missing or too old (needed for {what})",
         fix="{advice}",
         patterns=[r"DeepGEMM backend is not available or outdated(?:\. Please install or update the `?deep_gemm`?)?",
                   r"DeepGEMM backend is unavailable in the current vLLM environment",
                   r"Sparse Attention Indexer CUDA op requires DeepGEMM",
                   r"No module named 'deep_gemm'", r"deep_gemm.{0,40}(?:is not installed|not available)"],
         facts=_deepgemm_facts, playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.deepgemm_jit_failed", category="kernel_library",
         title="A DeepGEMM JIT kernel failed to load on this GPU ({error})",
         fix="DeepGEMM's kernels target SM90/SM100 and are refused elsewhere (e.g. SM12x): set VLLM_USE_DEEP_GEMM=0 "
             "(and VLLM_MOE_USE_DEEP_GEMM=0) so vLLM uses its Triton/CUTLASS paths, or install a DeepGEMM that "
             "supports this GPU.",
         # DeepGEMM's JIT runtime (deep_gemm/include/deep_gemm/jit/handle.hpp) reports driver errors this way
         patterns=[r"CUDA driver error \([^)]*jit/handle\.hpp:\d+\): \d+ \((?P<error>CUDA_ERROR_\w+)",
                   DEEPGEMM_ARCH_REFUSED],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="kernels.library_api_mismatch", category="kernel_library",
         title="The installed kernel library is not the release this vLLM calls", fix="",
         check=lambda scan, env: _library_api_mismatch(scan), playbook="kernel-library", confidence=0.8),
    # CUTLASS's Python DSL (nvidia-cutlass-dsl, used by FlashInfer and vLLM's cute_dsl kernels) checks the target
    # architecture when it builds an MMA/copy atom
    Rule(signature="kernels.cute_dsl_arch_unsupported", category="kernel_library",
         title="A CUTLASS DSL kernel does not support this GPU architecture ({arch})",
         fix="The kernel was written for {archs} only; this GPU is {arch} (SM12.1 GB10 is not SM12.0, SM12x is not "
             "SM100). Pick a backend that does not use it (--moe-backend marlin / triton, another FP4/FP8 GEMM "
             "backend), or install the nvidia-cutlass-dsl and FlashInfer releases that add this architecture.",
         # (k3: older DSL releases print the arch without its enum prefix: "but got sm_121a")
         patterns=[r"OpError: expects arch to be one of \[(?P<archs>[^\]]*)\], but got (?:Arch\.)?(?P<arch>sm_\w+)"],
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
                   r"AssertionError: vllm\._flashmla(?:_extension)?_C is not available",
                   # kern2: vllm/v1/attention/ops/flashmla.py raises its reason when an MLA path calls it anyway
                   # (forks spell the module vllm_flashmla_C)
                   r"(?:RuntimeError|AssertionError): vllm[._]{1,2}flashmla(?:_extension)?_C is not available"],
         playbook="kernel-library", confidence=0.85),
    Rule(signature="triton.out_of_shared_memory", category="triton_compile",
         title="{kernel} needs more shared memory than this GPU has{need}",
         fix="{advice}",
         patterns=[r"out of resource: shared memory, Required: (?P<required>\d+), Hardware limit: (?P<limit>\d+)",
                   r"out of resource: shared memory"],
         facts=_smem_facts, playbook="triton-compile", confidence=0.9),
    Rule(signature="triton.ptxas_failed", category="triton_compile",
         title="{what}",
         fix="{advice}",
         patterns=[r"ptxas fatal\s*:.*", r"PTXASError", r"ptxas .{0,40}error", r"ptxas failed",
                   r"Value 'sm_\d+a?' is not defined for option 'gpu-name'",
                   # k3: a thread or ticket title restating ptxas's refusal: ptxas "sm_107a is not defined"
                   PTXAS_ARCH_RESTATED,
                   # kern: Triton's cubin step running its bundled ptxas (make_cubin), exit status only
                   r"CalledProcessError: Command '\['[^']*/ptxas(?:\.exe)?', .{0,200}--gpu-name=(?P<arch>sm_\w+)"],
         facts=_ptxas_facts, playbook="triton-compile", confidence=0.85),
    # triton/backends/nvidia/driver.py builds its C launcher against the driver (libraries=['cuda'], found
    # through `ldconfig -p` or TRITON_LIBCUDA_PATH): no libcuda.so where the linker looks
    Rule(signature="triton.libcuda_not_found", category="triton_compile",
         title="Triton cannot link its launcher against the driver's libcuda",
         fix="Triton compiles a small C launcher linked with -lcuda at first use. Make the driver library findable: "
             "run `ldconfig` (root) so libcuda.so.1 is in the linker cache, set TRITON_LIBCUDA_PATH to the directory "
             "that holds libcuda.so.1, or add a libcuda.so symlink to it; in a container, start it with the NVIDIA "
             "runtime (--gpus all) so the driver libraries are mounted.",
         patterns=[r"libcuda\.so cannot found!?", r"cannot find -lcuda\b"],
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
                   r"torch\._dynamo\.exc\.(?:BackendCompilerFailed|TorchRuntimeError|InternalTorchDynamoError)",
                   # Dynamo refusing to trace the model (a graph break under fullgraph, an op it cannot trace):
                   # vLLM compiles with fullgraph=True, so any of these ends start-up
                   r"torch\._dynamo\.exc\.(?:Unsupported|UserError|UncapturedHigherOrderOpError|"
                   r"ObservedException|RestartAnalysis|SkipFrame)\b",
                   r"torch\._inductor\.exc\.\w+Error\b"],
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


# vLLM imports gpt-oss's MXFP4 Triton MoE kernels at start-up for every model and logs a failure at ERROR
# ("Failed to import Triton kernels. ... Error: No module named 'triton_kernels.matmul_ogs'") before carrying on:
# only the MXFP4 path needs them (moe.triton_kernels_unavailable reads that case).
LOGGED_TRITON_KERNELS = "Failed to import Triton kernels"


def _kernel_package_missing(scan: Scan) -> Diagnosis | None:
    d = not_in_passing(KERNEL_PACKAGE_MISSING, scan)
    if d is not None and all(LOGGED_TRITON_KERNELS in e.text for e in d.evidence):
        return None
    return d


# An optional kernel package a chosen backend or model needs is not installed (vLLM's own words).
KERNEL_PACKAGE_MISSING: Rule = Rule(
    signature="kernels.package_missing", category="kernel_library",
    title="A kernel package this launch needs is not installed ({package})",
    fix="Install the package vLLM names, in the version your vLLM release expects (see its "
        "requirements/cuda.txt), or choose a backend that does not need it.",
    patterns=[r"FlashInfer backend is not available\. Please install the package",
              r"Please install (?P<package>flashinfer) \(>= ?[\d.]+\)",
              r"pip install (?P<package>flashinfer-python)",
              r"Please install (?P<package>flash[_-]attn)",
              r"to be installed\. Please install (?P<package>flash-attn) first",
              r"(?P<package>tilelang) is required for \w+ but is not installed",
              r"DeepGEMM backend is not available\. Please install the `(?P<package>deep_gemm)` package",  # 0.10
              r"The package `(?P<package>flashinfer)` is required to",  # mxfp8_utils 0.10-0.15
              r"requires (?P<package>helion) to be installed",  # vllm/kernels/helion 0.16+
              r"pip install (?P<package>fbgemm-gpu-genai)",
              r"All2All kernels .{0,80}are not available\. See (?P<package>tools/ep_kernels)",
              r"No module named '(?P<package>triton_kernels|flash_mla|causal_conv1d|mamba_ssm|xformers|sgl_kernel|"
              r"deep_ep|pplx_kernels|aiter|tilelang|fla|cuda\.bindings|flashinfer_cubin|flashinfer_jit_cache)"
              r"[\w.]*'"],
    playbook="kernel-library", confidence=0.85,
    check=lambda scan, env: _kernel_package_missing(scan))

RULES += [
    KERNEL_PACKAGE_MISSING,
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
         patterns=[r"PassManager::run failed", r"LLVM ERROR: (?P<detail>.{1,160})", r"LLVM Translation failed",
                   # kern: the Triton build has no LLVM target for this GPU (gfx906 on stock Triton)
                   r"error: unsupported target: '(?P<detail>gfx\w+|sm_\w+)'",
                   # an MLIR verifier rejecting one of Triton's ops (its dialects: tt, ttg, ttng, amdgpu, the GPU ones)
                   r"error: '(?P<detail>(?:tt|ttg|ttng|triton_gpu|triton_nvidia_gpu|amdgpu|rocdl|nvvm|gpu)\.\w+' op .{0,120})"],
         playbook="triton-compile", confidence=0.8),
]

FLASHINFER_ARCH_UNSUPPORTED: Rule = Rule(
    signature="kernels.flashinfer_arch_unsupported", category="kernel_library",
    title="FlashInfer cannot build this kernel for this GPU's architecture",
    fix="FlashInfer compiles some kernels only for some GPU generations, and needs an nvcc new enough for the "
        "GPU (SM 12.x needs CUDA >= 12.9): install such a CUDA toolkit and set CUDA_HOME to it, install the "
        "flashinfer-cubin / flashinfer-jit-cache wheels of your FlashInfer version, or choose a backend "
        "without FlashInfer (another --attention-backend, NVFP4 GEMM or MoE backend).",
    patterns=[r"No supported CUDA architectures found for major versions \[(?P<majors>[\d, ]+)\]",
              r"SM (?P<sm>\d+)\.x requires CUDA >= (?P<cuda>[\d.]+)"],
    playbook="kernel-library", confidence=0.9,
    check=lambda scan, env: not_in_passing(FLASHINFER_ARCH_UNSUPPORTED, scan))

RULES += [
    FLASHINFER_ARCH_UNSUPPORTED,
]

# Triton's launcher reports the driver's error for a kernel launch as "Triton Error [CUDA]: <cuGetErrorString>"
# (triton/backends/nvidia/driver.c; "[HIP]" on ROCm): the compiled kernel could not be loaded or launched on
# this GPU (too much shared memory or too many registers for it, a cubin for another architecture). A
# crash inside the kernel (an illegal address) or a full GPU is named by its own rule, which ranks higher.
TRITON_LAUNCH_FAILED: Rule = Rule(
    signature="triton.launch_failed", category="triton_compile",
    title="A Triton kernel could not be loaded or launched on this GPU ({error})",
    fix="Triton compiled the kernel but the driver refused to load or launch it ({error}): usually a kernel "
        "configuration too large for this GPU (shared memory, registers, block size) or a triton/torch build "
        "that does not match the GPU. Use the triton version this vLLM pins (upgrade both for new GPUs), clear "
        "~/.triton/cache, or avoid the kernel (another --attention-backend / --moe-backend, --enforce-eager).",
    patterns=[r"Triton Error \[(?:CUDA|HIP)\]: (?:Code: \d+, )?(?P<error>(?!out of memory|an illegal memory access)[^.\n]{1,120})"],
    playbook="triton-compile", confidence=0.65)

RULES += [
    TRITON_LAUNCH_FAILED,
]
