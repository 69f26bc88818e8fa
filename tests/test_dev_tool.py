"""tool's dev set (tests/logs/dev-tool/): structured outputs, tool and reasoning parsers, chat templates, the Responses
API and sampling parameters, real logs through the CLI, and the mechanisms that name them, each on the forms the
raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-tool")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- per-request logits processors -------------------------------------------------------------------------

def test_v1_refuses_per_request_logits_processors():
    d = first("ValueError: vLLM V1 does not support per request user provided logits processors.\n")
    assert (d.signature, d.category) == ("config.logits_processors_per_request_v1", "engine_config")


@pytest.mark.parametrize("text", [
    # V0 multi-step worker (0.6-0.9)
    "ERROR 10-01 02:39:08 engine.py:157] AssertionError('Logits Processors are not supported in multi-step decoding')\n",
    # LLMEngine.add_request with --num-scheduler-steps > 1 (0.7-0.10.0)
    "INFO 03-02 10:00:00 api_server.py:529] args: Namespace(num_scheduler_steps=8)\n"
    "ValueError: Logits processors are not supported in multi-step decoding\n",
    # no release named: the scheduler reading stays
    "ValueError: Logits processors are not supported in multi-step decoding\n",
])
def test_multi_step_logits_processors_is_a_scheduler_setting(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.logits_processors_multi_step", "engine_config")


@pytest.mark.parametrize("text", [
    "My vllm version is 0.10.1.1\nValueError: Logits processors are not supported in multi-step decoding\n",
    "vllm==0.11.0\nValueError: Logits processors are not supported in multi-step decoding\n",
])
def test_the_same_words_from_010_1_on_are_the_removed_v0_path(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.logits_processors_removed", "install_mismatch")


def test_a_release_before_010_1_keeps_the_scheduler_reading():
    d = first("vllm==0.9.2\nValueError: Logits processors are not supported in multi-step decoding\n")
    assert d.signature == "config.logits_processors_multi_step"


# ---- token ids in a request's sampling parameters ----------------------------------------------------------

@pytest.mark.parametrize("text, field", [
    ("ValueError: token_id(s) [191222] in logit_bias contain out-of-vocab token ids. Vocabulary size: 128256\n",
     "logit_bias"),
    ("ValueError: token_id(s) [151645] in stop_token_ids contain out-of-vocab token ids. Vocabulary size: 129280\n",
     "stop_token_ids"),
    ("ValueError: token_id 99999999 in logit_bias contains out-of-vocab token id. Vocabulary size: 32000\n",
     "logit_bias"),
    ("ValueError: allowed_token_ids contains out-of-vocab token id!\n", "allowed_token_ids"),
])
def test_out_of_vocab_request_ids(text, field):
    d = first(text)
    assert (d.signature, d.category, d.facts["field"]) == ("config.request_token_ids_out_of_vocab", "engine_config",
                                                            field)


def test_a_prompt_token_id_stays_the_tokenizer_rule():
    d = first("ValueError: Token id 151646 is out of vocabulary\n")
    assert d.signature == "tokenizer.token_id_out_of_vocab"


def test_device_index_error_needs_a_request_field_in_the_paste():
    text = "Index out of range in dimension 1: index value 151645 exceeds bounds 129280!\n"
    d = top(text)
    assert d is None or d.signature != "config.request_token_ids_device_index"
    d = first('{"stop_token_ids": [151645]}\n' + text)
    assert d.signature == "config.request_token_ids_device_index"


def test_too_many_ids_for_the_sampler():
    d = first("ValueError: Too many allowed token IDs: 2000. The max size is 1024.\n")
    assert (d.signature, d.facts["count"], d.facts["max_size"]) == ("config.request_token_ids_over_limit", 2000, 1024)


# ---- the Responses API store, tools, Mistral templates -----------------------------------------------------

@pytest.mark.parametrize("text", [
    '{"error":{"message":"Response with id \'resp_998bca5d44e22037\' not found.","type":"invalid_request_error"}}\n',
    "`store=True` (default) is not supported. Please set `store=False` in Responses API or set "
    "`VLLM_ENABLE_RESPONSES_API_STORE=1` in the env var when starting the vLLM server.\n",
])
def test_responses_store(text):
    assert first(text).signature == "config.responses_store_disabled"


def test_empty_tools_array():
    assert first("Value error, `tools` must not be an empty array.\n").signature == "config.tools_empty_array"


@pytest.mark.parametrize("text, sig", [
    ("ValueError: chat_template is not supported for Mistral tokenizers.\n", "tokenizer.mistral_template_refused"),
    ("ValueError: Kwargs ['reasoning_effort'] are not supported by `MistralCommonTokenizer.apply_chat_template`.\n",
     "tokenizer.mistral_kwargs_refused"),
    ("ValueError: Kwargs ['enable_thinking', 'foo'] are not supported by MistralCommonTokenizer.apply_chat_template\n",
     "tokenizer.mistral_kwargs_refused"),
])
def test_mistral_tokenizer_refusals(text, sig):
    d = first(text)
    assert (d.signature, d.category) == (sig, "tokenizer_chat_template")


# ---- structured-output libraries and schemas ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "TypeError: LLMatcher.validate_grammar() got some positional-only arguments passed as keyword arguments: "
    "'tokenizer'\n",
    "TypeError: GrammarCompiler.compile_json_schema() got an unexpected keyword argument 'strict_mode'\n",
    "TypeError: TokenizerInfo.from_huggingface() missing 1 required positional argument: 'vocab_size'\n",
])
def test_structured_output_library_of_another_release(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.structured_output_library_api", "install_mismatch")


@pytest.mark.parametrize("text", ["RuntimeError: maximum must be an integer\n",
                                  "RuntimeError: exclusiveMinimum must be an integer\n"])
def test_json_schema_integer_bound(text):
    assert first(text).signature == "config.json_schema_integer_bound"


def test_a_cut_traceback_in_the_structured_output_manager():
    d = first("ERROR 03-07 16:37:49 [core.py:324] EngineCore hit an exception: Traceback (most recent call last):\n"
              'ERROR 03-07 16:37:49 [core.py:324]   File "/x/site-packages/vllm/v1/engine/core.py", line 65, in '
              "__init__\n"
              "ERROR 03-07 16:37:49 [core.py:324]     self.structured_output_manager = "
              "StructuredOutputManager(vllm_config)\n"
              'ERROR 03-07 16:37:49 [core.py:324]   File "/x/site-packa\n')
    assert (d.signature, d.category) == ("config.cut_in_structured_output", "engine_config")


# ---- launch-argument wordings this batch brought in ---------------------------------------------------------

def test_unrecognized_arguments_without_spaces():
    d = first("2.报错：“vllm:error:unrecognized arguments:--enable-reason”\n")
    assert (d.signature, d.facts["flag"]) == ("config.unrecognized_argument", "--enable-reason")


def test_unregistered_parser_placeholder_name():
    d = first("ValueError: --enable-auto-tool-choice requires tool_parser:'<name>' which has not been registered\n")
    assert d.signature == "config.tool_parser_unknown"
