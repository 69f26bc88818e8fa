"""Mechanisms behind tests/logs/dev-mcfg/: pydantic's wrapped config errors, quantized tensors a layer was built
without, transformers objects that lack what vLLM reads, a start-up that died while building the drafter, and
request-time refusals, each against the forms vLLM and its libraries really print."""

from __future__ import annotations

from triage.diagnose import diagnose
from triage.logread import scan_text
from tests.dev_sets import first as top




def block(cls: str, inner: str) -> str:
    return ("pydantic_core._pydantic_core.ValidationError: 1 validation error for " + cls + "\n"
            f"  Value error, {inner} [type=value_error, input_value=ArgsKwargs((), {{'model': ...}}), "
            "input_type=ArgsKwargs]\n"
            "    For further information visit https://errors.pydantic.dev/2.12/v/value_error\n")


# ---- pydantic ValidationError: the raised message inside decides --------------------------------------------

def test_validation_error_defers_to_a_known_inner_message():
    # vllm/transformers_utils/config.py (0.6 .. 0.16): a RoPE dict this vLLM/transformers pair cannot read
    d = top(block("ModelConfig", "rope_scaling should have a 'rope_type' key"))
    assert d.category == "model_support" and d.signature == "model_support.rope_config_unreadable"
    d = top(block("ModelConfig", "rope_parameters should have a 'rope_type' key"))
    assert d.category == "model_support"


def test_validation_error_inner_message_only_the_catalogue_knows():
    # "Unknown quantization method" has a hand rule; "Cannot find any of ['adapter_name_or_path']" only the
    # mined catalogue (quantization/base_config.py): either way not the generic engine_config refusal
    d = top(block("ModelConfig", "Cannot find any of ['adapter_name_or_path'] in the model's quantization config."))
    assert d.category == "quantization", d.title


def test_validation_error_with_an_unknown_inner_message_stays_engine_config():
    d = top(block("SchedulerConfig", "Invalid foo setting 3 for the bar."))
    assert d.signature == "config.validation_error" and d.category == "engine_config"
    assert "Invalid foo setting" in d.title


def test_validation_error_without_inner_message_unchanged():
    d = top("pydantic_core._pydantic_core.ValidationError: 1 validation error for CompilationConfig\n"
            "level\n  Input should be a valid integer [type=int_parsing, input_value='x', input_type=str]\n")
    assert d.signature == "config.validation_error"


# ---- a quantized checkpoint's tensor that the layer vLLM built lacks ----------------------------------------

def test_scale_tensor_for_a_layer_built_unquantized_wrapped_by_the_paste():
    d = top("ValueError: There is no module or parameter named\n"
            "'layers.0.mlp.down_proj.weight_scale' in GraniteModel.\n\n"
            "The available parameters belonging to\n"
            "layers.0.mlp.down_proj (RowParallelLinear) are:\n"
            "{'layers.0.mlp.down_proj.weight'}\n")
    assert d.signature == "quant.layer_built_unquantized" and d.category == "quantization"
    assert d.facts["tensor"] == "weight_scale" and d.facts["available"] == ["layers.0.mlp.down_proj.weight"]


def test_scale_tensor_where_the_layer_is_quantized_is_a_name_mismatch():
    # the layer has its own scales in vLLM: the checkpoint's name is what does not map
    d = top("ValueError: There is no module or parameter named 'model.layers.0.mlp.gate.weight_scale' in "
            "Qwen3MoeForCausalLM. The available parameters belonging to model.layers.0.mlp.gate (ReplicatedLinear) "
            "are: {'model.layers.0.mlp.gate.weight', 'model.layers.0.mlp.gate.weight_scale_inv'}\n")
    assert d.signature == "model_loading.weight_mismatch"


def test_plain_weight_missing_is_still_a_weight_mismatch():
    d = top("ValueError: There is no module or parameter named 'lm_head.weight' in LlamaForCausalLM. The available "
            "parameters belonging to lm_head (ParallelLMHead) are: {'lm_head.weight_packed'}\n")
    assert d.category == "model_loading"


def test_kv_cache_scale_keyerror_is_quantization():
    # vLLM's loaders remap k_scale/v_scale per quantization format (maybe_remap_kv_scale_name)
    for name in ("layers.32.self_attn.qkv_proj.k_scale", "model.layers.3.self_attn.v_scale",
                 "model.layers.0.mlp.down_proj.input_scale", "model.layers.0.mlp.up_proj.weight_scale_inv"):
        d = top(f"KeyError: '{name}'\n")
        assert d.category == "quantization", (name, d.signature)
    assert top("KeyError: 'model.layers.0.self_attn.o_proj.weight'\n").category == "model_loading"


