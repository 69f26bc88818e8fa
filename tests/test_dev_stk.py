"""stk's dev set (tests/logs/dev-stk/): vLLM inside serving stacks and routers (llm-d, Dynamo, production-stack, Ray
Serve LLM, KServe, SageMaker LMI), through the CLI, and the mechanisms that name them, each on the forms the raising
code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.logread import scan_text
from triage.logread.normalize import parse

DEV, EXPECTED = load("dev-stk")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "tokenizer_chat_template--prodstack-llama-vision-base-no-template.log":
        "the log is only a 400 on /v1/chat/completions; that the chart serves a base model without a chat template "
        "is in the values file's modelURL and the thread's title, not in any line vLLM wrote",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- disaggregated prefill/decode: decode TP below the prefill's ---------------------------------------------------

@pytest.mark.parametrize("text", [
    # vLLM's NixlConnector (0.9+) and the MoRIIO copy: a bare assertion
    "AssertionError: Decode TP cannot be smaller than prefill TP\n",
    # Dynamo's patched vLLM 0.8.x names both sizes
    "AssertionError: Decode TP cannot be smaller than prefill TP, got 1 and 2\n",
    # the TPU path refuses any unequal pair
    "AssertionError: TPU (pallas_v1) DOES NOT support heterogeneous TP yet.\n",
])
def test_decode_tp_below_prefill_is_engine_config(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.pd_decode_tp_below_prefill", "engine_config")


def test_decode_tp_sizes_become_facts():
    d = first("AssertionError: Decode TP cannot be smaller than prefill TP, got 1 and 2\n")
    assert (d.facts["decode_tp"], d.facts["prefill_tp"]) == (1, 2)


# ---- the pod's command `vllm` missing from the image -----------------------------------------------------------

@pytest.mark.parametrize("text", [
    # runc through containerd (kubectl describe pod)
    'Error: failed to create containerd task: failed to create shim task: OCI runtime create failed: runc create '
    'failed: unable to start container process: exec: "vllm": executable file not found in $PATH: unknown\n',
    # Docker
    'docker: Error response from daemon: failed to create task for container: failed to create shim task: OCI runtime'
    ' create failed: runc create failed: unable to start container process: exec: "vllm": executable file not found'
    ' in $PATH: unknown.\n',
    # crun / podman / CRI-O
    "container create failed: executable file `vllm` not found in $PATH: No such file or directory\n",
])
def test_container_command_vllm_missing_is_an_install_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.container_vllm_command_missing", "install_mismatch")


def test_another_missing_executable_is_not_vllms():
    d = top('exec: "lmcache_experimental_server": executable file not found in $PATH: unknown\n')
    assert d is None or d.signature != "install.container_vllm_command_missing"


# ---- NIXL missing: the logged error, not the import warning --------------------------------------------------------

def test_nixl_logged_at_error_is_the_failure():
    d = first("ERROR 08-03 11:35:28 [nixl_connector.py:343] NIXL is not available\n"
              "ERROR 08-03 11:35:28 [core.py:519] EngineCore failed to start.\n")
    assert d.signature == "distributed.nixl_unavailable"


def test_nixl_import_warning_alone_is_no_failure():
    d = top("INFO 05-08 11:47:21 [__init__.py:239] Automatically detected platform rocm.\n"
            "WARNING 05-08 11:47:21 [nixl_utils.py:34] NIXL is not available\n"
            "WARNING 05-08 11:47:21 [nixl_utils.py:44] NIXL agent config is not available\n")
    assert d is None or d.signature != "distributed.nixl_unavailable"


def test_an_error_row_repeating_a_warnings_words_is_kept():
    scan = scan_text("WARNING 08-03 11:35:20 [nixl_connector.py:53] NIXL is not available\n"
                     "INFO 08-03 11:35:27 [factory.py:74] Creating v1 connector with name: NixlConnector\n"
                     "ERROR 08-03 11:35:28 [nixl_connector.py:343] NIXL is not available\n")
    assert [ln.level for ln in scan.lines if ln.text == "NIXL is not available"] == ["WARNING", "ERROR"]


def test_a_warning_repeated_is_still_one_row():
    scan = scan_text("WARNING 08-03 11:35:20 [a.py:1] the same words\n"
                     "WARNING 08-03 11:35:21 [a.py:1] the same words\n")
    assert len([ln for ln in scan.lines if ln.text == "the same words"]) == 1


# ---- the CRI log format of a node's pod logs ----------------------------------------------------------------------

@pytest.mark.parametrize("raw", [
    "2025-08-03T11:35:28.409790786Z stdout F ERROR 08-03 11:35:28 [nixl_connector.py:343] NIXL is not available",
    "2025-08-03T11:35:28.41112065Z stderr P ERROR 08-03 11:35:28 [nixl_connector.py:343] NIXL is not available",
])
def test_cri_stream_and_tag_are_a_prefix(raw):
    ln = parse(1, raw)
    assert (ln.level, ln.src, ln.text) == ("ERROR", "nixl_connector.py:343", "NIXL is not available")


def test_a_word_stdout_after_a_time_stays():
    assert parse(1, "2025-08-03T11:35:28Z stdout is closed").text == "stdout is closed"
