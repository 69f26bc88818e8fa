"""The KV cache beyond one GPU: KV-transfer connectors, CPU/disk offloading, the hybrid KV cache manager, KV dtypes.

What vLLM and the libraries around it raise, and why:
- FlashAttention's varlen kernels check `query and key must have the same dtype` (flash-attn / vllm-flash-attn
  mha_fwd); in vLLM that happens when an fp8 KV cache (--kv-cache-dtype fp8) reaches a FlashAttention build that
  cannot read one (V1 before 0.8 let it through; later releases refuse the dtype at backend selection).
- Attention._init_kv_cache_quant refuses `fp8_e5m2 kv-cache is not supported with fp8 checkpoints.` for every
  quantized checkpoint (the gate meant fp8 checkpoints carrying KV scales, and also catches INT4/AWQ models until
  vllm#45040); a V100 fork words it "... with checkpoint KV scales outside the SM70 ... path".
- OffloadingSpec (vllm/v1/kv_offload/base.py) asserts `gpu_block_size=N not divisible by hash_block_size=M.`
  (0.2x adds "Hybrid models (e.g. Mamba+Attention) need --enable-prefix-caching to align block sizes.") and, when
  kv_connector_extra_config names a block_size, `If 'block_size' is specified in kv_connector_extra_config, there
  must be at least one KV cache group, and all groups must have the same block size.`
- The TurboQuant KV cache (0.20+) refuses hybrid models at config time (`TurboQuant KV cache is not supported for
  hybrid (attention + Mamba) models. ...`); 0.25+ lets them through and fails later on a skipped layer
  (`Unknown TurboQuant cache dtype: 'auto'`).
- With prefix caching on, hybrid Mamba models get mamba cache mode 'align', which asserts `Chunked prefill is
  required for mamba cache mode 'align'.`
- NixlConnector asserts `SSM can only have one local block` when a Mamba-hybrid request arrives with prefix-cache
  hits (no prefix caching for hybrid models over NIXL).
- vLLM's connector factory refuses a connector without SupportsHMA when the hybrid KV cache manager is on:
  `Connector X does not support HMA but HMA is enabled. Please set --disable-hybrid-kv-cache-manager.`
- The offloading region in /dev/shm is pre-faulted with madvise(MADV_POPULATE_WRITE) (SharedOffloadRegion, EC
  connector's ECSharedRegion): Linux before 5.14 answers EINVAL (`[Errno 22] Invalid argument`), a /dev/shm too
  small for the region answers EFAULT (`[Errno 14] Bad address`).
- UCX prints `transports 'cuda_ipc','cuda_copy' are not available` when it was built without CUDA; NIXL then
  cannot register GPU memory (NIXL_ERR_BACKEND).
- Mooncake's transfer engine logs `Error from http client, GET http://.../metadata?key=...` (and "Failed to
  retrieve segment descriptor" / "Failed to open segment") when its HTTP metadata server does not answer.
- LMCache builds a LocalCPUBackend of max_local_cpu_size GB; with 0 torch.frombuffer raises `both buffer length
  (0) and count (-1) must not be 0`.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule
from triage.rules.install import unless_started_after

FP8_KV_RE = lazy(r"kv[_-]cache[_-]dtype[=:'\" ]+\W*fp8|kv_cache_dtype=fp8")
ERRNO_RE = lazy(r"(?:OSError: )?\[Errno (?P<errno>22|14)\] (?P<what>Invalid argument|Bad address)")
# where vLLM pre-faults an offload region with madvise (KV offloading, the EC connector's CPU region)
OFFLOAD_REGION_MARKS = ("shared_offload_region", "ec_shared_region", "madvise", "vllm_offload_")
# vLLM turning the hybrid KV cache manager off: config/vllm.py for a KV connector or KV events (0.10+), and
# kv_cache_utils' note that a hybrid model then gets no per-type KV sizing
HMA_OFF_RE = lazy(r"Turning off hybrid kv cache manager because `?(?P<flag>--[\w-]+)`? is set"
                  r"|Hybrid KV cache manager is disabled for this hybrid model")
KV_SHORT_RE = lazy(r"KV cache is needed, which is larger than the available|To serve at least one request with the "
                   r"models?'?s? max seq len|is larger than the maximum number of tokens that can be stored in KV cache")
ZERO_BUFFER_RE = lazy(r"both buffer length \(0\) and count \(-?\d+\) must not be 0")


def _fp8_kv_facts(m: Any, line: Any, scan: Scan) -> dict[str, Any]:
    return {"fp8_kv": bool(FP8_KV_RE.search(scan.joined_text()))}


def _madvise_errno(scan: Scan, errno: str) -> Any:
    """The line of the offload region's madvise failing with this errno, or None."""
    text = scan.joined_text()
    if not any(mark in text for mark in OFFLOAD_REGION_MARKS):
        return None
    return next((ln for ln in scan.lines for m in [ERRNO_RE.search(ln.text)] if m and m.group("errno") == errno),
                None)


