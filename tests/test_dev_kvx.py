"""kvx's dev set (tests/logs/dev-kvx/): real logs of the KV cache beyond one GPU (KV-transfer connectors,
offloading, the hybrid KV cache manager, KV dtypes) through the CLI, and the rules that name them, each on the
other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-kvx")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "environment--tiering-offload-madvise-old-kernel.log":
        "the paste stops inside the traceback (tiering/spec.py create_handlers) before the OSError: the madvise "
        "errno that tells an old kernel from a small /dev/shm is not in the log",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


E = "(EngineCore_DP0 pid=31) ERROR 05-01 10:00:00 [core.py:1006] "


# ---- fp8 KV cache reaching FlashAttention ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    E + "RuntimeError: query and key must have the same dtype\n",
    E + "RuntimeError: query and value must have the same dtype\n",
])
def test_flash_attn_dtype_check_is_the_fp8_kv_cache(text):
    d = first(text)
    assert (d.signature, d.category) == ("attention.fp8_kv_flash_attn_dtype_mismatch", "attention_backend")


def test_flash_attn_dtype_fact_notes_an_fp8_kv_launch():
    d = first("INFO 12-19 09:03:40 api_server.py:652] args: Namespace(kv_cache_dtype='fp8')\n"
              + E + "RuntimeError: query and key must have the same dtype\n")
    assert d.facts.get("fp8_kv") is True


# ---- fp8_e5m2 KV cache with a quantized checkpoint --------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: fp8_e5m2 kv-cache is not supported with fp8 checkpoints.\n",
    # the V100 fork's wording (1Cat-vLLM attention.py)
    "ValueError: fp8_e5m2 kv-cache is not supported with checkpoint KV scales\noutside the SM70 Flash-V100 unit-scale "
    "override path.\n",
])
def test_fp8_e5m2_refused_for_quantized_checkpoints(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.fp8_e5m2_kv_quantized_checkpoint", "engine_config")


# ---- offloading's block sizes -------------------------------------------------------------------------

@pytest.mark.parametrize("text,sizes", [
    # 0.2x: with vLLM's hint for hybrid models
    ("AssertionError: gpu_block_size=544 not divisible by hash_block_size=16. Hybrid models (e.g. Mamba+Attention) "
     "need --enable-prefix-caching to align block sizes.\n", "(544 vs 16 tokens)"),
    # the first form, no hint
    ("AssertionError: gpu_block_size=64 not divisible by hash_block_size=256\n", "(64 vs 256 tokens)"),
    ("AssertionError: If 'block_size' is specified in kv_connector_extra_config, there must be at least one KV cache "
     "group, and all groups must have the same block size.\n", None),
])
def test_offload_block_sizes_are_engine_config(text, sizes):
    d = first(E + text)
    assert (d.signature, d.category) == ("config.kv_offload_block_size_mismatch", "engine_config")
    if sizes:
        assert sizes in d.title


# ---- TurboQuant, Mamba cache modes, NIXL and HMA on hybrid models --------------------------------------------

@pytest.mark.parametrize("text", [
    "NotImplementedError: TurboQuant KV cache is not supported for hybrid (attention + Mamba) models. Boundary layer "
    "protection requires uniform attention layers.\n",
    "ValueError: Unknown TurboQuant cache dtype: 'auto'. Valid presets: turboquant_k8v4, turboquant_4bit_nc\n",
])
def test_turboquant_on_a_hybrid_model(text):
    d = first(E + text)
    assert (d.signature, d.category) == ("config.turboquant_kv_hybrid_model", "engine_config")


def test_a_turboquant_preset_typo_is_not_the_hybrid_refusal():
    d = top(E + "ValueError: Unknown TurboQuant cache dtype: 'turboquant_k9v9'. Valid presets: turboquant_k8v4\n")
    assert d is None or d.signature != "config.turboquant_kv_hybrid_model"


@pytest.mark.parametrize("text", [
    "  Assertion failed, Chunked prefill is required for mamba cache mode 'align'. [type=assertion_error]\n",
    "AssertionError: Chunked prefill is required for mamba cache mode 'align'.\n",
])
def test_mamba_align_mode_needs_chunked_prefill(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.mamba_align_needs_chunked_prefill", "engine_config")
    assert "align" in d.title


def test_nixl_ssm_block_assert_is_prefix_caching_on_a_hybrid():
    d = first("(Worker_TP0 pid=9) ERROR 07-27 19:43:44 [multiproc_executor.py:962] AssertionError: SSM can only have "
              "one local block\n")
    assert (d.signature, d.category) == ("config.nixl_hybrid_prefix_caching", "engine_config")


@pytest.mark.parametrize("text", [
    "ValueError: Connector LMCacheConnectorV1 does not support HMA but HMA is enabled. Please set "
    "`--disable-hybrid-kv-cache-manager`.\n",
    # wrapped after "HMA is" in a paste
    "  ValueError: Connector DynamoConnector does not support HMA but HMA is\n  enabled. Please set "
    "`--disable-hybrid-kv-cache-manager`.\n",
])
def test_connector_without_hma(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.kv_connector_without_hma", "engine_config")
    assert "Connector" in d.title and ("LMCacheConnectorV1" in d.title or "DynamoConnector" in d.title)


HMA_OFF = ("(APIServer pid=1) WARNING 05-06 10:00:00 [config.py:1297] Turning off hybrid kv cache manager because "
           "`{flag}` is set. This will reduce the performance of vLLM on LLMs with sliding window attention or Mamba "
           "attention.\n")
SHORT = (E + "ValueError: To serve at least one request with the models's max seq len (128000), (38.87 GiB KV cache "
         "is needed, which is larger than the available KV cache memory (21.40 GiB). Based on the available memory, "
         "the estimated maximum model length is 70400.\n")


@pytest.mark.parametrize("flag", ["--kv-transfer-config", "--kv-events-config"])
def test_kv_capacity_after_hma_was_turned_off_names_the_flag(flag):
    d = first(HMA_OFF.format(flag=flag) + SHORT)
    assert (d.signature, d.category) == ("kv_cache.hma_disabled_by_connector", "kv_cache_memory")
    assert flag in d.title and "--no-disable-hybrid-kv-cache-manager" in d.fix.summary


def test_kv_capacity_without_hma_note_stays_the_plain_capacity_rule():
    d = first(SHORT)
    assert d.category == "kv_cache_memory" and d.signature != "kv_cache.hma_disabled_by_connector"


def test_hma_turned_off_without_a_failure_is_no_capacity_diagnosis():
    d = top(HMA_OFF.format(flag="--kv-transfer-config"))
    assert d is None or d.signature != "kv_cache.hma_disabled_by_connector"


# ---- the offload region in /dev/shm ---------------------------------------------------------------------

REGION = ("(Worker_TP0 pid=5) INFO 06-08 14:19:55 [v1/kv_offload/cpu/shared_offload_region.py:68] Created mmap file "
          "/dev/shm/vllm_offload_1780928262818256525_dp0.mmap (3.22 GB)\n"
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/kv_offload/cpu/shared_offload_region.py", line 100, '
          "in __init__\n    self.mmap_obj.madvise(_MADV_POPULATE_WRITE, offset, cpu_page_size)\n")


@pytest.mark.parametrize("err,sig,cat", [
    ("OSError: [Errno 22] Invalid argument\n", "environment.kv_offload_madvise_old_kernel", "environment"),
    ("OSError: [Errno 14] Bad address\n", "distributed.kv_offload_shm_too_small", "distributed"),
])
def test_offload_region_madvise_errno(err, sig, cat):
    d = first(REGION + err)
    assert (d.signature, d.category) == (sig, cat)


def test_an_errno_22_elsewhere_is_not_the_offload_region():
    d = top('  File "/usr/lib/python3.12/socket.py", line 233, in bind\nOSError: [Errno 22] Invalid argument\n')
    assert d is None or d.signature != "environment.kv_offload_madvise_old_kernel"


# ---- NIXL's UCX, Mooncake's metadata, LMCache's CPU buffer ---------------------------------------------------

UCX = ("[1746690477.974497] [llm206:611  :0]     ucp_context.c:1268 UCX  WARN  transports 'cuda_ipc','cuda_copy' are "
       "not available, please use one or more of: mm, posix, self, shm, sm, sysv, tcp\n")


@pytest.mark.parametrize("warn", [
    UCX,
    "[1.0] [host:1:0]     ucp_context.c:1203 UCX  WARN  transport 'cuda_copy' is not available, please use one or "
    "more of: posix, self, tcp\n",
])
def test_ucx_without_cuda_before_a_nixl_failure(warn):
    d = first(warn + "nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND\n")
    assert (d.signature, d.category) == ("install.ucx_without_cuda", "install_mismatch")


def test_ucx_without_cuda_then_a_server_that_came_up_is_no_failure():
    d = top(UCX + "(APIServer pid=1) INFO:     Application startup complete.\n")
    assert d is None or d.signature != "install.ucx_without_cuda"


@pytest.mark.parametrize("text", [
    "E0904 21:29:13.607991 31963 transfer_metadata_plugin.cpp:224] Error from http client, GET "
    "http://192.168.10.12:8080/metadata?key=mooncake%2Fram%2F192.168.10.12%3A12516 error: Failed initialization\n",
    "W0904 21:29:13.608021 31963 transfer_metadata.cpp:423] Failed to retrieve segment descriptor, name "
    "192.168.10.12:12516\nE0904 21:29:13.608029 31963 transfer_task.cpp:469] Failed to open segment 192.168.10.12:12516\n",
])
def test_mooncake_metadata_lookup(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.mooncake_metadata_unreachable", "distributed")


def test_zero_size_frombuffer_is_lmcache_config_only_with_lmcache():
    err = "ValueError: both buffer length (0) and count (-1) must not be 0\n"
    d = first('  File "/usr/local/lib/python3.12/dist-packages/lmcache/v1/memory_management.py", line 1210, in '
              "__init__\n    self.buffer = torch.frombuffer(mm, dtype=torch.uint8)\n" + err)
    assert (d.signature, d.category) == ("config.lmcache_zero_cpu_buffer", "engine_config")
    # torch's own message elsewhere (a zero-size tensor through torch.distributed) is no LMCache setting
    d2 = top('  File "/usr/lib/python3/dist-packages/torch/distributed/_serialization.py", line 80\n' + err)
    assert d2 is None or d2.signature != "config.lmcache_zero_cpu_buffer"


# ---- a KV connector's start-up notes are harmless ----------------------------------------------------------

def test_connector_startup_notes_alone_are_no_failure():
    d = top("(EngineCore_DP0 pid=340) WARNING 02-01 23:01:55 [base.py:166] Initializing KVConnectorBase_V1. This API "
            "is experimental and subject to change in the future as we iterate the design.\n"
            "(EngineCore_DP0 pid=340) [2026-02-01 23:01:55,853] LMCache WARNING: No LMCache configuration file is set. "
            "Trying to read configurations from the environment variables. (utils.py:55:lmcache.integration.vllm.utils)\n")
    assert d is None or d.confidence <= 0.5
