"""Configuration, model, speculative-decoding and attention rules against the messages vLLM and its libraries
really print (each small log is written from the raising code), and the real thread logs they were fixed from
(tests/logs/dev-cfg/, through the CLI)."""

from __future__ import annotations


import pytest

from tests.dev_sets import check, load, params
from tests.dev_sets import first as top
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-cfg")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {}




@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])


# vllm/model_executor/models/registry.py _raise_for_unsupported: a draft class (_SPECULATIVE_DECODING_MODELS)
# is the --speculative-config draft, a target class the served model.
@pytest.mark.parametrize("arch,sig", [
    ("EagleQwen2ForCausalLM", "speculative.draft_architecture_unsupported"),
    ("Eagle3Qwen3ForCausalLM", "speculative.draft_architecture_unsupported"),
    ("DeepSeekMTPModel", "speculative.draft_architecture_unsupported"),
    ("MLPSpeculatorPreTrainedModel", "speculative.draft_architecture_unsupported"),
    ("DFlashDraftModel", "speculative.draft_architecture_unsupported"),
    ("Qwen3NextForCausalLM", "model_support.architecture_unsupported"),
    ("Glm4vForConditionalGeneration", "model_support.architecture_unsupported"),
])
def test_unsupported_architecture_draft_or_target(arch, sig):
    d = top(f"ValueError: Model architectures ['{arch}'] are not supported for now. Supported architectures: "
            "dict_keys(['LlamaForCausalLM', 'Qwen2ForCausalLM'])\n")
    assert d.signature == sig, d.title
    assert arch in d.title


# V0 spec_decode_worker.create_spec_worker (0.5 .. 0.8), and V1 config/speculative.py _verify_args checking the
# MTP/EAGLE draft against the target's pipeline size (ModelConfig.verify_with_parallel_config).
def test_spec_decode_with_pipeline_parallel_v0():
    d = top("NotImplementedError: Speculative decoding is currently incompatible with pipeline parallelism\n")
    assert (d.category, d.signature) == ("speculative_decoding", "speculative.pipeline_parallel_unsupported")
    assert "--tensor-parallel-size" in d.fix.summary


def test_pp_unsupported_is_the_draft_when_spec_decode_is_on():
    log = ("(APIServer pid=1) INFO 08-12 10:00:00 [utils.py:1] non-default args: {'pipeline_parallel_size': 4, "
           "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 3}}\n"
           "(APIServer pid=1) NotImplementedError: Pipeline parallelism is not supported for this model. "
           "Supported models implement the `SupportsPP` interface.\n")
    assert top(log).signature == "speculative.pipeline_parallel_unsupported"


def test_pp_unsupported_without_spec_decode_is_the_model():
    d = top("NotImplementedError: Pipeline parallelism is not supported for this model.\n"
            "Supported models implement the `SupportsPP` interface.\n")
    assert (d.category, d.signature) == ("engine_config", "config.pp_unsupported_model")


# vllm-flash-attention csrc/flash_attn/flash_api.cpp TORCH_CHECKs (strings of _vllm_fa2_C / _vllm_fa3_C).
@pytest.mark.parametrize("msg", [
    "This flash attention build does not support headdim not being a multiple of 32.",
    "FlashAttention forward only supports head dimension at most 256",
    "FlashAttention only support fp16 and bf16 data type",
    "FlashAttention only supports fp16, bf16, and fp8_e4m3 data type",
    "If V headdim is different from Q/K dim, we only support Q/K headdim in (128, 192] and V headdim in (96, 128], "
    "or (Q/K <= 64 and V <= 512).",
])
def test_flash_attention_kernel_refusals(msg):
    d = top(f"ERROR 05-06 09:15:43 [core.py:396] RuntimeError: {msg}\n")
    assert (d.category, d.signature) == ("attention_backend", "attention.flash_attn_kernel_refused")
    assert "TRITON_ATTN" in d.fix.summary


