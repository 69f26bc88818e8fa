"""cn's dev set (tests/logs/dev-cn/): real logs from the Chinese-speaking ecosystem that runs vLLM (Qwen, GLM, MiniCPM,
InternVL, Xinference, FastChat, vllm-ascend, ModelScope), through the CLI, and the mechanisms that name them, each on
the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-cn")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- MiniCPM-V's version dispatch (vllm/model_executor/models/minicpmv.py) ----------------------------------

def test_minicpmv_gate_names_the_checkpoint_version():
    d = first("ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. Got version: (4, 5)\n")
    assert (d.signature, d.category) == ("model_support.minicpmv_version_unsupported", "model_support")
    assert d.facts["version"] == "4.5" and d.facts["supported"] == "2.0, 2.5, 2.6, 4.0"


def test_minicpmv_gate_before_0101_has_no_version_named():
    d = first("ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, and 2.6\n")
    assert d.signature == "model_support.minicpmv_version_unsupported"
    assert d.facts["version"] == "" and d.facts["supported"] == "2.0, 2.5, and 2.6"


def test_minicpmv_gate_in_chinese_prose():
    d = first("按照cookbook的版本安装的vllm，报错ValueError: Currently, MiniCPMV only supports versions 2.0, 2.5, 2.6, 4.0. "
              "Got version: (4, 5),是不是没来得及更新vllm版本呀\n")
    assert d.signature == "model_support.minicpmv_version_unsupported" and d.facts["version"] == "4.5"


# ---- vLLM's rope_scaling factor assert (config.py _get_and_verify_max_len, 0.2 .. 0.6) -------------------------

@pytest.mark.parametrize("text", [
    '    assert "factor" in rope_scaling\nAssertionError\n',
    "    assert 'factor' in rope_scaling\nAssertionError\n",
    '使用vllm部署报错， assert "factor" in rope_scaling\n',
])
def test_rope_factor_assert_is_model_support(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.rope_scaling_factor_missing", "model_support")


# ---- remote SentencePiece tokenizers under transformers 4.34+ --------------------------------------------------

@pytest.mark.parametrize("text,cls", [
    ("AttributeError: 'ChatGLMTokenizer' object has no attribute 'tokenizer'\n", "ChatGLMTokenizer"),
    ("AttributeError: 'ChatGLMTokenizer' object has no attribute 'sp_tokenizer'. Did you mean: '_tokenize'?\n",
     "ChatGLMTokenizer"),
    ("AttributeError: 'InternLM2Tokenizer' object has no attribute 'sp_model'\n", "InternLM2Tokenizer"),
    ('  File "/root/.cache/huggingface/modules/transformers_modules/yayi2-30b/tokenization_yayi.py", line 90, in '
     "vocab_size\nAttributeError: 'YayiTokenizer' object has no attribute 'sp_model'\n", "YayiTokenizer"),
])
def test_remote_tokenizer_attribute_error(text, cls):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.remote_code_transformers_434", "tokenizer_chat_template")
    assert d.facts["tokenizer"] == cls


def test_an_in_library_tokenizer_missing_sp_model_is_not_claimed():
    d = top("AttributeError: 'XLMRobertaTokenizerFast' object has no attribute 'sp_model'\n")
    assert d is None or d.signature != "tokenizer.remote_code_transformers_434"


def test_a_paste_cut_inside_the_remote_get_vocab():
    d = first(
        '  File "/usr/lib/python3/dist-packages/transformers/tokenization_utils.py", line 367, in __init__\n'
        "    self._add_tokens(\n"
        '  File "/usr/lib/python3/dist-packages/transformers/tokenization_utils.py", line 467, in _add_tokens\n'
        "    current_vocab = self.get_vocab().copy()\n"
        '  File "/root/.cache/huggingface/modules/transformers_modules/chatglm3-6b/tokenization_chatglm.py", line 108, '
        "in get_vocab\n"
        "    vocab = {self._convert_id_to_token(i): i for i in range(self.vocab_size)}\n")
    assert d.signature == "tokenizer.remote_code_transformers_434"
    assert d.facts["file"] == "tokenization_chatglm.py"


# ---- vllm-ascend 0.7's NPU attention and prefix caching ------------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Prefix cache and chunked prefill are currently not supported.\n",
    "RuntimeError: Prefix cache and chunked prefill are currently not supported when using quanzation.\n",
])
def test_ascend_prefix_and_chunked_prefill_refusal_is_engine_config(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.ascend_prefix_chunked_unsupported", "engine_config")


# ---- ModelScope's download checksum --------------------------------------------------------------------------

def test_modelscope_checksum_alone_names_no_workers():
    d = first("2024-02-10 10:05:42,800 - modelscope - ERROR - File ./temp/tmpyhge8o3g/qwen1.5-72b-chat-q5_k_m.gguf.a "
              "integrity check failed, the download may be incomplete, please try again.\n")
    assert (d.signature, d.category) == ("model_loading.modelscope_download_corrupt", "model_loading")
    assert d.facts["workers"] == ""


def test_modelscope_checksum_under_tensor_parallel_names_the_concurrent_download():
    d = first("python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-0.5B --tensor-parallel-size 2\n"
              "modelscope.hub.errors.FileIntegrityError: File /root/.cache/modelscope/hub/models/._____temp/Qwen/"
              "Qwen2.5-0.5B/vocab.json integrity check failed, expected sha256 signature is ca10d7e9, actual is "
              "87f064d6, the download may be incomplete, please try again.\n")
    assert d.signature == "model_loading.modelscope_download_corrupt"
    assert "several vLLM workers" in d.title


def test_a_checksum_modelscope_recovered_from_is_no_failure():
    d = top("2025-04-14 07:29:32,856 - modelscope - ERROR - File /root/.cache/modelscope/hub/models/._____temp/Qwen/"
            "Qwen2.5-0.5B/vocab.json integrity check failed, expected sha256 signature is ca10d7e9, actual is 87f064d6, "
            "the download may be incomplete, please try again.\n"
            "INFO 04-14 07:31:02 [api_server.py:1090] Starting vLLM API server on http://0.0.0.0:8000\n"
            "INFO:     Application startup complete.\n")
    assert d is None or d.signature != "model_loading.modelscope_download_corrupt"


# ---- an NCCL error typed from a screenshot -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "VllM ： NCCLerror: unhandled system error (run withNCCL DEBUG=INFo for details)\n",
    "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n",
])
def test_nccl_unhandled_system_error_with_or_without_the_space(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.nccl_error", "distributed")
    assert d.facts["nccl_error"] == "unhandled system error"


# ---- a model newer than vLLM: transformers too old for it, and too new for vLLM once upgraded -------------------

def test_both_transformers_refusals_mean_vllm_is_too_old():
    d = first("ValueError: The checkpoint you are trying to load has model type `glm4v_moe` but Transformers does not "
              "recognize this architecture.\n"
              "ValueError: 'aimv2' is already used by a Transformers config, pick another name.\n")
    assert (d.signature, d.category) == ("model_support.vllm_older_than_model", "model_support")
    assert d.facts == {"model_type": "glm4v_moe", "config_clash": "aimv2"}


@pytest.mark.parametrize("text", [
    "ValueError: The checkpoint you are trying to load has model type `qwen3_vl` but Transformers does not recognize "
    "this architecture.\n",
    "ValueError: 'aimv2' is already used by a Transformers config, pick another name.\n",
])
def test_one_refusal_alone_is_not_the_pinch(text):
    d = first(text)
    assert d.signature != "model_support.vllm_older_than_model"


@pytest.mark.parametrize("text,cls", [
    ("TypeError: ChatGLMTokenizer._pad() got an unexpected keyword argument 'padding_side'\n", "ChatGLMTokenizer"),
    ("TypeError: _pad() got an unexpected keyword argument 'padding_side'\n", None),
])
def test_remote_tokenizer_pad_without_padding_side(text, cls):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.remote_code_pad_padding_side", "tokenizer_chat_template")
    assert d.facts.get("cls") == cls
