"""Out of device memory said by a library other than torch's CUDA allocator.

- NCCL checks every CUDA call it makes (CUDACHECK / CUCHECK in src/include/checks.h) and, when one fails, logs
  "Cuda failure '<cudaGetErrorString>'" (NCCL <= 2.18) or "Cuda failure <code> '<string>'" (2.19+) and returns
  ncclUnhandledCudaError; torch re-raises that as "NCCL error ... unhandled cuda error" with NCCL's last error
  below it ("Last error:\\nCuda failure 'out of memory'"). The NCCL error is the messenger: a communicator
  (its buffers, a collective's workspace) could not get GPU memory, so the GPU is full.
- torch_npu (Ascend, vllm-ascend) words its caching allocator's failure "NPU out of memory. Tried to allocate
  2.00 GiB (NPU 0; 60.96 GiB total capacity; ...)", with no "CUDA" anywhere.

Both are the GPU/NPU running out of memory (gpu_oom), with the same remedies as CUDA's own message.
"""

from __future__ import annotations

from triage.rules.base import Rule
from triage.rules.memory import _oom_facts

RULES = [
    Rule(signature="oom.nccl_cuda_out_of_memory", category="gpu_oom",
         title="GPU out of memory inside NCCL (its CUDA call failed with 'out of memory'){phase_suffix}",
         fix="NCCL could not allocate GPU memory for its buffers: the GPU was already full. {advice}",
         patterns=[r"Cuda failure (?:\d+ )?'out of memory'"],
         facts=_oom_facts, playbook="gpu-oom", confidence=0.9),
    Rule(signature="oom.npu_out_of_memory", category="gpu_oom",
         title="The NPU ran out of memory{phase_suffix}",
         fix="{advice} On Ascend, PYTORCH_NPU_ALLOC_CONF=expandable_segments:True also reduces fragmentation.",
         patterns=[r"NPU out of memory\.(?: Tried to allocate (?P<tried>[\d.]+ [KMG]iB) \(NPU (?P<gpu_index>\d+); "
                   r"(?P<total>[\d.]+ [KMG]iB) total capacity)?"],
         facts=_oom_facts, playbook="gpu-oom", confidence=0.9),
]
