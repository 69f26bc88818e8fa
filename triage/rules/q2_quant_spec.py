"""Quantized-kernel capability gates, the V0 speculative-decoding worker seen from outside, a cut dtype check.

- vLLM's mixed-precision kernel picker (model_executor/layers/quantization/kernels/mixed_precision, 0.6+) asks each
  kernel whether it can take the layer and prints every kernel's reason after "Failed to find a kernel that can
  implement the WNA16 linear layer". The capability reasons are the kernels' own gates ("CUTLASS W4A8 requires
  compute capability of 90 (Hopper)", "Machete requires compute capability of 90", "AllSpark currently does not
  support device_capability = 100", the scaled-mm kernels' "requires capability 90, got 89"): a checkpoint scheme
  with no kernel on this GPU generation, not a GPU too old for vLLM. A paste often keeps only those reasons, or a
  user's table of them.
- V0's speculative decoding (vllm/spec_decode, 0.4-0.10) wraps the GPU worker in SpecDecodeWorker (its scorer and
  proposer workers: MultiStepWorker, NGramWorker, MedusaWorker, MLPSpeculatorWorker, SmallerTpProposerWorker,
  TP1DraftModelRunner). A framework that reaches into `driver_worker.model_runner` for weight sync (verl, OpenRLHF,
  TRL) finds the wrapper there: "'SpecDecodeWorker' object has no attribute 'model_runner'".
- vLLM's dtype check before the model loads (worker.py `_check_if_gpu_supports_dtype` 0.2-0.10,
  `Platform.check_if_supports_dtype` since) raises for one reason only, bfloat16 the GPU cannot run (below
  compute capability 8.0 on CUDA/ROCm, the Arc A770 on XPU): a traceback cut inside it still says which.
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# -- mixed-precision kernel capability gates ---------------------------------------------------------------------
KERNEL_GATE = Rule(
    signature="quant.kernel_capability_gate", category="quantization",
    title="No quantized kernel of this vLLM takes the checkpoint's scheme on this GPU ({kernel}: {gate})",
    fix="vLLM's quantized linear kernels gate on the GPU generation: W4A8 (CUTLASS W4A8) and Machete run on Hopper "
        "(SM90) only, AllSpark on Ampere; on another GPU no kernel is left for this checkpoint's scheme. Use a "
        "checkpoint in a scheme this GPU has a kernel for (W4A16 / GPTQ / AWQ through Marlin on Ampere and newer, "
        "FP8 on SM89+, NVFP4 on Blackwell), or run this one on the GPU generation it was made for.",
    patterns=[
        # the picker's own line: "<Kernel> cannot implement due to: <reason>", or a user's table of them
        r"(?P<kernel>\w+LinearKernel)\b.{0,80}?(?P<gate>[Rr]equires (?:compute )?capability (?:of )?(?P<min>\d+)"
        r"|does not support device_capability = (?P<cc>\d+))",
        # the reason alone
        r"(?P<kernel>CUTLASS W4A8|Machete) (?P<gate>requires compute capability of (?P<min>\d+))",
        r"(?P<kernel>AllSpark) currently (?P<gate>does not support device_capability = (?P<cc>\d+))",
    ],
    playbook="quantization", confidence=0.88, check=lambda scan, env: _kernel_gate(scan))


def _kernel_gate(scan: Scan) -> Diagnosis | None:
    """The reasons read alone: where the picker's own message is in the paste, quant.no_kernel_for_gpu reads the
    whole list; where one reason is a weight shape (not divisible), the shape is the cause (quant.shape_unsupported)."""
    joined = scan.joined_text()
    if "Failed to find a kernel" in joined or "is not divisible by" in joined:
        return None
    return KERNEL_GATE.match_lines(scan)

# -- the V0 spec-decode wrapper seen by a framework --------------------------------------------------------------
SPEC_WRAPPERS = ("SpecDecodeWorker|MultiStepWorker|NGramWorker|MedusaWorker|MLPSpeculatorWorker|"
                 "SmallerTpProposerWorker|TP1DraftModelRunner")
SPEC_WRAPPER_ATTR = Rule(
    signature="speculative.worker_wrapper_attribute", category="speculative_decoding",
    title="With speculative decoding vLLM's worker is a {cls}, which has no '{attr}'",
    fix="Speculative decoding in vLLM's V0 engine wraps the GPU worker in SpecDecodeWorker (a scorer and a proposer "
        "worker), so code that reaches into the plain worker (`driver_worker.model_runner`, as RL frameworks' weight "
        "sync does) finds no '{attr}' there. Leave speculative_config out of that framework's vLLM engine, or use a "
        "framework release that supports speculative decoding for its rollout with the vLLM version it pins.",
    patterns=[rf"'(?P<cls>{SPEC_WRAPPERS})' object has no attribute '(?P<attr>\w+)'"],
    playbook="speculative-decoding", confidence=0.8)

# -- a traceback cut inside vLLM's dtype check -------------------------------------------------------------------
DTYPE_CHECK_FRAME_RE = lazy(r'File "(?P<file>[^"]*vllm[^"]*\.py)", line \d+, in '
                            r"(?P<func>_check_if_gpu_supports_dtype|check_if_supports_dtype)\b")
# the worker's call into it, when the paste ends on that source line
DTYPE_CHECK_CALL_RE = lazy(r"^\s*(?:current_platform\.)?(?P<func>_check_if_gpu_supports_dtype|check_if_supports_dtype)"
                           r"\(self\.model_config\.dtype\)\s*$")
FOLLOW = 6  # lines after the frame where its own source line, or the exception it raised, would be printed


def _cut_dtype_check(scan: Scan, env: dict) -> Diagnosis | None:
    lines = scan.lines
    last = [x for x in lines if x.text.strip()][-1:]
    for i, ln in enumerate(lines):
        m = DTYPE_CHECK_FRAME_RE.search(ln.text)
        if m is None:
            m = DTYPE_CHECK_CALL_RE.match(ln.text) if last and ln is last[0] else None
            if m is None or any(e.line.no > ln.no for e in scan.exceptions):
                continue
        after = [x for x in lines[i + 1:i + 1 + FOLLOW] if x.proc == ln.proc and x.text.strip()]
        # a deeper frame: the check only passed through here
        if any('File "' in x.text for x in after[:2]):
            continue
        # the exception it raised is in the paste: the message rules read it
        if any(e.line.proc == ln.proc and ln.no < e.line.no <= ln.no + FOLLOW for e in scan.exceptions):
            continue
        raised = next((x for x in after[:2] if x.text.strip().startswith("raise ")), None)
        ev = [Evidence(ln.no, ln.shown)] + ([Evidence(raised.no, raised.shown)] if raised else [])
        return Diagnosis(
            category="dtype_unsupported", signature="dtype.cut_in_dtype_check",
            title=f"The GPU refused the model's dtype (the traceback is cut in vLLM's {m.group('func')}); "
                  "the message itself is cut off",
            confidence=0.6, evidence=ev,
            facts={"function": m.group("func"),
                   "file": (m.groupdict().get("file") or "the worker's call").rsplit("/vllm/", 1)[-1],
                   "category_guessed_from": "the vLLM function the traceback is cut in"},
            fix=Fix("vLLM's dtype check raises only for bfloat16 on a GPU that cannot run it (compute capability "
                    "below 8.0: V100, T4, RTX 20xx; the Arc A770 on XPU): launch with --dtype half (float16), or "
                    "use an Ampere or newer GPU.", "dtype-unsupported"),
            first_line=ln.no)
    return None


CUT_DTYPE_CHECK = Rule(
    signature="dtype.cut_in_dtype_check", category="dtype_unsupported",
    title="The GPU refused the model's dtype (traceback cut in vLLM's dtype check)", fix="",
    check=_cut_dtype_check, playbook="dtype-unsupported", confidence=0.6)

RULES = [KERNEL_GATE, SPEC_WRAPPER_ATTR, CUT_DTYPE_CHECK]