def _offload_madvise_old_kernel(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    ln = _madvise_errno(scan, "22")
    return None if ln is None else MADVISE_OLD_KERNEL.diagnosis(scan, [(ln, ERRNO_RE.search(ln.text))])


def _offload_shm_too_small(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    ln = _madvise_errno(scan, "14")
    return None if ln is None else OFFLOAD_SHM_TOO_SMALL.diagnosis(scan, [(ln, ERRNO_RE.search(ln.text))])


def _hma_off_kv_short(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    off = next((ln for ln in scan.lines if HMA_OFF_RE.search(ln.text)), None)
    if off is None:
        return None
    short = next((ln for ln in scan.lines if ln.no > off.no and KV_SHORT_RE.search(ln.text)), None)
    if short is None:
        return None
    m = HMA_OFF_RE.search(off.text)
    flag = (m.group("flag") if m else None) or "--kv-transfer-config"
    return Diagnosis(
        category="kv_cache_memory", signature="kv_cache.hma_disabled_by_connector",
        title=f"The KV cache is too small because {flag} turned the hybrid KV cache manager off",
        confidence=0.96, evidence=[Evidence(off.no, off.shown), Evidence(short.no, short.shown)],
        facts={"flag": flag},
        fix=Fix(f"With the hybrid KV cache manager off ({flag}), a hybrid model's sliding-window / Mamba layers get "
                "a full-length KV cache each, so one max-length request no longer fits: launch with "
                "--no-disable-hybrid-kv-cache-manager when the connector supports it (NixlConnector, the "
                "OffloadingConnector; newer vLLM keeps it on by itself), or lower --max-model-len, or serve "
                "without the connector.", "kv-cache-memory"),
        first_line=short.no)


def _lmcache_zero_cpu(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    text = scan.joined_text()
    if not ("lmcache" in text.lower() or "max_local_cpu_size" in text):
        return None
    for ln in scan.lines:
        if ZERO_BUFFER_RE.search(ln.text):
            return Diagnosis(
                category="engine_config", signature="config.lmcache_zero_cpu_buffer",
                title="LMCache was configured with a zero-size local CPU buffer (max_local_cpu_size: 0)",
                confidence=0.85, evidence=[Evidence(ln.no, ln.shown)], facts={},
                fix=Fix("LMCache still creates its LocalCPUBackend (also the staging buffer of other backends) and "
                        "a size of 0 cannot be allocated: remove max_local_cpu_size from the LMCache config (or "
                        "LMCACHE_MAX_LOCAL_CPU_SIZE from the environment) or give it a size of at least 1 (GB), or "
                        "upgrade LMCache (the hotfix in LMCache PR 1905).", "engine-config"),
                first_line=ln.no)
    return None


def _ucx_without_cuda(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    # a build without CUDA transports only matters when nothing came up after it said so
    return unless_started_after(UCX_WITHOUT_CUDA, scan)


UCX_WITHOUT_CUDA: Rule = Rule(
    signature="install.ucx_without_cuda", category="install_mismatch",
    title="UCX under NIXL was built without CUDA: its cuda_ipc / cuda_copy transports are missing",
    fix="NIXL moves the KV cache through UCX, and this UCX has no CUDA transports, so GPU memory cannot be "
        "registered (NIXL_ERR_BACKEND): use the NIXL or Dynamo container, or build UCX --with-cuda (then NIXL "
        "against it); `ucx_info -d | grep cuda` must list cuda_copy and cuda_ipc. Do not restrict UCX_TLS to "
        "transports the build lacks.",
    patterns=[r"transports? '[\w,']*?cuda_(?:ipc|copy)'?[\w,']*? (?:are|is) not available"],
    check=_ucx_without_cuda, playbook="install-mismatch", confidence=0.8)


MADVISE_OLD_KERNEL: Rule = Rule(
    signature="environment.kv_offload_madvise_old_kernel", category="environment",
    title="The kernel refuses madvise(MADV_POPULATE_WRITE) on the KV offload region (Linux older than 5.14)",
    fix="vLLM pre-faults the CPU offload region in /dev/shm with MADV_POPULATE_WRITE, which Linux kernels before "
        "5.14 (RHEL 8's 4.18) do not know: upgrade vLLM to a release with the fallback (vllm#51116), run on a 5.14+ "
        "kernel (`uname -r`), or launch without KV offloading (--kv-offloading-size, the OffloadingConnector).",
    check=_offload_madvise_old_kernel, playbook="environment", confidence=0.85)
OFFLOAD_SHM_TOO_SMALL: Rule = Rule(
    signature="distributed.kv_offload_shm_too_small", category="distributed",
    title="The KV offload region does not fit in /dev/shm (madvise: Bad address)",
    fix="The CPU offload region is a file in /dev/shm and the size asked for (--kv-offloading-size, "
        "cpu_bytes_to_use) is more than /dev/shm holds: give the container more shared memory (`docker run "
        "--ipc=host` or `--shm-size`; `df -h /dev/shm` shows it) or lower the offloading size.",
    check=_offload_shm_too_small, playbook="distributed", confidence=0.85)


RULES = [
    Rule(signature="attention.fp8_kv_flash_attn_dtype_mismatch", category="attention_backend",
         title="FlashAttention got an fp8 KV cache it cannot read (query and key dtypes differ)",
         fix="This FlashAttention build reads the KV cache in the model's dtype, and an fp8 KV cache "
             "(--kv-cache-dtype fp8) reaches it as a different dtype: launch with --kv-cache-dtype auto, or pick an "
             "attention backend with fp8 KV support (--attention-backend FLASHINFER, VLLM_ATTENTION_BACKEND on "
             "older releases), or upgrade vLLM (later releases choose a capable backend or refuse the dtype at "
             "start-up).",
         patterns=[r"query and (?:key|value) must have the same dtype"],
         facts=_fp8_kv_facts, playbook="attention-backend", confidence=0.8),
    Rule(signature="config.fp8_e5m2_kv_quantized_checkpoint", category="engine_config",
         title="--kv-cache-dtype fp8_e5m2 is refused for this quantized checkpoint",
         fix="vLLM refuses an fp8_e5m2 KV cache with checkpoints whose quantization method handles KV scales (fp8 "
             "checkpoints; before vllm#45040 every quantized checkpoint, INT4/AWQ included): use "
             "--kv-cache-dtype fp8 (e4m3, on GPUs with native fp8) or auto, or upgrade vLLM if the checkpoint has "
             "no fp8 KV scales.",
         patterns=[r"fp8_e5m2 kv-cache is not supported with (?:fp8 checkpoints|checkpoint KV scales)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.kv_offload_block_size_mismatch", category="engine_config",
         title="KV offloading cannot split the KV cache blocks into its hash blocks{sizes}",
         fix="The offloading connector hashes blocks of --block-size tokens and every KV cache group's block must be "
             "a multiple of it: for a hybrid (Mamba + attention) model enable --enable-prefix-caching so vLLM aligns "
             "the block sizes; otherwise pass a --block-size that divides the groups' block size, drop block_size "
             "from kv_connector_extra_config when the groups differ (DeepSeek-V4, hybrid models), or upgrade vLLM.",
         patterns=[r"gpu_block_size=(?P<gpu_block>\d+) not divisible by hash_block_size=(?P<hash_block>\d+)",
                   r"If 'block_size' is specified in kv_connector_extra_config, there must be at least one KV cache "
                   r"group"],
         facts=lambda m, line, scan: {"sizes": (f" ({m.group('gpu_block')} vs {m.group('hash_block')} tokens)"
                                                if m.groupdict().get("gpu_block") else "")},
         playbook="engine-config", confidence=0.88),
    Rule(signature="config.turboquant_kv_hybrid_model", category="engine_config",
         title="The TurboQuant KV cache does not support this hybrid (attention + Mamba) model",
         fix="TurboQuant's boundary-layer protection needs uniform attention layers, and this model mixes attention "
             "with Mamba / linear-attention layers: use --kv-cache-dtype fp8 or auto, or a vLLM release with "
             "TurboQuant support for hybrid models.",
         patterns=[r"TurboQuant KV cache is not supported for hybrid",
                   r"Unknown TurboQuant cache dtype: 'auto'"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.mamba_align_needs_chunked_prefill", category="engine_config",
         title="Mamba cache mode '{mode}' needs chunked prefill, which is turned off",
         fix="With prefix caching on, vLLM caches a hybrid model's Mamba state in 'align' mode, which only works "
             "with chunked prefill: drop --no-enable-chunked-prefill (enable_chunked_prefill=False), or turn prefix "
             "caching off (--no-enable-prefix-caching) when chunked prefill must stay off.",
         patterns=[r"Chunked prefill is required for mamba cache mode '(?P<mode>\w+)'"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="config.nixl_hybrid_prefix_caching", category="engine_config",
         title="NixlConnector cannot take prefix-cache hits for a Mamba-hybrid model (SSM can only have one local block)",
         fix="NIXL's KV transfer has no prefix-caching support for hybrid (Mamba + attention) models: launch the "
             "prefill and decode instances with --no-enable-prefix-caching, or upgrade vLLM to a release whose "
             "NixlConnector supports it.",
         patterns=[r"SSM can only have one local block"],
         playbook="engine-config", confidence=0.88),
    Rule(signature="config.kv_connector_without_hma", category="engine_config",
         title="KV connector {connector} does not support the hybrid KV cache manager, which is on",
         fix="The connector cannot handle several KV cache groups: launch with --disable-hybrid-kv-cache-manager; "
             "when the model needs the hybrid manager (DeepSeek-V4, Mamba/linear-attention hybrids) use a connector "
             "that supports it instead (NixlConnector, vLLM's OffloadingConnector, a Dynamo/LMCache release with "
             "SupportsHMA).",
         # the message wrapped after "HMA is" in a paste still names the connector
         patterns=[r"Connector (?P<connector>\w+) does not support HMA but HMA is(?: enabled|\s*$)"],
         playbook="engine-config", confidence=0.9),
    MADVISE_OLD_KERNEL,
    OFFLOAD_SHM_TOO_SMALL,
    UCX_WITHOUT_CUDA,
    Rule(signature="kv_cache.hma_disabled_by_connector", category="kv_cache_memory",
         title="The KV cache is too small because a KV connector turned the hybrid KV cache manager off",
         fix="Launch with --no-disable-hybrid-kv-cache-manager when the connector supports it, or lower "
             "--max-model-len.",
         check=_hma_off_kv_short, playbook="kv-cache-memory", confidence=0.96),
    Rule(signature="distributed.mooncake_metadata_unreachable", category="distributed",
         title="Mooncake could not read a peer's segment from its metadata server",
         fix="The transfer engine looks each peer's memory segment up in the metadata server and the look-up failed: "
             "check that the server in metadata_server (mooncake_http_metadata_server, etcd) runs and is reachable "
             "from every node; Mooncake's HTTP metadata server is unstable under load, its maintainers suggest etcd "
             "(`\"metadata_server\": \"etcd://HOST:2379\"`) or P2PHANDSHAKE.",
         patterns=[r"Error from http client, GET \S*metadata\?key=\S+ error: (?P<error>.+)$",
                   r"Failed to retrieve segment descriptor, name (?P<segment>\S+)"],
         playbook="distributed", confidence=0.8),
    Rule(signature="config.lmcache_zero_cpu_buffer", category="engine_config",
         title="LMCache was configured with a zero-size local CPU buffer (max_local_cpu_size: 0)",
         fix="Remove max_local_cpu_size from the LMCache config or give it a size of at least 1 (GB).",
         check=_lmcache_zero_cpu, playbook="engine-config", confidence=0.85),
    # -- harmless: a KV connector's start-up notes -------------------------------------------------------------
    Rule(signature="harmless.kv_connector_experimental", category="", harmless=True,
         title="vLLM notes that the KV connector API is experimental (harmless)",
         fix="", patterns=[r"Initializing KVConnectorBase_V1\. This API is experimental"]),
    Rule(signature="harmless.lmcache_no_config_file", category="", harmless=True,
         title="LMCache reads its settings from LMCACHE_* environment variables (no config file; harmless)",
         fix="", patterns=[r"No LMCache configuration file is set\. Trying to read configurations from the environment",
                           r"You can set the configuration file through the environment variable: LMCACHE_CONFIG_FILE"]),
]
