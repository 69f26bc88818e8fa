"""A parallel size checked against the devices the process sees, when it sees none.

vLLM's workers assert `local_world_size <= visible device count` (v1 gpu_worker / xpu_worker, 0.10+), and the
count is 0 when the accelerator is not available at all (torch.cuda.is_available() False, no NPU mounted):
then the launch arguments are not what is wrong, the device is missing from the process. With a count above
zero it stays a parallel size larger than the machine (engine_config).
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="environment.zero_visible_devices", category="environment",
         title="No accelerator is visible to vLLM's worker (0 visible devices)",
         fix="The process sees no GPU/NPU at all: check the driver (`nvidia-smi` / `npu-smi info`), that the devices "
             "are passed into the container (`--gpus all`, /dev/davinci* for Ascend) and that CUDA_VISIBLE_DEVICES / "
             "ASCEND_RT_VISIBLE_DEVICES does not hide them; only then compare the tensor/data parallel sizes.",
         patterns=[r"number\s+of visible devices \(0\)", r"^of visible devices \(0\)"],
         playbook="environment", confidence=0.85),
]
