"""LoRA kernel limits, vLLM config fields a framework expects, and the sleep-mode allocator.

LoRA in vLLM runs through fixed kernels, and their limits surface as errors that name no fix:
- The CUDA punica kernels (vLLM 0.3 .. 0.5, csrc/punica/bgmv) are instantiated for a list of hidden sizes; a shape
  outside it (a tensor-parallel shard such as 13696/4 = 3424, a vocabulary above the list) fails at the first LoRA
  forward: "RuntimeError: No suitable kernel. h_in=64 h_out=3424 dtype=Float out_dtype=BFloat16". The Triton LoRA
  kernels that replaced them take any shape.
- LoRAConfig.verify_with_scheduler_config (0.3 .. 0.5): "Due to limitations of the custom LoRA CUDA kernel,
  max_num_batched_tokens must be <= 65528 when LoRA is enabled." (max_num_batched_tokens defaults to max_model_len
  when chunked prefill is off, so a 128k context trips it).
- LoRAConfig.verify_with_model_config (0.3.x): "LoRA is not supported with quantized models yet."; from 0.4 AWQ/GPTQ
  (later bitsandbytes, FP8) only warn "... quantization is not tested with LoRA yet." and go on.
- LogitsProcessorWithLoRA.create_lora_weights: "When using LoRA, vocab size must be 32000 >= vocab_size <= 33024"
  (early 2024), "... <= 128512", "... <= 257024" (mid-2024), "... must be > 32000 and <= 258048" and
  "... must be <= 258048" (2026).

Frameworks that patch vLLM's LoRA manager or worker (verl's hijack of _load_adapter, unsloth_zoo, ms-swift, TRL)
read fields of vLLM's own config classes; when the installed vLLM removed or has not yet added one, Python says
"'LoRAConfig' object has no attribute 'lora_extra_vocab_size'" (removed in vLLM 0.12). That is a framework/vLLM
version mismatch, not a transformers one: the transformers config rule (model.py) leaves these classes to this one.

Sleep mode (enable_sleep_mode) allocates weights and KV cache from a compiled memory pool:
- vllm/device_allocator/cumem.py: `assert cumem_available, "cumem allocator is not available"` when the
  vllm.cumem_allocator extension did not import (a build without it, a platform without one); vllm-ascend's
  camem.py says "camem allocator is not available" when vllm_ascend_C was built without custom kernels
  (COMPILE_CUSTOM_KERNELS unset).
- CuMemAllocator.__init__ (0.8 .. early 2026): `assert "expandable_segments:True" not in conf, "Expandable segments
  are not compatible with memory pool. Please track https://github.com/pytorch/pytorch/issues/147851 ..."`; images
  that export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (OpenRLHF's, many trainers') trip it. vLLM #40812
  turns expandable segments off around the pool instead.
"""

from __future__ import annotations

from triage.rules.base import Rule

# vLLM's own config classes (vllm/config): an attribute missing on one of these is code from another vLLM release.
VLLM_CONFIG_CLASSES = (r"(?:LoRA|Model|Cache|Parallel|Scheduler|Device|Load|Speculative|Vllm|VLLM|Pooler|Compilation"
                       r"|Observability|Decoding|StructuredOutputs|MultiModal|KVTransfer|KVEvents|PromptAdapter"
                       r"|Attention|EPLB|Kernel)Config")

