"""mix2's dev set (tests/logs/dev-mix2/): a mixed batch of real logs from vLLM and the projects that run it, through
the CLI, and the mechanisms that name them, each on the forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a project around vLLM refusing the installed vLLM by version ------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: vllm version 0.11.0 not supported. Currently supported versions are 0.3.1, 0.4.2, 0.5.4 and 0.6.3.\n",
    "AssertionError: OpenRLHF only supports vLLM >= 0.4.1\n",
    "ImportError: Using vLLM requires vllm==0.10.2; found 0.9.1\n",
    "RuntimeError: Unsupported vLLM version 0.12.0\n",
])
def test_framework_refusing_the_vllm_version_is_an_install_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.vllm_version_refused", "install_mismatch")


def test_a_version_banner_is_no_refusal():
    d = top("INFO 01-06 10:12:40 [api_server.py:1839] vLLM API server version 0.11.0\n")
    assert d is None or d.signature != "downstream.vllm_version_refused"


# ---- a CLI without the subcommand the instructions use ---------------------------------------------------

@pytest.mark.parametrize("text", [
    "TRL CLI: error: argument command: invalid choice: 'vllm-serve' (choose from 'chat', 'dpo', 'env', 'grpo', 'kto', 'sft')\n",
    "vllm: error: argument subparser: invalid choice: 'bench' (choose from 'chat', 'complete', 'serve')\n",
    "lmcache: error: argument {server,controller}: invalid choice: 'worker'\n",
])
def test_unknown_subcommand_is_an_older_tool(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.cli_subcommand_missing", "install_mismatch")


def test_an_option_value_invalid_choice_stays_engine_config():
    d = first("vllm serve: error: argument --dtype: invalid choice: 'fp8' (choose from 'auto', 'half', 'float16')\n")
    assert d.category == "engine_config"


# ---- an engine argument the installed vLLM does not take, from the caller's line --------------------------

def test_engine_args_kwarg_below_its_call_is_the_vllm_release():
    d = first("    self.model = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**engine_args))\n"
              "TypeError: __init__() got an unexpected keyword argument 'limit_mm_per_prompt'\n")
    assert (d.signature, d.category) == ("downstream.engine_kwarg_unknown", "install_mismatch")
    assert d.facts["arg"] == "limit_mm_per_prompt"


def test_an_unexpected_kwarg_without_a_vllm_call_is_not_claimed():
    d = top("    model = MyModel(**cfg)\nTypeError: __init__() got an unexpected keyword argument 'foo'\n")
    assert d is None or d.signature != "downstream.engine_kwarg_unknown"


# ---- zero visible devices is no parallel size -------------------------------------------------------------

def test_zero_visible_devices_is_the_environment_even_wrapped():
    d = first("AssertionError: local_world_size (8) must be less than or equal to the number\n"
              "of visible devices (0).\n")
    assert (d.signature, d.category) == ("environment.zero_visible_devices", "environment")


def test_more_workers_than_visible_devices_is_not_the_environment():
    d = top("AssertionError: local_world_size (8) must be less than or equal to the number of visible devices (4).\n")
    assert d is None or d.signature != "environment.zero_visible_devices"


# ---- an undefined symbol with the symbol cut ---------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "then get `flash_attn_2_cuda.cpython-311-x86_64-linux-gnu.so: undefined symbol:`  error again.\n",
    "ImportError: /x/site-packages/vllm/_C.abi3.so: undefined symbol:\n",
])
def test_undefined_symbol_without_its_name_is_the_install(text):
    d = first(text)
    assert d.category == "install_mismatch"