# ---- transformers objects without what vLLM reads ------------------------------------------------------------

def test_tokenizer_attribute_transformers_removed():
    d = top("AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended. "
            "Did you mean: 'num_special_tokens_to_add'?\n")
    assert d.signature == "model_support.transformers_tokenizer_attr"
    assert d.facts["attr"] == "all_special_tokens_extended"
    d = top("AttributeError: TokenizersBackend has no attribute all_special_tokens_extended\n")
    assert d.category == "model_support"


def test_tokenizer_attribute_only_logged_in_passing_is_not_the_failure():
    ds, _ = diagnose(scan_text("WARNING 03-09 11:20:04 [tokenizer.py:99] Qwen2Tokenizer has no attribute "
                               "all_special_tokens_extended\nINFO 03-09 11:20:05 [api_server.py:1] Started server\n"))
    assert all(d.signature != "model_support.transformers_tokenizer_attr" for d in ds)


# ---- a start-up that died while the drafter was being built ----------------------------------------------------

DRAFTER = ("(EngineCore_DP0 pid=7) INFO 09-18 12:03:10 [gpu_model_runner.py:2380] Loading drafter model...\n"
           "(EngineCore_DP0 pid=7) INFO 09-18 12:03:11 [eagle.py:644] Assuming the EAGLE head shares the same vocab "
           "embedding with the target model.\n")
FAILED = ("(EngineCore_DP0 pid=7) ERROR 09-18 12:03:12 [core.py:712] EngineCore failed to start.\n"
          "(EngineCore_DP0 pid=7) ERROR 09-18 12:03:12 [core.py:712] Traceback (most recent call last):\n"
          '(EngineCore_DP0 pid=7) ERROR 09-18 12:03:12 [core.py:712]   File "/x/vllm/v1/engine/core.py", line 703, '
          "in run_engine_core\n")


def test_failure_without_message_right_after_the_drafter():
    d = top(DRAFTER + FAILED)
    assert d.signature == "speculative.failed_after_drafter" and d.category == "speculative_decoding"


