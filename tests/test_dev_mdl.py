"""mdl's dev set (tests/logs/dev-mdl/): real model-support, model-loading and tokenizer/chat-template failures as
people paste them, each through the CLI with the category its thread established."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mdl")
# Misses not yet named by a mechanism, each with the reason.
OPEN: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, OPEN))
def test_dev_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])


# The mechanisms on the forms people paste, beyond the dev logs.
@pytest.mark.parametrize("text, model_type", [
    # transformers 4.3x+ as printed, inside pydantic's ValidationError, markdown without backticks, lower-cased
    ("ValueError: The checkpoint you are trying to load has model type `glm4_moe` but Transformers does not recognize "
     "this architecture. This could be because of an issue with the checkpoint", "glm4_moe"),
    ("  Value error, The checkpoint you are trying to load has model type gemma3n but Transformers does not recognize "
     "this architecture. [type=value_error, input_value=ArgsKwargs((), {'model': ...", "gemma3n"),
    ("value error, the checkpoint you are trying to load has model type `qwen3_next`  but transformers does not "
     "recognize this architecture .", "qwen3_next"),
])
def test_unknown_model_type_in_any_form(text, model_type):
    d = first(text)
    assert (d.category, d.facts.get("model_type")) == ("model_support", model_type)


@pytest.mark.parametrize("text", [
    "AttributeError: 'MistralTokenizer' object has no attribute 'convert_tokens_to_ids'. Did you mean: "
    "'convert_tokens_to_string'?",
    "(EngineCore_DP0 pid=9) AttributeError: MistralTokenizer has no attribute all_special_tokens_extended",
])
def test_mistral_tokenizer_where_hf_one_expected(text):
    assert first(text).signature == "tokenizer.mistral_mode_mismatch"


@pytest.mark.parametrize("text, parser", [
    ("RuntimeError: Hermes 2 Pro Tool parser could not locate tool call start/end tokens in the tokenizer!",
     "Hermes 2 Pro"),
    ("ERROR 02-11 [api_server.py:1031] RuntimeError: Qwen3 reasoning parser could not locate think start/end tokens "
     "in the tokenizer!", "Qwen3"),
    ("RuntimeError: Llama3JsonToolParser could not locate the bot token in the tokenizer!", "Llama3JsonToolParser"),
])
def test_parser_without_its_tokens(text, parser):
    d = first(text)
    assert (d.signature, d.facts["parser"]) == ("tokenizer.parser_tokens_missing", parser)


def test_parser_string_fallback_is_no_failure():
    d = top("WARNING 05-01 [abs_reasoning_parsers.py:88] Qwen3 reasoning parser could not locate think start/end "
            "tokens in the tokenizer. Falling back to string matching.")
    assert d is None or d.signature != "tokenizer.parser_tokens_missing"


@pytest.mark.parametrize("text, tool", [
    ("ValueError: To use optimized download using Xet storage, you need to install the hf_xet package. Try "
     "`pip install \"huggingface_hub[hf_xet]\"` or `pip install hf_xet`.", "hf_xet"),
    ("RuntimeError: An error occurred while downloading using `hf_transfer`. Consider disabling "
     "HF_HUB_ENABLE_HF_TRANSFER for better error handling.", "hf_transfer"),
])
def test_download_tools(text, tool):
    d = first(text)
    assert (d.signature, d.facts["tool"]) == ("model_loading.hub_download_tool", tool)


def test_hub_outage_is_unreachable():
    d = first("requests.exceptions.HTTPError: 503 Server Error: Service Unavailable for url: "
              "https://huggingface.co/api/models/meta-llama/Llama-3.1-8B-Instruct/revision/main")
    assert d.signature == "model_loading.hub_unreachable"


def test_unrecognized_processing_class():
    d = first("ValueError: Unrecognized processing class in /models/ckpt. Can't instantiate a processor, a tokenizer, an "
              "image processor or a feature extractor for this model.")
    assert (d.category, d.signature) == ("model_support", "model_support.mm_processor_failed")


def test_cut_in_plumbing_with_a_deeper_frame_is_left_to_the_frames():
    # the innermost frame is the model's own code: the call in progress in the plumbing above it says nothing
    text = ('Traceback (most recent call last):\n'
            '  File "/usr/lib/python3.12/site-packages/vllm/inputs/preprocess.py", line 144, in _process_tokens\n'
            '    inputs = self._process_multimodal(\n'
            '  File "/usr/lib/python3.12/site-packages/vllm/attention/selector.py", line 88, in get_attn_backend\n'
            '    return _cached_get_attn_backend(\n')
    d = top(text)
    assert d is None or d.signature != "model_support.cut_in_mm_processor"


def test_transformers_backend_cannot_run_the_model():
    d = first("ValueError: The Transformers implementation of 'Qwen2_5_VLForSequenceClassification' is not compatible "
              "with vLLM.")
    assert (d.signature, d.facts["arch"]) == ("model_support.architecture_unsupported", "Qwen2_5_VLForSequenceClassification")


def test_transformers_fallback_warning_is_no_failure():
    d = top("WARNING 06-08 [utils.py:182] Qwen3ForCausalLM has no vLLM implementation, falling back to Transformers "
            "implementation. Some features may not be supported and performance may not be optimal.")
    assert d is None or d.confidence <= 0.5


def test_template_frame_decides():
    d = first('  File "/usr/lib/python3/dist-packages/jinja2/environment.py", line 1295, in render\n'
              '    self.environment.handle_exception()\n'
              '  File "<template>", line 3, in top-level template code\n'
              "AttributeError: 'list' object has no attribute 'strip'\n")
    assert d.signature == "tokenizer.template_raised"


def test_concatenation_typeerror_without_a_template_is_not_named_one():
    d = top('  File "/app/prep.py", line 9, in build\nTypeError: can only concatenate str (not "list") to str\n')
    assert d is None or d.signature != "tokenizer.template_raised"


@pytest.mark.parametrize("text, signature", [
    ("requests.exceptions.HTTPError: 403 Client Error: Forbidden for url: "
     "https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct/resolve/main/config.json", "model_loading.gated_or_auth"),
    ("KeyError: 'rope_theta'", "model_support.rope_config_unreadable"),
    ("TypeError: Qwen2_5_VLProcessor.__init__() got an unexpected keyword argument 'video_processor'",
     "model_support.mm_processor_failed"),
    ("OSError: Unable to load weights from pytorch checkpoint file for '/models/x/pytorch_model.bin' at "
     "'/models/x/pytorch_model.bin'.", "model_loading.pickle_checkpoint_refused"),
])
def test_hub_rope_processor_and_pickle_forms(text, signature):
    assert first(text).signature == signature
