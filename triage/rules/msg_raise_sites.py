"""vLLM raise sites found by searching real threads for their message text (dev-msg).

Each rule reads a message vLLM raises from one place, in the wordings of the releases that raised it:

- parallel_state.py asserts that the tensor/pipeline/data/expert model-parallel groups are created once per
  process (0.1-0.33): a second LLM engine built in the same process (a notebook cell run twice, two LLM()
  objects, LangChain's VLLM wrapper created twice) trips it before anything is loaded.
- The V1 model runners of 0.7-0.9 (gpu/tpu_model_runner.initialize_kv_cache) allocate one KV-cache type only and
  raise for a model whose layers need two (sliding window next to full attention, Mamba next to attention);
  plugins that reimplement the allocation (kvcached) copied the refusal.
- The V1 GPU worker of 0.11.1 asserted local_world_size <= visible devices on every rank, which a Ray cluster
  spanning nodes (TP over 2 nodes) fails although nothing is wrong with it (fixed by vllm PR 28873, 0.11.2).
  A count of 0 is the environment (triage.rules.mix2_devices), a larger parallel size without Ray a layout the
  node cannot hold.
- --engine-use-ray (0.4-0.5) ran AsyncLLMEngine in a Ray actor created with num_gpus=1 when TP > 1: Ray sets
  CUDA_VISIBLE_DEVICES to that one GPU, so the multiprocessing executor's GPU count check refuses TP > 1.
- The fused-MoE layer's CPU path of 0.5-0.6 raised NotImplementedError (CPU MoE came with IPEX in 0.7).
- `vllm serve --headless` refuses --data-parallel-rank (0.10+); a main-branch commit of July 2025 (657f2f3)
  checked the resolved config instead, so every headless worker was refused (fixed by vllm PR 20398).
- ObservabilityConfig refuses --otlp-traces-endpoint when the OpenTelemetry packages do not import (0.5.4+);
  the vllm/vllm-openai images do not ship them.
- Prefix caching with a sliding-window model: the 0.3 model runner's assert, 0.4's block manager and the
  CacheConfig check of 0.5-0.10 (V0); Qwen1.5/Qwen2 declare a window they do not use (use_sliding_window false),
  which 0.3.x read anyway (fixed by vllm PR 3373).
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence
from triage.rules.base import Rule

# A Ray-backed launch: the executor flag in any spelling, Ray's own status / worker lines.
RAY_RE = lazy(r"distributed[-_]executor[-_]backend[ =:'\"]+ray\b|\bray (?:status|start)\b|RayWorkerWrapper|"
              r"Autoscaler status|ray_distributed_executor|\bRay cluster\b")
# --engine-use-ray as typed, or as vLLM echoes its arguments.
ENGINE_USE_RAY_RE = lazy(r"--engine-use-ray\b|engine_use_ray=True")


def _with_context(rule: Rule, scan: Scan, context_re, *, unless=None) -> Diagnosis | None:
    """The rule's match, when some line of the log also shows `context_re` (quoted as evidence)."""
    d = rule.match_lines(scan)
    if d is None:
        return None
    if unless is not None and unless(d):
        return None
    ctx = next((ln for ln in scan.lines if context_re.search(ln.text)), None)
    if ctx is None:
        return None
    if all(e.line != ctx.no for e in d.evidence):
        d.evidence.append(Evidence(ctx.no, ctx.shown))
    return d


def _no_devices(d: Diagnosis) -> bool:
    return d.facts.get("devices") == 0


_LOCAL_WORLD = (r"local_world_size(?: \((?P<local_world_size>\d+)\))? must be less than or equal to the number "
                r"of visible devices(?: \((?P<devices>\d+)\))?")

RAY_LOCAL_WORLD: Rule = Rule(
    signature="distributed.ray_multinode_local_world_size", category="distributed",
    title="vLLM's worker compared a multi-node Ray world size with one node's GPUs",
    fix="vLLM 0.11.1's GPU worker asserts local_world_size <= visible devices on every rank, which is wrong when Ray "
        "spreads the tensor/pipeline parallel ranks over several nodes (e.g. TP 8 on two 4-GPU nodes). Upgrade vLLM "
        "to 0.11.2 or later (vllm PR 28873 only checks it for multiprocessing data parallel); `ray status` should "
        "show all nodes' GPUs before you launch.",
    patterns=[_LOCAL_WORLD], playbook="distributed", confidence=0.88,
    check=lambda scan, env: _with_context(RAY_LOCAL_WORLD, scan, RAY_RE, unless=_no_devices))

ENGINE_USE_RAY: Rule = Rule(
    signature="distributed.engine_use_ray_one_gpu", category="distributed",
    title="--engine-use-ray runs the engine in a Ray actor that sees one GPU, so TP > 1 is refused",
    fix="With --engine-use-ray (vLLM 0.4-0.5) the engine itself becomes a Ray actor reserved one GPU when the "
        "tensor parallel size is above 1; Ray then sets CUDA_VISIBLE_DEVICES to that GPU and the multiprocessing "
        "workers cannot be placed. Launch without --engine-use-ray (it was deprecated and removed in 0.6), and pass "
        "--distributed-executor-backend ray if you want the workers on Ray.",
    patterns=[r"please set tensor_parallel_size(?: \(\d+\))? to less than max local gpu count",
              r"please ensure that world_size \(\d+\) is less than (?:than )?max local gpu count"],
    playbook="distributed", confidence=0.93,
    check=lambda scan, env: _with_context(ENGINE_USE_RAY, scan, ENGINE_USE_RAY_RE))

