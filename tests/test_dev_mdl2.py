"""mdl2's dev set (tests/logs/dev-mdl2/): failed launches reported in model vendors' repositories, through the CLI,
and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-mdl2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "model_support--qwen3vl-235b-a100-oom-transformers-backend-title.log":
        "the paste shows only the OOM title and a cut load_model traceback; that vLLM 0.10.2 loaded Qwen3-VL through "
        "the Transformers backend is in a maintainer's comment, not in a log line",
    "tokenizer_chat_template--devstral-2507-mistral-common-old-image.log":
        "the paste stops before mistral_common's 'Unknown version: v13' (which tokenizer.mistral_version_unknown "
        "reads); only a comment says the image's mistral-common is too old",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- --trust-remote-code: what counts as passing it -------------------------------------------------------

REFUSAL = ("ValueError: Loading moonshotai/Moonlight-16B-A3B-Instruct requires you to execute the configuration file "
           "in that repo on your local machine. Make sure you have read the code there to avoid malicious use, then set "
           "the option `trust_remote_code=True` to remove this error.\n")


def _trust(text: str):
    ds, _ = diagnose(scan_text(text))
    return next(d for d in ds if d.signature == "model_support.trust_remote_code")


@pytest.mark.parametrize("launch", [
    'vllm serve "moonshotai/Moonlight-16B-A3B-Instruct" trust_remote_code=True\n',
    "vllm: error: unrecognized arguments: trust_remote_code=True\n",
    "python -m vllm.entrypoints.openai.api_server --model m trust_remote_code=True\n",
    "",
])
def test_a_bare_keyword_or_its_rejection_is_no_flag(launch):
    assert _trust(launch + REFUSAL).title == "The model needs --trust-remote-code"


@pytest.mark.parametrize("launch", [
    "vllm serve moonshotai/Moonlight-16B-A3B-Instruct --trust-remote-code\n",
    "INFO 04-14 13:59:19 [cli_args.py:309] non-default args: {'model': 'm', 'trust_remote_code': True}\n",
    "INFO 03-12 16:53:17 api_server.py:913] args: Namespace(model='m', trust_remote_code=True, max_model_len=None)\n",
    "llm = LLM(model='moonshotai/Moonlight-16B-A3B-Instruct', trust_remote_code=True)\n",
])
def test_the_flag_in_its_real_spellings_counts_as_passed(launch):
    assert "although --trust-remote-code was passed" in _trust(launch + REFUSAL).title


# ---- an engine keyword written as name=value on the command line -------------------------------------------

@pytest.mark.parametrize("word,flag", [
    ("trust_remote_code=True", "`--trust-remote-code`"),
    ("enforce_eager=False", "`--no-enforce-eager`"),
    ("max_model_len=4096", "`--max-model-len 4096`"),
])
def test_a_keyword_argument_is_told_as_its_flag(word, flag):
    d = first(f"vllm: error: unrecognized arguments: {word}\n")
    assert d.signature == "config.unrecognized_argument"
    assert flag in d.fix.summary


def test_a_removed_flag_keeps_its_advice():
    d = first("vllm serve: error: unrecognized arguments: --foo-bar-baz\n")
    assert "Python keyword" not in d.fix.summary


# ---- vLLM's processor type check, whole or retold as a title ------------------------------------------------

@pytest.mark.parametrize("text", [
    "vllm serve 报错: Invalid type of HuggingFace processor\n",
    "Invalid type of HuggingFace processor.\n",
    "TypeError: Invalid type of HuggingFace processor. Expected type: <class 'transformers.models.glm46v.processing_glm46v."
    "Glm46VProcessor'>, but found type: <class 'transformers.tokenization_utils_fast.PreTrainedTokenizerFast'>\n",
    "TypeError: Invalid type of HuggingFace config. Expected type: <class 'X'>, but found type: <class 'Y'>\n",
])
def test_processor_type_check_is_model_support(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.mm_processor_failed", "model_support")


def test_the_phrase_inside_a_sentence_is_not_claimed():
    d = top("We fixed the Invalid type of HuggingFace processor check in the docs last week and moved on\n")
    assert d is None or d.signature != "model_support.mm_processor_failed"


# ---- vllm-metal's hybrid runtime without the model type's state family --------------------------------------

@pytest.mark.parametrize("text,model_type", [
    ("NotImplementedError: Metal hybrid runtime has no state family for model_type='granitemoehybrid'.\n",
     "granitemoehybrid"),
    ('NotImplementedError: Metal hybrid runtime has no state family for model_type="falcon_h1".\n', "falcon_h1"),
    ("(APIServer pid=1) NotImplementedError: Metal hybrid runtime has no state family for model_type=jamba.\n", "jamba"),
])
def test_metal_hybrid_without_state_family_is_model_support(text, model_type):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.metal_hybrid_unsupported", "model_support")
    assert f"type {model_type} on" in d.title
