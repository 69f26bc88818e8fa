"""What an exception's type and message words say about the failing subsystem, when no rule knows it.

Used by the fallback diagnosis only (triage.diagnose): a module that cannot be imported names the
package that is missing or broken, and a handful of words ("NCCL", "out of memory", "quantization")
name a subsystem outright. When nothing here decides, the fallback says the failure is unrecognised
rather than guess with confidence.
"""

from __future__ import annotations

import re

from triage.areas import PACKAGES, area_of
from triage.lazyre import lazy

# "No module named 'flashinfer.jit'", "cannot import name 'X' from 'transformers.models.y' (...)",
# "DLL load failed while importing _C", "libcudart.so.12: cannot open shared object file"
IMPORTED_RE = lazy(r"No module named '(?P<a>[\w.]+)'|cannot import name '\w+' from '(?P<b>[\w.]+)'"
                   r"|while importing (?P<c>[\w.]+)|(?P<lib>lib[\w.+-]*\.so[\w.]*): cannot open shared object file",
                   needles=("No module named '", "cannot import name '", "while importing ", "cannot open shared object"))

# Words that name the subsystem whatever raised them; earlier entries win.
WORDS: list[tuple[tuple[str, ...], str]] = [
    (("invalid device ordinal",), "environment"),
    # getpass.getuser() -> pwd.getpwuid(): the process runs as a uid with no passwd entry (a container's
    # arbitrary uid), whichever library asked for the user name (torch's and Triton's cache directories)
    (("getpwuid(): uid not found", "getpwuid()"), "environment"),
    # int(CUDA_VISIBLE_DEVICES entry): a MIG or GPU UUID where the code takes device indices
    (("base 10: 'MIG-", "base 10: 'GPU-", 'base 10: "MIG-', 'base 10: "GPU-'), "environment"),
    # Messages that say more than the generic words after them ("CUDA error: ...", "compute capability",
    # "NVIDIA driver"), in the categories the hand rules give them: CUDA's refusal inside a graph capture,
    # HIP's kernel missing for this GPU, PTX newer than the driver, torch finding no driver at all (no GPU in
    # the container), vLLM's bfloat16 check on a pre-Ampere GPU.
    (("operation not permitted when stream is capturing", "cudaErrorStreamCaptureUnsupported",
      "cudaErrorStreamCaptureInvalidated"), "cudagraph_capture"),
    (("invalid device function", "hipErrorNoBinaryForGpu"), "unsupported_gpu"),
    (("provided PTX was compiled with an unsupported toolchain", "cudaErrorUnsupportedPtxVersion"), "cuda_driver"),
    (("Found no NVIDIA driver on your system",), "environment"),
    (("Bfloat16 is only supported on GPUs", "bfloat16 is only supported on GPUs"), "dtype_unsupported"),
    # a compiled extension that does not link against what is installed (Linux ld.so, macOS dyld), even
    # a kernel library's own: built against another torch
    (("undefined symbol", "Symbol not found", "symbol lookup error"), "install_mismatch"),
    # the kernel's OOM killer (mm/oom_kill.c: "%s: Killed process %d (%s)" after "Out of memory" or
    # "Memory cgroup out of memory") and Kubernetes' OOMKilled: host RAM, before the GPU's "out of memory"
    (("Killed process", "oom-kill", "oom_kill", "OOMKilled", "Memory cgroup out of memory"), "environment"),
    (("out of memory", "OutOfMemory", "CUBLAS_STATUS_ALLOC_FAILED"), "gpu_oom"),
    (("no kernel image", "is not compatible with the current PyTorch installation", "too old to be supported"),
     "unsupported_gpu"),
    (("CUDA driver initialization failed", "No HIP GPUs", "Too many open files", "Cannot allocate memory"),
     "environment"),
    (("Cannot assign requested address",), "distributed"),
    (("NVIDIA driver", "CUDA driver version", "driver version is insufficient", "cudaErrorInsufficientDriver",
      "forward compatibility", "NVML"), "cuda_driver"),
    (("NCCL", "nccl", "Gloo", "gloo", "ProcessGroup", "TCPStore", "c10d", "all_reduce", "Ray cluster", "placement group",
      "MASTER_ADDR", "/dev/shm",
      # a worker's bus error is shared memory it could not back (PyTorch: "This might be caused by
      # insufficient shared memory (shm)"): /dev/shm too small in a container
      "Bus error", "bus error", "SIGBUS"), "distributed"),
    (("speculative", "Speculative", "draft model", "draft_model", "EAGLE", "Eagle", "eagle", "num_speculative_tokens",
      "MTP", "Medusa", "ngram"), "speculative_decoding"),
    (("quantiz", "Quantiz", "GPTQ", "gptq", "AWQ", "awq", "FP8", "fp8", "NVFP4", "nvfp4", "MXFP4", "mxfp4",
      "bitsandbytes", "compressed-tensors", "compressed_tensors", "Marlin", "marlin", "weight_scale", "modelopt",
      "group_size",
      # vLLM's scaled-matmul kernels of quantized layers ("No compiled cutlass_scaled_mm for a compute capability")
      "cutlass_scaled_mm", "cutlass_moe_mm", "scaled_mm_azp",
      # the tensors only quantized checkpoints hold (GPTQ/AWQ, bitsandbytes, compressed-tensors, FP8)
      "g_idx", "qweight", "qzeros", "absmax", "weight_packed", "weight_zero_point", "input_scale"),
     "quantization"),
    (("chat template", "chat_template", "tokenizer", "Tokenizer", "jinja"), "tokenizer_chat_template"),
    (("KV cache", "kv cache", "kv_cache", "num_gpu_blocks", "cache blocks", "gpu_memory_utilization"), "kv_cache_memory"),
    (("attention backend", "Attention backend", "head_size", "head size", "AttentionBackend", "FLASH_ATTN", "FLASHINFER",
      "TRITON_ATTN", "FLASHMLA", "sliding window"), "attention_backend"),
    (("FlashInfer", "flashinfer", "FlashAttention", "flash_attn", "DeepGEMM", "deep_gemm", "CUTLASS", "cutlass",
      "cuBLAS", "CUBLAS", "cuDNN", "CUDNN", "illegal memory access", "device-side assert", "CUDA error",
      "nvcc", "NVCC"),
     "kernel_library"),
    (("Triton", "triton", "ptxas", "Inductor", "inductor", "torch.compile", "dynamo"), "triton_compile"),
    (("CUDA graph", "cudagraph", "CUDAGraph", "cuda_graph", "stream is capturing"), "cudagraph_capture"),
    (("compute capability", "Compute capability", "sm_"), "unsupported_gpu"),
    (("safetensors", "huggingface.co", "Repository Not Found", "401 Client Error", "404 Client Error",
      "config.json", "gguf", "GGUF", "snapshot_download", "HF_HUB_OFFLINE", "local_files_only"), "model_loading"),
    (("trust_remote_code", "not supported for now"), "model_support"),
    (("Address already in use", "address already in use", "No CUDA GPUs", "CUDA_VISIBLE_DEVICES", "Permission denied",
      "Read-only file system"), "environment"),
]
# --- mcfg: request-time refusals ---
# vLLM's OpenAI server answers a request it refuses with an error body ({"object": "error", "type":
# "BadRequestError", "code": 400}; 404 NotFoundError for a model name it does not serve): the server runs, and the
# request does not fit what it was launched with (context length, multimodal limits, sampling limits, served name).
WORDS += [
    (("'type': 'BadRequestError'", '"type": "BadRequestError"', '"type":"BadRequestError"', "'type': 'NotFoundError'",
      '"type": "NotFoundError"', '"type":"NotFoundError"', "Error code: 400 -", "Error code: 404 -"), "engine_config"),
]
# --- end mcfg ---
# Words that hint more than they decide: where in vLLM the exception was raised counts for more.
WEAK_WORDS: list[tuple[tuple[str, ...], str]] = [
    (("bfloat16", "float16", "dtype"), "dtype_unsupported"),
    (("architecture", "Architecture", "model_type", "model type"), "model_support"),
    (("checkpoint", "weights"), "model_loading"),
    (("tensor_parallel_size", "tensor parallel", "pipeline_parallel", "max_model_len", "max_num_seqs",
      "max_num_batched_tokens", "--", "argument", "LoRA", "lora"), "engine_config"),
    (("transformers",), "model_support"),
    # a model's multimodal inputs that do not fit its implementation (vLLM's input schemas, e.g.
    # utils/tensor_schema.py "pixel_values dim[2] expected 448, got 384", the processor's placeholders)
    (("pixel_values", "image_grid_thw", "image_sizes", "multimodal", "multi_modal", "multi-modal"), "model_support"),
]