def test_flash_attention_on_a_pre_ampere_gpu_stays_the_gpus_age():
    d = top("RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert d.category == "unsupported_gpu"


# transformers 5 configuration_utils._LEGACY_LAYER_TYPE_REMAP renames layer types; vLLM's
# granitemoehybrid ALL_DECODER_LAYER_TYPES (up to 0.25) only has the old names.
@pytest.mark.parametrize("name", ["full_attention", "linear_attention", "indexed_attention"])
def test_renamed_layer_type_keyerror(name):
    d = top(f"(EngineCore pid=9824) ERROR 09-08 10:02:31 [core.py:708] KeyError: '{name}'\n")
    assert (d.category, d.signature) == ("model_support", "model_support.layer_types_mismatch")
    assert name in d.title and "transformers" in d.fix.summary


def test_layer_type_unknown_to_an_old_transformers():
    d = top("ValueError: The `layer_types` entries must be in ('full_attention', 'sliding_attention', "
            "'chunked_attention', 'linear_attention')\n")
    assert d.signature == "model_support.layer_types_mismatch" and "upgrade transformers" in d.fix.summary


# A model's load_weights: param = params_dict[name] with a checkpoint tensor the model does not have.
@pytest.mark.parametrize("name", ["lm_head.weight", "layers.0.mlp.down_proj.weight_scale",
                                  "blocks.0.attn.qkv.weight", "layers.0.mlp.experts.w13_bias"])
def test_checkpoint_tensor_keyerror(name):
    d = top(f"    param = params_dict[name]\nKeyError: '{name}'\n")
    assert (d.category, d.signature) == ("model_loading", "model_loading.weight_mismatch")


def test_plain_keyerror_is_not_a_checkpoint_tensor():
    ds, _ = diagnose(scan_text("KeyError: 'choices'\n"))
    assert all(d.signature != "model_loading.weight_mismatch" for d in ds)


# ModelConfig._init_multimodal_config (0.6 .. 0.10).
def test_mm_option_on_a_text_model():
    d = top("$ vllm serve meta-llama/Llama-3.1-8B-Instruct --limit-mm-per-prompt image=2\n"
            "ValueError: `limit_mm_per_prompt` is only supported for multimodal models.\n")
    assert (d.category, d.signature) == ("engine_config", "config.mm_option_text_only")
    assert "--limit-mm-per-prompt" in d.fix.summary


def test_mm_option_on_a_vision_model_this_vllm_does_not_know():
    d = top("$ vllm serve THUDM/GLM-4.1V-9B-Thinking --limit-mm-per-prompt '{\"image\":32}'\n"
            "  Value error, `limit_mm_per_prompt` is only supported for multimodal models. [type=value_error]\n")
    assert (d.category, d.signature) == ("model_support", "model_support.multimodal_not_recognised")
    assert "upgrade vLLM" in d.fix.summary


# huggingface_hub utils/_http.py hf_raise_for_status (EntryNotFoundError), and the requests error older hubs wrapped.
@pytest.mark.parametrize("line", [
    "huggingface_hub.errors.EntryNotFoundError: 404 Client Error. (Request ID: Root=1-abc)\n\n"
    "Entry Not Found for url: https://huggingface.co/org/model/resolve/main/config.json.\n",
    "requests.exceptions.HTTPError: 404 Client Error: Not Found for url: "
    "https://huggingface.co/HuggingFaceH4/gemma-2-2b-gkd/resolve/main/config.json\n",
])
def test_hub_file_not_found(line):
    assert top(line).signature == "model_loading.files_missing"


# v1/attention/backends/*.py: "<backend> [backend] [currently] does not support <feature>[ yet]", and cascade
# attention's assert in flash_attn.py (0.8 .. 0.33).
@pytest.mark.parametrize("msg,feature", [
    ("NotImplementedError: FlexAttention does not support sliding window yet.", "sliding window"),
    ("NotImplementedError: FlexAttention does not support logits soft cap yet.", "logits soft cap"),
    ("NotImplementedError: b12x does not support ALiBi.", "ALiBi"),
    ("AssertionError: Cascade attention does not support sliding window.", "sliding window"),
    ("NotImplementedError: FlashInfer backend currently does not support attention sinks, please use trtllm on "
     "blackwell or flash attention on earlier GPUs.", "attention sinks"),
])
def test_backend_lacks_a_feature(msg, feature):
    d = top(msg + "\n")
    assert (d.category, d.signature) == ("attention_backend", "attention.backend_feature_unsupported")
    assert d.facts["feature"] == feature


def test_cascade_attention_fix_is_the_flag_not_a_backend():
    d = top("AssertionError: Cascade attention does not support sliding window.\n")
    assert "--disable-cascade-attn" in d.fix.summary and d.title.startswith("Cascade attention cannot")


# vllm/transformers_utils/tokenizer.py get_tokenizer (vllm/tokenizers/hf.py from 0.13): both hints.
def test_tokenizer_failed_custom_class_needs_remote_code():
    d = top("RuntimeError: Failed to load the tokenizer. If the tokenizer is a custom tokenizer not yet available in "
            "the HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or using the "
            "`--trust-remote-code` flag in the CLI.\n")
    assert d.signature == "tokenizer.load_failed" and "--trust-remote-code" in d.fix.summary


def test_tokenizer_class_of_transformers_5():
    d = top("ValueError: Tokenizer class TokenizersBackend does not exist or is not currently imported.\n")
    assert d.signature == "tokenizer.load_failed" and "transformers 5" in d.fix.summary


# A checkpoint tensor the model lacks while a draft model is configured: the draft's, unless the traceback shows
# the target's own loader.
def test_keyerror_with_a_draft_configured_is_the_draft():
    log = ("INFO 05-29 10:12:03 [cli_args.py:297] non-default args: {'speculative_config': {'method': 'eagle3', "
           "'model': 'yuhuili/EAGLE3-LLaMA3.3-Instruct-70B'}}\n"
           "KeyError: 'embed_tokens.weight'\n")
    assert top(log).signature == "speculative.draft_weights_mismatch"


def test_keyerror_in_the_targets_loader_stays_model_loading():
    log = ("INFO 05-29 10:12:03 [cli_args.py:297] non-default args: {'speculative_config': {'method': 'ngram'}}\n"
           "Traceback (most recent call last):\n"
           '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/models/qwen2.py", line 371, in '
           "load_weights\n"
           "    param = params_dict[name]\n"
           "KeyError: 'layers.0.mlp.down_proj.weight_scale'\n")
    assert top(log).signature == "model_loading.weight_mismatch"


# registry.py _PREVIOUSLY_SUPPORTED_MODELS / _OOT_SUPPORTED_MODELS (0.10 .. 0.33).
def test_architecture_vllm_dropped():
    d = top("ValueError: Model architecture Phi3SmallForCausalLM was supported in vLLM until v0.9.2, and is not "
            "supported anymore. Please use an older version of vLLM if you want to use this model architecture.\n")
    assert d.signature == "model_support.architecture_removed" and "vLLM 0.9.2" in d.fix.summary


def test_architecture_moved_to_a_plugin():
    d = top("ValueError: Model architecture BartForConditionalGeneration is not supported in-tree anymore. Please "
            "install the plugin at https://github.com/vllm-project/bart-plugin if you want to use this model "
            "architecture.\n")
    assert d.signature == "model_support.architecture_removed" and "bart-plugin" in d.fix.summary


# transformers < 5 modeling_gguf_pytorch_utils.load_gguf_checkpoint (5.x: "GGUF model with architecture X is not
# supported yet.").
def test_transformers_gguf_architecture_not_supported():
    assert top("ValueError: Architecture chatglm not supported\n").signature == "model_loading.gguf_unsupported"


# vllm/transformers_utils/processor.py get_processor (0.6 .. 0.33; "proceesor" in some releases) and
# multimodal/processing's config check.
@pytest.mark.parametrize("msg", [
    "TypeError: Invalid type of HuggingFace processor. Expected type: <class 'transformers.processing_utils."
    "ProcessorMixin'>, but found type: <class 'transformers.models.llama.tokenization_llama_fast.LlamaTokenizerFast'>",
    "TypeError: Invalid type of HuggingFace proceesor. Expected type: <class 'transformers.processing_utils."
    "ProcessorMixin'>, but found type: <class 'transformers.tokenization_utils_fast.PreTrainedTokenizerFast'>",
    "TypeError: Invalid type of HuggingFace config. Expected type: <class 'transformers.models.qwen3_5_moe."
    "Qwen3_5MoeConfig'>, but found type: <class 'transformers.models.qwen3_6.Qwen3_6Config'>",
])
def test_processor_or_config_class_vllm_did_not_expect(msg):
    d = top(msg + "\n")
    assert (d.category, d.signature) == ("model_support", "model_support.mm_processor_failed")
    assert "transformers version this vLLM pins" in d.fix.summary


def test_custom_processor_needs_remote_code():
    d = top("RuntimeError: Failed to load the processor. If the processor is a custom processor not yet available in "
            "the HuggingFace transformers library, consider setting `trust_remote_code=True` in LLM or using the "
            "`--trust-remote-code` flag in the CLI.\n")
    assert d.signature == "model_support.mm_processor_failed" and "--trust-remote-code" in d.fix.summary


def test_inspection_failure_with_the_brackets_lost():
    d = top("error: Model architectures Qwen2 5 VLForConditionalGeneration' failed to be inspected. Please check the "
            "logs for more details.\n")
    assert d.signature == "model_support.architecture_unsupported"


# Lib/argparse.py: "argument X: invalid <type> value", "expected one argument", "the following arguments are
# required"; vllm/engine/arg_utils.py parse_type's ArgumentTypeError; Enum values of older vLLM configs.
@pytest.mark.parametrize("line,what", [
    ("api_server.py: error: argument --max-model-len: invalid int value: '32k'", "'32k' is not a whole number"),
    ("vllm serve: error: argument --speculative-config/-sc: invalid loads value: '{method:ngram}'", "not valid JSON"),
    ("error: argument --tensor-parallel-size/-tp: expected one argument", "its value is missing"),
    ("vllm serve: error: argument --limit-mm-per-prompt: Value image=4 cannot be converted to <function loads at "
     "0x7f0>.", "not valid JSON"),
    ("vllm serve: error: argument --compilation-config/-O: 1 validation error for CompilationConfig",
     "a field it does not accept"),
])
def test_argument_value_refused(line, what):
    d = top(line + "\n")
    assert (d.category, d.signature) == ("engine_config", "config.argument_invalid")
    assert what in d.title


def test_invalid_choice_keeps_its_own_rule():
    assert top("vllm serve: error: argument --dtype: invalid choice: 'bf' (choose from 'auto', 'half')\n"
               ).signature == "config.invalid_choice"


def test_required_argument_missing():
    d = top("vllm serve: error: the following arguments are required: model_tag\n")
    assert d.signature == "config.argument_missing" and "vllm serve ORG/MODEL" in d.fix.summary


def test_enum_value_of_an_older_vllm():
    d = top("ValueError: 'gguf' is not a valid LoadFormat\n")
    assert (d.category, d.signature) == ("engine_config", "config.enum_value_invalid")
    ds, _ = diagnose(scan_text("ValueError: 'fp4' is not a valid QuantizationMethods\n"))
    assert all(x.signature != "config.enum_value_invalid" for x in ds)


# transformers configuration_auto CONFIG_MAPPING.__getitem__: raise KeyError(key) for a model type it predates.
@pytest.mark.parametrize("key,sig", [("qwen2", "model_support.model_type_keyerror"),
                                     ("gemma3", "model_support.model_type_keyerror"),
                                     ("deepseek_v3", "model_support.model_type_keyerror")])
def test_bare_model_type_keyerror(key, sig):
    assert top(f"KeyError: '{key}'\n").signature == sig


def test_other_keyerrors_are_not_model_types():
    ds, _ = diagnose(scan_text("KeyError: 'choices'\n"))
    assert all(d.signature != "model_support.model_type_keyerror" for d in ds)


def test_model_types_list_comes_from_transformers():
    from triage.rules.model import _known_model_types
    names = _known_model_types()
    assert {"llama", "qwen2", "gemma3", "mistral"} <= names and len(names) > 500


@pytest.mark.parametrize("line,sig", [
    ("ValueError: Cannot use apply_chat_template() because tokenizer.chat_template is not set and no template "
     "argument was passed!", "tokenizer.chat_template_missing"),
    ("OSError: [Errno 122] Disk quota exceeded", "model_loading.disk_full"),
    ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
     "'models/Qwen2.5-7B/instruct'. Use `repo_type` argument if needed.", "model_loading.files_missing"),
    ("ModuleNotFoundError: No module named 'transformers_modules.Qwen-7B-Chat'",
     "model_support.remote_code_module_missing"),
])
def test_more_library_messages(line, sig):
    assert top(line + "\n").signature == sig


