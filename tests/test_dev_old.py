"""old's dev set (tests/logs/dev-old/): real logs of vLLM's older releases (V0 engine, 0.2-0.8) through the CLI,
and the mechanisms that name them, each on the wordings the raising code of those releases writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-old")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


def notes_of(text: str) -> set[str]:
    return {n.signature for n in diagnose(scan_text(text))[1]}


# ---- vLLM's pynccl without a loadable libnccl (0.4.0 / 0.4.1 wording, 0.5+ wrapper) ---------------------------

LOAD_040 = ("ERROR 04-23 19:30:01 pynccl.py:53] Failed to load NCCL library from libnccl.so.2 .It is expected if you "
            "are not running on NVIDIA/AMD GPUs.Otherwise please set the environment variable VLLM_NCCL_SO_PATH to "
            "point to the correct nccl library path.\n"
            "INFO 04-23 19:30:01 pynccl_utils.py:17] Failed to import NCCL library: libnccl.so.2: cannot open shared "
            "object file: No such file or directory\n"
            "INFO 04-23 19:30:01 pynccl_utils.py:18] It is expected if you are not running on NVIDIA GPUs.\n")
LOAD_041 = ("ERROR 04-22 15:53:32 pynccl.py:44] Failed to load NCCL library from libnccl.so.2 .It is expected if you "
            "are not running on NVIDIA/AMD GPUs.Otherwise, the nccl library might not exist, be corrupted or it does "
            "not support the current platform Linux-4.18.0-240.el8.x86_64-x86_64-with-glibc2.35.One solution is to "
            "download libnccl2 version 2.18 from https://developer.download.nvidia.com/compute/cuda/repos/ and extract "
            "the libnccl.so.2 file. If you already have the library, please set the environment variable "
            "VLLM_NCCL_SO_PATH to point to the correct nccl library path.\n"
            "INFO 04-22 15:53:32 pynccl_utils.py:17] Failed to import NCCL library: Failed to load NCCL library from "
            "libnccl.so.2 .\n")
LOAD_054 = ("ERROR 10-18 14:44:45 pynccl_wrapper.py:196] Failed to load NCCL library from libnccl.so.2 .It is expected "
            "if you are not running on NVIDIA/AMD GPUs.Otherwise, the nccl library might not exist, be corrupted or it "
            "does not support the current platform Linux-5.15.0-50-generic-x86_64-with-glibc2.31.If you already have "
            "the library, please set the environment variable VLLM_NCCL_SO_PATH to point to the correct nccl library "
            "path.\n")
LOAD_085 = ("ERROR 05-02 11:02:03 [pynccl_wrapper.py:229] Failed to load NCCL library from libnccl.so.2. It is expected "
            "if you are not running on NVIDIA/AMD GPUs.Otherwise, the nccl library might not exist, be corrupted or it "
            "does not support the current platform Linux-6.8.0-x86_64-with-glibc2.35. If you already have the "
            "library, please set the environment variable VLLM_NCCL_SO_PATH to point to the correct nccl library "
            "path.\n")
NAME_ERROR = ("ERROR 04-24 09:39:29 worker_base.py:157]     logger.info(f\"vLLM is using nccl=={ncclGetVersion()}\")\n"
              "ERROR 04-24 09:39:29 worker_base.py:157] NameError: name 'ncclGetVersion' is not defined\n")
INIT_DEVICE = ("ERROR 04-22 15:53:33 worker_base.py:153] Error executing method init_device. This might cause deadlock "
               "in distributed execution.\n")


@pytest.mark.parametrize("load", [LOAD_040, LOAD_041, ""])
def test_undefined_nccl_wrapper_is_the_missing_library(load):
    d = first(load + NAME_ERROR)
    assert (d.signature, d.category) == ("distributed.pynccl_library_unloadable", "distributed")
    assert d.confidence >= 0.85


@pytest.mark.parametrize("load", [LOAD_040, LOAD_041])
def test_load_failure_then_tensor_parallel_init_is_the_missing_library(load):
    d = first(load + INIT_DEVICE)
    assert d.signature == "distributed.pynccl_library_unloadable"
    assert d.facts["so_file"] == "libnccl.so.2"


@pytest.mark.parametrize("load", [LOAD_040, LOAD_041, LOAD_054, LOAD_085])
def test_load_failure_alone_is_only_a_note(load):
    # 0.4.x swallowed the import error until a tensor-parallel group needed it; 0.5+ disables pynccl and goes on
    d = top(load)
    assert d is None or d.confidence <= 0.5
    assert "harmless.pynccl_library_unloadable" in notes_of(load)


def test_load_failure_with_one_gpu_stays_a_note_even_when_a_worker_fails():
    text = ("INFO 08-19 09:33:57 llm_engine.py:75] Initializing an LLM engine (v0.4.0) with config: model='/m', "
            "tensor_parallel_size=1, seed=0)\n" + LOAD_040 + INIT_DEVICE)
    d = top(text)
    assert d is None or d.signature != "distributed.pynccl_library_unloadable"


def test_the_draft_model_tensor_parallel_size_is_not_the_engine_s():
    text = ("INFO 05-02 11:02:03 api_server.py:152] args: Namespace(speculative_draft_tensor_parallel_size=1, "
            "tensor_parallel_size=4, seed=0)\n" + LOAD_041 + INIT_DEVICE)
    assert first(text).signature == "distributed.pynccl_library_unloadable"


def test_a_real_missing_libnccl_at_import_is_still_the_install():
    d = first("ImportError: libnccl.so.2: cannot open shared object file: No such file or directory\n")
    assert (d.signature, d.category) == ("install.cuda_runtime_lib_missing", "install_mismatch")


# ---- V0's CPU swap space -----------------------------------------------------------------------------------------

def test_swap_exhausted_is_the_kv_cache_budget():
    d = first("RuntimeError: Aborted due to the lack of CPU swap space. Please increase the swap space to avoid this "
              "error.\n")
    assert (d.signature, d.category) == ("kv_cache.cpu_swap_exhausted", "kv_cache_memory")


def test_possibly_too_large_swap_space_is_a_warning_only():
    text = ("WARNING 05-12 10:11:12 config.py:436] Possibly too large swap space. 16.00 GiB out of the 31.26 GiB total "
            "CPU memory is allocated for the swap space.\n")
    d = top(text)
    assert d is None or d.confidence <= 0.5
    assert "harmless.swap_space_possibly_large" in notes_of(text)


def test_too_large_swap_space_is_still_refused():
    d = first("ValueError: Too large swap space. 4.00 GiB out of the 4.30 GiB total CPU memory is allocated for the "
              "swap space.\n")
    assert d.signature == "engine_args.swap_space_too_large"


# ---- weight widths and group sizes the V0 quantization configs take ---------------------------------------------

@pytest.mark.parametrize(("text", "method", "what"), [
    ("ValueError: Currently, only 4-bit weight quantization is supported for AWQ, but got 8 bits.", "AWQ",
     "8-bit weights"),
    ("ValueError: Currently, only 2/3/4/8-bit weight quantization is supported for GPTQ, but got 5 bits.", "GPTQ",
     "5-bit weights"),
    ("ValueError: Currently, only 4-bit weight quantization is supported for SqueezeLLM, but got 3 bits.",
     "SqueezeLLM", "3-bit weights"),
    ("ValueError: Currently, only 6-bit or 8-bit weight quantization are supported for DeepSpeed FP quantizaiton, "
     "but got 4 bits.", "DeepSpeed FP", "4-bit weights"),
    ("ValueError: Currently, only group size 128 and -1 (channelwise) is supported for Marlin, but got group_size "
     "of 64", "Marlin", "group size 64"),
])
def test_quantized_weight_format_the_method_does_not_take(text, method, what):
    d = first(text + "\n")
    assert (d.signature, d.category) == ("quant.weight_format_unsupported", "quantization")
    assert (d.facts["method"], d.facts["what"]) == (method, what)


# ---- pipeline parallelism before the releases that serve it -----------------------------------------------------

@pytest.mark.parametrize(("text", "sig"), [
    ("NotImplementedError: Pipeline parallelism is not supported yet.", "config.pp_unavailable_in_release"),
    ("NotImplementedError: Pipeline parallelism is only supported through AsyncLLMEngine as performance will be "
     "severely degraded otherwise.", "config.pp_unavailable_in_release"),
    ("NotImplementedError: Pipeline parallelism is only supported for the following  architectures: "
     "['LlamaForCausalLM', 'MistralForCausalLM'].", "config.pp_unsupported_model"),
    ("NotImplementedError: Pipeline parallelism is not supported for this model. Supported models implement the "
     "`SupportsPP` interface.", "config.pp_unsupported_model"),
])
def test_pipeline_parallel_refusals_by_release(text, sig):
    d = first(text + "\n")
    assert (d.signature, d.category) == (sig, "engine_config")


# ---- old wordings of existing gates ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: GPUs with compute capability less than 7.0 are not supported.",  # setup.py, 0.1-0.2
    "RuntimeError: GPUs with compute capability below 7.0 are not supported.",  # worker, 0.2
])
def test_old_compute_capability_floor(text):
    d = first(text + "\n")
    assert (d.signature, d.category) == ("gpu.compute_capability_too_low", "unsupported_gpu")


@pytest.mark.parametrize("where", ["cluster", "placement group"])
def test_ray_gpu_count_in_cluster_or_group(where):
    d = first(f"ValueError: The number of required GPUs exceeds the total number of available GPUs in the {where}.\n")
    assert (d.signature, d.category) == ("distributed.ray_gpus", "distributed")


# ---- a bare "OOM" stated as the run's event, over a log cut before its exception ---------------------------------

CUT_PROFILE = ("INFO 09-27 11:18:35 enc_dec_model_runner.py:297] Starting profile run for multi-modal models.\n"
               "[rank0]: Traceback (most recent call last):\n"
               "[rank0]:   File \"/home/u/miniconda3/envs/eval/lib/python3.10/runpy.py\", line 196, in "
               "_run_module_as_main\n")


@pytest.mark.parametrize("words", [
    "# [Usage]: OOM when using Llama-3.2-11B-Vision-Instruct\n",
    "In this part, OOM occurs as the memory continues to increase as it passes forward.\n",
    "# [Bug]: OOM error during profile run with max_num_seqs=256\n",
])
def test_bare_oom_stated_as_the_event(words):
    d = first(words + CUT_PROFILE)
    assert (d.signature, d.category) == ("oom.stated_in_report", "gpu_oom")


@pytest.mark.parametrize("words", [
    "# How to avoid OOM when serving long prompts?\n",  # a question about preventing it
    "# vLLM OOM killed when loading shards\n",  # the host's OOM killer
])
def test_bare_oom_words_that_are_no_gpu_oom(words):
    d = top(words + CUT_PROFILE)
    assert d is None or d.signature != "oom.stated_in_report"


# ---- older wordings of the xFormers refusal and of NCCL errors, V0's preemption warning ------------------------

@pytest.mark.parametrize("text", [
    "ValueError: Operator `memory_efficient_attention` does not support inputs:\n"  # xformers <= 0.0.21
    "`cutlassF` is not supported because:\n    xFormers wasn't build with CUDA support\n",
    "NotImplementedError: No operator found for `memory_efficient_attention_forward` with inputs:\n",
])
def test_xformers_refusal_old_and_new(text):
    d = first(text)
    assert (d.signature, d.category) == ("attention.xformers_no_operator", "attention_backend")


@pytest.mark.parametrize(("text", "err"), [
    ("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_UNHANDLED_CUDA_ERROR: unhandled cuda error",
     "unhandled cuda error"),  # CuPy's wrapper (vLLM 0.2.7-0.3.x, all-reduce in CUDA graphs)
    ("cupy_backends.cuda.libs.nccl.NcclError: NCCL_ERROR_SYSTEM_ERROR: unhandled system error",
     "unhandled system error"),
    ("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "unhandled system error"),
])
def test_nccl_error_through_cupy_or_pynccl(text, err):
    d = first(text + "\n")
    assert (d.signature, d.facts["nccl_error"]) == ("distributed.nccl_error", err)


@pytest.mark.parametrize("mode", ["RECOMPUTE", "SWAP"])
def test_v0_preemption_warning_is_no_failure(mode):
    text = (f"WARNING 09-02 14:05:47 scheduler.py:1355] Sequence group chat-8f2c is preempted by PreemptionMode.{mode} "
            "mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase "
            "gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. "
            "total_num_cumulative_preemption=51\n")
    assert top(text) is None
    assert "harmless.v0_preemption" in notes_of(text)


# ---- Ray through the V0 releases ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ImportError: Ray is not installed. Please install Ray to use distributed serving.",  # 0.2-0.4
    "ImportError: Ray is not installed. Please install Ray to use multi-node serving.",
    "ValueError: Failed to import Ray with ModuleNotFoundError(\"No module named 'ray'\"). For multi-node "
    "inference, please install Ray with `pip install ray`.",
])
def test_ray_not_installed_by_release(text):
    d = first(text + "\n")
    assert (d.signature, d.category) == ("distributed.ray_missing", "distributed")


def test_driver_node_outside_the_placement_group():
    d = first("RuntimeError: driver node id 3f2e is not included in a placement group 0a1b. Node id -> bundles "
              "{'ab': [0, 1]}. You don't have enough GPUs available in a current node.\n")
    assert (d.signature, d.category) == ("distributed.ray_gpus", "distributed")


# ---- V0 config checks in their old wordings ----------------------------------------------------------------------

@pytest.mark.parametrize(("text", "sig", "category"), [
    ("ValueError: GPU memory utilization must be less than 1.0. Got 95.0.", "config.value_invalid", "engine_config"),
    ("ValueError: max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096).",
     "config.value_invalid", "engine_config"),
    ("ValueError: LoRA is not supported with quantized models yet.", "lora.quantized_base_refused",
     "engine_config"),
    ("RuntimeError: No supported device detected.", "environment.no_gpu_visible", "environment"),
    ("ValueError: Currently, the 'pt' format is not supported for Mixtral. Please use the 'safetensors' format "
     "instead. ", "model_loading.mixtral_pt_format", "model_loading"),
])
def test_v0_config_checks(text, sig, category):
    d = first(text + "\n")
    assert (d.signature, d.category) == (sig, category)


def test_old_utilization_detail_keeps_the_bound():
    d = first("ValueError: GPU memory utilization must be less than 1.0. Got 1.2.\n")
    assert d.facts["detail"] == "GPU memory utilization must be less than 1.0"
