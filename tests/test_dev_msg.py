"""msg's dev set (tests/logs/dev-msg/): real logs found by searching threads for the message text of vLLM raise
sites no hand rule claimed, through the CLI, and the rules that name them (triage.rules.msg_raise_sites), each on the
wordings the raising code writes across releases."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-msg")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a second engine in one process: parallel_state's once-per-process groups ------------------------------

@pytest.mark.parametrize("text, group", [
    # 0.2-0.4 (model_executor/parallel_utils) and 0.4.1+ (distributed/parallel_state.py)
    ("AssertionError: tensor model parallel group is already initialized\n", "tensor model"),
    ("AssertionError: pipeline model parallel group is already initialized\n", "pipeline model"),
    # 0.1.x's Megatron copy and 0.8+'s _DP
    ("AssertionError: data parallel group is already initialized\n", "data"),
    # LangChain's VLLM wrapper re-raises it inside its pydantic validation
    ("ValidationError: 1 validation error for VLLM\n__root__\n"
     "  data parallel group is already initialized (type=assertion_error)\n", "data"),
])
def test_parallel_group_already_initialized_is_a_second_engine(text, group):
    d = first(text)
    assert (d.signature, d.category, d.facts["group"]) == ("distributed.parallel_group_reinitialized", "distributed",
                                                            group)


def test_an_uninitialized_group_is_no_second_engine():
    d = top("AssertionError: tensor model parallel group is not initialized\n")
    assert d is None or d.signature != "distributed.parallel_group_reinitialized"


# ---- one KV-cache type in the V1 runners of 0.7-0.9 ---------------------------------------------------------

@pytest.mark.parametrize("text", [
    # gpu_model_runner / tpu_model_runner initialize_kv_cache (0.7.3-0.9)
    "NotImplementedError: Hybrid models with more than one KV cache type are not supported yet.\n",
    # kvcached's patched allocation, told in prose
    "I get `(EngineCore_DP0 pid=924148) NotImplementedError: Hybrid models with more than one KV cache type are not "
    "supported yet.`.\n",
])
def test_more_than_one_kv_cache_type(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.hybrid_kv_cache_types", "model_support")


def test_hybrid_manager_disabled_keeps_its_own_rule():
    d = first("ValueError: Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one "
              "unified type.\n")
    assert d.signature == "config.hybrid_kv_cache_disabled"


# ---- local_world_size against the visible devices (gpu_worker.init_device, 0.10-0.11.1) -------------------

RAY_LAUNCH = "INFO [utils.py:233] non-default args: {'tensor_parallel_size': 8, 'distributed_executor_backend': 'ray'}\n"
LWS = "AssertionError: local_world_size (8) must be less than or equal to the number of visible devices (4).\n"


def test_local_world_size_under_ray_is_the_multinode_check():
    d = first(RAY_LAUNCH + LWS)
    assert (d.signature, d.category) == ("distributed.ray_multinode_local_world_size", "distributed")


def test_local_world_size_title_without_numbers_under_ray():
    d = first("# [Bug]: AssertionError: local_world_size must be less than or equal to the number of visible devices\n"
              "Run command: `vllm serve --model gpt-oss-120b --tensor-parallel-size 8 --distributed-executor-backend ray`\n")
    assert d.signature == "distributed.ray_multinode_local_world_size"


def test_local_world_size_without_ray_is_the_layout():
    d = first(LWS)
    assert (d.signature, d.category, d.facts["devices"]) == ("config.local_world_size_exceeds_devices",
                                                              "engine_config", 4)


def test_zero_visible_devices_stays_the_environment_even_under_ray():
    d = first(RAY_LAUNCH + "AssertionError: local_world_size (8) must be less than or equal to the number of "
              "visible devices (0).\n")
    assert (d.signature, d.category) == ("environment.zero_visible_devices", "environment")


# ---- the multiprocessing executor's GPU count (0.5-0.9) and --engine-use-ray ------------------------------

@pytest.mark.parametrize("msg", [
    "AssertionError: please set tensor_parallel_size to less than max local gpu count\n",  # 0.5.0
    "AssertionError: please set tensor_parallel_size (4) to less than max local gpu count (1)\n",  # 0.5.1-0.9
    "RuntimeError: please ensure that world_size (4) is less than than max local gpu count (1)\n",
])
def test_gpu_count_with_engine_use_ray_is_the_engine_actor(msg):
    d = first("INFO args: Namespace(model='Qwen2-72B', tensor_parallel_size=4, engine_use_ray=True)\n" + msg)
    assert (d.signature, d.category) == ("distributed.engine_use_ray_one_gpu", "distributed")


@pytest.mark.parametrize("msg", [
    "AssertionError: please set tensor_parallel_size to less than max local gpu count\n",
    "AssertionError: please set tensor_parallel_size (4) to less than max local gpu count (2)\n",
])
def test_gpu_count_without_engine_use_ray_is_the_layout(msg):
    d = first(msg)
    assert (d.signature, d.category) == ("config.tp_exceeds_gpus", "engine_config")


# ---- the fused-MoE layer's CPU path (0.5-0.6) ----------------------------------------------------------------

@pytest.mark.parametrize("text, platform", [
    ("NotImplementedError: The CPU backend currently does not support MoE.\n", "CPU"),
    ("ERROR 11-11 11:42:38 engine.py:158] NotImplementedError('The CPU backend currently does not support MoE.')\n",
     "CPU"),
    ("NotImplementedError: The TPU backend currently does not support MoE.\n", "TPU"),
])
def test_backend_without_moe(text, platform):
    d = first(text)
    assert (d.signature, d.category, d.facts["platform"]) == ("model_support.cpu_backend_moe", "model_support",
                                                               platform)


# ---- vllm serve --headless and a data-parallel rank -------------------------------------------------------

def test_headless_refuses_a_data_parallel_rank():
    d = first("ValueError: data_parallel_rank is not applicable in headless mode\n")
    assert (d.signature, d.category) == ("config.headless_data_parallel_rank", "engine_config")


# ---- --otlp-traces-endpoint without OpenTelemetry ---------------------------------------------------------

@pytest.mark.parametrize("text", [
    # 0.5.4
    "ValueError: OpenTelemetry packages must be installed before configuring 'otlp_traces_endpoint'\n",
    # 0.6+
    "ValueError: OpenTelemetry is not available. Unable to configure 'otlp_traces_endpoint'. Ensure OpenTelemetry "
    "packages are installed. Original error:\n",
])
def test_otlp_endpoint_without_opentelemetry(text):
    d = first(text)
    assert (d.signature, d.category, d.facts["option"]) == ("install.opentelemetry_missing", "install_mismatch",
                                                             "otlp_traces_endpoint")


# ---- prefix caching with sliding-window attention (V0, 0.3-0.10) ---------------------------------------------

@pytest.mark.parametrize("text", [
    "AssertionError: Prefix caching is currently not supported with sliding window attention\n",  # 0.3 model runner
    "NotImplementedError: Sliding window is not allowed with prefix caching enabled!\n",  # 0.4 block manager
    "AssertionError: Prefix caching is not supported with sliding window\n",  # 0.5 model runner
    "NotImplementedError: Prefix caching is not supported with sliding window. Run with --disable-sliding-window to "
    "use prefix caching.\n",  # CacheConfig 0.5-0.10
])
def test_prefix_caching_with_sliding_window(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.prefix_caching_sliding_window", "engine_config")


def test_prefix_caching_refused_for_another_reason_keeps_the_general_rule():
    d = first("AssertionError: Prefix caching is not supported with flashinfer yet.\n")  # 0.5 flashinfer backend
    assert d.signature == "config.prefix_caching_unsupported"
