"""mm's dev set (tests/logs/dev-mm/): real logs of multimodal serving (vision, video and audio inputs) through the
CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-mm")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a modality's package missing: vLLM's PlaceholderModule, transformers' check_imports, the import itself ----

@pytest.mark.parametrize("text, what", [
    # PlaceholderModule.__getattr__ (vllm/utils.py 0.7+, vllm/utils/import_utils.py): one sentence per extra
    ("ImportError: Please install vllm[audio] for audio support\n", "vLLM's audio extra"),
    ("ImportError: Please install vllm[video] for video support\n", "vLLM's video extra"),
    # a package in no extra: Python's own error, raised where the video loader touches it
    ("  File \"/usr/local/lib/python3.10/dist-packages/vllm/multimodal/video.py\", line 96, in load_bytes\n"
     "    vr = decord.VideoReader(f, num_threads=num_threads)\n"
     "ModuleNotFoundError: No module named 'decord'\n", "the package decord"),
    # transformers' check_imports for a checkpoint's remote code (the warning line, then the ImportError)
    ("ImportError: This modeling file requires the following packages that were not found in your environment: "
     "qwen_vl_utils. Run `pip install qwen_vl_utils`\n", "the package qwen_vl_utils"),
    ("Encountered exception while importing timm: No module named 'timm'\n", "the package timm"),
    # torchvision's video reader without PyAV
    ("ImportError: PyAV is not installed, and is necessary for the video operations in torchvision.\n",
     "the package PyAV"),
    # transformers' requires_backends (Gemma 3n's timm-backed vision tower)
    ("ImportError: \nTimmWrapperConfig requires the timm library but it was not found in your environment. You can "
     "install it with pip:\n`pip install timm`. Please note that you may need to restart your runtime after "
     "installation.\n", "the package timm"),
    # an audio decoder named alone is the audio extra
    ("ModuleNotFoundError: No module named 'soundfile'\n", "vLLM's audio extra"),
])
def test_a_missing_modality_package_is_named_with_its_install(text, what):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.mm_package_missing", "model_support")
    assert what in d.title


def test_the_install_command_fits_the_package():
    assert "pip install 'vllm[audio]'" in first("ImportError: Please install vllm[audio] for audio support\n").fix.summary
    assert "pip install qwen-vl-utils" in first("ModuleNotFoundError: No module named 'qwen_vl_utils'\n").fix.summary
    d = first("image: 'vllm/vllm-openai:latest'\nImportError: Please install vllm[audio] for audio support\n")
    assert "FROM vllm/vllm-openai" in d.fix.summary


def test_an_optional_import_probed_at_startup_is_not_the_failure():
    d = top("INFO 02-21 09:14:02 [importing.py:43] No module named 'librosa'; audio inputs are disabled\n")
    assert d is None or d.signature != "model_support.mm_package_missing"


def test_a_kernel_library_keeps_its_own_rule():
    d = top("ImportError: This modeling file requires the following packages that were not found in your "
            "environment: flash_attn. Run `pip install flash_attn`\n")
    assert d is None or d.signature != "model_support.mm_package_missing"


# ---- the speech-to-text endpoint's one answer for every audio loader failure -------------------------------------

def test_invalid_audio_file_points_at_the_audio_extra_without_certainty():
    d = first('{"error":{"message":"Invalid or unsupported audio file.","type":"BadRequestError","code":400}}\n')
    assert (d.signature, d.category) == ("model_support.audio_undecodable", "model_support")
    assert d.confidence < 0.85


# ---- a multimodal option on a model this vLLM does not know: the model named by a script or the ticket ----------

@pytest.mark.parametrize("text", [
    # an offline script: the checkpoint assigned to a name, then handed to LLM(...)
    'MODEL_PATH = "/models/Qwen2.5-Omni-7B"\nllm = LLM(model=MODEL_PATH, limit_mm_per_prompt={"image": 1})\n'
    "ValueError: `limit_mm_per_prompt` is only supported for multimodal models.\n",
    'llm = LLM(model="moonshotai/Kimi-VL-A3B-Instruct", trust_remote_code=True)\n'
    "ValueError: `limit_mm_per_prompt` is only supported for multimodal models.\n",
    # no launch at all: the ticket's prose names the model
    "The model (Qwen2.5-Omni-7B) is not recognised by vLLM as multimodal.\n"
    "ValueError: `mm_processor_kwargs` is only supported for multimodal models.\n",
])
def test_a_multimodal_model_named_outside_a_launch_is_an_older_vllm(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.multimodal_not_recognised", "model_support")


def test_a_text_model_in_a_script_stays_a_text_only_option():
    d = first('llm = LLM(model="meta-llama/Llama-3.1-8B-Instruct", limit_mm_per_prompt={"image": 2})\n'
              "ValueError: `limit_mm_per_prompt` is only supported for multimodal models.\n")
    assert (d.signature, d.category) == ("config.mm_option_text_only", "engine_config")


def test_the_remote_code_import_warning_is_kept_in_a_full_log():
    # a log with vLLM's headers is filtered by its words: transformers' check_imports warning carries none of the
    # error words, and it is the only line that names the package
    d = first("(APIServer pid=1) INFO 11-24 16:04:10 [model.py:630] Resolved architecture: Ernie4_5_VLMoeForConditionalGeneration\n"
              "(APIServer pid=1) Encountered exception while importing decord: No module named 'decord'\n"
              "(APIServer pid=1) Traceback (most recent call last):\n"
              '(APIServer pid=1)   File "<frozen runpy>", line 198, in _run_module_as_main\n')
    assert d.signature == "model_support.mm_package_missing" and d.facts["package"] == "decord"


# ---- an item larger than the encoder cache: both wordings of input_processor._validate_model_input ---------------

@pytest.mark.parametrize("text, modality, tokens", [
    ("vllm.exceptions.VLLMValidationError: The decoder prompt contains a(n) video item with length 16758, which "
     "exceeds the pre-allocated encoder cache size 16384. Please reduce the input size or increase the encoder cache "
     "size by setting --limit-mm-per-prompt at startup.\n", "video", 16758),
    ('{"error":{"message":"The decoder prompt contains a(n) audio item with 29537 embedding tokens, which exceeds the '
     'pre-allocated encoder cache size 2048. Please reduce the input size or increase the encoder cache size by '
     'setting --limit-mm-per-prompt at startup.","type":"BadRequestError","code":400}}\n', "audio", 29537),
])
def test_an_item_over_the_encoder_cache_names_the_budget_to_raise(text, modality, tokens):
    d = first(text)
    assert (d.signature, d.category) == ("config.mm_item_exceeds_encoder_cache", "engine_config")
    assert (d.facts["modality"], d.facts["item_tokens"]) == (modality, tokens)
    assert f"--max-num-batched-tokens {tokens}" in d.fix.summary


# ---- the multimodal path's notes that read like failures ------------------------------------------------------

@pytest.mark.parametrize("text, signature", [
    # transformers' ProcessorMixin (both quotings across releases)
    ("Keyword argument `max_pixels` is not a valid argument for this processor and will be ignored.\n",
     "harmless.processor_kwarg_ignored"),
    ("Keyword argument min_pixels is not a valid argument for this processor and will be ignored.\n",
     "harmless.processor_kwarg_ignored"),
    ("Using a slow image processor as `use_fast` is unset and a slow processor was saved with this model. "
     "`use_fast=True` will be the default behavior in v4.52, even if the model was saved with a slow processor.\n",
     "harmless.image_processor_fast_slow"),
    ("It looks like you are trying to rescale already rescaled images. If the input images have pixel values between "
     "0 and 1, set `do_rescale=False` to avoid rescaling them again.\n", "harmless.image_processor_fast_slow"),
    ("WARNING 10-29 17:42:42 model_runner.py:1247] Computed max_num_seqs (min(256, 32768 // 147456)) to be less "
     "than 1. Setting it to the minimum value of 1.\n", "harmless.mm_profiling_seq_short"),
])
def test_multimodal_notes_are_no_failure(text, signature):
    ds, notes = diagnose(scan_text(text))
    assert all(d.confidence <= 0.5 for d in ds)
    assert signature in [n.signature for n in notes]


def test_a_profiling_note_does_not_hide_the_oom_after_it():
    d = first("WARNING 04-27 16:27:59 [profiling.py:245] The sequence length used for profiling (max_num_batched_tokens "
              "/ max_num_seqs = 20000) is too short to hold the multi-modal embeddings in the worst case (98304 tokens "
              "in total, out of which {'image': 81920, 'video': 16384} are reserved for multi-modal embeddings).\n"
              "ERROR 04-27 16:28:02 [engine.py:448] CUDA out of memory. Tried to allocate 800.00 MiB. GPU 0 has a total "
              "capacity of 15.56 GiB of which 442.62 MiB is free.\n")
    assert d.category == "gpu_oom"


@pytest.mark.parametrize("text, install", [
    # torchvision's video reader names PyAV: the pip package is av, and no audio extra is involved
    ("ImportError: PyAV is not installed, and is necessary for the video operations in torchvision.\n",
     "pip install av"),
    # a ticket's own words
    ("We're running vllm 0.7.3 latest docker container. It looks like librosa is not installed by default in the "
     "dockerfile\n", "pip install 'vllm[audio]'"),
    ("missing install vllm[audio] for https://huggingface.co/fixie-ai/ultravox-v0_5-llama-3_1-8b\n",
     "pip install 'vllm[audio]'"),
])
def test_the_package_said_in_prose_gets_its_install(text, install):
    d = first(text)
    assert d.signature == "model_support.mm_package_missing"
    assert install in d.fix.summary
