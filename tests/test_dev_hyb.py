"""hyb's dev set (tests/logs/dev-hyb/): real logs of hybrid (Mamba/SSM, linear-attention) and long-context models in
vLLM, through the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-hyb")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- mamba cache mode 'align' refusing a KV connector's prefix hit (scheduler._mamba_block_aligned_split) ------

@pytest.mark.parametrize("text", [
    "AssertionError: External KV connector is not verified yet\n",
    "AssertionError: External KV connector is not verified yet.\n",  # the wording some forks quote
    "    assert num_external_computed_tokens == 0, (\n",
])
def test_external_kv_hit_in_align_mode_is_engine_config(text):
    d = first(text)
    assert (d.signature, d.category) == ("hyb.mamba_align_external_kv", "engine_config")


# ---- a mamba block size without prefix caching (VllmConfig.validate_mamba_block_size) --------------------------

def test_mamba_block_size_without_prefix_caching_names_the_drafter_when_there_is_one():
    d = first("non-default args: {'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}}\n"
              "ValueError: --mamba-block-size can only be set with --enable-prefix-caching\n")
    assert d.signature == "hyb.mamba_block_size_without_prefix_caching" and d.facts["drafter"]
    assert "speculative-config" in d.fix.summary


def test_mamba_block_size_without_prefix_caching_alone():
    d = first("pydantic_core._pydantic_core.ValidationError: 1 validation error for VllmConfig\n"
              "  Value error, --mamba-block-size can only be set with --enable-prefix-caching [type=value_error]\n")
    assert (d.signature, d.category) == ("hyb.mamba_block_size_without_prefix_caching", "engine_config")
    assert not d.facts["drafter"]


# ---- an empty state slice in a Mamba2 layer: the block size left the chunk ends --------------------------------

def test_empty_ssm_state_slice_in_mamba_mixer2_is_the_block_size():
    d = first('  File "/x/vllm/model_executor/layers/mamba/mamba_mixer2.py", line 963, in conv_ssm_forward\n'
              "    ssm_state[cache_blocks_to_fill] = from_where\n"
              "RuntimeError: shape mismatch: value tensor of shape [0, 24, 32, 64] cannot be broadcast to indexing "
              "result of shape [4, 24, 32, 64]\n")
    assert (d.signature, d.category) == ("hyb.mamba_block_chunk_misaligned", "engine_config")


def test_a_shape_mismatch_outside_mamba_code_is_not_claimed():
    d = top("RuntimeError: shape mismatch: value tensor of shape [0, 4] cannot be broadcast to indexing result of "
            "shape [2, 4]\n")
    assert d is None or d.signature != "hyb.mamba_block_chunk_misaligned"


# ---- mamba cache mode 'all' with speculative decoding -----------------------------------------------------------

def test_prev_step_assert_of_mamba_mixer2_is_spec_decode_with_mode_all():
    d = first('  File "/x/vllm/model_executor/layers/mamba/mamba_mixer2.py", line 963, in conv_ssm_forward\n'
              "    assert block_idx_last_scheduled_token_prev_step_d is not None\n"
              "AssertionError\n")
    assert (d.signature, d.category) == ("hyb.mamba_cache_all_spec_decode", "speculative_decoding")
    assert "--mamba-cache-mode align" in d.fix.summary


def test_bare_assert_with_mode_all_and_a_drafter():
    d = first("non-default args: {'mamba_cache_mode': 'all', 'enable_prefix_caching': True, "
              "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}\n"
              "ERROR [core.py:1349] AssertionError\n")
    assert (d.signature, d.category) == ("hyb.mamba_cache_all_spec_decode", "speculative_decoding")


def test_bare_assert_with_mode_all_but_no_drafter_is_not_claimed():
    d = top("non-default args: {'mamba_cache_mode': 'all', 'enable_prefix_caching': True}\n"
            "ERROR [core.py:1349] AssertionError\n")
    assert d is None or d.signature != "hyb.mamba_cache_all_spec_decode"


# ---- the hybrid KV cache manager turned off, the paste cut in unify_hybrid_kv_cache_specs ----------------------

def test_hma_off_then_cut_in_unify_is_engine_config():
    d = first("WARNING [kv_cache_utils.py:1175] Hybrid KV cache manager is disabled for this hybrid model, This means "
              "we do not enable any optimizations for saving KV cache memory.\n"
              "Traceback (most recent call last):\n"
              '  File "/x/vllm/v1/core/kv_cache_utils.py", line 1236, in get_kv_cache_groups\n'
              "    unify_hybrid_kv_cache_specs(kv_cache_spec)\n")
    assert (d.signature, d.category) == ("hyb.hma_off_unify_cut", "engine_config")


def test_hma_off_alone_is_no_failure():
    d = top("WARNING [kv_cache_utils.py:1175] Hybrid KV cache manager is disabled for this hybrid model, This means "
            "we do not enable any optimizations for saving KV cache memory.\n")
    assert d is None or d.signature != "hyb.hma_off_unify_cut"


# ---- sliding window on some layers only (qwen2.py 0.5 .. 0.8) ----------------------------------------------------

@pytest.mark.parametrize("text", [
    # 0.6+ (.format)
    "ValueError: Sliding window for some but all layers is not supported. This model uses sliding window but "
    "`max_window_layers` = 64 is less than `num_hidden_layers` = 64. Please open an issue to discuss this feature.\n",
    # a ticket title cut at its length limit
    "# [Bug]: Qwen2.5: Sliding window for some but all layers is not supported. This model uses sliding window but "
    "`max_window_layers` = 28 is less than `num_hidden_layers` = 28. Please open an issue to disc\n",
])
def test_partial_sliding_window_is_model_support(text):
    d = first(text)
    assert (d.signature, d.category) == ("hyb.partial_sliding_window_unsupported", "model_support")


# ---- FP8 block quantization refusing a tensor-parallel shard (fp8_utils.validate_fp8_block_shape) ---------------

@pytest.mark.parametrize("text", [
    "ValueError: Weight output_partition_size = 576 is not divisible by weight quantization block_n = 128.\n",
    "ValueError: The output_size of gate's and up's weight = 192 is not divisible by weight quantization block_n = 128\n",
    "# [Bug]: checkpoint cannot load with tp_size=8 — MoE gate+up weight output_size (80) not divisible by FP8 "
    "block_n=128\n",
])
def test_fp8_block_shard_is_quantization_shape(text):
    d = first(text)
    assert (d.signature, d.category) == ("quant.shape_unsupported", "quantization")


# ---- a Mamba state builder is no attention backend to pick ---------------------------------------------------------

def test_mamba_metadata_builder_in_prose_is_no_attention_backend_refusal():
    d = top("The current code gates `prev_last_scheduled_idx` inside this check, so it is never forwarded to "
            "`Mamba2AttentionMetadataBuilder`.\nKeyError: 'x'\n")
    assert d is None or d.signature != "attention.backend_refused"


def test_feature_refusal_ending_in_exclamation_marks():
    d = first("# [Bug]: FlexAttention does not support sliding window yet !!!\n")
    assert (d.signature, d.category) == ("attention.backend_feature_unsupported", "attention_backend")


# ---- a message quoted in prose and broken at a width, with no exception line to hang it on ------------------------

def test_kv_message_wrapped_in_a_code_block_is_read_whole(tmp_path):
    from triage.diagnose import diagnose
    from triage.logread import scan_path
    p = tmp_path / "paste.log"
    p.write_text("Measured on a hybrid model, the only edit being --enable-prefix-caching:\n\n```text\n"
                 "To serve at least one request with the model's max seq len (262144), 9.29 GiB KV cache is needed,\n"
                 "which is larger than the available KV cache memory (9.28 GiB).\n"
                 "Based on the available memory, the estimated maximum model length is 260800.\n```\n")
    ds, _ = diagnose(scan_path(str(p)))
    assert ds and (ds[0].signature, ds[0].facts.get("kv_capacity_tokens")) == ("kv_cache.insufficient_for_max_len",
                                                                                260800)


def test_a_literal_whole_on_one_line_is_not_reread_across_lines(tmp_path):
    from triage.diagnose import diagnose
    from triage.logread import scan_path
    p = tmp_path / "paste.log"
    # the sentence is whole on its line and does not match there; the next line must not complete it
    p.write_text("INFO the warning said KV cache is needed, which is larger than the available KV cache memory (\n"
                 "so we lowered it.\n")
    ds, _ = diagnose(scan_path(str(p)))
    assert all(d.signature != "kv_cache.insufficient_for_max_len" for d in ds)