def test_docker_option_after_the_image_reaches_vllm():
    d = top("api_server.py: error: argument --pipeline-parallel-size/-pp: invalid int value: '8000:8000'\n")
    assert d.signature == "config.argument_invalid" and "before the image name" in d.fix.summary


def test_shell_command_passed_to_the_server_entrypoint():
    d = top("api_server.py: error: unrecognized arguments: /bin/bash -c cd / && python3 -m "
            "vllm.entrypoints.openai.api_server --port 80\n")
    assert d.signature == "config.unrecognized_argument" and "--entrypoint" in d.fix.summary


# attention/selector.py (0.6: "Invalid attention backend 'X'. Available backends: ..."), platforms/cuda.py (0.8 ..
# 0.10: "Invalid attention backend for cuda, with use_v1: ... use_mla: ...").
def test_forced_backend_missing_for_the_engine():
    d = top("ValueError: Invalid attention backend for cuda, with use_v1: True use_mla: True\n")
    assert d.signature == "attention.invalid_backend_legacy" and "MLA" in d.fix.summary
    assert "VLLM_ATTENTION_BACKEND" in d.fix.summary


def test_backend_name_unknown_to_an_old_selector():
    d = top("ValueError: Invalid attention backend 'FLASHINFER_VLLM_V1'. Available backends: FLASH_ATTN, XFORMERS, "
            "ROCM_FLASH, TORCH_SDPA, FLASHINFER (case-sensitive).\n")
    assert d.signature == "attention.unknown_backend_name" and d.facts["backend"] == "FLASHINFER_VLLM_V1"


