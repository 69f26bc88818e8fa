"""Messages of vLLM's V0 releases (0.2-0.8) that later releases reworded or dropped.

- vLLM's own NCCL wrapper (pynccl, 0.4.0+) loads libnccl.so.2 with ctypes. In 0.4.0/0.4.1 the load runs when
  pynccl is imported (model_executor/parallel_utils/pynccl.py, distributed/device_communicators/pynccl.py):
  it logs "Failed to load NCCL library from <so> ..." as an ERROR and re-raises, pynccl_utils swallows the
  import error ("Failed to import NCCL library: <error>", INFO), and the first tensor-parallel
  init_process_group then dies on `logger.info(f"vLLM is using nccl=={ncclGetVersion()}")` with
  `NameError: name 'ncclGetVersion' is not defined`. The library was the one the vllm-nccl-cu12 package
  downloads to ~/.config/vllm/nccl/cu12/ (or VLLM_NCCL_SO_PATH, or the system's libnccl.so.2). From 0.5.0 the
  loader (pynccl_wrapper.NCCLLibrary) logs the same ERROR but PyNcclCommunicator catches it and disables
  itself, and a single-GPU engine never needs NCCL: the line alone is then not what stopped anything.
- V0's scheduler preempts a running group with several sequences (n > 1, best_of, beam search) by swapping its
  KV blocks to the CPU swap space (--swap-space GiB per GPU); when those blocks are used up it raises
  "Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this error." (0.1-0.10).
  Preemption itself is no failure: every 50th one is logged as a warning ("Sequence group <id> is preempted by
  PreemptionMode.RECOMPUTE mode because there is not enough KV cache space ...") and serving goes on.
  CacheConfig warns "Possibly too large swap space" above 40% of the host's memory: a warning only (above 70% it
  raises "Too large swap space", engine_args.swap_space_too_large).
- V0's quantization configs accept only some weight widths and group sizes: AWQ and SqueezeLLM 4-bit, GPTQ
  2/3/4/8-bit, DeepSpeedFP 6/8-bit, Marlin group size 128 or -1 ("Currently, only ... is supported for X, but got
  ...", 0.2-0.10).
- Mixtral from its PyTorch .bin files ("Currently, the 'pt' format is not supported for Mixtral.", up to 0.4.0).
- Pipeline parallelism: up to 0.5.0 ParallelConfig refused any --pipeline-parallel-size > 1 ("Pipeline
  parallelism is not supported yet."); 0.5.1-0.6 served it only through the AsyncLLMEngine ("... only supported
  through AsyncLLMEngine as performance will be severely degraded otherwise.", raised by the offline LLM class).
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# -- vLLM's pynccl without a loadable libnccl -------------------------------------------------------------------
NCCL_LOAD_RE = lazy(r"Failed to load NCCL library from (?P<so>\S+?) ?\.(?:It is expected|\s|$)"
                    r"|Failed to import NCCL library: (?P<err>.+)")
NCCL_NAME_RE = lazy(r"name 'ncclGetVersion' is not defined")
# the tensor-parallel start-up that needed the library: 0.4.x workers' init_device and the process-group set-up
NCCL_NEEDED_RE = lazy(r"Error executing method init_device|while processing method init_device"
                      r"|in init_worker_distributed_environment|pynccl_utils\.init_process_group"
                      r"|in init_process_group")
TP_RE = lazy(r"\btensor_parallel_size'?[=:]\s*'?(?P<tp>\d+)")  # not speculative_draft_tensor_parallel_size

PYNCCL_FIX = ("vLLM loads NCCL itself (pynccl) and found no usable libnccl.so.2 ({so}). In vLLM 0.4.0/0.4.1 that "
              "is the copy the vllm-nccl-cu12 package downloads to ~/.config/vllm/nccl/cu12/ (an incomplete download "
              "leaves it broken): point VLLM_NCCL_SO_PATH at a working library, e.g. "
              "`export VLLM_NCCL_SO_PATH=$(python -c 'import nvidia.nccl, os; "
              "print(os.path.join(nvidia.nccl.__path__[0], \"lib\", \"libnccl.so.2\"))')` (torch's own NCCL), or "
              "upgrade vLLM (0.4.2+ no longer downloads NCCL).")


def _tensor_parallel(scan: Scan) -> int | None:
    for ln in scan.lines:
        if "tensor_parallel_size" in ln.text:
            m = TP_RE.search(ln.text)
            if m:
                return int(m.group("tp"))
    return None


def _pynccl(scan: Scan, harmless: bool) -> Diagnosis | None:
    joined = scan.joined_text()
    if "NCCL library" not in joined and "ncclGetVersion" not in joined:
        return None
    loads = [ln for ln in scan.lines if NCCL_LOAD_RE.search(ln.text)]
    named = [ln for ln in scan.lines if NCCL_NAME_RE.search(ln.text)]
    needed = [ln for ln in scan.lines if NCCL_NEEDED_RE.search(ln.text)] if loads else []
    # what stopped the start-up: the undefined wrapper (0.4.x), or the tensor-parallel set-up right after the
    # load failed; otherwise the ERROR line is the loader's note and the engine went on without pynccl
    fatal = bool(named) or (bool(needed) and _tensor_parallel(scan) != 1)
    if fatal == harmless or not (loads or named):
        return None
    m = next((NCCL_LOAD_RE.search(ln.text) for ln in loads), None)
    so = (m.group("so") if m and m.group("so") else "libnccl.so.2")
    facts = {"so_file": so}
    rule = PYNCCL_HARMLESS if harmless else PYNCCL
    ev = (named + loads[:2] + needed[:1]) if not harmless else loads[:3]
    ev = sorted({ln.no: ln for ln in ev}.values(), key=lambda x: x.no)
    conf = 0.9 if named else 0.8
    return Diagnosis(category=rule.category, signature=rule.signature,
                     title=rule.title.format(so=so), confidence=conf if not harmless else 0.3,
                     evidence=[Evidence(ln.no, ln.shown) for ln in ev[:6]], facts=facts,
                     fix=Fix(rule.fix.format(so=so) if rule.fix else "", rule.playbook),
                     first_line=ev[0].no)


PYNCCL = Rule(
    signature="distributed.pynccl_library_unloadable", category="distributed",
    title="vLLM's NCCL wrapper (pynccl) could not load {so}, so the tensor-parallel workers cannot start",
    fix=PYNCCL_FIX, playbook="distributed", confidence=0.9,
    check=lambda scan, env: _pynccl(scan, harmless=False))

PYNCCL_HARMLESS = Rule(
    signature="harmless.pynccl_library_unloadable", category="", harmless=True,
    title="vLLM's NCCL wrapper could not load {so} and is not used (logged as ERROR; harmless on one GPU)",
    fix="", check=lambda scan, env: _pynccl(scan, harmless=True))


# -- the CPU swap space of V0's scheduler ------------------------------------------------------------------------
SWAP_EXHAUSTED = Rule(
    signature="kv_cache.cpu_swap_exhausted", category="kv_cache_memory",
    title="V0's scheduler ran out of CPU swap space for preempted sequences",
    fix="vLLM's V0 scheduler swaps the KV cache of a preempted request with several sequences (n > 1, best_of, beam "
        "search) to the CPU swap space, and that space (--swap-space, 4 GiB per GPU by default) is full. Raise it "
        "(`--swap-space 16`, while swap x tensor-parallel size stays under 70% of the host's memory), lower "
        "--max-num-seqs or n/best_of so fewer sequences are preempted at once, or give the GPU KV cache more room "
        "(--gpu-memory-utilization). vLLM's V1 engine (0.8+) recomputes instead of swapping.",
    patterns=[r"Aborted due to the lack of CPU swap space"],
    playbook="kv-cache-memory", confidence=0.9)

# logged every 50th preemption (0.4-0.10): the scheduler recomputes or swaps the group and goes on
PREEMPTION_WARNING = Rule(
    signature="harmless.v0_preemption", category="", harmless=True,
    title="V0's scheduler preempted requests for lack of KV cache space (a throughput warning, not a failure)",
    fix="", patterns=[r"Sequence group \S+ is preempted by PreemptionMode\.(?:RECOMPUTE|SWAP) mode because there is "
                      r"not enough KV cache space"])

SWAP_WARNING = Rule(
    signature="harmless.swap_space_possibly_large", category="", harmless=True,
    title="The CPU swap space is over 40% of the host's memory (a warning; start-up goes on)",
    fix="", patterns=[r"Possibly too large swap space\. [\d.]+ GiB out of the [\d.]+ GiB total CPU memory"])


# -- weight widths and group sizes the V0 quantization configs take ----------------------------------------------
WEIGHT_FORMAT = Rule(
    signature="quant.weight_format_unsupported", category="quantization",
    title="vLLM's {method} support does not take this checkpoint's {what}",
    fix="The checkpoint's quantization_config asks for {what}, which vLLM's {method} kernels do not implement "
        "(AWQ and SqueezeLLM: 4-bit; GPTQ: 2/3/4/8-bit; DeepSpeedFP: 6/8-bit; Marlin: group size 128 or -1). Use a "
        "checkpoint quantized with a supported width/group size (an 8-bit model as GPTQ int8 or compressed-tensors "
        "W8A16 rather than AWQ), or load the unquantized model.",
    patterns=[r"Currently, only (?P<allowed>[\d/]+-bit(?: or \d+-bit)?) weight quantization (?:is|are) supported for "
              r"(?P<method>[\w ]+?),? but got (?P<what_bits>\d+) bits",
              r"Currently, only (?P<allowed>group size [\d\- ()\w,]+?) is supported for (?P<method>\w+), but got "
              r"group_size of (?P<what_group>-?\d+)"],
    playbook="quantization", confidence=0.9,
    facts=lambda m, ln, scan: {"what": (f"{m.group('what_bits')}-bit weights" if m.groupdict().get("what_bits")
                                        else f"group size {m.group('what_group')}"),
                               "method": m.group("method").replace(" quantizaiton", "").replace(" quantization", "")})


# -- pipeline parallelism before the releases that serve it ------------------------------------------------------
PP_RELEASE = Rule(
    signature="config.pp_unavailable_in_release", category="engine_config",
    title="{headline}",
    fix="{advice}",
    patterns=[r"(?P<old>Pipeline parallelism is not supported yet)",
              r"(?P<offline>Pipeline parallelism is only supported through AsyncLLMEngine)"],
    playbook="engine-config", confidence=0.9,
    facts=lambda m, ln, scan: (
        {"headline": "This vLLM release has no pipeline parallelism (--pipeline-parallel-size > 1)",
         "advice": "vLLM before 0.5.1 refuses any --pipeline-parallel-size above 1: use --tensor-parallel-size "
                   "alone, or upgrade vLLM (0.5.1+ serves pipeline parallelism through the OpenAI server)."}
        if m.groupdict().get("old") else
        {"headline": "Pipeline parallelism in this vLLM runs only in the server (AsyncLLMEngine), not in LLM()",
         "advice": "vLLM 0.5.1-0.6 refuses --pipeline-parallel-size in the offline LLM class / LLMEngine: serve the "
                   "model with `vllm serve ... --pipeline-parallel-size N` (or python -m "
                   "vllm.entrypoints.openai.api_server) and send requests to it, use --tensor-parallel-size "
                   "instead, or upgrade vLLM."}))


# -- Mixtral's .bin weights before 0.4.1 -----------------------------------------------------------------------------
MIXTRAL_PT = Rule(
    signature="model_loading.mixtral_pt_format", category="model_loading",
    title="This vLLM loads Mixtral only from safetensors, and the load format is 'pt'",
    fix="vLLM up to 0.4.0 refuses Mixtral's PyTorch .bin weights (ModelConfig._verify_load_format): download the "
        "checkpoint's *.safetensors files and launch with --load-format safetensors (or auto), or upgrade vLLM.",
    patterns=[r"Currently, the 'pt' format is not supported for Mixtral"],
    playbook="model-loading", confidence=0.9)


RULES = [PYNCCL, PYNCCL_HARMLESS, SWAP_EXHAUSTED, PREEMPTION_WARNING, SWAP_WARNING, WEIGHT_FORMAT, PP_RELEASE,
         MIXTRAL_PT]
