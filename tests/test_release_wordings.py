"""Each common failure as every vLLM release prints it reaches the hand rule meant for it.

vLLM reworded many messages between releases (0.6 -> 0.33): a hole moved, a sentence was added, a
word was fixed ("models's" -> "model's"), an exception type changed. Each case below is the literal
source text of one release (file named) with its holes filled by plausible values, logged the way the
engine prints it, and the rule (signature prefix) or category expected to name it first.
"""

from __future__ import annotations

import pytest

from triage.diagnose import diagnose
from triage.logread import scan_text

HDR = "ERROR 07-21 09:15:43 [core.py:586] "

# (release, source file, message as raised (type included), expected signature prefix)
CASES: list[tuple[str, str, str, str]] = [
    # KV cache / max_model_len
    ("0.6.6", "vllm/worker/cache_engine.py",
     "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in KV "
     "cache (20016). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
     "kv_cache.max_len_exceeds_capacity"),
    ("0.8.5", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (9.34 GiB). Try increasing `gpu_memory_utilization` or "
     "decreasing `max_model_len` when initializing the engine.",
     "kv_cache.insufficient_for_max_len"),
    ("0.10.2", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (9.34 GiB). Based on the available memory, the estimated "
     "maximum model length is 76448. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
     "initializing the engine.",
     "kv_cache.insufficient_for_max_len"),
    ("0.25.1", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: To serve at least one request with the model's max seq len (262144), (24.0 GiB KV cache is needed, "
     "which is larger than the available KV cache memory (11.71 GiB). Based on the available memory, the estimated "
     "maximum model length is 127824. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when "
     "initializing the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
     "kv_cache.insufficient_for_max_len"),
    ("0.6.6", "vllm/worker/cache_engine.py",
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine.", "kv_cache.no_memory_for_blocks"),
    ("0.16.0", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
     "kv_cache.no_memory_for_blocks"),
    ("0.33.0", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
     "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See "
     "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.",
     "kv_cache.no_memory_for_blocks"),
    # free memory below the requested share at start-up
    ("0.10.2", "vllm/v1/worker/gpu_worker.py",
     "ValueError: Free memory on device (10.5/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, "
     "71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.", "kv_cache.free_memory_below_utilization"),
    ("0.33.0", "vllm/v1/worker/utils.py",
     "ValueError: Free memory on device cuda:0 (10.5/79.19 GiB) on startup is less than desired GPU memory "
     "utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
     "kv_cache.free_memory_below_utilization"),
    # attention backend / head size
    ("0.6.6", "vllm/v1/attention/backends/flash_attn.py",
     "ValueError: Head size 72 is not supported by FlashAttention. Supported head sizes are: [32, 64, 96, 128, 160, "
     "192, 224, 256].", "@attention_backend"),
    ("0.8.5", "vllm/v1/attention/backends/flash_attn.py",
     "ValueError: Head size 72 is not supported by FlashAttention. Supported head sizes are: [32, 64, 96, 128, 160, "
     "192, 224, 256]. Set VLLM_USE_V1=0 to use another attention backend.", "@attention_backend"),
    ("0.10.2", "vllm/v1/attention/backends/flash_attn.py",
     "ValueError: Head size 72 is not supported by FlashAttentionImpl. Supported head sizes are: [32, 64, 96, 128, "
     "160, 192, 224, 256]. Set VLLM_ATTENTION_BACKEND=FLEX_ATTENTION to use FlexAttention backend which supports all "
     "head sizes.", "@attention_backend"),
    ("0.16.0", "vllm/v1/attention/backends/rocm_attn.py",
     "ValueError: Head size 72 is not supported by RocmAttentionImpl. Supported head sizes are: [32, 64, 96, 128, "
     "160, 192, 224, 256]. Set --attention-backend=FLEX_ATTENTION to use FlexAttention backend which supports all "
     "head sizes.", "@attention_backend"),
    ("0.25.1", "vllm/platforms/cuda.py",
     "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=72, dtype="
     "torch.bfloat16, kv_cache_dtype=auto, block_size=16, use_mla=False, has_sink=False, use_sparse=False). Reasons: "
     "{FLASH_ATTN: [head_size not supported], FLASHINFER: [head_size not supported]}.", "@attention_backend"),
    ("0.33.0", "vllm/platforms/rocm.py",
     "ValueError: No valid attention backend found for rocm with AttentionSelectorConfig(head_size=576, dtype="
     "torch.bfloat16, kv_cache_dtype=fp8, block_size=1, use_mla=True, has_sink=False, use_sparse=True). Reasons: "
     "{ROCM_AITER_MLA_SPARSE: [kv_cache_dtype not supported]}. Try --kv-cache-dtype auto.", "@attention_backend"),
    # tensor parallel divisibility
    ("0.6.6", "vllm/config.py",
     "ValueError: Total number of attention heads (14) must be divisible by tensor parallel size (4).",
     "@engine_config"),
    ("0.33.0", "vllm/config/model.py",
     "ValueError: Total number of attention heads (14) must be divisible by tensor parallel size (4).",
     "@engine_config"),
    # unsupported architecture
    ("0.6.6", "vllm/model_executor/models/registry.py",
     "ValueError: Model architectures ['Qwen3ForCausalLM'] are not supported for now. Supported architectures: "
     "dict_keys(['AquilaModel', 'LlamaForCausalLM'])", "@model_support"),
    ("0.33.0", "vllm/model_executor/models/registry.py",
     "ValueError: Model architectures ['FooForCausalLM'] are not supported for now. Supported architectures: "
     "dict_keys(['AquilaModel', 'LlamaForCausalLM'])", "@model_support"),
    # bf16 on a pre-Ampere GPU
    ("0.6.6", "vllm/v1/worker/gpu_worker.py",
     "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: "
     "--dtype=half.", "dtype.bf16_before_ampere"),
    ("0.33.0", "vllm/platforms/cuda.py",
     "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has "
     "compute capability 7.5. You can use float16 instead by explicitly setting the `dtype` flag in CLI, for "
     "example: --dtype=half.", "dtype.bf16_before_ampere"),
    # quantization minimum capability
    ("0.6.6", "vllm/config.py",
     "ValueError: The quantization method fp8 is not supported for the current GPU. Minimum capability: 80. "
     "Current capability: 75.", "@quantization"),
    ("0.33.0", "vllm/config/vllm.py",
     "ValueError: The quantization method compressed-tensors is not supported for the current GPU. Minimum "
     "capability: 75. Current capability: 70.", "@quantization"),
    # chat template
    ("0.6.6", "vllm/entrypoints/chat_utils.py",
     "ValueError: As of transformers v4.44, default chat template is no longer allowed, so you must provide a chat "
     "template if the tokenizer does not define one.", "tokenizer.chat_template_missing"),
    ("0.33.0", "vllm/renderers/hf.py",
     "vllm.exceptions.ChatTemplateResolutionError: As of transformers v4.44, default chat template is no longer "
     "allowed, so you must provide a chat template if the tokenizer does not define one.", "tokenizer.chat_template_missing"),
    # no device
    ("0.6.6", "vllm/config.py", "RuntimeError: Failed to infer device type", "@environment"),
    ("0.33.0", "vllm/config/device.py",
     "RuntimeError: Failed to infer device type, please set the environment variable `VLLM_LOGGING_LEVEL=DEBUG` to "
     "turn on verbose logging to help debug the issue.", "@environment"),
    # speculative config
    ("0.6.6", "vllm/config.py",
     "ValueError: num_speculative_tokens must be provided with speculative_model unless the draft model config "
     "contains an n_predict parameter.", "@speculative_decoding"),
    ("0.16.0", "vllm/config/speculative.py",
     "ValueError: num_speculative_tokens must be provided with speculative model unless the draft model config "
     "contains an n_predict parameter.", "@speculative_decoding"),
    # the same failures, reworded in other releases (found by comparing the mined templates of every release)
    ("0.7.3", "vllm/v1/core/kv_cache_utils.py",
     "ValueError: To serve at least one request with the models's max seq len (131072), (16.00 GB KV cache is needed, "
     "which is larger than the available KV cache memory (9.34 GB). Try increasing `gpu_memory_utilization` or "
     "decreasing `max_model_len` when initializing the engine.", "kv_cache.insufficient_for_max_len"),
    ("0.33.0", "vllm/v1/worker/utils.py",
     "ValueError: Free memory on device cuda:0 (10.5/79.19 GiB) on startup is less than the engine's budget after "
     "excluding external process's weights (0.9, 60.1 GiB). Decrease GPU memory utilization or reduce GPU memory used "
     "by other processes.", "kv_cache.free_memory_below_utilization"),
    ("0.10.2", "vllm/worker/worker.py",
     "AssertionError: Error in memory profiling. Initial used memory 2147483648, currently used memory 1073741824. "
     "This happens when the GPU memory was not properly cleaned up before initializing the vLLM instance.",
     "environment.gpu_memory_changed"),
    ("0.13.0", "vllm/entrypoints/renderer.py",
     "ValueError: This model's maximum context length is 4096 tokens. However, your request has 5000 input tokens. "
     "Please reduce the length of the input messages.", "config.prompt_too_long"),
    ("0.33.0", "vllm/renderers/params.py",
     "ValueError: This model's maximum context length is 4096 tokens. However, your prompt contains 5000 input tokens, "
     "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt.",
     "config.prompt_too_long"),
    ("0.6.6", "vllm/executor/multiproc_gpu_executor.py",
     "AssertionError: please ensure that world_size (4) is less than than max local gpu count (2)",
     "config.tp_exceeds_gpus"),
    ("0.6.6", "vllm/executor/ray_gpu_executor.py",
     "ValueError: Ray accelerated DAG is not installed. Run `pip install ray[adag]` to install it.",
     "distributed.ray_missing"),
    ("0.33.0", "vllm/model_executor/layers/fused_moe/oracle/int8.py",
     "NotImplementedError: No Int8 MoE backend supports the deployment configuration (weight_key=kInt8Static, "
     "activation_key=None). Set `VLLM_LOGGING_LEVEL=DEBUG` to see per-backend unsupported reasons.",
     "quant.kernel_unsupported_gpu"),
    ("0.33.0", "vllm/model_executor/layers/fused_moe/oracle/unquantized.py",
     "NotImplementedError: No Unquantized MoE backend supports the deployment configuration.",
     "quant.kernel_unsupported_gpu"),
    ("0.21.0", "vllm/model_executor/layers/quantization/gptq.py",
     "ValueError: The output size is not aligned with the quantized weight shape. This can be caused by too large "
     "tensor parallel size.", "quant.shape_unsupported"),
    ("0.29.0", "vllm/model_executor/layers/quantization/fp8.py",
     "ValueError: The input_size of down's weight = 1408 is not divisible by weight quantization block_k = 128.",
     "quant.shape_unsupported"),
    ("0.8.5", "vllm/platforms/neuron.py",
     "NotImplementedError: Speculative decoding not yet supported for Neuron backend.", "speculative.unsupported"),
    ("0.21.0", "vllm/config/speculative.py",
     "ValueError: eagle3 is only supported for ['llama', 'qwen', 'minicpm', 'gpt_oss'] models. Got "
     "self.target_model_config.hf_text_config.model_type='gemma3'", "speculative.config_invalid"),
    ("0.30.0", "vllm/distributed/device_communicators/shm_broadcast.py",
     "RuntimeError: Insufficient space in /dev/shm: 1024 MiB required, 64 MiB free. Increase /dev/shm (e.g. "
     "--shm-size or --ipc=host).", "distributed.nccl_shm"),
    ("0.33.0", "vllm/v1/attention/backends/mla/indexer.py",
     "ValueError: indexer_kv_dtype='mxfp4' requires Blackwell datacenter GPUs (sm_10x, e.g. B200/GB200); sm_120 "
     "(consumer Blackwell) and earlier architectures are not supported.", "gpu.compute_capability_too_low"),
    ("0.33.0", "vllm/v1/attention/backends/triton_attn.py",
     "ValueError: bfloat16 KV cache is not supported on Tesla T4 (compute capability 7.5); bfloat16 requires SM80+. "
     "Re-run with --kv-cache-dtype float16.", "dtype.bf16_before_ampere"),
    ("0.33.0", "vllm/v1/attention/backends/mla/triton_mla.py",
     "ValueError: bfloat16 KV cache is not supported by the Triton MLA backend on Tesla V100-SXM2-32GB (compute "
     "capability 7.0); bfloat16 requires SM80+. Re-run with --kv-cache-dtype float16.", "dtype.bf16_before_ampere"),
    ("0.33.0", "vllm/v1/attention/backends/triton_attn.py",
     "ValueError: FP8 KV cache is not supported by the Triton attention backend on NVIDIA A100-SXM4-80GB (compute "
     "capability 8.0); native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype auto.",
     "dtype.fp8_unsupported"),
    ("0.6.6", "vllm/attention/ops/blocksparse_attention/interface.py",
     "AssertionError: Requires compute capability of 8 or above (Ampere or newer) to use Triton kernel.",
     "gpu.compute_capability_too_low"),
    ("transformers 4.57.6", "transformers/modeling_utils.py",
     "ValueError: Flash Attention 3 requires compute capability >= 9.0, but found NVIDIA A100-SXM4-80GB with compute "
     "capability 8.0.", "gpu.compute_capability_too_low"),
    ("0.12.0", "vllm/config/parallel.py",
     "ValueError: Tensor parallel size (4) cannot be larger than the number of available GPUs (2).",
     "config.tp_exceeds_gpus"),
    ("0.29.0", "vllm/model_executor/layers/quantization/fp8.py",
     "ValueError: The output_size of gate's and up's weight = 1408 is not divisible by weight quantization block_n = "
     "128.", "quant.shape_unsupported"),
    ("0.31.0", "vllm/renderers/params.py",
     "ValueError: This model's maximum context length is 4096 tokens. However, you requested 1024 output tokens and "
     "your prompt contains 3500 input tokens, for a total of 4524 tokens. Please reduce the length of the input prompt "
     "or the number of requested output tokens.", "config.prompt_too_long"),
    ("0.10.2", "vllm/utils/deep_gemm.py",
     "RuntimeError: DeepGEMM backend is not available. Please install the `deep_gemm` package to enable FP8 kernels.",
     "kernels.package_missing"),
    ("0.15.1", "vllm/model_executor/layers/quantization/utils/mxfp8_utils.py",
     "ImportError: The package `flashinfer` is required to do MX-FP8 quantization. Please install it with`pip install "
     "flashinfer`", "kernels.package_missing"),
    ("0.16.0", "vllm/parser/parser_manager.py",
     "TypeError: Error: --enable-auto-tool-choice requires tool_parser:'qwen3' which has not been registered",
     "config.tool_parser_unknown"),
    ("0.33.0", "vllm/config/parallel.py",
     "ValueError: World size (8) is larger than the number of available GPUs (4) in this node. If this is intentional "
     "and you are using:", "config.tp_exceeds_gpus"),
]


def _top(message: str):
    ds, _ = diagnose(scan_text(HDR + message + "\n"))
    return ds[0] if ds else None


@pytest.mark.parametrize("release,source,message,expected", CASES,
                         ids=[f"{c[0]}:{c[1]}:{i}" for i, c in enumerate(CASES)])
def test_release_wording_is_named(release: str, source: str, message: str, expected: str) -> None:
    d = _top(message)
    assert d is not None, f"{release} {source}: nothing named"
    if expected.startswith("@"):
        assert d.category == expected[1:], (release, source, d.signature, d.category)
    else:
        assert d.signature.startswith(expected), (release, source, d.signature, d.category)