def test_a_raised_message_after_the_drafter_is_left_to_its_rules():
    d = top(DRAFTER + FAILED + "(EngineCore_DP0 pid=7) ERROR 09-18 12:03:12 [core.py:712] torch.OutOfMemoryError: "
            "CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    assert d.category == "gpu_oom"


def test_drafter_lines_in_a_healthy_start_are_nothing():
    ds, _ = diagnose(scan_text(DRAFTER + "(APIServer pid=1) INFO 09-18 12:03:40 [api_server.py:1] Starting vLLM "
                                         "API server on http://0.0.0.0:8000\n"))
    assert all(d.confidence <= 0.5 for d in ds)


def test_failure_after_other_steps_is_not_the_drafter():
    log = ("(EngineCore_DP0 pid=7) INFO 09-18 12:03:10 [default_loader.py:268] Loading weights took 7.91 seconds\n"
           + FAILED)
    assert all(d.signature != "speculative.failed_after_drafter" for d in diagnose(scan_text(log))[0])


# ---- request-time refusals --------------------------------------------------------------------------------------

def test_openai_error_body_of_a_refused_request_is_engine_config():
    d = top("openai.BadRequestError: Error code: 400 - {'error': {'message': 'This model does not support image "
            "input', 'type': 'BadRequestError', 'param': None, 'code': 400}}\n")
    assert d.category == "engine_config" and d.confidence < 0.5


def test_a_garbled_frame_line_still_places_the_exception_in_spec_decode():
    # a paste that lost the frame's ", line N" (moved below) and a slash: the path still names the proposer
    d = top('File "~/envs/x/lib/python3.10/site-packages/vllm_ascend/spec_decodejeagle_proposer.py",\n'
            "self.hidden_states[:num_tokens] = target_hidden_states\n"
            "RuntimeError: The expanded size of the tensor (1024) must match the existing size (4096) at "
            "non-singleton dimension 1. Target sizes: [5, 1024]. Tensor sizes: [5, 4096]\n"
            "line 1008, in set_inputs_first_pass\n")
    assert d.signature == "speculative.drafter_crash" and d.category == "speculative_decoding"


def test_a_garbled_frame_elsewhere_says_nothing_about_spec_decode():
    d = top('File "~/envs/x/lib/python3.10/site-packages/vllm/model_executor/layers/linear.py",\n'
            "RuntimeError: The expanded size of the tensor (1024) must match the existing size (4096) at "
            "non-singleton dimension 1.\n")
    # the frame names no drafter: at most the word model's guess from the message's words, said as one
    assert d.category != "speculative_decoding" or (d.confidence <= 0.35 and d.facts["category_decided"] is False)


# ---- the weight loaders' bare shape assertions -------------------------------------------------------------------

def test_weight_loader_shape_assertion_is_a_checkpoint_mismatch():
    # layers/linear.py (0.6 .. 0.33): "assert param_data.shape == loaded_weight.shape", printed without a message
    d = top("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/model_executor/layers/linear.py", line 1108, in '
            "weight_loader\n"
            "    assert param_data.shape == loaded_weight.shape\n"
            "AssertionError\n")
    assert d.signature == "model_loading.checkpoint_mismatch" and d.category == "model_loading"
    # a paste of the source line and the bare exception only
    d = top("    assert param_data.shape == loaded_weight.shape\nAssertionError\n")
    assert d.category == "model_loading"


def test_other_assertions_are_not_weight_shapes():
    d = top("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.10/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 100, in '
            "execute_model\n"
            "    assert num_tokens > 0\n"
            "AssertionError\n")
    assert d.signature != "model_loading.checkpoint_mismatch"


def test_a_drafter_weight_shape_assertion_is_left_to_spec_decode():
    d = top("Traceback (most recent call last):\n"
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/spec_decode/eagle.py", line 600, in load_model\n'
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/vocab_parallel_embedding.py", '
            "line 419, in weight_loader\n"
            "AssertionError: Shapes do not match! param.data.shape=torch.Size([151936, 4096]) "
            "loaded_weight.shape=torch.Size([152064, 4096])\n")
    assert d.category == "speculative_decoding"


def test_a_failure_far_after_the_drafter_lines_is_not_blamed_on_it():
    # other steps ran in between (their lines need not be selected): the drafter is not the step that failed
    far = "".join(f"(EngineCore_DP0 pid=7) INFO 09-18 12:03:11 [x.py:1] step {i} done\n" for i in range(60))
    scan = scan_text(DRAFTER + far + FAILED)
    assert [ln.no for ln in scan.lines][3] > 20  # those lines are not selected (one kept as context), yet the numbering runs on
    ds, _ = diagnose(scan)
    assert all(d.signature != "speculative.failed_after_drafter" for d in ds)


# ---- a model class written for another vLLM's model interface ---------------------------------------------------

def test_model_class_without_vllm_config_argument():
    d = top("TypeError: Qwen2ForCausalLM.__init__() got an unexpected keyword argument 'vllm_config'\n")
    assert d.signature == "model_support.model_class_interface" and d.category == "model_support"


def test_old_style_warning_alone_is_not_a_failure():
    ds, _ = diagnose(scan_text("WARNING 05-14 09:12:31 [utils.py:77] Trying to guess the arguments for old-style model "
                               "class <class 'x.AcmeForCausalLM'>\nINFO 05-14 09:13:00 [api_server.py:1] Starting vLLM "
                               "API server on http://0.0.0.0:8000\n"))
    assert all(d.signature != "model_support.model_class_interface" for d in ds)


def test_other_typeerrors_are_not_the_model_interface():
    d = top("TypeError: forward() got an unexpected keyword argument 'positions'\n")
    assert d.signature != "model_support.model_class_interface"


# ---- a message wrapped by the paste -----------------------------------------------------------------------------

def test_max_model_len_refusal_wrapped_at_the_parenthesis():
    d = top("Value error, User-specified max_model_len (16384) is greater than the derived max_model_len \n"
            "(max_position_embeddings=8192 or model_max_length=None in model's config.json). To allow overriding "
            "this maximum, set \nthe env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1.\n")
    assert d.signature == "config.max_model_len_too_large"
    assert d.facts["max_model_len"] == 16384 and d.facts["max_position_embeddings"] == 8192


def test_every_pattern_rule_reads_an_exception_message_a_paste_wrapped():
    cases = {
        "ValueError: max_num_batched_tokens (2048) is smaller than\nmax_model_len (32768). This effectively limits":
            "config.batched_tokens_lt_max_len",
        "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be\n"
        "stored in KV cache (21328). Try increasing gpu_memory_utilization": "kv_cache.max_len_exceeds_capacity",
        "ValueError: The checkpoint you are trying to load has model type\n`qwen3_5` but Transformers does not "
        "recognize this architecture.": "model_support.transformers_unknown_type",
    }
    for text, sig in cases.items():
        assert top(text + "\n").signature == sig, text
