"""rl's dev set (tests/logs/dev-rl/): real logs of vLLM inside RL and post-training frameworks (verl, lmm-r1,
TRL's server mode, Unsloth), through the CLI, and the mechanisms that name them, each on the forms the raising
code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-rl")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- Unsloth's vLLM child process exiting before its readiness line -----------------------------------------

@pytest.mark.parametrize("text", [
    # unsloth/dataprep/synthetic.py and unsloth_zoo.vllm_utils (the stdout reader loop, then the raise)
    "Stdout stream ended before readiness message detected.\n",
    "RuntimeError: Unsloth: vllm_process failed to load!\n",
    # newer releases print it without raising, followed by the child's output tails
    "Unsloth: vllm_process failed to load!\n\n--- stdout tail ---\n",
])
def test_unsloth_vllm_child_died_is_the_vllm_release(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.unsloth_vllm_process_died", "install_mismatch")
    assert d.confidence < 0.6


def test_unsloth_timeout_is_not_the_child_dying():
    d = top("Unsloth: vllm_process failed to load! (timeout=1200)\n")
    assert d is None or d.signature != "downstream.unsloth_vllm_process_died"


def test_the_childs_own_error_in_the_stderr_tail_outranks_the_wrapper():
    d = first("Stdout stream ended before readiness message detected.\n\n--- stderr tail ---\n"
              "ValueError: Free memory on device cuda:0 (10.2/23.56 GiB) on startup is less than desired GPU memory "
              "utilization (0.9, 21.2 GiB). Decrease GPU memory utilization or reduce GPU memory used by other "
              "processes.\n")
    assert d.signature != "downstream.unsloth_vllm_process_died"


# ---- unsloth_zoo's ports of vLLM's LoRA managers missing a method the installed vLLM calls -------------------

@pytest.mark.parametrize("text", [
    "Unsloth Zoo will now patch everything to make training faster!\n"
    "AttributeError: 'LRUCacheWorkerLoRAManager' object has no attribute 'get_dummy_lora_warmup_rank'\n",
    "Unsloth 2026.6.1: Fast Llama patching.\n"
    "AttributeError: 'WorkerLoRAManager' object has no attribute 'get_dummy_lora_warmup_rank'\n",
    # the message wrapped after "has no attribute" (a docstring or a narrow terminal)
    "unsloth 2026.6.1, unsloth_zoo 2026.6.1\n"
    "    AttributeError: 'LRUCacheWorkerLoRAManager' object has no attribute\n"
    "                    'get_dummy_lora_warmup_rank'\n",
])
def test_stale_unsloth_lora_port_is_an_install_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.unsloth_lora_port_stale", "install_mismatch")
    assert d.facts["attr"] == "get_dummy_lora_warmup_rank"


def test_vllm_own_lora_manager_without_unsloth_is_not_a_port():
    d = top("AttributeError: 'LRUCacheWorkerLoRAManager' object has no attribute 'get_dummy_lora_warmup_rank'\n")
    assert d is None or d.signature != "downstream.unsloth_lora_port_stale"


# ---- a whole log (not a pasted fragment): Unsloth's lines carry no error word and must still be selected ------

_NOISE = "".join(f"INFO 06-03 03:57:{i % 60:02d} [loader.py:12] Loading chunk {i}\n" for i in range(300))


def test_unsloth_print_without_raise_is_kept_in_a_whole_log():
    d = first(_NOISE + "Unsloth: vllm_process failed to load!\n\n--- stdout tail ---\n")
    assert d.signature == "downstream.unsloth_vllm_process_died"


def test_unsloth_banner_is_kept_in_a_whole_log():
    d = first("==((====))==  Unsloth 2026.6.1: Fast Llama patching. Transformers: 5.10.1. vLLM: 0.21.1.\n" + _NOISE
              + "(EngineCore_DP0 pid=4120) ERROR 06-09 10:12:44 [core.py:1021] AttributeError: "
                "'LRUCacheWorkerLoRAManager' object has no attribute 'get_dummy_lora_warmup_rank'\n")
    assert d.signature == "downstream.unsloth_lora_port_stale"


# ---- CUDA OOM inside vLLM's sleep-mode (CuMem) allocator ---------------------------------------------------

@pytest.mark.parametrize("text, phase", [
    # vLLM >= 0.7.3 raises it (csrc/cumem_allocator.cpp: "CUDA Error: %s at %s:%d")
    ("  File \"/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py\", line 207, in wake_up\n"
     "    create_and_map(handle)\n"
     "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62\n", "waking up"),
    # before 0.7.3 the extension only printed it, then the same handle's "invalid argument" lines
    ("INFO 02-09 11:02:13 executor_base.py:219] It took 0.53 seconds to wake up.\n"
     "CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:56\n"
     "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:57\n"
     "CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:64\n", "waking up"),
    # another build tree, at the first allocation under enable_sleep_mode
    ("RuntimeError: CUDA Error: out of memory at /tmp/vllm-build/csrc/cumem_allocator.cpp:64\n", "allocating"),
])
def test_sleep_mode_allocator_oom_is_gpu_oom(text, phase):
    d = first(text)
    assert (d.signature, d.category) == ("oom.sleep_mode_allocator", "gpu_oom")
    assert d.facts["phase"].startswith(phase)


def test_cumem_invalid_argument_alone_is_not_an_oom():
    d = top("CUDA Error: invalid argument at /workspace/csrc/cumem_allocator.cpp:57\n")
    assert d is None or d.signature != "oom.sleep_mode_allocator"


# ---- a vLLM class's method refusing its caller's arguments, quoted with no traceback --------------------------

@pytest.mark.parametrize("text", [
    "TypeError: Worker.reload_weights() got an unexpected keyword argument 'weights_iterator'\n",
    "TypeError: LLM.collective_rpc() got multiple values for argument 'args'\n",
    "TypeError: AsyncLLM.sleep() missing 1 required positional argument: 'level'\n",
])
def test_frameless_vllm_call_typeerror_is_the_callers_release(text):
    d = first(text)
    assert (d.signature, d.category) == ("downstream.vllm_api_mismatch", "install_mismatch")
    assert d.confidence < 0.75 and "called_from" not in d.facts


def test_frameless_attribute_error_on_a_vllm_class_is_left_alone():
    d = top("AttributeError: 'LLMEngine' object has no attribute 'model_executor'\n")
    assert d is None or d.signature != "downstream.vllm_api_mismatch" or d.facts.get("called_from")
