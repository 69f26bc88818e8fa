"""omni's dev set (tests/logs/dev-omni/): vLLM beyond text chat (speech and audio models, TTS and image generation
through vLLM-Omni, video input, OCR models) from real threads, through the CLI, and the mechanisms that name them,
each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-omni")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a diffusion model's pipeline missing from the installed diffusers --------------------------------------

@pytest.mark.parametrize("text", [
    "ModuleNotFoundError: No module named 'diffusers.pipelines.longcat_image'\n",
    "ModuleNotFoundError: No module named 'diffusers.models.transformers.transformer_glm_image'\n",
    "ImportError: cannot import name 'LongCatImageEditPipeline' from 'diffusers' "
    "(/usr/local/lib/python3.12/site-packages/diffusers/__init__.py)\n",
    "ImportError: cannot import name 'GlmImagePipeline' from 'diffusers.pipelines' "
    "(/usr/local/lib/python3.12/site-packages/diffusers/pipelines/__init__.py)\n",
])
def test_missing_diffusers_pipeline_is_an_old_diffusers(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.diffusers_pipeline_missing", "model_support")
    assert "pip install -U diffusers" in d.fix.summary


def test_the_thread_saying_the_module_is_missing_in_prose():
    d = first("When running the example, execution fails with `ModuleNotFoundError`.\n"
              "vllm-omni imports from the `diffusers` namespace (e.g. `diffusers.pipelines.longcat_image`), but these "
              "submodules do not exist in the standard installation.\n")
    assert d.signature == "model_support.diffusers_pipeline_missing"


def test_another_missing_module_below_a_diffusers_import_is_not_diffusers():
    d = top("  File \"/w/vllm_omni/diffusion/models/wan2_2/pipeline_wan2_2.py\", line 9, in <module>\n"
            "    from diffusers.pipelines.wan.pipeline_output import WanPipelineOutput\n"
            "ModuleNotFoundError: No module named 'ftfy'\n")
    assert d is None or d.signature != "model_support.diffusers_pipeline_missing"


def test_a_diffusers_helper_moved_between_releases_stays_the_package_skew():
    d = first("ImportError: cannot import name 'cached_download' from 'diffusers.utils' "
              "(/usr/lib/python3/site-packages/diffusers/utils/__init__.py)\n")
    assert d.signature == "install.package_api_skew"


# ---- a TTS checkpoint without the speaker encoder voice cloning needs --------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: This checkpoint does not provide `speaker_encoder` weights.\n",
    "ValueError: This checkpoint does not provide `speaker_encoder` weights; cannot compute ref_spk_embedding from "
    "ref_audio.\n",
])
def test_voice_cloning_without_speaker_encoder_asks_for_the_base_checkpoint(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_loading.tts_speaker_encoder_missing", "model_loading")
    assert "Base" in d.fix.summary


def test_dummy_load_format_is_named_as_the_cause():
    d = first("engine_args:\n  load_format: dummy\n"
              "ValueError: This checkpoint does not provide `speaker_encoder` weights.\n")
    assert "dummy" in d.fix.summary and "load_weights" in d.title


# ---- vLLM's optional extras and an architecture, as a title retells them -----------------------------------

@pytest.mark.parametrize("text, extra", [
    ("ImportError: Please install vllm[video] for video support.\n", "video"),  # 0.6 try_import_video_packages
    ("ImportError: please install vllm[video] for video support\n", "video"),  # a retold title
    ("ImportError: Please install vllm[audio] for audio support\n", "audio"),  # PlaceholderModule 0.7+
])
def test_vllm_extra_missing(text, extra):
    d = first(text)
    assert d.signature == "model_support.mm_package_missing"
    assert f"vllm[{extra}]" in d.fix.summary


@pytest.mark.parametrize("text", [
    "Value error, Model architectures ['DeepseekOCRForCausalLM'] are not supported for now. Supported architectures: "
    "dict_keys(['ApertusForCausalLM', 'AquilaModel'\n",
    "# pydantic core.ValidationError: 1 validation error for ModelConfig Value error, Model architectures "
    "DeepseekOCRForCausallM' are not supported for now, Supported architectures\n",
])
def test_unsupported_architecture_with_or_without_the_list_brackets(text):
    d = first(text)
    assert d.signature == "model_support.architecture_unsupported"
    assert str(d.facts["arch"]).startswith("DeepseekOCRForCausal")