# How a failure reads when nothing else says it is one (no log level, no exception type, no "error"):
# the words vLLM, its libraries and the kernel raise and log failures with ("... is not supported",
# "exceeds", "Timed out waiting", "Killed process", "undefined symbol"). A line of a pasted fragment that
# says none of them is not taken for the failure, whatever subsystem it names.
FAILURE_RE = lazy(r"\b(?:not (?:supported|available|found|enough|allowed|compatible|implemented|recognized|"
                  r"recognised|initialized)|no longer|unsupported|incompatible|mismatch(?:ed)?|invalid|"
                  r"missing|unknown|unrecognized|unexpected(?:ly)?|insufficient|exceed(?:s|ed)?|"
                  r"(?:larger|greater|smaller) than|too (?:old|new|large|small|long|many|few)|"
                  r"timed out|time(?:d)?out|killed|died|crash(?:ed)?|abort(?:ed)?|terminat(?:ed|ing)|"
                  r"segmentation fault|bus error|core dumped|out of memory|OOM(?:Killed)?|SIG(?:KILL|SEGV|BUS|ABRT)|"
                  r"denied|refused|undefined symbol|no such|could not|couldn't|can't|cannot|unable|"
                  r"illegal|corrupt(?:ed)?|exit(?:ed)? (?:with )?(?:code|status)|non-zero exit|"
                  r"does not|doesn't|is not|are not|failure|fail(?:s|ed)?|errors?|fatal|panic)\b",
                  flags=re.IGNORECASE)


