"""i3's dev set (tests/logs/dev-i3/): real logs of vLLM meeting a library or plugin of another release, through
the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-i3")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- kernels 0.15+ against a transformers that builds its hub-kernel table without versions --------------

@pytest.mark.parametrize("text", [
    # kernels/layer/layer.py, raised through transformers/integrations/hub_kernels.py
    "ValueError: Either a revision or a version must be specified.\n",
    # retold in a title or a CI summary, the period dropped
    "CI is broken: ValueError: Either a revision or a version must be specified\n",
])
def test_kernels_without_a_version_is_an_install_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.kernels_version_required", "install_mismatch")


def test_both_version_and_revision_given_is_not_the_release_mismatch():
    # the constructor's other check: a caller's own code passed both
    d = top("ValueError: Either a revision or a version must be specified, not both.\n")
    assert d is None or d.signature != "install.kernels_version_required"


# ---- vLLM-Omni's release check, and the import error after it --------------------------------------------

OMNI_WARNING = ("/x/vllm_omni/version.py:55: RuntimeWarning: vLLM and vLLM-Omni appear to have mismatched "
                "major/minor versions:\n --> vLLM-Omni version 0.18.0\n --> vLLM version 0.19.0\n"
                "This will likely cause compatibility issues.\n  warn_if_misaligned_vllm_version()\n")


@pytest.mark.parametrize("failure", [
    "Traceback (most recent call last):\n  File \"/x/vllm_omni/patch.py\", line 4, in <module>\n"
    "    from vllm.inputs.data import TokensPrompt as _OriginalTokensPrompt\n"
    "ModuleNotFoundError: No module named 'vllm.inputs.data'\n",
    "ImportError: cannot import name 'OpenAIServing' from 'vllm.entrypoints.openai.serving_engine'\n",
    # a paste cut inside the traceback
    "Traceback (most recent call last):\n  File \"/x/bin/vllm\", line 6, in <module>\n",
])
def test_omni_warning_then_a_failed_import_names_the_pair(failure):
    d = first(OMNI_WARNING + failure)
    assert (d.signature, d.category) == ("install.omni_vllm_misaligned", "install_mismatch")
    assert (d.facts["omni_version"], d.facts["vllm_version"]) == ("0.18.0", "0.19.0")


def test_omni_warning_wrapped_by_a_terminal_still_names_the_pair():
    wrapped = OMNI_WARNING.replace("appear to have mismatched", "appear to have\nmismatched")
    d = first(wrapped + "ModuleNotFoundError: No module named 'vllm.inputs.preprocess'\n")
    assert (d.signature, d.facts["omni_version"]) == ("install.omni_vllm_misaligned", "0.18.0")


@pytest.mark.parametrize("after", [
    "",  # the warning alone
    "INFO:     Application startup complete.\n",  # a locked pair that runs despite the warning
])
def test_omni_warning_without_a_failure_is_not_claimed(after):
    d = top(OMNI_WARNING + after)
    assert d is None or d.signature != "install.omni_vllm_misaligned"


# ---- a ticket's markdown heading made of the exception line ------------------------------------------------

@pytest.mark.parametrize("marks", ["# ", "## ", "### "])
def test_markdown_heading_before_an_exception_is_read_as_the_exception(marks):
    d = first(f"{marks}AttributeError: Qwen2Tokenizer has no attribute all_special_tokens_extended\n")
    assert d.signature == "model_support.transformers_tokenizer_attr"


def test_a_shell_comment_keeps_its_mark():
    d = top("# ValueError handling below is ours\nexport VLLM_USE_V1=1\n")
    assert d is None or d.confidence <= 0.5


# ---- pip's reports of a pin that does not hold, in all its wordings ---------------------------------------

@pytest.mark.parametrize("text", [
    # pip check (commands/check.py)
    "vllm 0.10.0 has requirement torch==2.7.1, but you have torch 2.8.0.\n",
    "vllm 0.10.0 requires xgrammar==0.1.21, which is not installed.\n",
    # pip install's resolver warning, a requirement with a comma in it
    "vllm 0.25.1 requires openai<3,>=2.25.0, which is not installed.\n",
    # vLLM's pin stated in a ticket
    "vllm 0.25.1 requires openai 2.25\n",
])
def test_pip_reports_of_a_pin_are_a_dependency_conflict(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.dependency_conflict", "install_mismatch")


def test_a_pin_report_before_a_server_that_came_up_is_not_the_failure():
    d = top("vllm 0.10.0 requires xgrammar==0.1.21, which is not installed.\n"
            "INFO:     Application startup complete.\n")
    assert d is None or d.signature != "install.dependency_conflict"


def test_prose_about_another_package_requiring_something_is_not_claimed():
    d = top("Our tool 1.2 requires python 3.10\n")
    assert d is None or d.signature != "install.dependency_conflict"


# ---- a library around vLLM written for another transformers release ---------------------------------------

LMFE = ('Traceback (most recent call last):\n'
        '  File "/usr/local/lib/python3.12/dist-packages/lmformatenforcer/integrations/transformers.py", line 5, '
        'in <module>\n'
        '    from transformers.generation.logits_process import LogitsWarper, PrefixConstrainedLogitsProcessor\n'
        "ImportError: cannot import name 'LogitsWarper' from 'transformers.generation.logits_process' "
        "(/usr/local/lib/python3.12/dist-packages/transformers/generation/logits_process.py)\n")


def test_a_library_importing_a_removed_transformers_name_is_that_library_release():
    d = first(LMFE)
    assert (d.signature, d.category) == ("install.library_transformers_mismatch", "install_mismatch")
    assert d.facts == {"package": "lm-format-enforcer", "name": "LogitsWarper"}


@pytest.mark.parametrize("importer", [
    "/usr/local/lib/python3.12/dist-packages/vllm/transformers_utils/config.py",  # vLLM's own range
    "/root/.cache/huggingface/modules/transformers_modules/Qwen/modeling_qwen.py",  # a model's remote code
])
def test_vllm_or_remote_code_importing_it_stays_the_transformers_range(importer):
    d = first(f'Traceback (most recent call last):\n  File "{importer}", line 12, in <module>\n'
              "    from transformers import DeepseekV2Config\n"
              "ImportError: cannot import name 'DeepseekV2Config' from 'transformers' (/x/transformers/__init__.py)\n")
    assert d.signature == "model_support.transformers_import"


def test_module_attribute_form_from_a_plugin():
    d = first('Traceback (most recent call last):\n'
              '  File "/opt/venv/lib/python3.12/site-packages/peft/utils/other.py", line 30, in <module>\n'
              "    from transformers.pytorch_utils import Conv1D\n"
              "AttributeError: module 'transformers.pytorch_utils' has no attribute 'Conv1D'\n")
    assert (d.signature, d.facts["package"]) == ("install.library_transformers_mismatch", "peft")


def test_a_repeated_frame_shape_still_reaches_the_second_traceback():
    # the second traceback's frame differs from the first's only by its line number (the scanner's shape cache)
    d = first('Traceback (most recent call last):\n'
              '  File "/usr/lib/python3/dist-packages/lmformatenforcer/integrations/transformers.py", line 8, in <module>\n'
              "ImportError: transformers is not installed\n" + LMFE.replace("/usr/local/lib/python3.12/dist-packages",
                                                                            "/usr/lib/python3/dist-packages"))
    assert d.signature == "install.library_transformers_mismatch"


# ---- triton's internals moved between releases ----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ImportError: cannot import name 'AttrsDescriptor' from 'triton.compiler.compiler'\n",
    # torch's inductor importing what its pinned triton has (raised alone, not under inductor's own wrapper)
    "ImportError: cannot import name 'triton_key' from 'triton.compiler.compiler' (/x/triton/compiler/compiler.py)\n",
    "AttributeError: module 'triton.language' has no attribute 'constexpr_function'\n",
])
def test_triton_api_missing_is_a_release_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.module_api_mismatch", "install_mismatch")


def test_vllm_logging_its_optional_triton_kernels_failed_is_not_that_mismatch():
    d = top("ERROR 11-05 10:16:20 [config.py:26] Failed to import Triton kernels. Please make sure your triton version "
            "is compatible. Error: module 'triton.language' has no attribute 'constexpr_function'\n")
    assert d is None or d.signature != "install.module_api_mismatch"
