"""Intel XPU collectives, and what the out-of-tree and non-CUDA platforms refuse by name (quantization, models).

- Intel GPUs communicate through oneCCL (torch's ProcessGroupXCCL, backend=xccl). vLLM's XPU worker warms the
  communicator up with an all_reduce in init_device (worker/xpu_worker.py, v1/worker/xpu_worker.py), before 0.27's
  fix (PR 52389) even with one GPU, and the KV-cache memory probe is the first collective of a TP run. oneCCL's
  failures come as "RuntimeError: oneCCL: ze_fd_manager.cpp:214 fill_device_fds: EXCEPTION: open failed: fd: -1,
  errno: No such file or directory" (the container lacks /dev/dri/by-path), "oneCCL: ze_call.cpp:28 do_call:
  EXCEPTION: ze error at zeMemOpenIpcHandle, code: ZE_RESULT_ERROR_INVALID_ARGUMENT" (IPC between two Arc GPUs),
  "|CCL_ERROR| exchange_utils.cpp:202 sendmsg_fd: ... errno: Broken pipe", or a segfault inside
  ccl_comm::allreduce_impl after "|CCL_WARN| failed to get PCI device" (WSL2, where oneCCL cannot see the PCI
  topology).
- Platforms list the quantization methods they implement (Platform.supported_quantization); ModelConfig then
  raises "ValueError: <method> quantization is currently not supported in <device>." (platforms/interface.py
  verify_quantization, 0.6 .. today; config.py in 0.2 .. 0.5 for ROCm only): tpu, xpu, cpu, hpu, npu, neuron and
  ROCm each have their own list. Threads retell it as "mxfp4 is not currently supported on gaudi3".
- The Neuron backend (vllm/model_executor/model_loader/neuron.py, 0.4 .. 0.9) served only the architectures
  transformers-neuronx implements: "Model architectures ['OPTForCausalLM'] are not supported on Neuron for now.
  Supported architectures: ['LlamaForCausalLM', 'MistralForCausalLM']".
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

CCL_PATTERNS = [
    r"oneCCL: (?P<where>\w+\.cpp:\d+) (?P<fn>\w+):(?: EX(?:CEPTION)?(?:: (?P<what>.{1,200}))?)?",
    r"\|CCL_ERROR\| (?P<where>\w+\.cpp:\d+) (?P<fn>\w+): (?P<what>.{1,200})",
    r"zeMemOpenIpcHandle\W{1,4}(?:code: )?(?P<what>ZE_RESULT_ERROR_\w+)",
]
# a crash inside oneCCL: its frames under a segfault report, or its warning that it cannot see the PCI topology
CCL_FRAME_RE = lazy(r"\bccl_comm::\w+|ProcessGroupXCCL::\w+|\|CCL_WARN\| failed to get PCI device")
SEGFAULT_RE = lazy(r"Segfault encountered|Segmentation fault|SIGSEGV")


def _ccl(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    rule = CCL_RULE
    d = rule.match_lines(scan)
    if d is not None:
        return d
    if not any(SEGFAULT_RE.search(ln.text) for ln in scan.lines):
        return None
    hits = [(ln, m) for ln in scan.lines if (m := CCL_FRAME_RE.search(ln.text))]
    if not hits:
        return None
    return rule.diagnosis(scan, hits[:6], facts={"what": "a segmentation fault inside oneCCL"}, confidence=0.8)


def _ccl_advice(m: Any, line: Any, scan: Scan) -> dict[str, Any]:
    text = line.text
    g = m.groupdict()
    what = g.get("what") or (f"{g['fn']} at {g['where']}" if g.get("fn") else "error")
    if "fd_manager" in text or "init_device_fds" in text or "opendir" in text:
        hint = ("oneCCL opens the GPUs through /dev/dri/by-path, which a container started with only "
                "`--device /dev/dri` lacks: add `-v /dev/dri/by-path:/dev/dri/by-path` (or run with --privileged).")
    elif "IpcHandle" in text or "ipc" in text.lower():
        hint = ("The GPUs cannot open each other's memory (Level Zero IPC): try `CCL_ZE_IPC_EXCHANGE=sockets` (or "
                "pidfd), `CCL_TOPO_P2P_ACCESS=0`, and a newer kernel, GPU driver and vLLM/llm-scaler image; with "
                "one GPU, run with --tensor-parallel-size 1.")
    else:
        hint = ("Check that every GPU is visible in the process (`sycl-ls`, `xpu-smi discovery`), that the oneCCL "
                "of the image matches its torch-xpu, and, with one GPU (or under WSL2, where oneCCL cannot read the "
                "PCI topology), upgrade vLLM: releases from 0.27 skip the oneCCL warm-up when world_size is 1.")
    return {"what": what.strip(), "hint": hint}


CCL_RULE = Rule(
    signature="distributed.xpu_oneccl", category="distributed",
    title="oneCCL (Intel GPU collectives) failed: {what}",
    fix="vLLM's XPU workers talk through oneCCL (init_device's warm-up all_reduce, the KV-cache memory probe). {hint}",
    patterns=CCL_PATTERNS, check=_ccl, facts=_ccl_advice, playbook="distributed", confidence=0.88)

RULES = [
    CCL_RULE,
    Rule(signature="quant.platform_unsupported", category="quantization",
         title="{quant} quantization is not available on {platform}",
         fix="This platform's vLLM backend does not implement {quant} (each platform lists its own methods): use a "
             "checkpoint in a format the platform supports (an unquantized/BF16 model, or the platform's own "
             "format: INC/FP8 on Gaudi, GPTQ/AWQ int4 on XPU, W8A8/int8 on TPU and CPU), or a newer release of the "
             "platform plugin if it adds {quant}.",
         patterns=[r"(?P<quant>[\w-]+) quantization is currently not supported in (?P<platform>[\w-]{2,20})",
                   # a thread retelling it ("mxfp4 is not currently supported on gaudi3")
                   r"(?i)\b(?P<quant>mxfp[468]|nvfp4|fp8|fp4|awq|gptq|bitsandbytes|gguf|int[48])(?: quantization)? is "
                   r"(?:currently )?not (?:currently |yet )?supported (?:on|in|for) (?P<platform>gaudi ?\d?|hpu|tpu|xpu|"
                   r"cpu|npu|neuron|ascend|intel gpus?|arc\b[\w ]{0,12})"],
         playbook="quantization", confidence=0.88),
    Rule(signature="model_support.neuron_architecture", category="model_support",
         title="The Neuron backend does not serve {arch}",
         fix="vLLM's Neuron backend of this release runs only the architectures transformers-neuronx / "
             "neuronx-distributed-inference implement ({supported}): serve one of those, or move to the vllm-neuron "
             "plugin and a Neuron SDK release that lists this model.",
         patterns=[r"Model architectures? (?P<arch>\[[^\]]{1,200}\]) (?:are|is) not supported on Neuron(?: for now)?\."
                   r"(?:\s*Supported architectures: (?P<supported>\[[^\]]{0,300}\]))?"],
         facts=lambda m, line, scan: {"supported": m.group("supported") or "see the release's list"},
         playbook="model-support", confidence=0.9),
]