def failure_words(text: str) -> list[str]:
    """The failure words of a line (FAILURE_RE), in order, each once."""
    out: list[str] = []
    for m in FAILURE_RE.finditer(text):
        w = m.group(0).lower()
        if w not in out:
            out.append(w)
    return out


# Subsystems a message's words name whatever code raised it: out of memory is out of memory in any module.
# Other words (a quantization method, a tokenizer, a kernel library) are topical: code of one subsystem
# often mentions another, so where the exception was raised counts for more.
DECISIVE = ("gpu_oom", "cuda_driver", "environment", "distributed", "unsupported_gpu", "install_mismatch")


def decisive(category: str, why: str) -> bool:
    """Whether (category, why) from category_from_words names the subsystem whatever raised it: an
    import that fails, a library's own exception type, or words of a DECISIVE subsystem."""
    return not why.startswith("its message mentions") or category in DECISIVE


IMPORT_QUOTED_RE = lazy(r"\b(?:ImportError|ModuleNotFoundError): (?:No module named|cannot import name)",
                       needles=("ImportError: ", "ModuleNotFoundError: "))
# vLLM's own packages that hold a kernel library (its FlashAttention build, vendored kernels): one that does
# not import is that library's build, not vLLM's Python code moving between releases
KERNEL_IN_VLLM_RE = lazy(r"vllm\.(?:vllm_flash_attn|third_party|cute_utils)\b")


def imported_module(message: str) -> str | None:
    """The dotted module an import error names ("flashinfer.jit", "vllm.vllm_flash_attn.layers")."""
    m = IMPORTED_RE.search(message)
    return (m.group("a") or m.group("b") or m.group("c")) if m is not None else None


def imported_package(message: str) -> str | None:
    """The top-level package (or the shared library) an import error names."""
    m = IMPORTED_RE.search(message)
    if m is None:
        return None
    if m.group("lib"):
        return m.group("lib")
    name = m.group("a") or m.group("b") or m.group("c") or ""
    return name.split(".")[0] or None


def category_from_words(exc_type: str, message: str, weak: bool = False) -> tuple[str, str] | None:
    """(category, why) when the exception's type or message words decide it, else None. `weak`: the
    words that only hint (WEAK_WORDS), for when nothing else decided."""
    if weak:
        # a call that does not fit its callee, whoever's: caller and callee were most often written for
        # different versions of one package (its "argument" is no launch argument)
        if (exc_type.endswith("TypeError") or "TypeError: " in message) and CALL_RE.search(message) is not None:
            return "install_mismatch", "a call does not fit its callee's signature (caller and callee from different versions?)"
        return _search(WEAK_WORDS, message)
    short = exc_type.rsplit(".", 1)[-1]
    # (an import error quoted in a line of prose or a title reads the same: "ImportError: cannot import ...")
    if short in ("ModuleNotFoundError", "ImportError") or "No module named" in message \
            or "cannot open shared object file" in message or IMPORT_QUOTED_RE.search(message) is not None:
        pkg = imported_package(message)
        inner = imported_module(message)
        if pkg == "vllm" and inner and KERNEL_IN_VLLM_RE.match(inner):
            return "kernel_library", f"vLLM's bundled kernel package {inner} does not import"
        if pkg:
            if pkg.startswith("lib"):
                if "cannot open shared object file: Permission denied" in message:
                    # the library is there, the process may not read it (a non-root user, a mount's mode)
                    return "environment", f"the shared library {pkg} is not readable by this user"
                if pkg.startswith(("libcuda.so", "libnvidia")):
                    return "environment", f"the NVIDIA driver library {pkg} is not visible (a container without the GPU runtime?)"
                return "install_mismatch", f"the shared library {pkg} is missing"
            if pkg == "vllm" and ("_C" in message or "_moe_C" in message or "_flashmla" in message):
                return "install_mismatch", "vLLM's compiled extension does not import"
            cat = PACKAGES.get(pkg)
            if cat:
                return cat, f"the package {pkg} does not import"
            return "install_mismatch", f"the package {pkg} does not import"
    if short == "TypeError" or "TypeError: " in message:
        call = _call_mismatch(message)
        if call is not None:
            return call
    if short == "AttributeError" or "AttributeError: " in message:
        attr = _attribute_missing(message)
        if attr is not None:
            return attr
    # an exception class of a library names that library ("ray.exceptions.GetTimeoutError")
    if "." in exc_type:
        if exc_type.startswith("torch.distributed."):
            return "distributed", f"the exception type {exc_type}"
        cat = PACKAGES.get(exc_type.split(".", 1)[0])
        if cat and cat != "install_mismatch":
            return cat, f"the exception type {exc_type}"
    return _search(WORDS, message)


