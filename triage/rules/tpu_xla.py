"""Google TPU: what vLLM's TPU backends (torch_xla in vLLM 0.5 .. 0.10, the tpu-inference / JAX plugin after) and
the XLA compiler under them raise.

- The device mesh. tpu-inference builds a (data, model) mesh of tensor_parallel_size devices from what JAX sees:
  JAX's mesh_utils raises "ValueError: Number of devices 4 must be >= the product of mesh_shape (1, 8)", and the
  runner's own check (tpu_runner.py _create_2d_mesh) "Insufficient devices for 2D mesh: found 1, expected 8 for mesh
  shape (1, 8)." A count below the host's chips (a v5p-8 host exposes 4 chips, each one JAX device) is a parallel
  size larger than the slice: engine_config. A count of 1 where the host has more chips, or after JAX's "A Google
  TPU may be present on this machine, but either a TPU-enabled jaxlib or libtpu is not installed. Falling back to
  cpu.", is JAX running on the CPU: the TPU is not visible to the process (environment).
- Head sizes. vLLM's Pallas backend refused head sizes that are not a multiple of 128 ("NotImplementedError: Head
  size must be a multiple of 128." in vllm/attention/backends/pallas.py 0.5 .. 0.9); the V1 ragged paged attention
  kernel compiled only for head_dim 128, and Mosaic fails to lower it for other sizes ("The last dim size is not
  128 in original base memref", Gemma 3's 256). vLLM 0.9.2+ pads head sizes on TPU (PR 19620).
- Device memory. The XLA TPU compiler and runtime report exhaustion as RESOURCE_EXHAUSTED, via torch_xla ("Bad
  StatusOr access: RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space hbm.
  Used 20.44G of 15.75G hbm.") or JAX (XlaRuntimeError; "Ran out of memory in memory space vmem"), and when a
  program cannot be loaded into what the KV cache left: "RESOURCE_EXHAUSTED: Error loading program
  'jit__multi_slice': Attempting to reserve 6.14G at the bottom of memory. That was not possible."
- Models. tpu-inference's JAX model registry raised UnsupportedArchitectureError for an architecture it had no
  implementation of (later releases log it and fall back to vLLM's PyTorch model through torchax).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

MESH_PATTERNS = [
    r"Number of devices (?P<found>\d+) must be >= the product of mesh_shape (?P<shape>\([\d, ]+\))",
    r"Insufficient devices for (?:2D )?mesh: found (?P<found>\d+), expected (?P<expected>\d+)",
]
# JAX on the CPU although the machine has a TPU (no TPU jaxlib / libtpu, or the chips held by another process)
CPU_FALLBACK_RE = lazy(r"TPU-enabled jaxlib or libtpu is not installed|Falling back to cpu|TPU platform is not "
                       r"available|Unable to initialize backend 'tpu'")
CHIPS_RE = lazy(r"\bnum_chips=(?P<chips>\d+)")
SHAPE_NUM_RE = lazy(r"\d+")


def _product(shape: str) -> int:
    n = 1
    for part in SHAPE_NUM_RE.findall(shape):
        n *= int(part)
    return n


def _mesh(scan: Scan, hidden: bool) -> Diagnosis | None:
    """The shortfall, read as a parallel size too large (hidden=False) or as a TPU JAX does not see (True)."""
    hits = list(_hits(scan))
    if not hits:
        return None
    g = hits[0][1].groupdict()
    found = int(g["found"])
    expected = int(g["expected"]) if g.get("expected") else _product(g.get("shape") or "")
    chips = None
    for ln in scan.lines:
        m = CHIPS_RE.search(ln.text)
        if m:
            chips = int(m.group("chips"))
    facts: dict[str, Any] = {"found": found, "expected": expected}
    if chips is not None:
        facts["chips"] = chips
    cpu = any(CPU_FALLBACK_RE.search(ln.text) for ln in scan.lines)
    missing = cpu or (chips is not None and found < chips) or (chips is None and found == 1)
    if missing != hidden:
        return None
    if hidden:
        return HIDDEN_RULE.diagnosis(scan, hits, facts=facts, confidence=0.85 if cpu or chips is not None else 0.7)
    return MESH_RULE.diagnosis(scan, hits, facts=facts)


def _hits(scan: Scan):
    for ln in scan.lines:
        for i in range(len(MESH_RULE.patterns)):
            m = MESH_RULE._search(i, ln.text)
            if m:
                yield ln, m
                break


MESH_RULE = Rule(
    signature="tpu.mesh_devices_short", category="engine_config",
    title="The TPU mesh needs {expected} devices but JAX sees {found}: tensor_parallel_size is larger than the slice",
    fix="tpu-inference shards the model over a mesh of tensor_parallel_size TPU devices, and this host exposes only "
        "{found} (one per chip: a v5p-8 or v6e-4 host has 4, a v5e-8 / v6e-8 host 8). Set --tensor-parallel-size to "
        "the chip count (`python -c 'import jax; print(jax.device_count())'`), or run on a larger slice (multi-host "
        "slices need the Ray multi-node setup).",
    patterns=MESH_PATTERNS, check=lambda scan, env: _mesh(scan, False), playbook="engine-config", confidence=0.9)

HIDDEN_RULE = Rule(
    signature="tpu.jax_devices_missing", category="environment",
    title="JAX sees only {found} device(s) on this TPU host: the TPU is not visible to vLLM",
    fix="JAX found fewer devices than the host has TPU chips, usually because it fell back to the CPU: install the "
        "TPU build (`pip install 'jax[tpu]'` / the vllm-tpu wheel or vllm/vllm-tpu image, which bring libtpu), "
        "make sure no other process holds the chips (`sudo lsof -w /dev/accel*` / `/dev/vfio`), and on a managed "
        "notebook (Kaggle, Colab) that a TPU was actually allocated; check with "
        "`python -c 'import jax; print(jax.devices())'` before lowering --tensor-parallel-size.",
    patterns=MESH_PATTERNS, check=lambda scan, env: _mesh(scan, True), playbook="environment", confidence=0.85)

RULES = [
    MESH_RULE,
    HIDDEN_RULE,
    Rule(signature="tpu.head_size_unsupported", category="attention_backend",
         title="The TPU attention kernel does not take this model's head size (not a multiple of 128)",
         fix="vLLM's TPU attention (the Pallas backend, then the ragged paged attention kernel) ran only head sizes "
             "that are a multiple of 128 (the V1 kernel: exactly 128); this model's differs (Gemma 3: 256, Llama 3.2 "
             "1B / OPT / Phi: 64 or 96). Upgrade to a vLLM TPU release that pads head sizes (vLLM 0.9.2+, or the "
             "vllm-tpu / tpu-inference builds), or serve a model whose head_dim is 128.",
         patterns=[r"Head size must be a multiple of 128",
                   r"The last dim size is not 128 in original base memref"],
         playbook="attention-backend", confidence=0.88),
    Rule(signature="tpu.xla_resource_exhausted", category="gpu_oom",
         title="The TPU ran out of {space} memory{while_}",
         fix="{advice}",
         patterns=[r"RESOURCE_EXHAUSTED: (?:XLA:TPU compile permanent error\. )?Ran out of memory in memory space "
                   r"(?P<space>hbm|vmem|smem|cmem)\b(?:\.\s*Used (?P<used>[\d.]+[KMGT]?) of (?P<total>[\d.]+[KMGT]?))?",
                   r"RESOURCE_EXHAUSTED: Error loading program(?: '(?P<program>[^']+)')?: Attempting to reserve "
                   r"(?P<reserve>[\d.]+[KMGT]?) at the bottom of memory",
                   r"RESOURCE_EXHAUSTED: Attempting to allocate (?P<alloc>[\d.]+[KMGT]?)\. That was not possible"],
         facts=lambda m, line, scan: _oom_facts(m),
         playbook="gpu-oom", confidence=0.9),
    Rule(signature="tpu.unsupported_architecture", category="model_support",
         title="tpu-inference has no implementation of this model's architecture{arch_note}",
         fix="The TPU plugin (tpu-inference) of this release does not implement this architecture in JAX: check its "
             "supported-models list, upgrade vllm-tpu / tpu-inference (newer releases fall back to vLLM's PyTorch "
             "model through torchax; `MODEL_IMPL_TYPE=vllm` selects that path), or serve the model on GPUs.",
         # newer releases log the same error as a warning and fall back to the PyTorch model: no failure
         patterns=[r"UnsupportedArchitectureError: (?!.*Falling back)(?P<msg>Model architectures? "
                   r"(?P<arch>\[[^\]]{1,200}\]).*)",
                   # the class name retold in a report ("I got `Unsupported Architecture Error`")
                   r"\bUnsupported ?Architecture ?Error\b(?!.*Falling back)(?!: )"],
         facts=lambda m, line, scan: {"arch_note": f" ({m.group('arch')})" if m.groupdict().get("arch") else ""},
         playbook="model-support", confidence=0.8, stated=True),
]

def _oom_facts(m: re.Match[str]) -> dict[str, Any]:
    g = m.groupdict()
    if g.get("space"):
        space = g["space"]
    else:
        space = "hbm"
    used = f" (needs {g['used']} of {g['total']})" if g.get("used") else ""
    if g.get("reserve"):
        while_ = f" loading an XLA program ({g['reserve']} could not be reserved)"
    elif g.get("alloc"):
        while_ = f" allocating {g['alloc']}"
    else:
        while_ = " while compiling" + used
    if space == "hbm":
        advice = ("The TPU's HBM is full: the weights, the KV cache (sized by --gpu-memory-utilization) and the "
                  "compiled programs must fit together. Lower --gpu-memory-utilization (e.g. 0.9 -> 0.8) so programs "
                  "can load, lower --max-model-len / --max-num-seqs / --max-num-batched-tokens, or shard over more "
                  "chips (--tensor-parallel-size up to the chip count, a larger slice).")
    else:
        advice = (f"A kernel's working set exceeded the TPU core's on-chip {space.upper()} at compile time, which "
                  "grows with the sequence and batch shapes vLLM compiles for: lower --max-model-len and "
                  "--max-num-batched-tokens (e.g. 16k -> 8k context), or upgrade vLLM / tpu-inference (newer kernels "
                  "pick smaller blocks).")
    return {"space": space.upper(), "while_": while_, "advice": advice}
