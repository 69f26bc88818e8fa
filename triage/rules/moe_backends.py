"""MoE kernels and backends: a forced --moe-backend a quantization has no kernel for, a quantized MoE scheme no
MoE method serves, the Triton MXFP4 kernels missing, FlashInfer's CUTLASS fused MoE on a GPU it has no build for.

- Each quantization's MoE "oracle" (fused_moe/oracle/{fp8,nvfp4,mxfp4,unquantized}.py, 0.2x) maps the user's
  --moe-backend onto its own backends and refuses the others: "moe_backend='emulation' is not supported for FP8 MoE.
  Expected one of ['triton', 'deep_gemm', ...]." ("NvFP4 MoE", "unquantized MoE", ...). The flag is global, so a
  checkpoint mixing NVFP4 and FP8/BF16 experts (an MTP layer, a BF16 tail) trips it for the other format. The older
  env-var form: "Unknown flashinfer moe backend: X expected one of ['throughput', 'latency']" (modelopt.py, 0.10).
- compressed-tensors / quark / auto-round pick a MoE method per scheme and raise "Unsupported FusedMoe scheme:
  <weights>, <activations>" (or the bare words) when none matches: the release has no MoE kernel for it (W4A8-FP8
  came in 0.1x), while the dense layers of the same checkpoint load. The fused Marlin MoE method of 0.8.x refused
  routing features: "Apply router weight on input is not supported forfused Marlin MoE method." (Qwen3 MoE
  GPTQ/AWQ), "Expert Parallelism is not supported for fused Marlin MoE method."
- gpt-oss's MXFP4 Triton backend imports OpenAI's triton_kernels at import time and only logs a failure ("Failed to
  import Triton kernels. Please make sure your triton version is compatible. Error: ...", at ERROR, 0.10 ..
  0.1x; later builds vendor the package and say "triton_kernels unavailable in this build" at INFO): every model
  prints it, and for any other model it is harmless. It is the failure only when the run is the MXFP4 / gpt-oss
  path and the server did not come up after.
- FlashInfer builds its CUTLASS fused MoE module per SM family (fused_moe/core.py get_cutlass_fused_moe_module):
  SM90/100/103/110/120/121, later SM89; any other GPU gets "ValueError: Invalid backend: 80".
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.install import unless_started_after

MOE_BACKEND_REFUSED = Rule(
    signature="moe.backend_not_for_quant", category="engine_config",
    title="--moe-backend {backend} has no kernel for {quant} MoE layers",
    fix="The MoE backend forced with --moe-backend (or VLLM_FLASHINFER_MOE_BACKEND) is not one the {quant} MoE "
        "layers can use; valid there: {allowed}. Drop the flag and let vLLM choose (auto), or pick one of those. "
        "--moe-backend applies to every MoE layer, so a checkpoint mixing formats (NVFP4 experts with an FP8 MTP "
        "layer or BF16 layers) needs a backend all of them accept, or auto.",
    patterns=[r"moe_backend='(?P<backend>[\w.-]+)' is not supported for (?P<quant>[\w-]+(?: [\w-]+)?) MoE\. "
              r"Expected one of (?P<allowed>\[[^\]]*\])",
              r"Unknown flashinfer moe backend: (?P<backend>[\w.-]+) expected one of (?P<allowed>\[[^\]]*\])"],
    playbook="engine-config", confidence=0.88)

MOE_SCHEME_UNSUPPORTED = Rule(
    signature="moe.quant_scheme_unsupported", category="quantization",
    title="This vLLM has no MoE kernel for the checkpoint's quantization ({what})",
    fix="The experts are quantized in a scheme (or need a routing feature) this vLLM's fused MoE methods do not "
        "implement, though the dense layers load: upgrade vLLM (MoE support for W4A8, int8 and FP4-A16 schemes and "
        "for Qwen3-MoE routing in Marlin arrived in later releases), or use a checkpoint whose experts are in a "
        "scheme this release serves (W4A16, FP8, NVFP4).",
    patterns=[r"Unsupported FusedMoe scheme(?::\s*(?P<what>[^\n]{1,160}))?",
              r"(?P<what>(?:Apply router weight on input|Expert Parallelism|Activation \w+)) (?:is|are) not supported "
              # (0.8.x glued two string literals: "not supported forfused Marlin MoE method.")
              r"for ?(?:the )?fused Marlin MoE method"],
    playbook="quantization", confidence=0.85)

# the MXFP4 / gpt-oss path is what needs the kernels: said on some line other than the import failure's own
_TRITON_KERNELS_FAILED_RE = lazy(r"Failed to import Triton kernels")
_MXFP4_PATH_RE = lazy(r"gpt-oss|gpt_oss|GptOss|[Mm][Xx][Ff][Pp]4|OAITriton")


def _triton_kernels_for_mxfp4(scan: Scan) -> Diagnosis | None:
    d = unless_started_after(TRITON_KERNELS_MISSING, scan)
    if d is None:
        return None
    if not any(_MXFP4_PATH_RE.search(ln.text) and not _TRITON_KERNELS_FAILED_RE.search(ln.text)
               for ln in scan.lines):
        return None
    return d


TRITON_KERNELS_MISSING: Rule = Rule(
    signature="moe.triton_kernels_unavailable", category="kernel_library",
    title="gpt-oss's MXFP4 Triton MoE kernels (triton_kernels) could not be imported",
    fix="vLLM's MXFP4 Triton MoE backend needs OpenAI's triton_kernels from the same Triton release as the installed "
        "triton (its internals move between releases: triton_kernels.routing, triton.language.target_info). Install "
        "the triton / triton_kernels pair this vLLM release was built with (a clean `pip install vllm`, or the release's "
        "Docker image; later vLLM vendors triton_kernels), do not upgrade triton afterwards, or pick another MXFP4 MoE "
        "backend (e.g. --moe-backend marlin where available).",
    patterns=[r"Failed to import Triton kernels"],
    check=lambda scan, env: _triton_kernels_for_mxfp4(scan),
    # logged at import by every model; another failure in the same log is the likelier cause
    secondary=True, playbook="kernel-library", confidence=0.6)

def _triton_kernels_in_passing(scan: Scan) -> Diagnosis | None:
    if _triton_kernels_for_mxfp4(scan) is not None:
        return None
    return TRITON_KERNELS_IN_PASSING.match_lines(scan)


# the same import failure where nothing needed the kernels: said, so that it is not read as the failure
TRITON_KERNELS_IN_PASSING: Rule = Rule(
    signature="harmless.triton_kernels_import", category="", harmless=True,
    title="vLLM could not import gpt-oss's Triton MoE kernels (triton_kernels); only the MXFP4 path needs them",
    fix="", patterns=[r"Failed to import Triton kernels"],
    check=lambda scan, env: _triton_kernels_in_passing(scan))

_FUSED_MOE_CONTEXT_RE = lazy(r"fused_moe|cutlass_fused_moe|FusedMoE")


def _flashinfer_moe_arch(scan: Scan) -> Diagnosis | None:
    d = FLASHINFER_MOE_ARCH.match_lines(scan)
    if d is None or not any(_FUSED_MOE_CONTEXT_RE.search(ln.text) for ln in scan.lines):
        return None
    return d


FLASHINFER_MOE_ARCH: Rule = Rule(
    signature="moe.flashinfer_cutlass_moe_arch", category="unsupported_gpu",
    title="FlashInfer's CUTLASS fused MoE has no build for this GPU (sm_{sm})",
    fix="FlashInfer's CUTLASS fused MoE is compiled only for Hopper and Blackwell (SM90, SM100/103/110, SM120/121; "
        "newer releases also SM89), so it cannot run on sm_{sm}: use another MoE implementation (in vLLM unset "
        "VLLM_USE_FLASHINFER_MOE_* and use --moe-backend triton or marlin; in other frameworks their eager/Triton "
        "MoE path), or a supported GPU.",
    patterns=[r"ValueError: Invalid backend: (?P<sm>[5-9]\d|1[0-2]\d)\s*$"],
    check=lambda scan, env: _flashinfer_moe_arch(scan),
    playbook="unsupported-gpu", confidence=0.85)

RULES = [MOE_BACKEND_REFUSED, MOE_SCHEME_UNSUPPORTED, TRITON_KERNELS_MISSING, TRITON_KERNELS_IN_PASSING,
         FLASHINFER_MOE_ARCH]
