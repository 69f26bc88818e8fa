"""mix6's dev set (tests/logs/dev-mix6/): a random sample of 2024 threads (vLLM 0.3-0.6, the V0 engine) through the
CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix6")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a chat template refusing the messages' roles, in the server's 400 answer -------------------------------

@pytest.mark.parametrize("text", [
    "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'Conversation roles must alternate "
    "user/assistant/user/assistant/...', 'type': 'BadRequestError', 'param': None, 'code': 400}\n",
    # the client's message wrapped where the reporter's terminal cut it
    "BadRequestError: Error code: 400 - {'object': 'error', 'message': 'After the optional system message, "
    "conversation roles must\nalternate user/assistant/user/assistant/...', 'type': 'BadRequestError'}\n",
    "ERROR 08-02 09:16:03 serving_chat.py:112] Error in applying chat template from request: System role not "
    "supported\n",
    "{\"object\":\"error\",\"message\":\"Only user and assistant roles are supported!\",\"type\":\"BadRequestError\"}\n",
    "ValueError: Only user, assistant and tool roles are supported, with the exception of an initial optional system "
    "message!\n",
])
def test_template_refusing_roles_is_the_chat_template(text):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.template_roles_refused", "tokenizer_chat_template")


def test_the_jinja_exception_form_stays_the_template_error():
    d = first("jinja2.exceptions.TemplateError: Conversation roles must alternate user/assistant/user/assistant/...\n")
    assert d.signature == "tokenizer.template_error"


# ---- FlashInfer's guarded import left None ------------------------------------------------------------------

def test_none_called_in_the_flashinfer_wrapper_frame_is_the_kernel_library():
    d = first('  File "/v/lib/python3.10/site-packages/vllm/worker/model_runner.py", line 1209, in execute_model\n'
              "    BatchDecodeWithPagedKVCacheWrapper(\n"
              "TypeError: 'NoneType' object is not callable\n")
    assert (d.signature, d.category) == ("kernel.flashinfer_import_none", "kernel_library")
    assert d.confidence >= 0.8


def test_none_called_in_the_flashinfer_backend_prefill():
    d = first('  File "/v/site-packages/vllm/attention/backends/flashinfer.py", line 519, in forward\n'
              "    output = flash_attn_varlen_func(\n"
              "TypeError: 'NoneType' object is not callable\n")
    assert d.signature == "kernel.flashinfer_import_none"


def test_gemma2_title_with_no_traceback_is_flashinfer_less_sure():
    d = first("[Bug]: TypeError: 'NoneType' object is not callable when loading Gemma 2 9B with new 0.5.1 version\n")
    assert d.signature == "kernel.flashinfer_import_none" and d.confidence < 0.7


def test_a_title_above_the_flashinfer_frame_takes_the_frame():
    d = first("# TypeError: 'NoneType' object is not callable\n\n"
              '  File "/v/site-packages/vllm/worker/model_runner.py", line 1209, in execute_model\n'
              "    BatchDecodeWithPagedKVCacheWrapper(\n"
              "TypeError: 'NoneType' object is not callable\n")
    assert d.signature == "kernel.flashinfer_import_none" and d.confidence >= 0.8


def test_none_called_elsewhere_is_not_flashinfer():
    d = top("INFO 07-08 11:02:19 selector.py:79] Using Flashinfer backend.\n"
            '  File "/v/site-packages/vllm/transformers_utils/tokenizer.py", line 91, in get_tokenizer\n'
            "    tokenizer = tokenizer_cls(name)\n"
            "TypeError: 'NoneType' object is not callable\n")
    assert d is None or d.signature != "kernel.flashinfer_import_none"


def test_none_called_without_flashinfer_or_gemma2_is_not_claimed():
    d = top("TypeError: 'NoneType' object is not callable\n")
    assert d is None or d.signature != "kernel.flashinfer_import_none"


# ---- the CPU backend's ISA check ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, isa", [
    ("CMake Error at cmake/cpu_extension.cmake:57 (message):\n  vLLM CPU backend requires AVX512 ISA support.\n",
     "AVX512"),
    ("CMake Error at cmake/cpu_extension.cmake:133 (message):\n  vLLM CPU backend requires AVX512, AVX2, Power9+ ISA "
     "or ARMv8 support.\n", "AVX512, AVX2, Power9+ ISA or ARMv8"),
    ("  vLLM CPU backend requires AVX512 or AVX2 or Power9+ ISA support.\n", "AVX512 or AVX2 or Power9+"),
    ("  vLLM CPU backend requires AVX512, AVX2, Power9+ ISA, S390X ISA, ARMv8 or\n  RISC-V support.\n",
     "AVX512, AVX2, Power9+ ISA, S390X ISA, ARMv8"),
])
def test_cpu_backend_isa_check_is_the_host(text, isa):
    d = first(text)
    assert (d.signature, d.category) == ("environment.cpu_backend_isa", "environment")
    assert d.facts["isa"] == isa


# ---- an unsupported architecture stated in the report's title ----------------------------------------------

@pytest.mark.parametrize("title", [
    "# Mistral model architecture is not supported\n",
    "# [Bug]: XLMRobertaModel architecture is not supported yet\n",
    "# vLLM does not support the Phi3Small model architecture\n",
])
def test_title_saying_the_architecture_is_unsupported_is_model_support(title):
    d = first(title + "\nI tried to load it with LLM(model=...).\n")
    assert (d.signature, d.category) == ("model_support.arch_unsupported_stated", "model_support")


@pytest.mark.parametrize("title", [
    "# GPU architecture is not supported (sm_120)\n",
    "# The model architecture is not an issue, the OOM is\n",
])
def test_other_architecture_words_are_not_the_model(title):
    d = top(title + "\nsome prose\n")
    assert d is None or d.signature != "model_support.arch_unsupported_stated"


def test_stated_architecture_yields_to_the_logged_registry_error():
    d = first("# Mistral model architecture is not supported\n"
              "ValueError: Model architectures ['MistralModel'] are not supported for now. Supported architectures: "
              "['LlamaForCausalLM', 'MistralForCausalLM']\n")
    assert d.signature != "model_support.arch_unsupported_stated" and d.category == "model_support"


# ---- the engine's request methods called with another release's keywords -----------------------------------

@pytest.mark.parametrize("text, word", [
    ("# AsyncLLMEngine.generate() got an unexpected keyword argument 'inputs'\n", "0.4.3"),
    ("TypeError: AsyncLLMEngine.generate() got an unexpected keyword argument 'prompt'\n", "`inputs`"),
    ("TypeError: generate() failed: LLMEngine.add_request() got an unexpected keyword argument 'prompt_token_ids'\n",
     "TokensPrompt"),
    ("AsyncLLM.generate() got an unexpected keyword argument 'lora_request_id'\n", "'lora_request_id'"),
])
def test_engine_method_keyword_of_another_release_is_the_install(text, word):
    d = first(text)
    assert (d.signature, d.category) == ("api.engine_method_kwarg_release", "install_mismatch")
    assert word in d.fix.summary


def test_another_class_generate_is_not_the_engine():
    d = top("TypeError: MyLLMEngine.generate() got an unexpected keyword argument 'inputs'\n")
    assert d is None or d.signature != "api.engine_method_kwarg_release"