RULES = [
    Rule(signature="distributed.parallel_group_reinitialized", category="distributed",
         title="A second vLLM engine was built in a process that already has one ({group} parallel group exists)",
         fix="vLLM's model-parallel groups are global to the process and created once: build one LLM engine per "
             "process. To load another model, run it in its own process (a separate script, or "
             "multiprocessing with the 'spawn' start method), or free the first one before creating the next: "
             "`del llm; from vllm.distributed.parallel_state import destroy_model_parallel, "
             "destroy_distributed_environment; destroy_model_parallel(); destroy_distributed_environment(); "
             "import gc; gc.collect()` (before 0.4.1 the module is vllm.model_executor.parallel_utils.parallel_state). In a "
             "notebook, restart the kernel instead of re-running the cell.",
         patterns=[r"(?P<group>tensor model|pipeline model|data|expert|(?:decode |prefill )?context model) parallel "
                   r"group is already initialized"],
         playbook="distributed", confidence=0.85),
    Rule(signature="model_support.hybrid_kv_cache_types", category="model_support",
         title="This vLLM's V1 runner allocates one KV-cache type; the model needs several",
         fix="The model mixes attention types (sliding-window and full attention as in gpt-oss / Gemma 2-3, or Mamba "
             "and attention layers), which vLLM 0.7-0.9's V1 model runner cannot allocate. Upgrade vLLM to a release "
             "with the hybrid KV-cache manager (0.10 or later), or on 0.8/0.9 run the V0 engine (VLLM_USE_V1=0). When "
             "a KV-cache plugin (kvcached, ENABLE_KVCACHED) raises it, upgrade the plugin to one that allocates per "
             "KV-cache group, or launch without it.",
         patterns=[r"Hybrid models with more than one KV cache type are not supported yet"],
         playbook="model-support", confidence=0.88),
    RAY_LOCAL_WORLD,
    Rule(signature="config.local_world_size_exceeds_devices", category="engine_config",
         title="The parallel layout puts {local_world_size} ranks on a node that has {devices} visible GPUs",
         fix="tensor_parallel_size x pipeline_parallel_size (x data-parallel-size-local) ranks must fit on this "
             "node's visible GPUs: reduce the parallel sizes, make the other GPUs visible (CUDA_VISIBLE_DEVICES, "
             "`docker --gpus all`), or spread the ranks over several nodes with Ray "
             "(--distributed-executor-backend ray) or --nnodes/--node-rank.",
         patterns=[r"local_world_size \((?P<local_world_size>\d+)\) must be less than or equal to the number of "
                   r"visible devices \((?P<devices>[1-9]\d*)\)"],
         playbook="engine-config", confidence=0.86),
    ENGINE_USE_RAY,
    Rule(signature="model_support.cpu_backend_moe", category="model_support",
         title="vLLM's {platform} backend of this release has no MoE (fused experts) implementation",
         fix="This release's fused-MoE layer raises on the {platform} path, so Mixtral/Qwen-MoE/DeepSeek-style models "
             "cannot run there. Serve the model on GPUs, pick a dense model for the {platform} backend, or upgrade: "
             "vLLM 0.7 and later run MoE on the CPU backend (through intel-extension-for-pytorch on x86).",
         patterns=[r"The (?P<platform>CPU|TPU) backend currently does not support MoE"],
         playbook="model-support", confidence=0.88),
    Rule(signature="config.headless_data_parallel_rank", category="engine_config",
         title="vllm serve --headless does not take --data-parallel-rank",
         fix="A headless node runs all of its local data-parallel ranks: drop --data-parallel-rank and give the node's "
             "first rank with --data-parallel-start-rank (with --data-parallel-size-local and --data-parallel-address "
             "of the head node). If you did not pass --data-parallel-rank, your vLLM build is the July 2025 main "
             "commit that checked the resolved config (657f2f3): install a build with vllm PR 20398 or a release.",
         patterns=[r"data_parallel_rank is not applicable in headless mode"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="install.opentelemetry_missing", category="install_mismatch",
         title="--otlp-traces-endpoint is set but the OpenTelemetry packages are not installed",
         fix="vLLM's tracing needs the OpenTelemetry packages, which neither the vllm wheel nor the vllm/vllm-openai "
             "images install: `pip install opentelemetry-sdk opentelemetry-api opentelemetry-exporter-otlp "
             "opentelemetry-semantic-conventions-ai` in the environment (or image) that runs vLLM, or launch without "
             "--otlp-traces-endpoint. The error's 'Original error' traceback names the import that failed.",
         patterns=[r"OpenTelemetry is not available\. Unable to configure '(?P<option>\w+)'",
                   r"OpenTelemetry packages must be installed before configuring '(?P<option>\w+)'"],
         playbook="install-mismatch", confidence=0.9),
    Rule(signature="config.prefix_caching_sliding_window", category="engine_config",
         title="Prefix caching cannot be used with this sliding-window model in this vLLM",
         fix="vLLM's V0 engine (0.3-0.10) does not combine prefix caching with sliding-window attention. Launch without "
             "--enable-prefix-caching, or with --disable-sliding-window (the context is then capped at the window), "
             "or use the V1 engine (0.8+), which supports both together. A model that declares a window it does not "
             "use (Qwen1.5/Qwen2 with use_sliding_window false) was refused by 0.3.x: upgrade vLLM (0.4+ honours "
             "use_sliding_window) or set \"sliding_window\": null in its config.json.",
         patterns=[r"Prefix caching is (?:currently )?not supported with sliding window",
                   r"Sliding window is not allowed with prefix caching enabled"],
         playbook="engine-config", confidence=0.92),
]
