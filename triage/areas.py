"""Which failure category a place in the code stands for: module paths (of vLLM and of the libraries
that fail its launches) to categories, with keyword overrides for modules that hold several kinds.

One map serves a traceback's frames (the fallback's guess, a traceback cut before its message) and
the catalogue of mined messages (the module a message is raised in). Reviewed by hand against the
templates that occur most in real threads; the first matching fragment wins, so the more specific
path comes first.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy

# (fragment of a file path, category). Frames give absolute paths (".../site-packages/vllm/...");
# the catalogue gives package-relative ones ("vllm/..."); both contain these fragments.
AREAS: list[tuple[str, str]] = [
    # Python's own user lookup (getpass.getuser -> pwd.getpwuid): a process whose uid has no passwd entry
    # (a container run as an arbitrary uid) fails in whatever called it (torch's, Triton's cache dirs)
    ("/getpass.py", "environment"),
    ("/pynvml.py", "environment"),  # the NVML bindings: the driver library and the devices it sees
    ("/pynvml/", "environment"),
    ("/amdsmi/", "environment"),
    ("vllm/spec_decode/", "speculative_decoding"),
    ("vllm/v1/spec_decode/", "speculative_decoding"),
    ("/spec_decode/", "speculative_decoding"),  # vllm/v1/worker/gpu/spec_decode/ (0.2x's model runner)
    ("vllm/config/speculative.py", "speculative_decoding"),
    ("vllm/model_executor/models/eagle", "speculative_decoding"),
    ("vllm/model_executor/models/medusa", "speculative_decoding"),
    ("vllm/model_executor/models/mlp_speculator", "speculative_decoding"),
    ("_mtp.py", "speculative_decoding"),
    ("/mtp.py", "speculative_decoding"),  # vllm/models/<model>/<vendor>/mtp.py
    ("mtp_validation.py", "speculative_decoding"),
    ("vllm/transformers_utils/configs/speculators", "speculative_decoding"),
    ("/fused_moe/oracle/", "quantization"),  # picks the quantized MoE kernel: a refusal there is a quant gap
    # vendored kernels (FlashAttention 4, Blackwell FMHA, linear-attention and MoE Triton kernels)
    ("vllm/third_party/pynvml.py", "environment"),
    ("vllm/third_party/", "kernel_library"),
    ("vllm/model_executor/warmup/", "kernel_library"),  # JIT warm-up of kernel libraries
    ("vllm/model_executor/kernels/", "kernel_library"),
    ("vllm/kernels/", "kernel_library"),
    ("vllm/_aiter_ops.py", "kernel_library"),  # ROCm's AITER kernels
    ("vllm/_ipex_ops.py", "kernel_library"),  # Intel's kernels (IPEX, XPU), TileLang's, CuTe helpers
    ("vllm/_xpu_ops.py", "kernel_library"),
    ("vllm/_tilelang_ops.py", "kernel_library"),
    ("vllm/cute_utils/", "kernel_library"),
    ("vllm/tilelang_utils/", "kernel_library"),
    # linear-attention and Mamba kernels (Triton), beside the same vendored under third_party/
    ("vllm/model_executor/layers/fla/ops/", "kernel_library"),
    ("vllm/model_executor/layers/mamba/ops/", "kernel_library"),
    ("vllm/model_executor/layers/lightning_attn.py", "kernel_library"),
    ("vllm/model_executor/layers/sparse_attn_indexer.py", "attention_backend"),
    ("vllm/attention/", "attention_backend"),
    ("vllm/v1/attention/", "attention_backend"),
    ("vllm/model_executor/layers/attention/", "attention_backend"),
    ("vllm/model_executor/layers/quantization/", "quantization"),
    ("vllm/config/quantization", "quantization"),
    ("/quantization/", "quantization"),
    ("transformers/utils/quantization_config.py", "quantization"),
    ("transformers/quantizers/", "quantization"),
    # transformers' integrations: each wraps one outside library, which says what a failure there is
    *[(f"transformers/integrations/{m}", "quantization") for m in (
        "aqlm", "awq", "bitnet", "bitsandbytes", "compressed_tensors", "eetq", "fbgemm_fp8", "finegrained_fp8",
        "fp_quant", "higgs", "hqq", "metal_quantization", "mxfp4", "nvfp4", "quanto", "spqr", "torchao", "vptq")],
    *[(f"transformers/integrations/{m}", "kernel_library") for m in (
        "flash_attention", "flash_paged", "npu_flash_attention", "hub_kernels", "deepgemm", "sonicmoe", "liger")],
    ("transformers/integrations/accelerate.py", "model_loading"),  # device maps, offloading, meta-device loading
    ("transformers/integrations/peft.py", "engine_config"),  # adapters, as vLLM's own LoRA code
    ("transformers/integrations/mistral/", "tokenizer_chat_template"),
    ("transformers/integrations/tiktoken.py", "tokenizer_chat_template"),
    ("compressed_tensors/", "quantization"),
    ("vllm/model_executor/model_loader/", "model_loading"),
    ("vllm/transformers_utils/tokenizer", "tokenizer_chat_template"),
    ("vllm/transformers_utils/chat_templates", "tokenizer_chat_template"),
    ("vllm/tokenizers/", "tokenizer_chat_template"),
    ("vllm/entrypoints/chat_utils.py", "tokenizer_chat_template"),
    ("vllm/renderers/", "tokenizer_chat_template"),
    ("transformers/tokenization_", "tokenizer_chat_template"),
    ("transformers/models/auto/tokenization_auto.py", "tokenizer_chat_template"),
    ("tokenizers/", "tokenizer_chat_template"),
    ("mistral_common", "tokenizer_chat_template"),
    ("jinja2", "tokenizer_chat_template"),
    # the models' own input processors (images, audio, video into the model's inputs): the model's support
    ("vllm/transformers_utils/processors/", "model_support"),
    ("vllm/transformers_utils/config.py", "model_loading"),  # config files: missing, unreadable, wrong format
    ("vllm/transformers_utils/configs/", "model_support"),
    ("vllm/transformers_utils/", "model_loading"),
    ("gguf", "model_loading"),
    ("safetensors", "model_loading"),
    # the hf CLI's own argument checks: how it was called, not what it fetched
    ("huggingface_hub/cli/", "engine_config"),
    ("huggingface_hub/commands/", "engine_config"),
    ("huggingface_hub", "model_loading"),
    ("transformers/utils/hub.py", "model_loading"),
    ("transformers/modeling_utils.py", "model_loading"),
    ("torch/serialization.py", "model_loading"),
    ("transformers/configuration_utils.py", "model_support"),
    ("transformers/models/auto/", "model_support"),
    ("transformers/dynamic_module_utils.py", "model_support"),
    ("transformers/utils/import_utils.py", "install_mismatch"),
    # the connector factories look a --kv-transfer-config / --ec-transfer-config name up: an unknown or
    # renamed connector is a launch setting, not the transfer itself
    ("vllm/distributed/kv_transfer/kv_connector/factory.py", "engine_config"),
    ("vllm/distributed/ec_transfer/ec_connector/factory.py", "engine_config"),
    ("vllm/distributed/", "distributed"),
    ("vllm/utils/nccl.py", "distributed"),  # finding and loading libnccl (0.2x)
    ("vllm/executor/ray", "distributed"),
    ("vllm/v1/executor/ray", "distributed"),
    ("vllm/executor/multiproc", "distributed"),
    ("vllm/v1/executor/multiproc", "distributed"),
    ("multiproc_worker_utils", "distributed"),
    ("torch/distributed/checkpoint/", "model_loading"),  # distributed checkpoints: reading and writing weights
    ("torch/distributed", "distributed"),
    ("torch/multiprocessing", "distributed"),
    ("ray/", "distributed"),
    # KV-transfer engines of disaggregated serving (NIXL, Mooncake): networking between instances
    ("nixl/", "distributed"),
    ("nixl_cu12/", "distributed"),
    ("nixl_cu13/", "distributed"),
    ("mooncake/", "distributed"),
    ("lmcache/", "distributed"),  # LMCache's connector moves KV blocks between instances and tiers
    # structured-output (guided decoding) backends: a grammar or schema the request or launch asked for
    ("xgrammar/", "engine_config"),
    ("outlines/", "engine_config"),
    ("outlines_core/", "engine_config"),
    ("lm_format_enforcer/", "engine_config"),
    ("llguidance/", "engine_config"),
    ("multiprocessing/", "distributed"),
    ("vllm/compilation/cuda_graph", "cudagraph_capture"),
    ("cuda_graph", "cudagraph_capture"),
    ("cudagraph", "cudagraph_capture"),
    ("torch/cuda/graphs.py", "cudagraph_capture"),
    ("flashinfer", "kernel_library"),
    ("flash_attn", "kernel_library"),
    ("deep_gemm", "kernel_library"),
    ("flashmla", "kernel_library"),
    ("vllm/_custom_ops.py", "install_mismatch"),  # vllm._C ops: missing when the build does not match
    ("vllm/model_executor/layers/fused_moe/", "kernel_library"),
    ("torch/utils/cpp_extension.py", "kernel_library"),  # a JIT build of a kernel extension
    ("triton/", "triton_compile"),
    ("torch/_inductor", "triton_compile"),
    ("torch/_dynamo", "triton_compile"),
    ("vllm/compilation/", "triton_compile"),
    ("vllm/triton_utils/", "triton_compile"),
    ("vllm/v1/core/kv_cache", "kv_cache_memory"),
    ("kv_cache_utils", "kv_cache_memory"),
    ("vllm/core/block", "kv_cache_memory"),
    ("vllm/v1/kv_cache_interface.py", "kv_cache_memory"),
    ("kv_cache_manager", "kv_cache_memory"),
    ("vllm/v1/kv_offload/", "kv_cache_memory"),
    ("vllm/v1/simple_kv_offload/", "kv_cache_memory"),
    ("vllm/v1/core/block_pool.py", "kv_cache_memory"),
    ("vllm/v1/kv_cache_spec_registry.py", "kv_cache_memory"),
    ("vllm/multimodal/", "model_support"),
    # per-model packages (vllm/models/<model>/<vendor>/...): their own kernels, else model code
    ("/nvidia/ops/", "kernel_library"),
    ("/amd/ops/", "kernel_library"),
    ("/common/ops/", "kernel_library"),
    ("vllm/models/", "model_support"),
    ("vllm/model_executor/models/", "model_support"),
    ("vllm/model_executor/layers/rotary_embedding", "model_support"),
    ("transformers/", "model_support"),
    ("vllm/lora/", "engine_config"),
    ("vllm/adapter_commons/", "engine_config"),  # LoRA and prompt adapters (0.6-0.9)
    ("vllm/prompt_adapter/", "engine_config"),
    ("vllm/plugins/lora_resolvers/", "engine_config"),
    ("vllm/v1/structured_output/", "engine_config"),
    ("vllm/model_executor/guided_decoding/", "engine_config"),
    ("tool_parsers/", "engine_config"),
    ("vllm/reasoning/", "engine_config"),
    ("vllm/parser/", "engine_config"),
    ("vllm/sampling_params.py", "engine_config"),  # a request's sampling or pooling parameters
    ("vllm/pooling_params.py", "engine_config"),
    ("vllm/snapshot/", "environment"),  # process snapshots (CRIU): host tools and kernel features
    # The platform layer finds the devices (NVML, amdsmi, visible-device variables, the CPU build) and
    # imports vllm._C: most of what it raises is the host's; its capability and backend checks are said in
    # words (STRONG/WEAK, OVERRIDES) that move it on.
    ("vllm/platforms/", "environment"),
    ("vllm/utils/network_utils.py", "environment"),  # ports and host addresses
    ("vllm/utils/numa_utils.py", "environment"),
    ("vllm/utils/system_utils.py", "environment"),
    ("vllm/v1/executor/vllm_net_devices.py", "distributed"),
    ("torch/cuda/", "cuda_driver"),
    ("torch/_ops.py", "install_mismatch"),
    ("torch/library.py", "install_mismatch"),
    ("numpy/", "install_mismatch"),
    ("vllm/config", "engine_config"),
    ("/config.py", "engine_config"),
    ("arg_utils", "engine_config"),
    ("vllm/envs.py", "engine_config"),
    ("vllm/entrypoints/", "engine_config"),
    ("vllm/engine/", "engine_config"),
    ("vllm/v1/engine/", "engine_config"),
]

# --- kern: kernel libraries' own package trees (installed packages, so the site-/dist-packages path). They
# come first: AITER keeps Triton/Gluon kernels under aiter/ops/triton/, which the generic "triton/" would
# otherwise claim; a failure inside any of these is the library's (or its kernel's), not Triton's or vLLM's.
_KERNEL_TREES = ("aiter", "xformers", "flash_mla", "tilelang", "tvm_ffi", "cutlass", "triton_kernels", "sgl_kernel",
                 "deep_ep", "flash_attn_interface")
AREAS[:0] = [(f"{site}/{lib}/", "kernel_library") for lib in _KERNEL_TREES
             for site in ("site-packages", "dist-packages")]
# --- end kern
# --- kern2: the same libraries run from a source checkout (pip install -e, PYTHONPATH=<repo>), whose path is
# <repo>/<package>/... rather than site-packages; AITER's own subpackages (its JIT loader, its op wrappers) name it
# wherever it lives.
AREAS[:0] = [(f"{lib}/{lib}/", "kernel_library") for lib in _KERNEL_TREES] + [
    ("aiter/jit/", "kernel_library"), ("aiter/ops/", "kernel_library")]
# --- end kern2

# vLLM's packages deliberately left out of the map: code that runs (or passes on) every kind of failure, so
# that a frame or message there names no subsystem (a deeper frame, the message's words or the word model
# decide instead). Every vLLM module the catalogue holds is either in AREAS or under one of these
# (tests/test_areas.py checks it against the mined releases).
UNPLACED: tuple[str, ...] = (
    # the model runners and workers: they run model code, kernels, sampling and capture alike
    "vllm/worker/", "vllm/v1/worker/", "vllm/executor/", "vllm/v1/executor/", "vllm/forward_context.py",
    # model layers shared by every model (linear, embeddings, norms, poolers, samplers, MLA, Mamba, indexers):
    # what they refuse is a weight, a shape, a kernel or a setting of any kind
    "vllm/model_executor/layers/", "vllm/model_executor/custom_op.py", "vllm/model_executor/hw_agnostic/",
    "vllm/model_executor/parameter.py", "vllm/model_executor/utils.py", "vllm/model_executor/determinism/",
    "vllm/model_executor/offloader/", "vllm/ir/", "vllm/scalar_type.py",
    # scheduling, requests, inputs and outputs: prompts, tokens and multimodal data of every kind pass here
    "vllm/core/", "vllm/v1/core/", "vllm/inputs/", "vllm/sequence.py", "vllm/outputs.py", "vllm/v1/outputs.py",
    "vllm/v1/request.py", "vllm/logits_process.py", "vllm/logprobs.py", "vllm/v1/sample/", "vllm/v1/pool/",
    "vllm/v1/hisparse/", "vllm/v1/watermarking/", "vllm/connections.py",
    # helpers and plumbing (utilities, memory allocators, plugins' loader, serialisation, the CLI's entry)
    "vllm/utils.py", "vllm/utils/", "vllm/v1/utils.py", "vllm/v1/serial_utils.py", "vllm/device_allocator/",
    "vllm/plugins/", "vllm/env_override.py", "vllm/__init__.py", "vllm/scripts.py", "vllm/grpc/",
    "vllm/v1/fault_tolerance/",
    # observability and assets: they log, they do not fail a launch
    "vllm/logger.py", "vllm/logging_utils/", "vllm/tracing.py", "vllm/tracing/", "vllm/profiler/", "vllm/usage/",
    "vllm/v1/metrics/", "vllm/v1/stats/", "vllm/version.py", "vllm/collect_env.py", "vllm/assets/",
)

# Exception types that name their subsystem whatever module raised them.
TYPE_AREAS: dict[str, str] = {
    "OutOfMemoryError": "gpu_oom",
    "DistBackendError": "distributed",
    "DistNetworkError": "distributed",
    "DistStoreError": "distributed",
    "RayActorError": "distributed",
    "ActorDiedError": "distributed",
    "RaySystemError": "distributed",
    "OutOfResources": "triton_compile",
    "CompilationError": "triton_compile",
    "PTXASError": "triton_compile",
    "InductorError": "triton_compile",
    "BackendCompilerFailed": "triton_compile",
    "TemplateError": "tokenizer_chat_template",
    "TemplateSyntaxError": "tokenizer_chat_template",
    "UndefinedError": "tokenizer_chat_template",
    "SafetensorError": "model_loading",
    "GatedRepoError": "model_loading",
    "RepositoryNotFoundError": "model_loading",
    "RevisionNotFoundError": "model_loading",
    "EntryNotFoundError": "model_loading",
    "LocalEntryNotFoundError": "model_loading",
    "HFValidationError": "model_loading",
    "NVMLError_LibraryNotFound": "environment",
    "NVMLError_DriverNotLoaded": "environment",
    "ModuleNotFoundError": "install_mismatch",
    "ImportError": "install_mismatch",
}

# Words in the message that decide the category in any module (a config module checks quantization,
# speculative decoding and KV-cache sizes alike). STRONG ones win over the module; WEAK ones only
# over a module that says little (engine_config, environment, model_support, install_mismatch).
STRONG: list[tuple[tuple[str, ...], str]] = [
    (("out of memory", "OutOfMemory"), "gpu_oom"),
    (("NCCL", "Gloo", "gloo", "/dev/shm", "placement group", "Ray cluster"), "distributed"),
    (("No available memory for the cache blocks", "KV cache is needed", "num_gpu_blocks", "KV cache space",
      "larger than the maximum number of tokens that can be stored in KV cache", "cache blocks",
      "Free memory on device", "desired GPU memory utilization"), "kv_cache_memory"),
    (("forked subprocess", "start method", "bootstrapping phase"), "distributed"),
    (("Selected backend",), "attention_backend"),
    (("CUDAGraphMode",), "cudagraph_capture"),
    (("Failed to infer device type", "No CUDA GPUs are available", "Address already in use",
      "address already in use"), "environment"),
    (("no kernel image is available", "minimum capability", "minimum compute capability"), "unsupported_gpu"),
    (("Bfloat16 is only supported", "bfloat16 is only supported"), "dtype_unsupported"),
    # Triton's language front-end refusing an FP8 type the GPU lacks ("fp8e4nv data type is not supported on CUDA
    # arch < 89"): the kernel's dtype, not a compiler failure
    (("data type is not supported on CUDA arch", "not supported in this architecture. The supported fp8 dtypes"),
     "dtype_unsupported"),
    # a prompt id above the tokenizer's vocabulary: ids from another model's tokenizer or template
    (("is out of vocabulary",), "tokenizer_chat_template"),
    (("driver version is insufficient", "NVIDIA driver on your system is too old", "forward compatibility",
      "provided PTX was compiled with an unsupported toolchain"), "cuda_driver"),
    (("operation not permitted when stream is capturing", "stream is capturing"), "cudagraph_capture"),
    (("attention backend", "Attention backend"), "attention_backend"),
    (("chat template", "chat_template"), "tokenizer_chat_template"),
    (("speculative", "Speculative", "draft model", "num_speculative_tokens"), "speculative_decoding"),
    (("CUDA graph capture", "cudagraph capture", "capturing CUDA graph", "Capturing CUDA graph"), "cudagraph_capture"),
    (("quantization", "Quantization", "quant_method", "BitsAndBytes", "bitsandbytes"), "quantization"),
    # the model loader's architecture lookup: the model is not one this vLLM implements
    # (the Neuron/TPU loaders' "Model architectures [...] are not supported on Neuron for now. Supported architectures:")
    (("has no vLLM implementation", "are not supported for now", "Supported architectures:"), "model_support"),
    # two options that only work as a pair: a launch setting whatever module checks it
    (("must be set together", "must be configured together", "configured together", "must be specified together"),
     "engine_config"),
    # a feature vLLM has only on some platforms, asked for on another (a CPU, XPU or TPU build)
    (("only CUDA is supported", "requires a CUDA-capable platform", "supported on CUDA and ROCm platforms",
      "requires CUDA or ROCm", "only available on CUDA platforms", "is only supported for CUDA"), "unsupported_gpu"),
]
# A module that checks several kinds of things, and the words that say which one a message is:
# (fragment of the module's path, words, category); before the module's own area.
OVERRIDES: list[tuple[str, tuple[str, ...], str]] = [
    # ensure_divisibility: heads, layers or sizes that tensor/pipeline parallelism cannot split evenly
    ("vllm/distributed/utils.py", ("is not divisible by",), "engine_config"),
]
# The platform layer (environment code): its import of vllm._C and its device-capability and backend checks
OVERRIDES += [
    ("vllm/platforms/", ("vllm._C", "package was not found", "requires intel_extension_for_pytorch"),
     "install_mismatch"),
    ("vllm/platforms/", ("GCN arch", "ROCm architecture", "is only supported on gfx"), "unsupported_gpu"),
    ("vllm/platforms/", ("torch distributed backend",), "distributed"),
    # a graph mode the platform's kernels cannot be captured in (XPU, HPU graphs as CUDA graphs)
    ("vllm/platforms/", ("cudagraph", "CUDA graph", "XPU graphs", "HPU graphs", "graph mode"), "cudagraph_capture"),
    ("vllm/platforms/", ("backend", "MLA", "Sparse Attention", "vit attention", "Flash Attention", "FlashAttention"),
     "attention_backend"),
]
# --- mcfg: loader code inside the models package ---
OVERRIDES += [
    # AutoWeightsLoader (models/utils.py) maps checkpoint tensors onto the parameters vLLM built: what it refuses is
    # a weight that does not fit (a name, a nesting, a tied weight missing), not the model's support
    ("vllm/model_executor/models/utils.py", ("weight", "parameter", "checkpoint"), "model_loading"),
]
# --- end mcfg ---
# The chat front-end parses a request's messages: its per-request count of images, audio or video is the
# --limit-mm-per-prompt setting ("At most 1 image(s) may be provided in one request."), not the template's.
OVERRIDES += [
    ("vllm/entrypoints/chat_utils.py", ("may be provided in one",), "engine_config"),
]
WEAK: list[tuple[tuple[str, ...], str]] = [
    (("quantized",), "quantization"),
    (("tokenizer", "Tokenizer"), "tokenizer_chat_template"),
    (("compute capability", "Compute capability"), "unsupported_gpu"),
    (("bfloat16", "Bfloat16", "BF16 is not supported"), "dtype_unsupported"),
    (("max_model_len", "max_num_batched_tokens", "gpu_memory_utilization"), "engine_config"),
    (("architectures", "Architecture", "model type", "model_type", "trust_remote_code"), "model_support"),
    (("safetensors", "checkpoint", "weights", "config.json"), "model_loading"),
    (("FlashInfer", "flashinfer", "DeepGEMM", "deep_gemm", "FlashAttention", "flash_attn"), "kernel_library"),
    (("triton", "Triton"), "triton_compile"),
    (("CUDA driver", "cuda driver"), "cuda_driver"),
]
VAGUE = {"engine_config", "environment", "model_support", "install_mismatch"}

# A message that says a package is missing or too old: the install's, unless it names a kernel library (its own
# category) or the module is one whose missing packages are its own subject (a quantization method, a tokenizer).
INSTALL_WORDS = ("pip install", "not installed", "to be installed", "Please install",
                 "please install", "Install with", "install it")
# --enable-eplb with a loader, kernel or backend that cannot rearrange experts: the launch's combination of settings
EPLB_RE = lazy(r"\bEPLB\b.*(?:not (?:yet )?supported|only supports?)|(?:does not|doesn't|not yet|cannot) (?:yet )?"
               r"support EPLB|only supported with EPLB")
KERNEL_NAMES = ("FlashInfer", "flashinfer", "DeepGEMM", "deep_gemm", "DeepEP", "deep_ep", "FlashAttention",
                "flash_attn", "Flash Attention", "flash-attn", "FlashMLA", "flash_mla")
# a kernel library named with its absence or its version
KERNEL_MISSING = INSTALL_WORDS + ("to install", "not found", "not available", "too old", "is not built", "newer version",
                                  ">= ")
INSTALL_OVER = VAGUE | {"model_loading", "distributed", "kv_cache_memory"}
# Kernel code (MoE experts, a model's own ops, kernel libraries) checks its inputs' formats: the quantized ones
# (scales, FP8/FP4 weights) are a quantization gap; a plain dtype it requires is the model's --dtype, which the
# attention backends check as well (`requires bfloat16`, `supports only FP16/BF16`).
KERNEL_CODE = {"kernel_library", "model_support"}
QUANT_WORDS = ("fp8", "FP8", "float8", "fp4", "FP4", "NVFP4", "nvfp4", "MXFP4", "mxfp4", "MXFP8", "mxfp8",
               "e4m3", "E4M3", "e8m0", "E8M0", "w8a8", "W8A8", "w4a16", "W4A16", "w8a16", "blockscale", "_scale",
               " scales", "quant")
DTYPE_RE = lazy(r"(?=.*(?:require|support|needs? to be|must (?:already )?be|expected to be|[Pp]lease use))"
                r".*(?:bfloat16|\bbf16|BF16|float16|\bfp16|FP16|float32|\bfp32|FP32|half precision)")
DTYPE_OVER = KERNEL_CODE | {"attention_backend", "distributed"}
# A module that loads weights, decodes media or moves KV blocks checks the options it was given
# (--model-loader-extra-config, --media-io-kwargs, a connector's or offloader's config): a named option that
# must be of some type or range is a launch setting, not the loading or the transfer.
SETTING_MODULES = ("vllm/model_executor/model_loader/", "vllm/multimodal/", "vllm/v1/kv_offload/",
                   "vllm/v1/simple_kv_offload/", "vllm/distributed/kv_transfer/", "vllm/distributed/ec_transfer/",
                   "vllm/distributed/weight_transfer/")
SETTING_RE = lazy(r"(?:\b[a-z][a-z0-9]*_[a-z0-9_]+|\b(?:size|threads|count|limit))(?: \([^)]*\))? must be "
                  r"(?:a |an )?(?:bool|dict|str\b|string|list|positive|non-negative|integer|int\b|float|provided|"
                  r"specified|set\b|>=|<=|>|<|at least|at most|between|one of|greater|less)")
# a connector's or offloader's own config module: what it refuses is the config it was given
SETTING_WORDS = ("must be", "requires", "Unsupported", "unsupported", "Invalid", "invalid", "expected")
CONFIG_MODULE_RE = lazy(r"/(?:config|configs?/[\w/]+)\.py$|_config\.py$")


# A fragment that names a folder from a package on ("ray/") must start a path component ("xarray/").
_ANCHORED = [("/" + f if "/" in f and not f.startswith(("/", "_")) else f, c) for f, c in AREAS]


# Ray ships a job's own code to its workers under its session folder ("/tmp/ray/session_<id>/runtime_resources/
# working_dir_files/_ray_pkg_<hash>/trinity/..."): that path is the job's package, not Ray's code.
RAY_SHIPPED_RE = lazy(r"^.*/runtime_resources/(?:working_dir_files|py_modules_files)/[^/]+/")


def _norm(path: str) -> str:
    return RAY_SHIPPED_RE.sub("/", "/" + path.replace("\\", "/").lstrip("/"))


def area_of(path: str) -> str | None:
    p = _norm(path)
    for frag, cat in _ANCHORED:
        if frag in p:
            return cat
    return None


def by_words(message: str, current: str | None) -> str | None:
    # a kernel library missing or too old, whatever else it names (`Requires DeepEP >= 2.0 and NCCL >= 2.30`)
    if any(n in message for n in KERNEL_NAMES) and any(n in message for n in KERNEL_MISSING):
        return "kernel_library"
    for needles, cat in STRONG:
        if any(n in message for n in needles):
            return cat
    if EPLB_RE.search(message):
        return "engine_config"
    if (current is None or current in INSTALL_OVER) and any(n in message for n in INSTALL_WORDS):
        return "install_mismatch"
    if current in KERNEL_CODE and any(n in message for n in QUANT_WORDS):
        return "quantization"
    if current in DTYPE_OVER and DTYPE_RE.search(message):
        return "dtype_unsupported"
    if current is None or current in VAGUE:
        for needles, cat in WEAK:
            if any(n in message for n in needles):
                return cat
    return current


def category_for(module: str, message: str, exc_type: str = "") -> str | None:
    """The category of a message raised (or logged) in `module`; None when neither says."""
    short = exc_type.rsplit(".", 1)[-1]
    typed = TYPE_AREAS.get(short)
    if typed is not None and typed not in VAGUE:
        return typed
    # "ImportError: ... install flashinfer" is a kernel library missing: words may refine a vague type
    if typed is None:
        p = "/" + module.replace("\\", "/").lstrip("/")
        for frag, needles, cat in OVERRIDES:
            if frag in p and any(n in message for n in needles):
                return cat
        if any(f in p for f in SETTING_MODULES) and (SETTING_RE.search(message) or (
                CONFIG_MODULE_RE.search(p) and any(w in message for w in SETTING_WORDS))):
            return "engine_config"
    return by_words(message, typed or area_of(module))


# Frames that say nothing about what failed: they pass every failure through (the CLI, import
# machinery, process and RPC plumbing, the engine's run loops, call helpers). A traceback's category
# comes from the innermost frame that is not one of these.
PASS_THROUGH = (
    "<frozen ", "/importlib/", "/runpy.py", "/argparse.py", "/threading.py", "/contextlib.py", "/functools.py",
    "/concurrent/futures/", "/asyncio/", "/uvloop/", "/multiprocessing/", "/site-packages/click/",
    "/vllm/entrypoints/cli/", "/vllm/scripts.py", "/bin/vllm", "/main.py", "/vllm/entrypoints/openai/api_server.py",
    "/vllm/entrypoints/llm.py", "/vllm/entrypoints/utils.py",
    "/vllm/v1/executor/multiproc_executor.py", "/vllm/executor/multiproc_worker_utils.py",
    "/vllm/executor/multiproc_executor.py", "/vllm/v1/executor/abstract.py", "/vllm/executor/executor_base.py",
    "/vllm/executor/uniproc_executor.py", "/vllm/v1/executor/uniproc_executor.py", "/vllm/executor/ray_utils.py",
    "/vllm/v1/executor/ray_utils.py", "/vllm/worker/worker_base.py", "/vllm/v1/worker/worker_base.py",
    "/vllm/v1/engine/core.py", "/vllm/v1/engine/core_client.py", "/vllm/v1/engine/async_llm.py",
    "/vllm/v1/engine/llm_engine.py", "/vllm/v1/engine/utils.py", "/vllm/engine/multiprocessing/",
    "/vllm/engine/async_llm_engine.py", "/vllm/utils.py", "/vllm/utils/__init__.py", "/vllm/v1/serial_utils.py",
    "/vllm/v1/utils.py", "/torch/utils/_contextlib.py", "/torch/nn/modules/module.py",
    # the call into a compiled op: what fails there is the op's own check, not the install
    "/torch/_ops.py", "/vllm/_custom_ops.py",
    "/ray/_private/worker.py", "/ray/_private/auto_init_hook.py", "/ray/_private/client_mode_hook.py",
    "/ray/_private/function_manager.py", "/ray/util/tracing/",
)
# --- down: frameworks that drive vLLM (RL/fine-tuning trainers, eval harnesses, serving stacks) only pass its
# failure up to their own caller; their folders named "ray/" are their Ray plumbing, not Ray's code
PASS_THROUGH += (  # type: ignore[assignment]
    "/verl/single_controller/", "/verl/trainer/", "/verl/workers/", "/openrlhf/trainer/", "/openrlhf/cli/",
    "/trl/trainer/", "/trl/scripts/", "/trl/extras/", "/lm_eval/", "/lmms_eval/", "/lighteval/", "/opencompass/",
    "/llamafactory/", "/unsloth/", "/unsloth_zoo/", "/swift/", "/nemo_rl/", "/skyrl_train/", "/areal/",
    "/hydra/", "/omegaconf/", "/ray/serve/", "/ray/llm/", "/kserve/", "/huggingfaceserver/", "/ray/_raylet",
    "/transformers/trainer.py", "/accelerate/",
)
# --- end down


def pass_through(path: str) -> bool:
    p = _norm(path)
    return any(frag in p for frag in PASS_THROUGH) or p.endswith(("/vllm", "/__main__.py"))


def informative(files: list[str]) -> list[str]:
    """The frames that may say where a failure lies, innermost last."""
    return [f for f in files if not pass_through(f)]


def area_of_frames(files: list[str]) -> tuple[str, str] | None:
    """(category, file) from the innermost frame the map knows, skipping frames that only pass the
    failure through."""
    for f in reversed(informative(files)):
        cat = area_of(f)
        if cat is not None:
            return cat, f
    return None


def area_of_trace(frames: list[Any]) -> tuple[str, str] | None:
    """area_of_frames for a traceback's frames (objects with .file and .func), except an import chain: when the
    innermost frame runs a module's top level ("<module>"), the traceback is the chain of imports that led to
    a failing import, and the packages doing the importing (the CLI, the engine arguments, the attention
    package) say nothing about what failed."""
    if not frames or frames[-1].func == "<module>":
        return None
    return area_of_frames([f.file for f in frames])


# C++ libraries log in glog's form ("E0911 06:19:37.204734  3746 rdma_transport.cpp:426] RdmaTransport: No available
# RNIC"; Ray's "[2025-... E 322780 345750] raylet_client.cc:199: " is read by logread): the source file names the
# library, whose subsystem a line that says only "Failed to open device" does not.
GLOG_RE = lazy(r"^\s*[DIWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ (?P<src>[\w./-]+\.(?:cc|cpp|cxx|c|h)):\d+\]")
NATIVE_SOURCES: list[tuple[tuple[str, ...], str]] = [
    # Mooncake's transfer engine and transports, NIXL and UCX, Ray's core (raylet, GCS, core worker, object
    # store), gRPC under them, torch's c10d stores and process groups: moving data between processes and nodes
    (("rdma_", "transfer_engine", "tcp_transport", "nvlink_transport", "topology.cpp", "nixl", "ucx", "raylet",
      "gcs_", "core_worker", "node_manager", "object_manager", "plasma", "grpc", "TCPStore", "ProcessGroup",
      "socket.cpp", "c10d"), "distributed"),
    (("nvml",), "environment"),
]


def area_of_native(text: str, src: str = "") -> tuple[str, str] | None:
    """(category, source file) for a C++ library's log line (glog's form, or a logger's source already read),
    when the file belongs to a library of one subsystem; else None."""
    m = GLOG_RE.match(text)
    name = m.group("src") if m is not None else src.split(":", 1)[0]
    if not name.endswith((".cc", ".cpp", ".cxx", ".c", ".h")):
        return None
    base = name.rsplit("/", 1)[-1]
    for needles, cat in NATIVE_SOURCES:
        if any(n in base for n in needles):
            return cat, base
    return None


# top-level package -> category (what its absence or breakage means for a vLLM launch)
PACKAGES: dict[str, str] = {}
for _names, _cat in [
    (("flashinfer", "flash_attn", "vllm_flash_attn", "deep_gemm", "deep_ep", "flash_mla", "flashmla", "xformers",
      "triton_kernels", "sgl_kernel", "causal_conv1d", "mamba_ssm", "fla", "cutlass", "cuda", "cupy", "pplx_kernels",
      "nvshmem", "aiter", "apex", "liger_kernel", "fused_moe", "tilelang", "cute", "cutlass_library",
      "flashinfer_cubin", "flashinfer_jit_cache"), "kernel_library"),
    (("bitsandbytes", "gptqmodel", "auto_gptq", "awq", "autoawq", "optimum", "compressed_tensors", "modelopt",
      "quark", "llmcompressor", "hqq", "torchao", "gguf_kernels", "marlin", "exllamav2"), "quantization"),
    (("transformers", "accelerate", "timm", "open_clip", "qwen_vl_utils", "einops", "librosa", "soundfile",
      "decord", "av", "torchaudio", "PIL", "cv2"), "model_support"),
    (("tokenizers", "sentencepiece", "tiktoken", "mistral_common", "jinja2", "blobfile"), "tokenizer_chat_template"),
    (("huggingface_hub", "safetensors", "gguf", "hf_transfer", "hf_xet", "modelscope", "runai_model_streamer",
      "tensorizer", "fastsafetensors"), "model_loading"),
    (("ray", "nixl", "mooncake", "ucx", "torch_npu"), "distributed"),
    # LMCache is installed beside vLLM for its KV connector, pinned to vLLM's version: one that does not
    # import is the install (a missing package, or one built for another vLLM)
    (("lmcache", "lmcache_vllm"), "install_mismatch"),
    (("triton",), "triton_compile"),
    (("vllm", "torch", "torchvision", "numpy", "numba", "pydantic", "fastapi", "uvloop", "msgspec", "zmq",
      "cv", "xgrammar", "outlines", "lm_format_enforcer", "llguidance", "openai", "setuptools",
      "pkg_resources", "_C", "_moe_C"), "install_mismatch"),
]:
    for _n in _names:
        PACKAGES[_n] = _cat
