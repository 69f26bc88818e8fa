"""GPU generation problems: too old or too new for the build, dtypes and quantization it cannot run."""

from __future__ import annotations

import re
from triage.lazyre import lazy
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, not_in_passing
from triage.rules.quant_native import RULES as NATIVE_QUANT_RULES
from triage.rules.vendor import vendor


# What newer releases changed, per method, read from each mined release's get_min_capability() (0.6.6, 0.8.5,
# 0.10.2, 0.16.0, 0.25.1, 0.33.0): where none lowered it, only another GPU or another checkpoint helps.
MIN_CAPABILITY_ADVICE = {
    "fp8": "vLLM 0.16+ accepts fp8 checkpoints from compute capability 7.5 (weight-only FP8 through Marlin below 8.9): "
           "upgrade vLLM, or use an AWQ/GPTQ checkpoint.",
    "awq_marlin": "use --quantization awq (its kernels need 7.5), or vLLM 0.16+ whose Marlin runs from 7.5.",
    "gptq_marlin": "use --quantization gptq (its kernels need 6.0), or vLLM 0.16+ whose Marlin runs from 7.5.",
    "mxfp4": "every vLLM release from 0.10 to 0.33 needs compute capability 8.0 for MXFP4 (gpt-oss): run it on an "
             "Ampere or newer GPU, or use another quantization of the model (e.g. a GGUF or AWQ build).",
    "modelopt": "vLLM 0.33 lowered ModelOpt FP8's minimum to 8.0 (earlier releases need 8.9): upgrade, or use a "
                "checkpoint in another format.",
    "bitsandbytes": "bitsandbytes needs compute capability 7.0 in every vLLM release: use a GPU of Volta or newer, or "
                    "a GGUF/GPTQ checkpoint.",
}


def _capabilities(m, line, scan) -> dict:
    """vLLM prints capabilities as 89 / 120; facts use the compute-capability form "8.9" / "12.0"."""
    out = {}
    for key in ("min_capability", "current_capability"):
        v = m.groupdict().get(key)
        if v and v.isdigit() and len(v) >= 2:
            out[key] = f"{v[:-1]}.{v[-1]}"
    method = (m.groupdict().get("quantization") or "").lower()
    if not method:  # compressed-tensors' "Quantization scheme is not supported ..." names no method
        out["quantization"] = "of this checkpoint (its compressed-tensors scheme)"
    extra = MIN_CAPABILITY_ADVICE.get(method)
    out["advice"] = (f"This vLLM's {method} kernels need compute capability {out.get('min_capability', '?')}: {extra}"
                     if extra else "This GPU is below what this vLLM's kernels for the checkpoint's quantization need: "
                     "use a checkpoint in a format this GPU runs (AWQ/GPTQ/unquantized), or a newer vLLM, which lowered "
                     "some minimums (fp8 and Marlin run from 7.5 in 0.16+).")
    return out

FOUND_GPU_RE = lazy(r"Found GPU\d+ (?P<name>.+?) which is of cuda capability (?P<cc>\d+\.\d+)")


def _too_old_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    if m.groupdict().get("cc"):
        return {}
    for ln in scan.lines:
        if ln.no in (line.no - 1, line.no - 2) and ln.proc == line.proc:
            g = FOUND_GPU_RE.search(ln.text)
            if g:
                return {"name": g.group("name"), "cc": g.group("cc")}
    return {}

NAMED_CC = {"ampere": (8, 0), "ada": (8, 9), "hopper": (9, 0), "blackwell datacenter": (10, 0), "blackwell": (10, 0)}


def _cc_of(text: str) -> tuple[int, int] | None:
    """'sm_90a' / 'SM100' / 'sm120' / '8.0' / 'Hopper' -> (major, minor)."""
    t = text.strip().lower()
    m = re.match(r"^sm ?_?(\d+?)(\d)[af]?x?$", t)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.match(r"^(\d+)\.(\d+)$", t)
    if m:
        return int(m.group(1)), int(m.group(2))
    return NAMED_CC.get(t)


# Compute capability by GPU name, for logs that name the GPU but not its capability (first match wins).
NAME_CC = [("GB10", (12, 1)), ("RTX PRO 6000", (12, 0)), ("RTX 50", (12, 0)), ("5090", (12, 0)), ("5080", (12, 0)),
           ("GB200", (10, 0)), ("B200", (10, 0)), ("B300", (10, 3)), ("H100", (9, 0)), ("H200", (9, 0)),
           ("H800", (9, 0)), ("H20", (9, 0)), ("A100", (8, 0)), ("A800", (8, 0)), ("L40", (8, 9)), ("L4", (8, 9)),
           ("RTX 40", (8, 9)), ("4090", (8, 9)), ("RTX 30", (8, 6)), ("A10", (8, 6)), ("A40", (8, 6)),
           ("A6000", (8, 6)), ("T4", (7, 5)), ("RTX 20", (7, 5)), ("V100", (7, 0))]


