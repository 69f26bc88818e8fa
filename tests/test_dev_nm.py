"""nm's dev set (tests/logs/dev-nm/): first launches of the 2025-2026 model families through the CLI, and the
mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-nm")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a Mistral-format tokenizer newer than the installed mistral_common -----------------------------------------

@pytest.mark.parametrize("text, version", [
    # Tekkenizer.from_file, every release since 1.3 (the list grows with the release)
    ("ValueError: Unknown version: v13 in /root/.cache/huggingface/hub/models--mistralai--Devstral-Small-2507/"
     "snapshots/3178e9e2/tekken.json. Make sure to use a valid version string: ['v1', 'v2', 'v3', 'v7', 'v11']\n",
     "v13"),
    # the same message wrapped after the path
    ("ValueError: Unknown version: v15 in tekken.json.\n"
     "Make sure to use a valid version string: ['v1', 'v2', 'v3', 'v7', 'v11', 'v13']\n", "v15"),
    # get_spm_version / MistralTokenizer.from_file on a SentencePiece file whose suffix this release lacks
    ("mistral_common.exceptions.TokenizerException: Unrecognized tokenizer filename: "
     "/models/Mistral-Large-Instruct-2411/tokenizer.model.v7\n", "v7"),
    ("TokenizerException: Unrecognized tokenizer version: TokenizerVersion.v13\n", "v13"),
])
def test_tokenizer_version_unknown_to_mistral_common(text, version):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.mistral_version_unknown", "tokenizer_chat_template")
    assert d.facts["version"] == version
    assert "mistral_common" in d.fix.summary


def test_an_unrecognized_non_mistral_tokenizer_file_is_not_a_version_gap():
    # a tokenizer.json handed to mistral_common is the wrong tokenizer mode, not an old mistral_common
    d = top("TokenizerException: Unrecognized tokenizer filename: /models/llama/tokenizer.json\n")
    assert d is None or d.signature != "tokenizer.mistral_version_unknown"


def test_a_package_version_line_is_no_tokenizer_version():
    d = top("ERROR: Unknown version: 1.2.3 in requirements.txt\n")
    assert d is None or d.signature != "tokenizer.mistral_version_unknown"


# ---- LMCache refusing a hybrid model's KV cache groups --------------------------------------------------------

@pytest.mark.parametrize("text, mode, cross", [
    ("ValueError: LMCache cannot serve this model's KV cache groups: group 0: MambaSpec with mamba_cache_mode='all' "
     "(only 'align' keeps reusable state snapshots). See lmcache/integration/vllm/kv_cache_group_edits.py.\n",
     "all", False),
    # wrapped by the paste after the colon
    ("ValueError: LMCache cannot serve this model's KV cache groups:\n"
     "group 3: MambaSpec with mamba_cache_mode='none' (only 'align' keeps reusable state snapshots)\n", "none", False),
    ("ValueError: LMCache cannot serve this model's KV cache groups: group 1: CrossAttentionSpec. "
     "See lmcache/integration/vllm/kv_cache_group_edits.py.\n", None, True),
])
def test_lmcache_refuses_hybrid_groups(text, mode, cross):
    d = first(text)
    assert (d.signature, d.category) == ("config.lmcache_kv_groups_unsupported", "engine_config")
    assert d.facts.get("mamba_cache_mode") == mode
    assert d.facts["cross_attention"] is cross
    assert "--mamba-cache-mode align" in d.fix.summary


# ---- GGUF architecture names with hyphens ---------------------------------------------------------------------

@pytest.mark.parametrize("arch", ["ernie4_5-moe", "minimax-m2", "gpt-oss", "qwen3next", "seed_oss"])
def test_gguf_architecture_unsupported_whatever_its_name(arch):
    d = first(f"ValueError: GGUF model with architecture {arch} is not supported yet.\n")
    assert (d.signature, d.category) == ("model_loading.gguf_unsupported", "model_loading")
    assert arch in d.title


# ---- transformers reading a model's config through a related config class -------------------------------------

@pytest.mark.parametrize("given, used", [("deepseek_v32", "deepseek_v3"), ("kimi_k2", "deepseek_v3"),
                                         ("qwen3_vl_text", "qwen3_vl")])
def test_model_type_read_through_another_config_class_is_a_note(given, used):
    from triage.diagnose import diagnose
    from triage.logread.scan import scan_text

    text = (f"(APIServer pid=7) You are using a model of type {given} to instantiate a model of type {used}. "
            "This is not supported for all configurations of models and can yield errors.\n")
    ds, notes = diagnose(scan_text(text))
    assert all(d.confidence <= 0.5 for d in ds)
    assert "harmless.config_model_type_mismatch" in {n.signature for n in notes}


def test_the_model_type_note_does_not_hide_the_failure_after_it():
    d = first("You are using a model of type kimi_k2 to instantiate a model of type deepseek_v3. This is not supported "
              "for all configurations of models and can yield errors.\n"
              "ModuleNotFoundError: No module named 'blobfile'\n")
    assert d.signature != "harmless.config_model_type_mismatch" and d.confidence > 0.5
