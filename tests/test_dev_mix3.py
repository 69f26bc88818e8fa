"""mix3's dev set (tests/logs/dev-mix3/): real logs from the serving stacks that run vLLM and wrap its log in
their own (Dynamo, Triton's vLLM backend, LocalAI, KAITO, BentoML, Modal, Xinference, production-stack, Ray Serve
LLM, GPUStack, KServe, RHOAI, AIBrix), through the CLI, and the mechanisms that name them, each on the forms the
raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.logread import scan_text

DEV, EXPECTED = load("dev-mix3")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "install_mismatch--xinference-vllm-pre012-torch29-aborted.log":
        "the process only prints 'Aborted (core dumped)' after platform detection; the torch 2.9 / vLLM < 0.12 "
        "mismatch is stated in the reporter's prose, not in anything the log's own lines say",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a serving wrapper calling vLLM's OpenAI-server internals from another release --------------------------

@pytest.mark.parametrize("text, callee, arg", [
    # Python >= 3.10 names the class; vLLM 0.4.1 renamed served_model -> served_model_names
    ("TypeError: OpenAIServingCompletion.__init__() got an unexpected keyword argument 'served_model'\n",
     "OpenAIServingCompletion", "served_model"),
    # vLLM 0.7 added the required `models` (OpenAIServingModels) argument
    ("TypeError: OpenAIServingChat.__init__() missing 1 required positional argument: 'models'\n",
     "OpenAIServingChat", "models"),
    ("TypeError: OpenAIServingModels.__init__() got multiple values for argument 'base_model_paths'\n",
     "OpenAIServingModels", "base_model_paths"),
    ("TypeError: init_app_state() missing 1 required positional argument: 'vllm_config'\n",
     "init_app_state", "vllm_config"),
    ("AttributeError: 'OpenAIServingChat' object has no attribute 'create_chat_completion_stream'\n",
     "OpenAIServingChat", "create_chat_completion_stream"),
    # relayed inside Triton's python backend line, its traceback escaped in one string
    ('I1216 02:12:49.624943 179 pb_stub.cc:388] "Failed to initialize Python stub: TypeError: '
     "build_async_engine_client_from_engine_args() got an unexpected keyword argument 'stat_loggers'\\n\\nAt:\\n"
     '  /opt/tritonserver/backends/vllm/model.py(301): _run_llm_engine\\n"\n',
     "build_async_engine_client_from_engine_args", "stat_loggers"),
])
def test_wrapper_on_vllm_entrypoint_internals_is_a_release_mismatch(text, callee, arg):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.entrypoint_api_mismatch", "install_mismatch")
    assert (d.facts["callee"], d.facts["arg"]) == (callee, arg)


@pytest.mark.parametrize("text", [
    "TypeError: MyOpenAIServer.__init__() got an unexpected keyword argument 'served_model'\n",
    "TypeError: OpenAIServingChatWrapper.__init__() got an unexpected keyword argument 'x'\n",
    "AttributeError: 'RequestLoggerMixin' object has no attribute 'log'\n",
])
def test_other_classes_call_errors_are_not_claimed(text):
    d = top(text)
    assert d is None or d.signature != "downstream.entrypoint_api_mismatch"


# ---- Dynamo's launcher failing to import vLLM ----------------------------------------------------------------

@pytest.mark.parametrize("text, error", [
    ("Failed to import python 'vllm' module. Are we running in the correct venv? AttributeError: class must define "
     "a '_type_' attribute\n", "AttributeError: class must define a '_type_' attribute"),
    ('Error: task 7 panicked with message "Failed to import python \'vllm\' module. Are we running in the correct '
     "venv? ModuleNotFoundError: No module named 'vllm'\"\n", "ModuleNotFoundError: No module named 'vllm'"),
])
def test_dynamo_cannot_import_vllm_is_the_install(text, error):
    d = first(text)
    assert (d.signature, d.category) == ("install.dynamo_vllm_import_failed", "install_mismatch")
    assert d.facts["error"] == error


# ---- Triton's mma -> mma layout assertion ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    # Triton 2.x / 3.0 (Ampere only)
    "python3: /project/lib/Analysis/Allocation.cpp:43: std::pair<llvm::SmallVector<unsigned int>, llvm::SmallVector"
    "<unsigned int> > mlir::triton::getCvtOrder(mlir::Attribute, mlir::Attribute): Assertion `!(srcMmaLayout && "
    "dstMmaLayout && !srcMmaLayout.isAmpere()) && \"mma -> mma layout conversion is only supported on Ampere\"' "
    "failed.\n",
    # later form (Hopper added to the condition)
    "Assertion `!(srcMmaLayout && dstMmaLayout && !srcMmaLayout.isAmpere() && !srcMmaLayout.isHopper()) && "
    "\"mma -> mma layout conversion is only supported on Ampere\"' failed.\nFatal Python error: Aborted\n",
])
def test_triton_mma_layout_assertion(text):
    d = first(text)
    assert (d.signature, d.category) == ("triton.mma_layout_conversion", "triton_compile")


# ---- paste forms: a whole log line in markdown inline code; a quoted exception printed as a tuple --------------

def test_a_log_line_in_backticks_reads_as_the_line():
    scan = scan_text("`(EngineCore_DP0 pid=1014) ERROR 07-28 14:39:40 [core.py:866] RuntimeError: boom`\n")
    ln = scan.lines[0]
    assert (ln.proc, ln.level, ln.text) == ("EngineCore_DP0 pid=1014", "ERROR", "RuntimeError: boom")


def test_backticks_inside_a_line_stay():
    ln = scan_text("Set `--max-model-len` to 4096 and `--enforce-eager`\n").lines[0]
    assert ln.text.startswith("Set `--max-model-len`")


@pytest.mark.parametrize("text", [
    # compressed-tensors raises RuntimeError("Quantization scheme is not supported for ", f"the current GPU. Min ...")
    "`(EngineCore_DP0 pid=1014) RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min "
    "capability: 80. ', 'Current capability: 75.')`\n",
    "The pod crash loops with `RuntimeError: ('Quantization scheme is not supported for ', 'the current GPU. Min "
    "capability: 80. ', 'Current capability: 75.')` on the T4\n",
])
def test_a_quoted_tuple_message_is_joined(text):
    d = first(text)
    assert (d.signature, d.category) == ("quant.min_capability", "quantization")
    assert (d.facts["min_capability"], d.facts["current_capability"]) == ("8.0", "7.5")
    assert "?" not in d.title