def _gpu_cc(scan: Scan) -> tuple[int, int] | None:
    have = _cc_of(str(scan.facts.get("compute_capability") or ""))
    if have:
        return have
    for g in scan.facts.get("gpus") or []:
        name = str(g.get("name", "")) if isinstance(g, dict) else ""
        for key, cc in NAME_CC:
            if key in name:
                return cc
    return None


def _no_kernel_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """A build without this GPU's kernels: a build gap (the GPU itself is fine), said per vendor."""
    if vendor(scan) == "amd" or "hip" in line.text.lower() or "gfx" in line.text:
        gfx = re.search(r"gfx\w+", " ".join(ln.text for ln in scan.lines if "gfx" in ln.text)[:20000])
        return {"sm_suffix": f" ({gfx.group(0)})" if gfx else "",
                "advice": ("This ROCm build of torch/vLLM has no code for this GPU's gfx target: install the ROCm wheel or "
                           "image built for it, or build vLLM with PYTORCH_ROCM_ARCH including "
                           + (gfx.group(0) if gfx else "this gfx target") + " (`rocminfo` names it).")}
    have = _gpu_cc(scan)
    sm = f"sm_{have[0]}{have[1]}" if have else None
    gap = (f" This is a build gap, not a GPU limitation: {sm} GPUs are supported by builds that include it"
           + (" (CUDA 12.8+ wheels for Blackwell)." if have and have[0] >= 10 else ".") if sm else "")
    return {"sm_suffix": f" ({sm})" if sm else " (no kernel image is available)",
            "advice": (f"torch or vLLM was compiled without this GPU's architecture ({sm or 'sm_XX'}): install a build "
                       "that lists it (check `python -c 'import torch; print(torch.cuda.get_arch_list())'`), e.g. a "
                       "CUDA 12.8+ wheel for Blackwell, or build vLLM with TORCH_CUDA_ARCH_LIST including this GPU."
                       + gap)}