RULES = [
    Rule(signature="lora.punica_no_kernel", category="engine_config",
         title="vLLM's CUDA punica LoRA kernel has no instance for this shape (h_in={h_in}, h_out={h_out})",
         fix="The punica kernels of this vLLM are compiled for a fixed list of sizes, and a tensor-parallel shard or "
             "vocabulary of {h_out} is not in it: use a --tensor-parallel-size whose per-GPU shard is supported "
             "(a smaller TP usually is), or upgrade vLLM to a release with the Triton LoRA kernels, which take any "
             "shape.",
         patterns=[r"No suitable kernel\. h_in=(?P<h_in>\d+) h_out=(?P<h_out>\d+)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="lora.batched_tokens_limit", category="engine_config",
         title="LoRA's CUDA kernel in this vLLM takes at most {limit} batched tokens",
         fix="With LoRA enabled this vLLM needs max_num_batched_tokens <= {limit}; without chunked prefill it "
             "defaults to max_model_len, so a long-context model trips it: pass `--max-model-len` (or "
             "`--max-num-batched-tokens`) of {limit} or less, or upgrade vLLM to a release with the Triton LoRA "
             "kernels, which have no such limit.",
         patterns=[r"Due to limitations of the custom LoRA CUDA kernel, max_num_batched_tokens must be <= "
                   r"(?P<limit>\d+) when LoRA is enabled"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="lora.vocab_size_limit", category="engine_config",
         title="LoRA in this vLLM supports vocabularies up to {limit} tokens, and this model's is larger",
         fix="vLLM's LoRA logits layer caps the vocabulary size ({limit} in this release; later releases raised it "
             "from 33024 to 128512, 257024 and 258048): upgrade vLLM to one whose limit covers the model's "
             "vocab_size, or merge the adapter into the base weights and serve without --enable-lora.",
         # a ticket retelling it may write "vocab size" for vocab_size
         patterns=[r"When using LoRA, vocab size must be (?:32000 >= vocab[_ ]size <= |> 32000 and <= |<= )"
                   r"(?P<limit>\d+)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="lora.quantized_base_refused", category="engine_config",
         title="This vLLM refuses LoRA on a quantized model",
         fix="vLLM 0.3.x applies LoRA only to unquantized weights: upgrade vLLM (0.4+ runs LoRA over AWQ/GPTQ, later "
             "releases over bitsandbytes and FP8 too), or merge the adapter into the full-precision model and "
             "quantize the merged checkpoint.",
         patterns=[r"LoRA is not supported with quantized models yet"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="install.vllm_config_field_missing", category="install_mismatch",
         title="Code written for another vLLM release reads {cls}.{attr}, which this vLLM does not have",
         fix="A framework that drives or patches vLLM (verl, TRL, OpenRLHF, unsloth, ms-swift) expects a different "
             "vLLM than the one installed (vLLM 0.12 removed LoRAConfig.lora_extra_vocab_size, for example): install "
             "the vLLM version that framework pins (`pip show` it for the range), or upgrade the framework to a "
             "release that supports this vLLM.",
         patterns=[r"'(?P<cls>" + VLLM_CONFIG_CLASSES + r")' object has no attribute '(?P<attr>\w+)'"],
         playbook="install-mismatch", confidence=0.85),
    Rule(signature="sleep.expandable_segments", category="engine_config",
         title="Sleep mode's memory pool refuses PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
         fix="vLLM's sleep-mode allocator (CuMemAllocator) cannot share the process with PyTorch's expandable "
             "segments: remove expandable_segments:True from PYTORCH_CUDA_ALLOC_CONF (and PYTORCH_ALLOC_CONF) for "
             "the vLLM processes (the image's ENV, the Ray runtime_env, the launcher's exports), or start vLLM "
             "without sleep mode; newer vLLM (#40812) switches it off around the pool itself.",
         patterns=[r"Expandable segments are not compatible with memory pool",
                   r"assert ['\"]expandable_segments:True['\"] not in conf"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="sleep.allocator_unavailable", category="install_mismatch",
         title="vLLM's sleep-mode allocator ({which}) is missing from this installation",
         fix="Sleep mode needs vLLM's compiled memory-pool extension. On Ascend reinstall vllm-ascend with its "
             "custom kernels (`COMPILE_CUSTOM_KERNELS=1 pip install -e .` in the vllm-ascend checkout); on CUDA "
             "install an official vLLM wheel and check `python -c 'import vllm.cumem_allocator'` (a source build "
             "without it, or a platform without one, has no sleep mode); or start without enable_sleep_mode.",
         patterns=[r"(?P<which>c[au]mem) allocator is not available"],
         playbook="install-mismatch", confidence=0.85),
]

# LoRAConfig.verify_with_model_config (0.4+) warns, and goes on, for a quantization LoRA was not tested with: the
# start-up continues, so the warning is no failure.
HARMLESS = [
    Rule(signature="harmless.lora_quantization_untested", category="", harmless=True,
         title="vLLM notes that this quantization is not tested with LoRA (it runs; harmless)",
         fix="", patterns=[r"\w+ quantization is not tested with LoRA yet"]),
]

RULES += HARMLESS
