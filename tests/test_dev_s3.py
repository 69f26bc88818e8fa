"""s3's dev set (tests/logs/dev-s3/): speculative decoding and engine features refused at start-up, real logs through
the CLI, and the mechanisms that name them, each on the other wordings the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-s3")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- sleep mode refused by the platform (config.py 0.7.x, config/model.py 0.8+) ---------------------------

@pytest.mark.parametrize("text", [
    "ValueError: Sleep mode is only supported on CUDA devices.\n",
    "ValueError: Sleep mode is not supported on current platform.\n",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for ModelConfig\n"
    "  Value error, Sleep mode is not supported on current platform. [type=value_error, input_value=ArgsKwargs((), "
    "{'model': 'Qwen/Qwen2.5-7B'}), input_type=ArgsKwargs]\n",
    "sleep mode not supported on ROCm with vllm 0.7.3, so the rollout fails\n",
])
def test_sleep_mode_refused_by_the_platform(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.sleep_mode_unsupported_platform", "engine_config")


def test_the_ascend_warning_that_disables_sleep_mode_is_no_refusal():
    d = top("WARNING 04-18 10:00:01 [utils.py:73] Failed to import vllm_ascend_C: No module named 'vllm_ascend.vllm_ascend_C'. "
            "Sleep mode will be disabled.\n")
    assert d is None or not d.signature.startswith("config.sleep_mode")


# ---- one sleep-mode engine per process (gpu_worker, vllm-ascend's NPU worker) ------------------------------

@pytest.mark.parametrize("text", [
    "AssertionError: Sleep mode can only be used for one instance per process.\n",
    "(EngineCore_DP0 pid=91) ERROR 07-01 02:03:04 [core.py:700] AssertionError: Sleep mode can only be used for one "
    "instance per process.\n",
])
def test_second_sleep_mode_engine_in_a_process(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.sleep_mode_one_instance", "engine_config")


# ---- Model Runner V2's pooling tasks (v1/worker/gpu/pool/pooling_runner.py) ---------------------------------

@pytest.mark.parametrize("text, task", [
    ("ValueError: Model Runner V2 supports pooling tasks ['classify', 'embed', 'token_classify'], but this model "
     "selects 'embed&token_classify' from ['embed', 'embed&token_classify', 'token_classify', 'token_embed']. Set an "
     "explicitly supported task or VLLM_USE_V2_MODEL_RUNNER=0.\n", "'embed&token_classify'"),
    ("ValueError: Model Runner V2 supports pooling tasks ['classify', 'embed'], but this model supports "
     "['token_embed']. Set VLLM_USE_V2_MODEL_RUNNER=0 to use this model.\n", "it supports ['token_embed']"),
])
def test_mrv2_pooling_task(text, task):
    d = first(text)
    assert (d.signature, d.category) == ("config.mrv2_pooling_task_unsupported", "engine_config")
    assert d.facts["task"] == task
    assert "VLLM_USE_V2_MODEL_RUNNER=0" in d.fix.summary


# ---- a LoRA adapter written into the draft model's layers ---------------------------------------------------

LORA_TRACE = (
    "  File \"/vllm/vllm/lora/models.py\", line 405, in activate_adapter\n"
    "    module.set_lora(index, module_lora.lora_a, module_lora.lora_b,\n"
    "  File \"/vllm/vllm/lora/layers.py\", line 215, in set_lora\n"
    "    self.lora_b_stacked[index,\n"
    "RuntimeError: {msg}\n")


@pytest.mark.parametrize("msg", [
    "The size of tensor a (768) must match the size of tensor b (4096) at non-singleton dimension 0",
    "The expanded size of the tensor (1024) must match the existing size (4096) at non-singleton dimension 1.  "
    "Target sizes: [5, 1024].  Tensor sizes: [5, 4096]",
])
def test_lora_shape_error_with_a_draft_is_speculative(msg):
    text = ("INFO 01-12 03:07:41 llm_engine.py:234] Initializing an LLM engine (v0.6.6) with config: model='m', "
            "speculative_config=SpeculativeConfig(draft_model='JackFram/llama-160m', num_spec_tokens=5)\n"
            "Traceback (most recent call last):\n" + LORA_TRACE.format(msg=msg))
    d = first(text)
    assert (d.signature, d.category) == ("speculative.lora_on_draft", "speculative_decoding")


def test_lora_shape_error_without_a_draft_is_not_claimed():
    text = "Traceback (most recent call last):\n" + LORA_TRACE.format(
        msg="The size of tensor a (768) must match the size of tensor b (4096) at non-singleton dimension 0")
    d = top(text)
    assert d is None or d.signature != "speculative.lora_on_draft"


# ---- forms an earlier rule now reads ------------------------------------------------------------------------

def test_draft_vocab_assert_retold_in_prose():
    d = first("In spec_decode_worker.py, line 564:` asserts all(vocab_sizes[0] == vocab_size for vocab_size in "
              "vocab_sizes)` making the inference pipeline unable to run.\n")
    assert (d.signature, d.category) == ("speculative.draft_mismatch", "speculative_decoding")


def test_draft_model_vocab_check_of_v1_draft_models():
    d = first("ValueError: Target and draft model should have the same vocabulary size. Target model "
              "vocab_size=152064. Draft model vocab_size=151936. Using models with different tokenizers can cause "
              "out-of-bounds errors during speculative decoding.\n")
    assert (d.signature, d.category) == ("speculative.draft_mismatch", "speculative_decoding")


def test_lora_rank_placeholder_in_prose():
    d = first("the vLLM backend will fail with the error: `ValueError: LoRA rank XXX is greater than max_lora_rank 16`.\n")
    assert (d.signature, d.category) == ("config.lora_rank", "engine_config")


# ---- speculative-config checks (config/speculative.py across releases) -------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: num_speculative_tokens:5 must be divisible by n_predict=1\n",
    "ValueError: A speculative model was provided, but neither `speculative_token_tree` nor `num_speculative_tokens` "
    "was provided\n",
    "ValueError: A speculative model was provided, but `num_speculative_tokens` was not provided\n",
    "ValueError: prompt_lookup_min=5 must be <= prompt_lookup_max=2\n",
    "ValueError: prompt_lookup_max=0 must be > 0\n",
    "ValueError: speculative_draft_tensor_parallel_size=4 cannot be other value than 1 or target model "
    "tensor_parallel_size=8\n",
])
def test_speculative_config_checks(text):
    d = first(text)
    assert (d.signature, d.category) == ("speculative.config_invalid", "speculative_decoding")


def test_draft_tp_fallback_warning_is_not_the_refusal():
    d = top("WARNING 10-01 10:00:00 [speculative.py:400] MLPSpeculatorPreTrainedModel cannot currently be run with "
            "tp>1; setting speculative_draft_tensor_parallel_size=1\n")
    assert d is None or d.confidence <= 0.5


# ---- one multimodal item above the step's token budget (encoder_cache_manager) ------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens "
    "(2048). Please increase max_num_batched_tokens.\n",
    "ValueError: Chunked MM input disabled but max_tokens_per_mm_item (16384)\nis larger than max_num_batched_tokens "
    "(2048).\n",
    # prose quoting it without the exception, wrapped and indented
    "and hit the refusal:\n\n  Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger\n"
    "  than max_num_batched_tokens (512).\n",
])
def test_mm_item_larger_than_batched_tokens(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.mm_item_exceeds_batched_tokens", "engine_config")
    assert "--max-num-batched-tokens" in d.fix.summary


def test_forcing_chunked_mm_input_off_is_only_a_warning():
    d = top("WARNING 06-02 09:14:40 [vllm.py:712] Forcing --disable_chunked_mm_input for models with "
            "multimodal-bidirectional attention.\n")
    assert d is None or d.confidence <= 0.5


# ---- EAGLE3 on a target without the interface (V1 gpu_model_runner, Model Runner V2 eagle3_utils) ----------

@pytest.mark.parametrize("text", [
    "RuntimeError: Model does not support EAGLE3 interface but aux_hidden_state_outputs was requested\n",
    "RuntimeError: Model does not support EAGLE3 interface\n",
    "RuntimeError: Worker failed with error 'Model does not support EAGLE3 interface but aux_hidden_state_outputs was "
    "requested', please check the stack trace above for the root cause\n",
])
def test_eagle3_target_without_the_interface(text):
    d = first(text)
    assert (d.signature, d.category) == ("speculative.eagle3_target_unsupported", "speculative_decoding")


def test_a_missing_aux_layer_method_stays_a_drafter_crash():
    d = first("  File \"/usr/local/lib/python3.12/dist-packages/vllm/v1/spec_decode/eagle.py\", line 900, in "
              "_get_eagle3_aux_layers\n    self.model.set_aux_hidden_state_layers(aux_layers)\n"
              "AttributeError: 'Qwen3NextForCausalLM' object has no attribute 'set_aux_hidden_state_layers'\n")
    assert d.category == "speculative_decoding"


# ---- dual-batch overlap on a non-DeepEP all2all backend (config/vllm.py, 0.11 .. later) ----------------------

@pytest.mark.parametrize("text, backend", [
    ("AssertionError: Microbatching currently only supports the deepep_low_latency all2all backend. naive is not "
     "supported. To fix set the VLLM_ALL2ALL_BACKEND environment variable to deepep_low_latency and install the DeepEP "
     "kerenls.\n", "naive"),
    ("  Value error, Microbatching currently only supports the deepep_low_latency and deepep_high_throughput all2all "
     "backend. allgather_reducescatter is not supported. To fix use --all2all-backend=deepep_low_latency or "
     "--all2all-backend=deepep_high_throughput and install the DeepEP kernels. [type=assertion_error, "
     "input_value=ArgsKwargs((), {'model_co...}), input_type=ArgsKwargs]\n", "allgather_reducescatter"),
    ("AssertionError: Microbatching currently only supports the deepep_low_latency, deepep_high_throughput, and "
     "nixl_ep all2all backends. flashinfer_all2allv is not supported.\n", "flashinfer_all2allv"),
    ("Assertion failed, Microbatching currently only supports the deepep_low_latency,\n"
     "deepep_high_throughput, and nixl_ep all2all backends. flashinfer_all2allv is not supported\n", None),
])
def test_dbo_needs_a_deepep_backend(text, backend):
    d = first(text)
    assert (d.signature, d.category) == ("config.dbo_all2all_backend", "engine_config")
    if backend:
        assert backend in d.title


# ---- sequence parallelism's preconditions (vllm-ascend platform check) ------------------------------------

@pytest.mark.parametrize("text", [
    "AssertionError: Sequence parallelism is only supported when tp_size > 1.\n",
    "AssertionError: Sequence parallelism requires enable_expert_parallel=True for MoE models.\n",
])
def test_sequence_parallel_preconditions(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.sequence_parallel_refused", "engine_config")
