"""A quantization method with no kernel for a layer, a config without architectures, Triton's Python stub dying.

What raises them, and where:
- vLLM's layers ask the checkpoint's quantization config for a method per layer (`quant_config.get_quant_method(self,
  prefix)`) and assert the answer: `assert self.quant_method is not None` in FusedMoE.__init__ (0.4+) and in the
  linear layers' __init__/forward (0.4+). A config returns None for a layer kind it has no kernel for, in practice the
  MoE experts: AWQ's get_quant_method handles LinearBase only (AWQ MoE goes through moe_wna16 on GPU, never on the CPU
  backend), GPTQ before its MoE support, an out-of-tree config. The assert is a statement that calls nothing, so a
  traceback shows it only as the line that failed.
- ModelRegistry._normalize_archs logs "No model architectures are specified" (0.6.4+) when the Hugging Face config
  has no `architectures` list, then the inspection fails on it (`for arch in architectures: TypeError: 'NoneType'
  object is not iterable`, or "Model architectures [] are not supported"): the config.json is incomplete (a custom
  export, a download cut short), not an architecture vLLM lacks.
- Triton Inference Server's Python backend (which runs vLLM in its vllm_backend) answers "Stub process '<instance>'
  is not healthy." when the stub process holding the model died without reporting an error: the container killed it
  (memory limit, /dev/shm too small for the stub's shared-memory pool), not vLLM raising. A vLLM error inside the
  model's initialize() is reported as that error instead.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="quantization.layer_quant_method_missing", category="quantization",
         title="The checkpoint's quantization method has no kernel for one of this model's layers (usually the MoE "
               "experts)",
         fix="vLLM asked the quantization config for a method for a layer and got none: the format has no MoE "
             "(FusedMoE) support in this vLLM or on this platform (AWQ MoE runs only on GPU through moe_wna16; AWQ on "
             "the CPU backend covers linear layers only). Run on a GPU with a vLLM that has the format's MoE kernels "
             "(try `--quantization moe_wna16` for AWQ/GPTQ MoE checkpoints), or use a checkpoint in a format with MoE "
             "support on this platform (unquantized, or another quantization).",
         patterns=[r"assert self\.quant_method is not None"],
         playbook="quantization", confidence=0.8),
    Rule(signature="model_loading.architectures_unspecified", category="model_loading",
         title="The model's config.json has no architectures field, so vLLM cannot pick a model class",
         fix="vLLM resolves the model class from `architectures` in config.json: check that the file downloaded "
             "completely (delete the cached snapshot and download again), or name the class yourself: "
             "`--hf-overrides '{\"architectures\": [\"<ModelClass>\"]}'` (LLM(..., hf_overrides={...}) offline), for "
             "example OPTForCausalLM for facebook/opt-125m.",
         patterns=[r"No model architectures are specified"],
         playbook="model-loading", confidence=0.85),
    Rule(signature="environment.triton_python_stub_unhealthy", category="environment",
         title="Triton's Python backend stub running vLLM died without an error (killed by its container)",
         fix="The stub process was killed rather than failing in vLLM: give the Triton container the memory and "
             "shared memory the model needs (Kubernetes/KServe: set CPU, memory and nvidia.com/gpu requests and "
             "limits; docker: `--shm-size` of a few GiB or `--ipc=host`), and check `dmesg` / the pod events for an "
             "OOM kill.",
         patterns=[r"Stub process (?:'[^']*' )?is not healthy"],
         playbook="environment", confidence=0.7),
]