def _needs(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """Too old, another line of the same generation, or a build without this GPU's kernels: the GPU's own
    compute capability against what the message asks for decides which."""
    gd = m.groupdict()
    need = gd.get("min") or ""
    feature = gd.get("feature")
    out: dict[str, Any] = {"needs": f" ({feature} requires {need})" if feature and need else
                           (f" (needs {need})" if need else "")}
    if "FlashAttention only supports Ampere" in line.text:
        need = "Ampere"
    want = _cc_of(need) if need else None
    have = _gpu_cc(scan)
    what = feature or "this kernel"
    if want and have:
        out["gpu_cc"] = f"{have[0]}.{have[1]}"
        if have[0] == 12 and want[0] in (9, 10):
            out["cause"] = "datacenter_only"
            out["headline"] = f"{what} exists only for SM{want[0]}0 data-center GPUs; this GPU is SM{have[0]}{have[1]}"
            out["advice"] = (f"{what} is built for SM{want[0]}0 (H100/B200-class) only; SM12x Blackwell (RTX 50xx, RTX PRO "
                             "6000, GB10) is a different line, not an older GPU: drop the option that selects it (use "
                             "the default or another backend/kernel for this GPU).")
            return out
        if have >= want and have[0] == want[0] and "kernel only supports" in line.text:
            out["cause"] = "build_gap"
            out["headline"] = f"This kernel was compiled for sm_{want[0]}{want[1]} only; this GPU is sm_{have[0]}{have[1]}"
            out["advice"] = (f"The build has the kernel for sm_{want[0]}{want[1]} but not for sm_{have[0]}{have[1]} (a build "
                             "gap, not a GPU limitation): install a vLLM build whose kernels include this exact "
                             "architecture, or avoid this kernel (another quantization or MoE backend).")
            return out
        if have >= want:
            out["cause"] = "build_gap"
            out["headline"] = (f"The build lacks kernels for this GPU (compute capability {have[0]}.{have[1]}), so a "
                               f"check for {need} failed")
            out["advice"] = (f"This GPU ({have[0]}.{have[1]}) is newer than the {need} the check asks for: the installed "
                             f"build has no sm_{have[0]}{have[1]} kernels for it (a build gap, not a GPU limitation). "
                             "Install a build that includes this architecture (CUDA 12.8+ wheels for Blackwell).")
            return out
        out["cause"] = "gpu_too_old"
    out["headline"] = f"This GPU's architecture is not supported by this vLLM path{out['needs']}"
    if out.get("cause") == "gpu_too_old" or not need:
        out["advice"] = ("This feature needs a newer GPU; choose a model/config that does not need it, or run on a GPU "
                         "with a higher compute capability.")
    elif "kernel only supports" in line.text:
        out["advice"] = (f"This kernel was compiled for {need} only and refused this GPU: on a sibling of that GPU (GB10 "
                         "is SM12.1, not 12.0) it is a build gap, not a GPU limitation. Install a build with kernels for "
                         "this exact GPU, or avoid this kernel (another quantization or MoE backend).")
    elif feature:
        out["advice"] = (f"{feature} runs only on {need} GPUs: drop the option that selects it, "
                         "or run on such a GPU. (SM12x Blackwell, RTX 50xx / RTX PRO 6000, is not an older "
                         "SM100: it is another line.)")
    else:
        out["advice"] = (f"This path needs {need}: if this GPU is older, run without it or on a newer GPU; if it is newer, "
                         "the installed build lacks kernels for it: install one that includes this GPU.")
    return out


# Words that say the model itself refuses a dtype (vllm/config/model.py _FLOAT16_NOT_SUPPORTED_MODELS: gemma2/3,
# plamo2, glm4 refuse float16), or that this GPU has no bfloat16.
MODEL_REFUSES_RE = lazy(r"model type '(?P<model>[\w.-]+)' does not support (?P<dtype>float16|bfloat16)")
NO_BF16_RE = lazy(r"doesn't support torch\.bfloat16|Bfloat16 is only supported on GPUs with compute capability of at "
                  r"least 8\.0|does not support bfloat16")


def _quant_dtype_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    """The dtypes the method takes, and whether any of them can run here: a model that refuses the only one
    (gemma3 and float16 for AWQ), or a GPU without bfloat16 for a bfloat16-only method, leaves none."""
    short = [t.strip().removeprefix("torch.") for t in m.group("supported").split(",") if t.strip()]
    short = [t for t in short if t]
    method = m.group("method")
    text = scan.joined_text()
    refused = {g.group("dtype") for g in MODEL_REFUSES_RE.finditer(text)}
    have = _gpu_cc(scan)
    no_bf16 = bool(NO_BF16_RE.search(text)) or (have is not None and have < (8, 0) and vendor(scan) != "amd")
    usable = [t for t in short if t not in refused and not (t == "bfloat16" and no_bf16)]
    flag = {"float16": "half", "bfloat16": "bfloat16", "float32": "float32"}
    if usable:
        advice = (f"The {method} kernels compute in {' or '.join(short)} only: launch with --dtype "
                  f"{flag.get(usable[0], usable[0])} (the checkpoint's weights stay quantized).")
    elif refused:
        advice = (f"The {method} kernels take {' or '.join(short)} only, and this model refuses "
                  f"{', '.join(sorted(refused))} (numerical instability): no dtype satisfies both. Use another "
                  "checkpoint of this model (GPTQ/compressed-tensors/FP8, or the unquantized weights).")
    else:
        advice = (f"The {method} kernels take {' or '.join(short)} only, and this GPU has no bfloat16 support (NVIDIA "
                  "before Ampere, AMD MI50/MI60): this checkpoint cannot run here. Use a checkpoint in another format "
                  "(AWQ/GPTQ in float16) or a newer GPU.")
    return {"supported": ", ".join(short) or "?", "advice": advice}


def _arch_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    arch = m.group("arch")
    if arch.startswith("gfx"):
        return {"advice": (f"A ROCm kernel library or build has no code for {arch}: ROCm builds of vLLM, AITER and "
                           "Triton list their gfx targets (MI200/MI300/MI350: gfx90a/gfx942/gfx950; RDNA only partly). "
                           f"Use an image or build made for {arch} (PYTORCH_ROCM_ARCH), or turn the library off "
                           "(VLLM_ROCM_USE_AITER=0) so vLLM takes its generic kernels.")}
    return {"advice": (f"The installed kernels were not built for {arch}: install a vLLM/kernel build that lists this "
                       "architecture (CUDA 12.8+ builds for Blackwell), or choose another backend/kernel for this GPU.")}


ARCH_UNKNOWN_PATTERNS = [
    r"(?!.*(?:[Ff]all(?:ing|s)? ?back|[Uu]sing ))(?:Unknown|Unsupported|unsupported|unknown) (?:GPU |gpu |CUDA |HIP )?"
    r"arch(?:itecture)?[:=]? ?['\"]?(?P<arch>gfx\d+\w*|sm_?\d+[af]?)\b",
    r"(?!.*[Ff]all(?:ing|s)? ?back)GPU arch(?:itecture)? ['\"]?(?P<arch>gfx\d+\w*|sm_?\d+[af]?)['\"]? (?:is )?not supported",
    r"(?!.*[Ff]all(?:ing|s)? ?back)(?:GPU|device) is not supported: (?P<arch>gfx\d+\w*|sm_?\d+[af]?)\b",
]
ARCH_UNKNOWN: Rule = Rule(
    signature="gpu.arch_unknown", category="unsupported_gpu",
    title="This GPU's architecture ({arch}) is not one the installed kernels know",
    fix="{advice}", patterns=ARCH_UNKNOWN_PATTERNS, facts=_arch_facts,
    check=lambda scan, env: not_in_passing(ARCH_UNKNOWN, scan), playbook="unsupported-gpu", confidence=0.8)


# torch >= 2.8 states the GPU's capability and its own supported range over several lines ("Found GPU0 ... which
# is of cuda capability 6.1." / "Minimum and Maximum cuda capability supported by this version of PyTorch is" /
# "(7.0) - (12.0)"). Above the range it is a warning (harmless.torch_capability_range: GB10 runs); below it, torch
# has no kernels for the GPU.
TORCH_RANGE_RE = lazy(r"\((?P<lo>\d+)\.(?P<lo_minor>\d+)\)\s*-\s*\((?P<hi>\d+\.\d+)\)")


def _below_torch_range(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    lines = scan.lines
    for i, ln in enumerate(lines):
        g = FOUND_GPU_RE.search(ln.text)
        if g is None:
            continue
        for nxt in lines[i:i + 4]:
            r = TORCH_RANGE_RE.search(nxt.text)
            if r is None or nxt.no - ln.no > 4:
                continue
            have = tuple(int(x) for x in g.group("cc").split("."))
            low = (int(r.group("lo")), int(r.group("lo_minor")))
            if have >= low:
                return None
            facts = {"name": g.group("name"), "cc": g.group("cc"), "range": f"{low[0]}.{low[1]}-{r.group('hi')}"}
            return _below_diagnosis(ln, nxt, facts)
    return None


def _below_diagnosis(ln: Line, nxt: Line, facts: dict[str, Any]) -> Diagnosis:
    return Diagnosis(
        category="unsupported_gpu", signature="gpu.below_torch_range",
        title=f"GPU too old for this PyTorch ({facts['name']}, compute capability {facts['cc']}; "
              f"this torch supports {facts['range']})",
        confidence=0.9, evidence=[Evidence(ln.no, ln.shown), Evidence(nxt.no, nxt.shown)], facts=facts,
        fix=Fix(f"This torch (and the vLLM built on it) has no kernels below compute capability "
                f"{facts['range'].split('-')[0]}: use an older torch/vLLM pair whose wheels still include "
                f"{facts['cc']}, build both from source for it, or run on a newer GPU.", "unsupported-gpu"),
        first_line=ln.no)


BELOW_TORCH_RANGE: Rule = Rule(
    signature="gpu.below_torch_range", category="unsupported_gpu",
    title="GPU too old for this PyTorch", fix="", check=_below_torch_range, playbook="unsupported-gpu",
    confidence=0.9)


RULES = [
    BELOW_TORCH_RANGE,
    Rule(signature="gpu.no_kernel_image", category="unsupported_gpu",
         title="The installed build has no kernels for this GPU{sm_suffix}",
         fix="{advice}", facts=_no_kernel_facts,
         patterns=[r"no kernel image is available for execution on the device",
                   # the same error as people retell it in a ticket ("CUDA kernel image not available for GTX 1080")
                   r"\bno kernel image (?:is )?available\b", r"\bkernel image (?:is )?(?:not available|unavailable)\b",
                   r"cudaErrorNoKernelImageForDevice", r"CUDA_ERROR_NO_BINARY_FOR_GPU",
                   # ROCm: the build has no code object for this gfx target
                   r"hipErrorNoBinaryForGpu", r"HIP error: invalid device function",
                   r"No compatible code objects found for: gfx\w+"],
         playbook="unsupported-gpu", confidence=0.9),
    Rule(signature="gpu.torch_arch_missing", category="unsupported_gpu",
         title="PyTorch was not built for this GPU ({name}, sm_{sm})",
         fix="This torch wheel does not include sm_{sm}: install a torch (and matching vLLM) built for it, "
             "e.g. the CUDA 12.8+ wheels for Blackwell GPUs.",
         # torch prints the device's own name: "NVIDIA ..." on recent drivers, "Tesla P40" / "Quadro P6000" on older cards
         patterns=[r"(?P<name>(?:NVIDIA|Tesla|Quadro|TITAN|GeForce) [\w .()-]+?) with CUDA capability sm_(?P<sm>\d+) "
                   r"is not compatible with the current PyTorch"],
         playbook="unsupported-gpu", confidence=0.95),
    Rule(signature="gpu.too_old_for_torch", category="unsupported_gpu",
         title="GPU too old for this PyTorch ({name}, compute capability {cc})",
         fix="This torch no longer supports compute capability {cc}: use an older torch/vLLM pair that still "
             "supports it, or a newer GPU.",
         patterns=[r"Found GPU\d+ (?P<name>.+?) which is of cuda capability (?P<cc>\d+\.\d+)\.\s*PyTorch no longer supports this GPU because it is too old",
                   # torch prints the warning over several lines: the GPU and capability on the line before
                   r"PyTorch no longer supports this GPU because it is too old"],
         facts=_too_old_facts,
         playbook="unsupported-gpu", confidence=0.95),
    Rule(signature="gpu.compute_capability_too_low", category="unsupported_gpu",
         title="{headline}",
         fix="{advice}",
         patterns=[r"(?:GPUs?|[Dd]evice) with compute capability (?:of )?(?:at least|>=|>) ?(?P<min>\d+(?:\.\d+)?) (?:is|are) required",
                   r"requires (?:a )?(?:GPU|device) with compute capability (?:>= ?|of at least )?(?P<min>\d+(?:\.\d+)?)",
                   r"FlashAttention only supports Ampere GPUs or newer",
                   # transformers' FA2/FA3 gate ("requires compute capability >= 9.0"), vLLM <= 0.9's block-sparse
                   # Triton kernel ("Requires compute capability of 8 or above"), the Mamba stochastic-rounding gate
                   r"(?!.*(?:[Ff]all(?:ing|s)? ?back|[Uu]sing ))[Rr]equires compute capability (?:of )?(?:>= ?)?(?P<min>\d+(?:\.\d+)?)(?: or above| \(|,)",
                   r"compute capability (?P<cc>\d+\.\d+) is (?:not supported|too low)",
                   # newer gates name the SM or the GPU family instead of a capability number
                   # (not a warning that says vLLM falls back to something else)
                   r"(?!.*[Ff]all(?:ing|s)? ?back)(?P<feature>[\w.='-]+(?: [\w.-]+){0,3}) requires (?P<min>SM ?\d+x?|sm_?\d+x?|Hopper|Blackwell(?: datacenter)?|Ampere|Ada)[\w ()/,.-]{0,60}?GPUs",
                   # a kernel compiled for one SM only, run on a sibling (GB10 is SM12.1, not SM12.0)
                   r"This kernel only supports (?P<min>sm_?\d+[af]?)",
                   # vLLM <= 0.2's own gate, and torch inductor's check before it compiles Triton kernels
                   # (setup.py of 0.1-0.2 said "less than" when building on such a GPU)
                   r"GPUs with compute capability (?:below|less than) (?P<min>\d+\.\d+) are not supported",
                   r"which is too old to be supported by the triton GPU compiler.{0,120}?CUDA Capability >= (?P<min>\d+\.\d+)"],
         facts=_needs, playbook="unsupported-gpu", confidence=0.85),
    # A kernel library's own table of GPU targets without this one: ROCm's AITER (aiter/jit/utils/chip_info.py
    # "Unknown GPU architecture: gfx1151"), CuTe DSL / CUTLASS pickers, a build that lists its sm_/gfx targets.
    ARCH_UNKNOWN,
    Rule(signature="dtype.bf16_before_ampere", category="dtype_unsupported",
         title="bfloat16 needs compute capability 8.0; this GPU ({gpu}) has {cc}",
         fix="Launch with --dtype half (float16), or use an Ampere or newer GPU.",
         patterns=[r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0\. Your (?P<gpu>.+?) GPU has compute capability (?P<cc>\d+\.\d+)",
                   r"Bfloat16 is only supported on GPUs with compute capability of at least 8\.0",
                   r"(?:Current CUDA Device|This device) does not support bfloat16",
                   r"bf16 is not supported on",
                   # vllm/v1/attention/backends/triton_attn.py, mla/triton_mla.py 0.24+: the KV cache follows the dtype
                   r"bfloat16 KV cache is not supported (?:by the Triton \w+ backend )?on (?P<gpu>.+?) \(compute capability (?P<cc>\d+\.\d+)\); bfloat16 requires SM80",
                   # (raised only below SM80; wrapped or shortened after "backend")
                   r"bfloat16 KV cache is not supported by the Triton \w+ backend"],
         playbook="dtype-unsupported", confidence=0.95),
    Rule(signature="dtype.fp8_unsupported", category="dtype_unsupported",
         title="This GPU cannot compute in the requested float8 type",
         fix="FP8 compute needs compute capability 8.9+ (Ada/Hopper/Blackwell) on NVIDIA, MI300-class (gfx942) or "
             "newer on AMD; use --kv-cache-dtype auto and a non-FP8 checkpoint, or a weight-only FP8 (Marlin) path on "
             "Ampere.",
         # Triton's own refusal (language/semantic.py) names its float8 type: fp8e4nv (NVIDIA e4m3), fp8e4b8 / fp8e5b16
         # (AMD's fnuz types), fp8e4b15; the list it prints is what this GPU has instead
         patterns=[r"type (?P<fp8_type>fp8e\w+) not supported in this architecture",
                   r"fp8e4nv data type is not supported on CUDA arch < 89",
                   r"Float8_e4m3fn.{0,40}not (?:supported|implemented)",
                   # vllm/v1/attention/backends/triton_attn.py, mla/triton_mla.py 0.24+
                   # (raised only below SM89; the message is often wrapped or shortened after "backend")
                   r"FP8 KV cache is not supported by the Triton \w+ backend"],
         playbook="dtype-unsupported", confidence=0.85),
    Rule(signature="dtype.float32_unsupported", category="dtype_unsupported",
         title="The chosen backend or kernel does not run in dtype {dtype}",
         fix="Launch with --dtype auto (the model's own half-precision dtype) or choose a backend that takes it.",
         patterns=[r"(?:[Oo]nly|only supports) (?:float16|fp16|half)(?: and bfloat16)? (?:is |are )?supported.{0,40}got (?P<dtype>\w+)",
                   r"dtype (?P<dtype>torch\.float32|float32) is not supported"],
         playbook="dtype-unsupported", confidence=0.75),
    # torch's dispatcher: an op with no kernel for this dtype on this device ('"addmm_impl_cpu_" not implemented for
    # 'Half'': float16 on the CPU backend; Float8 ops on a GPU without them)
    Rule(signature="dtype.op_not_implemented", category="dtype_unsupported",
         title="The device has no {op} kernel for {dtype}",
         fix="torch on this device cannot compute {op} in {dtype}: launch with a dtype the device runs (on the CPU "
             "backend --dtype bfloat16 or float32, not float16; on a GPU --dtype auto), or use a checkpoint that does "
             "not need {dtype}.",
         patterns=[r"\"(?P<op>\w+)\" not implemented for '(?P<dtype>Half|BFloat16|Float8_\w+|ComplexHalf)'"],
         playbook="dtype-unsupported", confidence=0.8),
    # -- quantization ---------------------------------------------------------------------
    Rule(signature="quant.min_capability", category="quantization",
         title="Quantization method {quantization} needs compute capability {min_capability}; this GPU has {current_capability}",
         fix="{advice}",
         patterns=[r"The quantization method (?P<quantization>[\w-]+) is not supported for the current GPU\. Minimum capability: (?P<min_capability>\d+)\. Current capability: (?P<current_capability>\d+)",
                   r"Quantization scheme is not supported for (?:the current GPU|this GPU)\. Min capability: (?P<min_capability>\d+)\. Current capability: (?P<current_capability>\d+)"],
         facts=_capabilities, playbook="quantization", confidence=0.95),
    # DeepGEMM's C++ checks throw DGException: "<kind> error (<file>:<line>): <reason>" (csrc/utils/exception.hpp).
    # Its scale-factor layout code (csrc/apis/layout.hpp, csrc/utils/layout.hpp) only knows the recipes of the
    # architectures it was written for (SM90 / SM100): on another GPU the FP8 block-scaled path vLLM routed
    # through it stops at "Unknown SF transformation" (weight post-processing) or "Unknown recipe" (GEMM / warm-up).
    Rule(signature="quant.deepgemm_scale_layout", category="quantization",
         title="DeepGEMM has no FP8 scale layout for this GPU ({reason})",
         fix="vLLM sent this FP8 block-scaled model through DeepGEMM, whose scale-factor layout code has no recipe for "
             "this GPU's architecture (the DeepGEMM pinned by older vLLM releases knows SM90/SM100 only; SM120 came with "
             "deepseek-ai/DeepGEMM#324). Set VLLM_USE_DEEP_GEMM=0 (and VLLM_MOE_USE_DEEP_GEMM=0) so vLLM uses its "
             "CUTLASS/Triton FP8 kernels, or upgrade to a vLLM whose pinned DeepGEMM supports this GPU.",
         patterns=[r"Assertion error \((?P<where>[^)]*layout\.hpp:\d+)\): (?P<reason>Unknown SF transformation|Unknown recipe)",
                   r"(?P<reason>Unknown SF transformation)"],
         playbook="quantization", confidence=0.9),
    Rule(signature="quant.unknown_method", category="quantization",
         title="Unknown quantization method {quantization}",
         fix="This vLLM does not know the checkpoint's quantization method: upgrade vLLM, or pass a supported "
             "--quantization value.",
         patterns=[r"Unknown quantization method: (?P<quantization>[\w-]+)", r"Unknown quantization method (?P<quantization>[\w-]+)",
                   r"Quantization method specified in the model config \((?P<quantization>[\w-]+)\) does not match"],
         playbook="quantization", confidence=0.9),
    Rule(signature="quant.kernel_unsupported_gpu", category="quantization",
         title="The quantized kernel ({kernel}) is not available on this GPU",
         fix="Pick a checkpoint format this GPU supports (NVFP4 needs SM100/SM120 kernels; FP8 W8A8 needs SM89+), "
             "or a vLLM build whose kernels include this GPU.",
         patterns=[r"(?P<kernel>NVFP4|nvfp4|FP4|MXFP4|CUTLASS|cutlass_scaled_mm|Machete|Marlin|FP8)[\w ]{0,40}(?:is )?not supported (?:on|for) (?:this|the current) (?:GPU|device|platform)",
                   r"(?P<kernel>cutlass_scaled_mm|cutlass_fp4_gemm|scaled_fp4_quant)\b.{0,60}(?:not (?:supported|implemented)|no kernel)",
                   r"No compiled (?P<kernel>cutlass[\w ]*) (?:kernel|for)",
                   # csrc/quantization/cutlass_w8a8 entry points (get_cutlass_moe_mm_data, ...): built without this SM
                   r"No compiled (?P<kernel>\w+): no cutlass_scaled_mm kernel for CUDA device capability",
                   r"(?P<kernel>ModelOpt NVFP4|FlashInfer FP4|CUTLASS FP4)\b.{0,60}(?:requires|only) .{0,30}(?:capability|SM|sm)",
                   # modelopt.py / compressed_tensors_moe.py on pre-Blackwell GPUs
                   r"Current platform does not support (?P<kernel>NVFP4|MXFP4|FP8|fp8) quantization",
                   # FP8 W8A8 through torch on a GPU below 8.9
                   r"(?P<kernel>torch\._scaled_mm) is only supported on (?:CUDA )?devices with compute capability",
                   # MoE backend oracles: no kernel for this GPU/model/quant combination
                   r"No (?P<kernel>(?:NvFp4|MxFp4|Mxfp4|Fp8|FP8|NVFP4|MXFP4|W4A8|Int4|Int8|WNA16|Unquantized)[\w ]{0,12}? MoE) backend supports the deployment configuration",
                   # (the line may end after "the": the message wrapped in a paste)
                   r"(?P<kernel>(?:NvFp4|MxFp4|Mxfp4|MxFp8|Mxfp8|Fp8) MoE backend '\w+') does not support the(?: deployment "
                   r"configuration|\s*$)",
                   r"(?P<kernel>FlashInfer|CUTLASS|Marlin) kernels unavailable for \w+ on current platform",
                   r"(?P<kernel>\[FP4 gemm Runner\]) Failed to run cutlass FP4 gemm",
                   # a MoE / GEMM kernel's own device check ("FlashInfer-CUTLASS MoE kernel does not support
                   # current device sm_120")
                   r"(?P<kernel>[\w-]+(?: [\w-]+){0,2} (?:MoE|GEMM|gemm|FP4|FP8|fp4|fp8) kernels?) (?:does|do) not support "
                   r"(?:the )?current (?:device|GPU|platform)"],
         playbook="quantization", confidence=0.85),
    Rule(signature="quant.shape_unsupported", category="quantization",
         title="The quantized weights have a shape this kernel cannot take (often: tensor parallel size)",
         fix="The layer's per-GPU slice is not divisible as the kernel requires: try another --tensor-parallel-size "
             "(or pipeline parallel), or a checkpoint with another group size; for an MoE whose experts are split "
             "below the FP8 block (128), --enable-expert-parallel keeps each expert whole.",
         patterns=[r"[Ww]eight input_size_per_partition = (?P<size>\d+) is not divisible by (?:min_thread_k|group_size|tile) = (?P<by>\d+)",
                   r"[Ww]eight output_size_per_partition = (?P<size>\d+) is not divisible by",
                   r"The (?:input|output) size is not aligned with the quantized weight shape",
                   r"The (?:input|output)_size of [\w' ]{1,30} weight = \d+ is not divisible by weight quantization block_[kn]",
                   # fp8_utils.validate_fp8_block_shape (0.9+): "Weight output_partition_size = N is not divisible by
                   # weight quantization block_n = 128."; and a report's "output_size (80) not divisible by FP8 block_n=128"
                   r"[Ww]eight output_partition_size = (?P<size>\d+) is not divisible by weight quantization block_n",
                   r"(?:input|output)_size \(\d+\) (?:is )?not divisible by (?:FP8 |weight quantization )?block_[kn] ?= ?\d+",
                   r"input_size_per_partition .{0,40} not divisible",
                   # the same mismatch caught by the kernel at run time (MoE WNA16, Marlin 2:4)
                   r"size_[kmn] must (?:be )?divisible by BLOCK_SIZE_[KMN]",
                   r"prob_[kmn] = \d+ is not divisible by thread_[kmn] = \d+"],
         playbook="quantization", confidence=0.9),
    Rule(signature="quant.marlin_unsupported", category="quantization",
         title="Marlin kernels cannot run this configuration",
         fix="Marlin needs compute capability 8.0+ and specific bit widths/group sizes: use another checkpoint or "
             "--quantization value, or a newer GPU.",
         patterns=[r"Marlin (?:does not support|only supports|kernel requires|is not supported)[^.]*",
                   r"gptq_marlin.{0,40}not supported"],
         playbook="quantization", confidence=0.85),
    Rule(signature="quant.model_unsupported", category="quantization",
         title="{arch} does not support {quantization} quantization in this vLLM",
         fix="This vLLM has no {quantization} path for this model architecture: upgrade vLLM (support is added per "
             "model), or use a checkpoint in another format (AWQ/GPTQ/FP8) or the unquantized model.",
         patterns=[r"Model (?P<arch>\w+) does not support (?P<quantization>BitsAndBytes|\w+) quantization(?: yet)?",
                   r"(?P<quantization>BitsAndBytes|GGUF|\w+) quantization is not supported for (?P<arch>\w+(?:For\w+|Model))"],
         playbook="quantization", confidence=0.9),
    # vllm/config (VllmConfig._get_quantization_config, 0.6-0.33): the activation dtype the launch resolved to is
    # not one the checkpoint's quantization method computes in (awq/gptq: float16; mxfp4: bfloat16 ...)
    Rule(signature="quant.dtype_unsupported", category="quantization",
         title="Quantization method {method} does not run in {dtype} (it takes {supported})",
         fix="{advice}",
         patterns=[r"(?:torch\.)?(?P<dtype>b?float\d+|half) is not supported for quantization method (?P<method>[\w-]+)\. "
                   r"Supported dtypes: \[(?P<supported>[\w., ]*)"],
         facts=_quant_dtype_facts, playbook="quantization", confidence=0.9),
    Rule(signature="quant.compressed_tensors_scheme", category="quantization",
         title="No compressed-tensors scheme matches this checkpoint on this GPU",
         fix="The checkpoint's compressed-tensors scheme is not implemented for this GPU/vLLM: upgrade vLLM or use "
             "a checkpoint in a supported scheme.",
         patterns=[r"No compressed-tensors compatible scheme was found", r"compressed-tensors.{0,60}(?:not supported|Unsupported)"],
         playbook="quantization", confidence=0.85),
]


# A quantization library the checkpoint's method needs is missing, or the method's name is not one
# this vLLM knows (vLLM's own words).
QUANT_PACKAGE_MISSING: Rule = Rule(
    signature="quant.package_missing", category="quantization",
    title="The package this quantization method needs is not installed ({package})",
    fix="Install the package vLLM names, at least the version it asks for (e.g. `pip install "
        "'bitsandbytes>=0.46.1'`), into the environment vLLM runs in.",
    patterns=[r"Please install (?P<package>bitsandbytes|torchao|modelscope)(?:>=[\d.]+)? via",
              r"`pip install (?P<package>bitsandbytes|torchao)(?:>=[\d.]+)?` to use",
              r"Please install it with `pip install (?P<package>amd-quark)",
              r"No module named '(?P<package>bitsandbytes|torchao|gptqmodel|auto_gptq|awq|compressed_tensors|"
              r"modelopt|quark|hqq)'"],
    playbook="quantization", confidence=0.85,
    check=lambda scan, env: not_in_passing(QUANT_PACKAGE_MISSING, scan))

RULES += [
    QUANT_PACKAGE_MISSING,
    Rule(signature="quant.invalid_method", category="quantization",
         title="This vLLM does not know the quantization method {quantization}",
         fix="Pass a --quantization value your vLLM lists (`vllm serve --help`), or leave it out to use the "
             "checkpoint's own; a method newer than your vLLM needs an upgrade, and a platform plugin's method "
             "(vllm-ascend's `ascend`) the plugin release that registers it.",
         patterns=[r"Invalid quantization method: (?P<quantization>[\w-]+)",
                   # argparse (engine args, choices = QUANTIZATION_METHODS): the same refusal before the engine starts;
                   # Python 3.12.8+ prints the value and the choices unquoted
                   r"argument --quantization(?:/-q)?: invalid choice: '?(?P<quantization>[\w-]+)"],
         playbook="quantization", confidence=0.9),
]

# Newer wordings of "this GPU cannot run the checkpoint's quantization" (kernel pickers, scheme checks).
NO_KERNEL_PATTERNS = [
    r"Failed to find a kernel that can implement the (?P<layer>[\w ]+?) linear layer",
    r"Quantization scheme is not supported for the current GPU\. Required capability: (?P<min>\d+)",
    r"The quantization method (?P<quantization>[\w+ -]+?) is not supported for the current GPU\.",
    r"quantization config '[\w-]+' requires GPU compute capability >= (?P<min>[\d.]+)",
]


def _no_kernel_for_gpu(scan: Scan, env: dict) -> Diagnosis | None:
    """The kernel picker lists every kernel's reason on the lines after its message: when one of them is
    a weight shape (not divisible), the shape is the cause (quant.shape_unsupported), not the GPU."""
    d = NO_KERNEL_RULE.match_lines(scan)
    if d is None or "Failed to find a kernel" not in d.evidence[0].text:
        return d
    lines = scan.lines
    for i, ln in enumerate(lines):
        if ln.no == d.first_line:
            for nxt in lines[i + 1:i + 16]:
                if nxt.proc != ln.proc or "Failed to find a kernel" in nxt.text:
                    break
                if "divisible" in nxt.text:
                    return None
            break
    return d


NO_KERNEL_RULE = Rule(
    signature="quant.no_kernel_for_gpu", category="quantization",
    title="No quantized kernel of this vLLM can run the checkpoint's scheme on this GPU",
    fix="Each kernel vLLM tried refused this GPU or dtype (the reasons follow the message): on pre-Ampere GPUs "
        "try --dtype half, else use a checkpoint in a scheme this GPU supports (FP8 needs compute capability "
        "8.9+, NVFP4 needs Blackwell), or a newer GPU.",
    patterns=NO_KERNEL_PATTERNS, check=lambda scan, env: _no_kernel_for_gpu(scan, env),
    playbook="quantization", confidence=0.9)
RULES += [NO_KERNEL_RULE]

RULES += [
    Rule(signature="quant.config_file_missing", category="quantization",
         title="The checkpoint has no {quantization} quantization config file",
         fix="--quantization {quantization} was asked for, but the checkpoint carries no config for it (e.g. "
             "quantize_config.json / quant_config.json): drop --quantization to use what the checkpoint declares, "
             "or point --model at the quantized checkpoint.",
         patterns=[r"Cannot find the config file for (?P<quantization>[\w-]+)"],
         playbook="quantization", confidence=0.9),
]

# vllm/platforms/xpu.py (0.9+): bfloat16 refused on the client Arc A770 (wrong results), before the model loads
RULES += [
    Rule(signature="dtype.bf16_intel_arc", category="dtype_unsupported",
         title="bfloat16 is refused on this Intel Arc GPU (known accuracy issue)",
         fix="Launch with --dtype half (float16); bfloat16 on the Arc A770 gives wrong results, so vLLM refuses it.",
         patterns=[r"Intel Arc A770 have bfloat16 accuracy known issue"],
         playbook="dtype-unsupported", confidence=0.95),
]

# vLLM's compiled quantization kernels refusing a call from their own C++ checks
RULES += NATIVE_QUANT_RULES