# config/vllm.py _validate_v2_model_runner: the features the V2 runner lacks, a speculative method among them or not.
def test_model_runner_lacks_a_speculative_method():
    d = top("  Value error, Model Runner V2 does not yet support: speculative method 'draft_model' [type=value_error, "
            "input_value=ArgsKwargs((), {}), input_type=ArgsKwargs]\n")
    assert (d.category, d.signature) == ("speculative_decoding", "speculative.model_runner_unsupported")
    assert "VLLM_USE_V2_MODEL_RUNNER" in d.fix.summary


def test_model_runner_lacks_another_feature():
    d = top("ValueError: Model Runner V2 does not yet support: dual batch overlap with LoRA\n")
    assert (d.category, d.signature) == ("engine_config", "config.model_runner_unsupported")


# serving_chat.py: "Error in preprocessing prompt inputs", then a traceback cut inside the chat template call.
def test_cut_chat_template_traceback():
    d = top("ERROR 08-17 11:21:36 [serving_chat.py:222] Error in preprocessing prompt inputs\n"
            "ERROR 08-17 11:21:36 [serving_chat.py:222]     request_prompt = apply_hf_chat_template(\n")
    assert (d.category, d.signature) == ("tokenizer_chat_template", "tokenizer.chat_preprocessing_failed")


def test_preprocessing_error_with_its_cause_keeps_the_cause():
    d = top("ERROR [serving_chat.py:222] Error in preprocessing prompt inputs\n"
            "ERROR [serving_chat.py:222]     return tokenizer.apply_chat_template(\n"
            "ERROR [serving_chat.py:222] jinja2.exceptions.TemplateError: Conversation roles must alternate "
            "user/assistant/user/assistant/...\n")
    assert d.signature == "tokenizer.template_error"