ATTR_RE = lazy(r"'(?P<cls>\w+)' object has no attribute '(?P<attr>\w+)'", needles=("object has no attribute",))
# vLLM's objects that the projects driving it reach into (the engine, its arguments, configs, workers, outputs):
# an attribute missing there is code written for another vLLM release
VLLM_OBJECTS = frozenset((
    "LLM", "LLMEngine", "AsyncLLMEngine", "AsyncLLM", "EngineArgs", "AsyncEngineArgs", "SamplingParams",
    "VllmConfig", "ModelConfig", "CacheConfig", "ParallelConfig", "SchedulerConfig", "LoadConfig", "DeviceConfig",
    "EngineCoreClient", "SyncMPClient", "AsyncMPClient", "InprocClient", "MultiprocExecutor", "UniProcExecutor",
    "Worker", "GPUModelRunner", "ModelRunner", "WorkerWrapperBase", "RequestOutput", "CompletionOutput"))
MODEL_SIDE_RE = lazy(r"(?:Config|Tokenizer(?:Fast)?|TokenizersBackend|Processor|ImageProcessor)$")


# Python's own words for a call that does not fit the callee's signature: the caller was written for another
# version of the callee ("AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'")
CALL_RE = lazy(r"(?P<callee>[\w.]+)\(\) (?:got an unexpected keyword argument|got multiple values for (?:keyword )?"
               r"argument|missing \d+ required (?:positional|keyword-only) arguments?|takes \d+ positional arguments? "
               r"but)", needles=("() got ", "() missing ", "() takes "))


def _call_mismatch(message: str) -> tuple[str, str] | None:
    """A call that does not fit its callee, placed by the callee: one of vLLM's objects that callers build (the
    engine's arguments, LLM, SamplingParams: code written for another vLLM release), or a qualified name in code
    the area map knows ("vllm.model_executor.layers.attention.mla_attention.MLACommonImpl.__init__")."""
    m = CALL_RE.search(message)
    if m is None:
        return None
    parts = m.group("callee").split(".")
    owner = parts[-2] if len(parts) >= 2 else ""
    if owner in VLLM_OBJECTS:
        return "install_mismatch", f"the call to vLLM's {owner} does not fit its signature (code written for another vLLM release)"
    if len(parts) >= 3:
        cat = area_of("/".join(parts[:-2]) + ".py")
        if cat is not None:
            return cat, f"the call to {'.'.join(parts[-2:])} ({'.'.join(parts[:-2])}, {cat} code) does not fit its signature"
    return None


def _attribute_missing(message: str) -> tuple[str, str] | None:
    """An attribute missing on an object whose class says whose it is: vLLM's own (another vLLM release), or a
    model's config, tokenizer or processor from transformers (its version and vLLM's do not match)."""
    m = ATTR_RE.search(message)
    if m is None:
        return None
    cls, attr = m.group("cls"), m.group("attr")
    if cls in VLLM_OBJECTS:
        return "install_mismatch", f"vLLM's {cls} has no attribute {attr} (code written for another vLLM release)"
    if MODEL_SIDE_RE.search(cls) is not None:
        return "model_support", f"the model's {cls} (transformers) has no attribute {attr}"
    return None


def _search(table: list[tuple[tuple[str, ...], str]], message: str) -> tuple[str, str] | None:
    for words, cat in table:
        for w in words:
            if w in message:
                return cat, f"its message mentions {w!r}"
    return None
