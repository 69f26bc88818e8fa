"""m2's dev set (tests/logs/dev-m2/): real model-support, model-loading and tokenizer/chat-template logs through the
CLI, and the mechanisms that name them, each on the other wordings the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-m2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- safetensors refusing a shard's header: the wordings of its bindings across releases ---------------------

@pytest.mark.parametrize("text", [
    "safetensors_rust.SafetensorError: Error while deserializing header: HeaderTooLarge\n",
    "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer\n",
    # Display form of newer bindings
    "safetensors_rust.SafetensorError: Error while deserializing header: header too large\n",
    # before SafetensorError existed the bindings raised a bare Exception, metadata separately
    "Exception: Error while deserializing header: InvalidHeaderDeserialization\n",
    "Exception: Error while deserializing metadata: Error(\"EOF while parsing a value\", line: 1, column: 4096)\n",
    # an issue title without the exception type
    "[Bug]: Error while deserializing header: InvalidHeaderDeserialization\n",
])
def test_safetensors_header_refused_is_a_corrupt_shard(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_loading.corrupt_weights", "model_loading")


# ---- a tokenizer/processor object lacking an attribute vLLM reads: Python's own wording too -----------------

@pytest.mark.parametrize("text, cls, attr", [
    ("AttributeError: 'Qwen2VLProcessor' object has no attribute 'image_token'\n", "Qwen2VLProcessor", "image_token"),
    ("AttributeError: 'LlavaNextVideoProcessor' object has no attribute 'video_token'\n", "LlavaNextVideoProcessor",
     "video_token"),
    ("[Bug]: AttributeError: 'Qwen2VLImageProcessor' object has no attribute 'max_pixels'\n", "Qwen2VLImageProcessor",
     "max_pixels"),
    # transformers' own __getattr__ wording, as before
    ("AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended\n", "Qwen2Tokenizer",
     "all_special_tokens_extended"),
])
def test_processor_attribute_missing_is_transformers_version(text, cls, attr):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.transformers_tokenizer_attr", "model_support")
    assert (d.facts["cls"], d.facts["attr"]) == (cls, attr)


def test_a_none_processor_is_not_a_missing_attribute_of_one():
    d = top("AttributeError: 'NoneType' object has no attribute 'image_processor'\n")
    assert d is None or d.signature != "model_support.transformers_tokenizer_attr"


# ---- a Qwen-VL vision weight reaching the text decoder's loader --------------------------------------------

@pytest.mark.parametrize("text, param", [
    ('  File "/usr/local/lib/python3.11/site-packages/vllm/model_executor/models/qwen2.py", line 405, in load_weights\n'
     "    param = params_dict[name]\n"
     "KeyError: 'visual.patch_embed.proj.weight'\n", "visual.patch_embed.proj.weight"),
    ("KeyError: 'visual.blocks.0.attn.qkv.weight'\n", "visual.blocks.0.attn.qkv.weight"),
    ("KeyError: 'model.visual.merger.mlp.0.weight'\n", "model.visual.merger.mlp.0.weight"),
    # a trainer's weight sync re-raises only the key's text
    ("Exception: Call to collective_rpc method failed: 'visual.patch_embed.proj.weight'\n",
     "visual.patch_embed.proj.weight"),
])
def test_visual_weight_in_text_loader_is_the_new_vl_layout(text, param):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.vl_weights_new_layout", "model_support")
    assert d.facts["param"] == param


def test_a_vision_key_raised_while_building_the_model_is_not_the_layout():
    text = ('  File "/vllm-workspace/vllm/vllm/model_executor/model_loader/utils.py", line 63, in initialize_model\n'
            "    return model_class(vllm_config=vllm_config, prefix=prefix)\n"
            '  File "/vllm-workspace/vllm/vllm/model_executor/models/qwen2_5_vl.py", line 1013, in __init__\n'
            "    self.visual = Qwen2_5_VisionTransformer(\n"
            "KeyError: 'visual.blocks.0.attn.qkv.weight'\n")
    d = top(text)
    assert d is None or d.signature != "model_support.vl_weights_new_layout"


def test_a_text_weight_keyerror_stays_a_checkpoint_mismatch():
    d = first("KeyError: 'lm_head.weight'\n")
    assert d.signature != "model_support.vl_weights_new_layout"


# ---- gpt-oss's Harmony vocabulary: not downloadable, or a cache that is not writable -----------------------

@pytest.mark.parametrize("text", [
    "openai_harmony.HarmonyError: error downloading or loading vocab file: failed to download or load vocab file\n",
    # served through the OpenAI server: the 500 body, and other servers' log wording of the same loader
    '{"error":{"message":"openai_harmony.HarmonyError: error downloading or loading vocab file","type":'
    '"InternalServerError","code":500}}\n',
    "Failed to load Harmony encoding: error downloading or loading vocab file: failed to download or load vocab file\n",
])
def test_harmony_vocab_unavailable_is_the_tokenizer(text):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.harmony_vocab_unavailable", "tokenizer_chat_template")


@pytest.mark.parametrize("text", [
    'openai_harmony.HarmonyError: error downloading or loading vocab file: an underlying IO error occurred while '
    'creating file "/tmp/tiktoken-rs-cache/fb374d41": Permission denied (os error 13)\n',
    'openai_harmony.HarmonyError: error downloading or loading vocab file: an underlying IO error occurred while '
    'creating file "/cache/tiktoken-rs-cache/fb374d41": Read-only file system (os error 30)\n',
])
def test_harmony_cache_not_writable_is_the_environment(text):
    d = first(text)
    assert (d.signature, d.category) == ("environment.harmony_cache_not_writable", "environment")


# ---- a --tokenizer-mode this vLLM does not register ------------------------------------------------------

@pytest.mark.parametrize("mode", ["deepseek_v32", "deepseek_v4", "kimi_audio", "qwen_vl"])
def test_tokenizer_mode_not_registered(mode):
    d = first(f"(APIServer pid=1) ValueError: No tokenizer registered for tokenizer_mode='{mode}'.\n")
    assert (d.signature, d.category, d.facts["mode"]) == ("tokenizer.mode_not_registered", "tokenizer_chat_template",
                                                          mode)


def test_the_missing_mode_outranks_the_chat_template_it_leaves_missing():
    d = first("ValueError: No tokenizer registered for tokenizer_mode='deepseek_v32'.\n"
              "ERROR 12-18 06:04:47 [serving_chat.py:263] ValueError: As of transformers v4.44, default chat template "
              "is no longer allowed, so you must provide a chat template if the tokenizer does not define one.\n")
    assert d.signature == "tokenizer.mode_not_registered"


# ---- hf_xet's CAS errors: the transfer, the rate limit, the cache's file system; a full disk stays the disk's --

@pytest.mark.parametrize("text, what", [
    ("RuntimeError: Data processing error: CAS service error : ReqwestMiddleware Error: Request failed after 5 "
     "retries\n", "the transfer failed"),
    ("RuntimeError: Data processing error: CAS service error : Reqwest Error: error decoding response body, domain: "
     "no-url\n", "the transfer failed"),
    ('ERROR 06-11 21:06:33 [core.py:515] RuntimeError: Data processing error: CAS service error : Error : single flight '
     'error: Real call failed: ReqwestError(reqwest::Error { kind: Status(429) }, "https://transfer.xethub.hf.co/x")\n',
     "rate-limited (HTTP 429)"),
    ("RuntimeError: Data processing error: CAS service error : IO Error: Operation not supported (os error 95)\n",
     "the cache's file system refused hf_xet's writes"),
])
def test_xet_download_failures(text, what):
    d = first(text)
    assert (d.signature, d.category, d.facts["what"]) == ("model_loading.xet_download_failed", "model_loading", what)


def test_a_full_disk_under_xet_is_the_disk():
    d = first("RuntimeError: Data processing error: File reconstruction error: IO Error: No space left on device "
              "(os error 28)\n")
    assert d.signature == "model_loading.disk_full"


# ---- custom code refused: missing flag, or refused although the launch passed it ----------------------------

def test_remote_code_refused_without_the_flag_asks_for_it():
    d = first("ValueError: Loading internvl2-8b/ requires you to execute the configuration file in that repo on your "
              "local machine. Make sure you have read the code there to avoid malicious use, then set the option "
              "`trust_remote_code=True` to remove this error.\n")
    assert d.signature == "model_support.trust_remote_code"
    assert d.title == "The model needs --trust-remote-code"


@pytest.mark.parametrize("launch", [
    "vllm serve /workspace/amd/MiniMax-M2.1-MXFP4 \\\n  --trust-remote-code \\\n  --port 8899\n",
    "(APIServer pid=1) INFO 03-20 02:24:49 [utils.py:238] non-default args: {'model': 'x', 'trust_remote_code': True}\n",
    "llm = LLM(model=MODEL, trust_remote_code=True)\n",
])
def test_remote_code_refused_although_passed_is_the_model_type(launch):
    d = first(launch + "  Value error, The repository /m contains custom code which must be executed to correctly load "
                       "the model.\nPlease pass the argument `trust_remote_code=True` to allow custom code to be run.\n")
    assert d.signature == "model_support.trust_remote_code"
    assert "although --trust-remote-code was passed" in d.title


# ---- a --chat-template path that is not there: the wordings of chat_utils across releases -------------------

@pytest.mark.parametrize("text, template", [
    ("[rank0]: ValueError: The supplied chat template (./chat_template/llama3.jinja) looks like a file path, but it "
     "failed to be opened. Reason: [Errno 2] No such file or directory: './chat_template/llama3.jinja'\n",
     "./chat_template/llama3.jinja"),
    ("ValueError: The supplied chat template string (/templates/qwen3.jinja) appears path-like, but doesn't exist!\n",
     "/templates/qwen3.jinja"),
    ("ValueError: The supplied chat template string (unsloth.jinja) appears path-like, but doesn't exist! Tried: "
     "unsloth.jinja and /usr/lib/python3/dist-packages/vllm/transformers_utils/chat_templates/unsloth.jinja\n",
     "unsloth.jinja"),
])
def test_chat_template_path_missing(text, template):
    d = first(text)
    assert (d.signature, d.category, d.facts["template"]) == ("tokenizer.chat_template_path_missing",
                                                              "tokenizer_chat_template", template)


# ---- the Transformers backend's pipeline-parallel plan with a nested module name ---------------------------

@pytest.mark.parametrize("text, cls, attr", [
    ("AttributeError: 'Qwen3VLMoeModel' object has no attribute 'language_model.embed_tokens'\n", "Qwen3VLMoeModel",
     "language_model.embed_tokens"),
    ("AttributeError: 'Gemma3Model' object has no attribute 'language_model.layers'\n", "Gemma3Model",
     "language_model.layers"),
])
def test_nested_pp_plan_name_is_the_transformers_backend(text, cls, attr):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.transformers_backend_nested_pp", "model_support")
    assert (d.facts["cls"], d.facts["attr"]) == (cls, attr)


def test_a_plain_missing_attribute_is_not_the_nested_plan():
    d = top("AttributeError: 'Qwen2VLProcessor' object has no attribute 'image_token'\n")
    assert d is None or d.signature != "model_support.transformers_backend_nested_pp"


# ---- transformers' unknown model type retold in Chinese (a ticket title) ----------------------------------

@pytest.mark.parametrize("text, model_type", [
    ("使用vllm启动glm4.5v 106B的时候显示Transformers 库无法识别 glm4v moe 这种模型架构\n", "glm4v moe"),
    ("vllm 0.10 部署报错：transformers无法识别qwen3_5架构\n", "qwen3_5"),
])
def test_unknown_model_type_in_chinese(text, model_type):
    d = first(text)
    assert (d.signature, d.category, d.facts["model_type"]) == ("model_support.transformers_unknown_type",
                                                                "model_support", model_type)
