"""Failures particular to the machines vLLM runs on outside the data centre, from what raises them.

- Jetson (Orin, Thor) and DGX Spark (GB10) have no separate GPU memory: the GPU allocates from the system RAM.
  vLLM sizes its KV cache as --gpu-memory-utilization of "GPU memory" (all of the RAM there) and, in V0, adds
  --swap-space GiB of pinned CPU blocks, so the kernel's OOM killer ends the process right after the cache is
  allocated ("# GPU blocks: N, # CPU blocks: M" then "Killed"). On these boards a SIGKILL is the GPU memory
  budget, not some other host process: the fix is vLLM's memory flags, not more RAM.
- vLLM's CUTLASS GEMMs (scaled_mm, blockwise FP8, FP4) check the kernel's status with CUTLASS_CHECK
  (csrc/cutlass_extensions/common.hpp: TORCH_CHECK(status == kSuccess, cutlassGetStatusString(status))), so the
  RuntimeError's message is the bare status ("Error Internal", "Error Not Supported", "Error Arch Mismatch", ...),
  often quoted with its source location ("cutlass_gemm_caller.cuh:61"). It comes from a kernel that vLLM selected
  for this GPU but that fails on it (SM12.x consumer Blackwell and GB10 running a path built for another SM).
- TRL's GRPO with use_vllm talks to a separate `trl vllm-serve` process in server mode (the only mode from TRL 0.16,
  the default later); its client gives up with "The vLLM server can't be reached at <host>:<port> after <n>
  seconds. Make sure the server is running by running `trl vllm-serve`." (the async client names
  `trl vllm-serve-async`). Unsloth's notebooks run vLLM in process (fast_inference) and patch TRL for it: the
  message there means the notebook, Unsloth and TRL are from different releases.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules import environment
from triage.rules.base import Rule

# The boards whose GPU memory is the system RAM, as logs and reports name them (collect_env's GPU row "NVIDIA GB10",
# "Orin (nvgpu)", jtop's "Jetson AGX Orin", L4T releases, the dusty-nv / NVIDIA Jetson container images).
_UNIFIED = lazy(r"\b(?P<device>Jetson(?: (?:AGX|Orin|Thor|Nano|NX|Xavier))*|Orin(?: (?:NX|Nano))?|NVIDIA Thor|"
                r"NVIDIA GB10|GB10|DGX Spark|L4T)\b|dustynv/|nvidia-ai-iot/vllm|jetson-containers")


def _unified_device(scan: Scan) -> str | None:
    for ln in scan.lines:
        m = _UNIFIED.search(ln.text)
        if m:
            return m.group("device") or "Jetson"
    return None


_HOST_OOM = next(r for r in environment.RULES if r.signature == "environment.host_oom_killed")


def _unified_memory_killed(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    d = _HOST_OOM.match_lines(scan)
    if d is None:
        return None
    device = _unified_device(scan)
    if device is None:
        return None
    # the kill line the host rule found is this rule's evidence
    hits = [(ln, m) for ln in scan.lines if ln.no == d.evidence[0].line for m in [_WHOLE.search(ln.text)] if m]
    return UNIFIED_MEMORY_KILLED.diagnosis(scan, hits, facts={"device": device}) if hits else None


_WHOLE = lazy(r".+")

UNIFIED_MEMORY_KILLED = Rule(
    signature="gpu.unified_memory_killed", category="gpu_oom",
    title="Killed on a unified-memory board ({device}): vLLM's GPU memory budget is the machine's RAM",
    fix="On Jetson and DGX Spark the GPU allocates from system RAM, so --gpu-memory-utilization is a share of the "
        "whole machine and the KV cache (plus V0's --swap-space CPU blocks) starves the OS until the OOM killer "
        "ends vLLM: lower --gpu-memory-utilization (e.g. 0.5), pass --swap-space 0 on V0, and cap --max-model-len "
        "and --max-num-seqs; on Jetson also mount swap and disable ZRAM and the desktop, on GB10 drop the page cache "
        "(`sync; echo 3 | sudo tee /proc/sys/vm/drop_caches`) before starting.",
    check=_unified_memory_killed, patterns=[r"^Killed\s*$"], playbook="gpu-oom", confidence=0.8)


_CUTLASS_STATUS = (r"Error (?:Internal|Not Supported|Arch Mismatch|Misaligned Operand|Invalid Problem|Invalid Layout|"
                   r"Invalid Data Type|Workspace Null|Insufficient Driver|Memory Allocation)")
_KERNEL = lazy(r"\b(?P<kernel>Cutlass\w*(?:MM|Mm|GEMM|Gemm)\w*Kernel)\b")


def _cutlass_kernel(m: Any, line: Any, scan: Scan) -> dict[str, Any]:
    """The CUTLASS linear kernel vLLM selected ("Selected CutlassFP8ScaledMMLinearKernel for ..."), when named."""
    for ln in scan.lines:
        k = _KERNEL.search(ln.text)
        if k:
            name = k.group("kernel")
            return {"disable": f"`VLLM_DISABLED_KERNELS={name}`"}
    return {"disable": "`VLLM_DISABLED_KERNELS=<the Cutlass...Kernel named in the log's 'Selected ... for ...' line>`"}


CUTLASS_STATUS = Rule(
    signature="quant.cutlass_kernel_status", category="quantization",
    title="A CUTLASS GEMM vLLM selected for the quantized layers fails on this GPU ({status})",
    fix="vLLM's CUTLASS kernel returned a failure status for this GPU and shape (typical of SM12.x consumer "
        "Blackwell and GB10 running a path built for another SM): disable it so vLLM picks the next kernel (Triton "
        "or Marlin), {disable}, or upgrade vLLM to a release that fixed the kernel for this GPU.",
    patterns=[
        # CUTLASS_CHECK's RuntimeError: the message is the bare status string
        rf"RuntimeError: (?P<status>{_CUTLASS_STATUS})\s*$",
        # the status beside the CUTLASS source it came from (torch's "Exception raised from ... at <file>:<line>",
        # or a report quoting the two together)
        rf"cutlass\w*\.cuh?:\d+\W{{0,3}}\s*(?P<status>{_CUTLASS_STATUS})\b",
        rf"(?P<status>{_CUTLASS_STATUS})\b.{{0,80}}\bcutlass\w*\.cuh?:\d+"],
    facts=_cutlass_kernel, playbook="quantization", confidence=0.85)


_TRL_UNREACHABLE = (r"The (?:async )?vLLM server can't be reached at (?P<address>\S+) after (?P<timeout>[\d.]+) "
                    r"seconds")
_UNSLOTH = lazy(r"(?i)\bunsloth\b|fast_inference")


def _trl_server(unsloth: bool):
    def check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
        rule = TRL_UNSLOTH if unsloth else TRL_NO_SERVER
        d = rule.match_lines(scan)
        if d is None:
            return None
        seen = any(_UNSLOTH.search(ln.text) for ln in scan.lines)
        return d if seen == unsloth else None
    return check


TRL_NO_SERVER = Rule(
    signature="downstream.trl_vllm_server_unreachable", category="engine_config",
    title="TRL's trainer is in vLLM server mode but no `trl vllm-serve` answers at {address}",
    fix="With use_vllm, TRL's GRPO/online trainers talk to a separate vLLM server: start it first on GPUs the "
        "trainer does not use (`CUDA_VISIBLE_DEVICES=0 trl vllm-serve --model <model>`, same TRL release) and point "
        "vllm_server_host/vllm_server_port at it, or run vLLM inside the trainer with vllm_mode=\"colocate\" "
        "(TRL >= 0.18).",
    patterns=[_TRL_UNREACHABLE], check=_trl_server(False), playbook="engine-config", confidence=0.8)

TRL_UNSLOTH = Rule(
    signature="downstream.unsloth_trl_vllm_server", category="install_mismatch",
    title="Unsloth's run went through TRL's vLLM server client: Unsloth, its notebook and TRL are out of step",
    fix="Unsloth runs vLLM inside the trainer (fast_inference=True) and patches TRL for it; TRL reaching for a "
        "`trl vllm-serve` server means the notebook, Unsloth and TRL come from different releases: "
        "`pip install --upgrade unsloth unsloth_zoo`, take the current notebook (its pinned TRL), and restart the "
        "runtime; fast_inference=False avoids vLLM altogether (slower generation).",
    patterns=[_TRL_UNREACHABLE], check=_trl_server(True), playbook="install-mismatch", confidence=0.8)


RULES = [UNIFIED_MEMORY_KILLED, CUTLASS_STATUS, TRL_NO_SERVER, TRL_UNSLOTH]
