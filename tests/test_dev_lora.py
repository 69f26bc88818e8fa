"""lora's dev set (tests/logs/dev-lora/): real logs of LoRA adapters and sampling parameters vLLM refuses, through
the CLI, and the mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-lora")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


def _sig(text: str) -> tuple[str, str]:
    d = first(text)
    return d.signature, d.category


# ---- MoE LoRA: expert weights before fused-MoE LoRA, the expert mapping after it ---------------------------

@pytest.mark.parametrize("text", [
    "ValueError: For MoE models, vLLM currently does not support fused MoE LoRA inference. Please ensure that the "
    "loaded LoRA model does not contain expert weights.\n",
    # the message retyped in lower case in a ticket
    "lora报错： for moe models, vlm currently does not support fused moe lora inference. please ensure that the "
    "loaded lora model does not contain expert weights\n",
])
def test_moe_expert_weights_refused(text):
    assert _sig(text) == ("lora.moe_expert_weights_unsupported", "engine_config")


def test_moe_model_without_expert_mapping_is_model_support():
    text = "AttributeError: To support LoRA for MoE model, 'get_expert_mapping' must be implemented\n"
    assert _sig(text) == ("lora.moe_expert_mapping_missing", "model_support")


def test_the_fused_moe_lora_info_line_is_no_failure():
    d = top("INFO 08-23 14:02:40 [utils.py:101] MoE model detected. Using fused MoE LoRA implementation.\n")
    assert d is None or d.signature not in {"lora.moe_expert_weights_unsupported", "lora.moe_expert_mapping_missing"}


# ---- the adapter path: a missing folder, and an RL framework's in-memory placeholder --------------------------

@pytest.mark.parametrize("text, path", [
    # 0.7+ (WorkerLoRAManager._load_adapter, LoRAAdapterNotFoundError in 2026 releases)
    ("ValueError: Loading lora sql-lora failed: No adapter found for /adapters/sql-lora\n", "/adapters/sql-lora"),
    ("vllm.exceptions.LoRAAdapterNotFoundError: Loading lora samp-1 failed: No adapter found for "
     "/tmp/peft/samp-1/adapter_config.json\n", "/tmp/peft/samp-1/adapter_config.json"),
    # 0.4-0.6: the open() of adapter_config.json came through
    ("FileNotFoundError: [Errno 2] No such file or directory: 'jashing/tinyllama-colorist-lora/adapter_config.json'\n",
     "jashing/tinyllama-colorist-lora"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/adapters/x/adapter_config.json'\n", "/adapters/x"),
])
def test_missing_adapter_folder(text, path):
    d = first(text)
    assert (d.signature, d.category) == ("lora.adapter_not_found", "engine_config")
    assert d.facts["path"] == path


def test_a_model_config_json_missing_stays_model_loading():
    d = first("FileNotFoundError: [Errno 2] No such file or directory: '/models/llama/config.json'\n")
    assert (d.signature, d.category) == ("model_loading.files_missing", "model_loading")


@pytest.mark.parametrize("text", [
    "ValueError: Loading lora 1748373774 failed: No adapter found for simon_lora_path\n",
    "ValueError: Loading lora 123 failed: No adapter found for /simon-stub-path\n",
    "FileNotFoundError: [Errno 2] No such file or directory: 'simon_lora_path/adapter_config.json'\n",
    "vLLM V1 with LoRA: FileNotFoundError for placeholder 'simon_lora_path' when using VLLM_USE_V1=1\n",
])
def test_placeholder_path_read_from_disk_is_a_framework_vllm_mismatch(text):
    assert _sig(text) == ("lora.inmemory_placeholder_path", "install_mismatch")


# ---- adapters that add tokens; vllm-ascend's rank limit --------------------------------------------------------

def test_added_vocab_over_the_extra_vocab_size():
    d = first("ValueError: LoRA added vocab size 3 is greater than lora_extra_vocab_size 0.\n")
    assert (d.signature, d.facts["added"], d.facts["limit"]) == ("lora.added_vocab_over_limit", 3, 0)


def test_ascend_sgmv_expand_rank_check():
    assert _sig("RuntimeError: hidden in should be smaller than hidden out\n") == (
        "lora.ascend_rank_over_slice", "engine_config")


# ---- n / best_of refusals across releases ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: best_of must be greater than or equal to n, got n=4 and best_of=2.\n",
    "ValueError: best_of must be 1 when using greedy sampling.Got 2.\n",
    "ValueError: n must be 1 when using greedy sampling, got 4.\n",
    "vllm.exceptions.VLLMValidationError: n must be 1 when using greedy sampling, got 2.\n",
    "ValueError: best_of must equal n to use output_kind=DELTA\n",
    "ValueError: vLLM V1 does not yet support best_of.\n",
])
def test_best_of_refusals(text):
    assert _sig(text) == ("sampling.best_of_refused", "engine_config")


# ---- top_k 0 from the model's generation config ---------------------------------------------------------------

# get_diff_sampling_param warns, then the serving class logs the defaults it took (the INFO line is kept as the
# line after the warning)
GEN_WARN = ("WARNING 05-02 03:26:16 [config.py:1239] Default sampling parameters have been overridden by the model's "
            "Hugging Face generation config recommended from the model creator. If this is not intended, please "
            "relaunch vLLM instance with `--generation-config vllm`.\n")

def test_generation_config_top_k_zero_is_a_hint_below_harmless():
    d = first(GEN_WARN + "INFO 05-02 03:26:16 [serving_chat.py:118] Using default chat sampling params from model: "
              "{'top_k': 0, 'top_p': 0.8, 'max_tokens': 512}\n")
    assert d.signature == "sampling.generation_config_top_k_zero" and d.confidence <= 0.5


def test_generation_config_top_k_twenty_is_nothing():
    d = top(GEN_WARN + "INFO 05-02 03:26:16 [serving_chat.py:118] Using default chat sampling params from model: "
            "{'top_k': 20, 'top_p': 0.8, 'temperature': 0.7}\n")
    assert d is None or d.signature != "sampling.generation_config_top_k_zero"


def test_the_refusal_itself_outranks_the_hint():
    d = first(GEN_WARN + "INFO 05-02 03:26:16 [serving_chat.py:118] Using default chat sampling params from model: "
              "{'top_k': 0, 'top_p': 0.8}\n"
              "ValueError: top_k must be -1 (disable), or at least 1, got 0.\n")
    assert d.signature == "sampling.params_invalid"


# ---- harmless: vision-tower LoRA weights skipped ----------------------------------------------------------------

def test_vision_tower_lora_skipped_is_harmless():
    d = top("WARNING 04-28 02:13:02 [models.py:478] Regarding multimodal models, vLLM currently only supports adding "
            "LoRA to language model, visual.blocks.31.mlp.up_proj will be ignored.\n")
    assert d is None or d.confidence <= 0.5
