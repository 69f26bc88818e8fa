"""pool's dev set (tests/logs/dev-pool/): embedding/reranker/classification/reward models, LoRA adapters, prompt
adapters and sleep mode, through the CLI; and the rules that name them, each on the wordings the raising code
writes across releases (not only the one a thread pasted)."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-pool")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a pooling task the installed vLLM cannot serve for this architecture ----------------------------------

@pytest.mark.parametrize("text, task", [
    # config.py _resolve_task, 0.6.2 .. 0.9.x (a set of the supported tasks)
    ("ValueError: This model does not support the 'embedding' task. Supported tasks: {'generate'}\n", "embedding"),
    ("ValueError: This model does not support the 'reward' task. Supported tasks: {'embedding'}\n", "reward"),
    ("ValueError: This model does not support the 'score' task. Supported tasks: {'generate', 'embed'}\n", "score"),
    # a ticket title that drops the "This model" (the architecture's name in its place)
    ("[Bug]: math-shepherd-mistral-7b-prm does not support the 'embedding' task. Supported tasks: {'generate'}\n",
     "embedding"),
    # config/model.py, 0.10+ (--task replaced by --runner/--convert), as pydantic prints it
    ("  Value error, This model does not support `--runner pooling`. You can pass `--convert <embed|classify|reward> "
     "to adapt it into a pooling model. [type=value_error, input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n",
     "pooling"),
])
def test_task_the_architecture_cannot_serve_is_model_support(text, task):
    d = first(text)
    assert (d.signature, d.category) == ("pooling.task_unsupported", "model_support")
    assert d.facts["task"] == task


def test_runner_pooling_refusal_points_at_convert():
    d = first("ValueError: This model does not support `--runner pooling`. You can pass `--convert "
              "<embed|classify|reward> to adapt it into a pooling model.\n")
    assert "--convert" in d.fix.summary


@pytest.mark.parametrize("arch", ["Qwen3ForCausalLM", "Qwen2ForCausalLM", "LlamaForCausalLM"])
def test_causal_lm_without_pooler(arch):
    d = first(f"AttributeError: '{arch}' object has no attribute 'pooler'\n")
    assert (d.signature, d.category) == ("pooling.model_without_pooler", "model_support")
    assert d.facts["arch"] == arch


def test_pooler_quoted_in_prose_is_read():
    # a ticket's first line quoting the exception's repr, before any log
    d = first('问题：AttributeError("\'Qwen3ForCausalLM\' object has no attribute \'pooler\'")\n')
    assert d.signature == "pooling.model_without_pooler"


# ---- LoRA kernel limits --------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, limit", [
    ("ValueError: When using LoRA, vocab size must be 32000 >= vocab_size <= 33024\n", 33024),
    ("ValueError: When using LoRA, vocab size must be 32000 >= vocab_size <= 128512\n", 128512),
    ("ValueError: When using LoRA, vocab size must be 32000 >= vocab_size <= 257024\n", 257024),
    ("ValueError: When using LoRA, vocab size must be > 32000 and <= 258048\n", 258048),
    ("ValueError: When using LoRA, vocab size must be <= 258048\n", 258048),
    # a ticket retelling it with "vocab size" for vocab_size
    ("When using LoRA, vocab size must be 32000 >= vocab size <= 33024\n", 33024),
])
def test_lora_vocab_limit_every_release(text, limit):
    d = first(text)
    assert (d.signature, d.category) == ("lora.vocab_size_limit", "engine_config")
    assert d.facts["limit"] == limit


def test_lora_on_a_quantized_model_refused_by_old_vllm():
    d = first("ValueError: LoRA is not supported with quantized models yet.\n")
    assert (d.signature, d.category) == ("lora.quantized_base_refused", "engine_config")


@pytest.mark.parametrize("method", ["awq", "gptq_marlin", "bitsandbytes", "fp8"])
def test_quantization_untested_with_lora_is_a_note(method):
    d = top(f"WARNING 06-14 12:29:50 config.py:976] {method} quantization is not tested with LoRA yet.\n")
    assert d is None or d.confidence <= 0.5


def test_lora_batched_tokens_limit():
    d = first("ValueError: Due to limitations of the custom LoRA CUDA kernel, max_num_batched_tokens must be <= 65528 "
              "when LoRA is enabled.\n")
    assert (d.signature, d.category) == ("lora.batched_tokens_limit", "engine_config")
    assert d.facts["limit"] == 65528


@pytest.mark.parametrize("h_in, h_out", [(64, 3424), (16, 79360)])
def test_punica_no_suitable_kernel(h_in, h_out):
    # Ray workers' prefix, and Triton's C++ backend printing the exception with "At:" frames
    for text in (f"(RayWorkerWrapper pid=1) ERROR 04-26 16:28:41 worker_base.py:157] RuntimeError: No suitable "
                 f"kernel. h_in={h_in} h_out={h_out} dtype=Float out_dtype=BFloat16\n",
                 f"E0125 16:55:39.360842 120378 backend_model.cc:635] ERROR: Failed to create instance: RuntimeError: "
                 f"No suitable kernel. h_in={h_in} h_out={h_out} dtype=Float out_dtype=BFloat16\n"):
        d = first(text)
        assert (d.signature, d.category) == ("lora.punica_no_kernel", "engine_config")
        assert (d.facts["h_in"], d.facts["h_out"]) == (h_in, h_out)


# ---- a field of vLLM's own config classes read by another release's code -----------------------------------

@pytest.mark.parametrize("cls, attr", [
    ("LoRAConfig", "lora_extra_vocab_size"),
    ("ModelConfig", "task"),
    ("ParallelConfig", "worker_use_ray"),
    ("SchedulerConfig", "num_scheduler_steps"),
    ("VllmConfig", "prompt_adapter_config"),
])
def test_vllm_config_field_missing_is_a_version_mismatch(cls, attr):
    d = first(f"AttributeError: '{cls}' object has no attribute '{attr}'\n")
    assert (d.signature, d.category) == ("install.vllm_config_field_missing", "install_mismatch")
    assert (d.facts["cls"], d.facts["attr"]) == (cls, attr)


@pytest.mark.parametrize("cls", ["Qwen3Config", "LlamaConfig", "PretrainedConfig", "MyLoRAConfig"])
def test_transformers_config_classes_stay_with_transformers(cls):
    d = first(f"AttributeError: '{cls}' object has no attribute 'rope_scaling'\n")
    assert d.signature == "model_support.transformers_config_attr"


# ---- the sleep-mode allocator ----------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "AssertionError: Expandable segments are not compatible with memory pool. Please track "
    "https://github.com/pytorch/pytorch/issues/147851 for the latest updates.\n",
    # the assert's source line quoted as a ticket title
    '# assert "expandable_segments:True" not in conf报错\n',
    "    assert 'expandable_segments:True' not in conf, 'Expandable segment\n",
])
def test_sleep_mode_refuses_expandable_segments(text):
    d = first(text)
    assert (d.signature, d.category) == ("sleep.expandable_segments", "engine_config")


def test_expandable_segments_in_the_environment_alone_is_no_failure():
    d = top("INFO 05-12 10:22:08 [__init__.py:239] PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True\n")
    assert d is None or d.signature != "sleep.expandable_segments"


@pytest.mark.parametrize("text, which", [
    ('AssertionError: cumem allocator is not available\n', "cumem"),
    ('[rank12]:     assert camem_available, "camem allocator is not available"\n', "camem"),
])
def test_sleep_mode_allocator_missing(text, which):
    d = first(text)
    assert (d.signature, d.category) == ("sleep.allocator_unavailable", "install_mismatch")
    assert d.facts["which"] == which


# ---- a request naming a model the server does not serve ---------------------------------------------------

@pytest.mark.parametrize("text", [
    # the server's JSON body (0.2 .. 0.x), the newer nested form, and the openai client's exception
    '{"object":"error","message":"The model `qwen` does not exist.","type":"NotFoundError","param":null,"code":404}\n',
    '{"error":{"message":"The model `qwen` does not exist.","type":"NotFoundError","param":"model","code":404}}\n',
    "openai.NotFoundError: Error code: 404 - {'object': 'error', 'message': 'The model `qwen` does not exist.', "
    "'type': 'NotFoundError', 'param': None, 'code': 404}\n",
])
def test_model_name_not_served(text):
    d = first(text)
    assert (d.signature, d.category) == ("serving.model_not_served", "engine_config")
    assert d.facts["name"] == "qwen"


@pytest.mark.parametrize("launch, served", [
    ("python -m vllm.entrypoints.openai.api_server --model /models/Qwen2-7B --trust-remote-code\n", "/models/Qwen2-7B"),
    ("vllm serve /models/Qwen2-7B --served-model-name qwen2 --trust-remote-code\n", "qwen2"),
    ("INFO 03-19 10:00:00 api_server.py:209] args: Namespace(host=None, served_model_name=['qwen2'], model='/m/q')\n",
     "qwen2"),
])
def test_model_not_served_names_what_the_server_serves(launch, served):
    d = first(launch + '{"object":"error","message":"The model `qwen` does not exist.","type":"NotFoundError"}\n')
    assert d.signature == "serving.model_not_served"
    assert d.facts["served"] == served


# ---- a PEFT save (adapter, or a merge saved before unwrapping) loaded as the model ---------------------------

@pytest.mark.parametrize("text", [
    # the V0 loaders' dict lookup, and AutoWeightsLoader (0.7+)
    "KeyError: 'base_model.model.model.layers.0.mlp.down_proj.lora_A.weight'\n",
    "KeyError: 'base_model.model.model.layers.0.self_attn.qkv_proj.lora_A.weight'\n",
    "ValueError: There is no module or parameter named 'base_model.model.model.embed_tokens' in Qwen2ForCausalLM\n",
    "ValueError: There is no module or parameter named 'base_model' in LlamaForCausalLM\n",
])
def test_peft_names_are_an_adapter_loaded_as_the_model(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_loading.weight_mismatch", "model_loading")
    assert d.facts.get("adapter_as_model") and "--lora-modules" in d.fix.summary
    assert "loader bug" not in d.title


def test_a_doubled_name_without_peft_is_still_a_loader_bug():
    d = first("KeyError: 'model.layers.0.self_attn.qkqkv_proj.weight'\n")
    assert d.facts.get("loader_bug") and not d.facts.get("adapter_as_model")
