"""lib's dev set (tests/logs/dev-lib/): failures the libraries under vLLM raise in their own words (Ray, Hugging Face
tokenizers, transformers' processors, NumPy), through the CLI, and the mechanisms that name them on the other
wordings their raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-lib")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a `ray` that is not Ray (vLLM's vllm/ray subpackage, a local ray/ folder) -------------------------------

@pytest.mark.parametrize("text", [
    # vllm/utils is_in_ray_actor, vllm/ray/lazy_utils, ray_utils (0.10+): the attribute call
    "AttributeError: module 'ray' has no attribute 'is_initialized'\n",
    "AttributeError: module 'ray' has no attribute 'remote'\n",
    # config.py's `from ray import is_initialized` (0.8-0.9) on a namespace package or vLLM's subpackage
    "ImportError: cannot import name 'is_initialized' from 'ray' (unknown location)\n",
    "ImportError: cannot import name 'init' from 'ray' (/home/me/vllm/vllm/ray/__init__.py)\n",
    "ImportError: cannot import name 'remote' from 'ray' (/home/me/project/ray.py)\n",
])
def test_a_shadowed_ray_is_the_installation(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.ray_module_shadowed", "install_mismatch")


@pytest.mark.parametrize("text", [
    # a Ray submodule not imported yet is Ray's own lazy import, not a shadowed package
    "AttributeError: module 'ray' has no attribute 'util'\n",
    # the real Ray, another release: not a shadow
    "ImportError: cannot import name 'is_initialized' from 'ray' "
    "(/usr/local/lib/python3.12/site-packages/ray/__init__.py)\n",
])
def test_ray_attribute_errors_of_the_real_package_are_not_a_shadow(text):
    d = top(text)
    assert d is None or d.signature != "install.ray_module_shadowed"


# ---- a generated token id the tokenizer does not have ----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "TypeError: argument 'tokens': 'NoneType' object cannot be converted to 'PyString'\n",
    # tokenizers builds whose decoder takes a sequence
    "TypeError: argument 'tokens': 'NoneType' object cannot be converted to 'Sequence'\n",
    # retold in a title, without its TypeError
    "# argument 'tokens': 'NoneType' object cannot be converted to 'PyString'\n",
])
def test_a_none_token_from_the_decoder_is_an_id_past_the_tokenizer(text):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.generated_id_not_in_tokenizer", "tokenizer_chat_template")


def test_a_prompt_id_out_of_vocabulary_stays_the_prompt_rule():
    d = first("ValueError: Token id 151851 is out of vocabulary\n")
    assert d.signature == "tokenizer.token_id_out_of_vocab"


# ---- a fast tokenizer borrowed by two threads -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: Already borrowed\n",
    "RuntimeError: Already mutably borrowed\n",
    '"POST /v1/chat/completions HTTP/1.1" 400 Bad Request (caused by RuntimeError: Already borrowed at '
    "self._tokenizer.enable_truncation)\n",
])
def test_already_borrowed_is_concurrent_tokenizer_use(text):
    d = first(text)
    assert (d.signature, d.category) == ("tokenizer.fast_tokenizer_already_borrowed", "tokenizer_chat_template")


def test_a_borrow_word_in_prose_is_not_claimed():
    d = top("INFO: the adapter was already borrowed from the pool\n")
    assert d is None or d.signature != "tokenizer.fast_tokenizer_already_borrowed"


# ---- transformers' processor component check --------------------------------------------------------------------

@pytest.mark.parametrize("text,got,arg", [
    ("TypeError: Received a Qwen2VLImageProcessorFast for argument image_processor, but a Qwen2VLImageProcessor "
     "was expected.\n", "Qwen2VLImageProcessorFast", "image_processor"),
    # vLLM's cached tokenizer subclass refused by the processor's tokenizer check (a tuple of accepted classes)
    ("TypeError: Received a CachedQwen2TokenizerFast for argument tokenizer, but a ('Qwen2Tokenizer', "
     "'Qwen2TokenizerFast') was expected.\n", "CachedQwen2TokenizerFast", "tokenizer"),
    # quoted without its TypeError (the description of a ticket)
    (" Received a Qwen2VLImageProcessorFast for argument image_processor, but a Qwen2VLImageProcessor was expected\n",
     "Qwen2VLImageProcessorFast", "image_processor"),
])
def test_processor_component_class_refused_is_a_transformers_release(text, got, arg):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.processor_component_type", "model_support")
    assert (d.facts["got"], d.facts["arg"]) == (got, arg)


# ---- a name transformers already registers ----------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: 'aimv2' is already used by a Transformers config, pick another name.\n",
    # a ticket title cut before the tail
    "# Failed to use custom vLLM version: ValueError: 'aimv2' is already used by a Transformers config\n",
    # auto_factory's register for a config class (a processor or model registered on a config transformers maps)
    "ValueError: '<class 'vllm.transformers_utils.configs.ovis.OvisConfig'>' is already used by a Transformers "
    "model.\n",
])
def test_a_name_transformers_already_has_is_transformers_too_new(text):
    d = first(text)
    assert (d.signature, d.category) == ("model_support.transformers_too_new", "model_support")


# ---- Ray's notes that are not failures ---------------------------------------------------------------------------

@pytest.mark.parametrize("text,sig", [
    ("2025-04-17 02:50:51,178\tINFO utils.py:324 -- Module ray.dashboard.modules.actor.actor_head cannot be loaded "
     "because we cannot import all dependencies. Install this module using `pip install 'ray[default]'` for the full "
     "dashboard functionality. Error: No module named 'aiohttp_cors'\n", "harmless.ray_dashboard_optional_modules"),
    ("2025-01-14 03:08:29,081\tWARNING services.py:2022 -- WARNING: The object store is using /tmp instead of "
     "/dev/shm because /dev/shm has only 67108864 bytes available. This will harm performance!\n",
     "harmless.ray_object_store_tmp"),
])
def test_ray_notes_are_harmless(text, sig):
    ds, notes = diagnose(scan_text(text))
    assert all(d.confidence <= 0.5 for d in ds)
    assert sig in {n.signature for n in notes}


def test_the_ray_notes_do_not_hide_a_real_failure():
    text = ("2025-01-14 03:08:29,081\tWARNING services.py:2022 -- WARNING: The object store is using /tmp instead "
            "of /dev/shm because /dev/shm has only 67108864 bytes available.\n"
            "AttributeError: module 'ray' has no attribute 'is_initialized'\n")
    assert first(text).signature == "install.ray_module_shadowed"


# ---- a NumPy-2 banner above an import traceback cut before its message -----------------------------------------

def test_numpy_banner_outranks_a_cut_import_traceback():
    text = ("A module that was compiled using NumPy 1.x cannot be run in\n"
            "NumPy 2.0.2 as it may crash. To support both 1.x and 2.x\n"
            "versions of NumPy, modules must be compiled with NumPy 2.0.\n"
            "Traceback (most recent call last):  File \"/app/run.py\", line 1, in <module>\n"
            "    from vllm import LLM, SamplingParams\n"
            "  File \"/env/lib/python3.10/site-packages/vllm/__init__.py\", line 3, in <module>\n"
            "    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs\n"
            "  File \"/env/lib/python3.10/site-packages/vllm/engine/arg_utils.py\", line 6, in <module>\n"
            "    from vllm.config import (CacheConfig, DecodingConfig, DeviceConfig,\n"
            "  File \"/env/lib/python3.10/site-packages/vllm/config.py\", line 7, in <module>\n"
            "    import torch\n")
    assert first(text).signature == "install.numpy_abi_banner"


# ---- a compile failure that could not cross the process boundary ------------------------------------------------

@pytest.mark.parametrize("text", [
    # vLLM's multiproc executor unpickling a worker's reply (Python 3.9 names no class)
    "TypeError: __init__() missing 1 required positional argument: 'inner_exception'\n",
    # Ray's serializer (verl, gpustack): the class named, then Ray's own wrapper
    "(TaskRunner pid=4135204) TypeError: BackendCompilerFailed.__init__() missing 1 required positional argument: "
    "'inner_exception'\n"
    "ray.exceptions.RaySystemError: System error: Failed to unpickle serialized exception\n",
    # a torch whose constructor needs the frame too
    "TypeError: BackendCompilerFailed.__init__() missing 2 required positional arguments: 'inner_exception' and "
    "'first_useful_frame'\n",
])
def test_unpicklable_compile_failure_is_a_compile_failure(text):
    d = first(text)
    assert (d.signature, d.category) == ("triton.inductor_failed_unpicklable", "triton_compile")


def test_the_workers_own_compile_error_outranks_the_unpickling_one():
    text = ("(VllmWorker rank=0 pid=2716) torch._inductor.exc.InductorError: CalledProcessError: Command '['gcc', "
            "'/tmp/tmpa1/main.c']' returned non-zero exit status 1.\n"
            "ERROR 04-03 18:30:13 [core.py:343] TypeError: __init__() missing 1 required positional argument: "
            "'inner_exception'\n")
    assert first(text).signature != "triton.inductor_failed_unpicklable"
