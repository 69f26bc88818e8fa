"""q2's dev set (tests/logs/dev-q2/): quantization, speculative decoding and dtype failures as threads paste them,
through the CLI, and the mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_triage
from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-q2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "quantization--nvfp4a4-5090-sm120-cut-before-error.log":
        "the paste ends in the engine's first frames, before any message; only the prose says NVFP4A4 on an RTX 5090 "
        "with vLLM 0.9.2, and telling that this release had no SM120 FP4 kernel would need release knowledge",
}
FAILED = {n: c for n, c in EXPECTED.items() if c["category"] != "none"}
HEALTHY = sorted(n for n, c in EXPECTED.items() if c["category"] == "none")


@pytest.mark.parametrize("name", params(FAILED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_dev_log_is_no_failure(name):
    r = run_triage("--log", str(DEV / name), "--json", "--offline", "--no-probe",
                   env={"TRIAGE_GITHUB_API": "http://127.0.0.1:9"})
    report = json.loads(r.stdout)
    assert r.returncode == 3, (r.returncode, report["diagnoses"][:2])
    assert all(d["confidence"] <= 0.5 for d in report["diagnoses"]), report["diagnoses"][:2]


# ---- the mixed-precision kernel picker's capability gates (kernels/mixed_precision) -----------------------

@pytest.mark.parametrize("text", [
    # each kernel's can_implement() reason, as choose_mp_linear_kernel prints it
    " CutlassW4A8LinearKernel cannot implement due to: CUTLASS W4A8 requires compute capability of 90 (Hopper)\n",
    " MacheteLinearKernel cannot implement due to: Machete requires compute capability of 90 (Hopper)\n",
    " AllSparkLinearKernel cannot implement due to: AllSpark currently does not support device_capability = 100.\n",
    # the picker's own gate on get_min_capability() (two spaces in "compute  capability" as printed)
    " MacheteLinearKernel requires capability 90, current compute  capability is 86\n",
    # the reason alone, older Machete wording
    "Machete requires compute capability of 90\n",
])
def test_quantized_kernel_capability_gate_is_quantization(text):
    d = first(text)
    assert (d.signature, d.category) == ("quant.kernel_capability_gate", "quantization")


def test_the_pickers_own_message_still_names_the_gpu_and_scheme():
    d = first("ValueError: Failed to find a kernel that can implement the WNA16 linear layer. Reasons: \n"
              " CutlassW4A8LinearKernel cannot implement due to: CUTLASS W4A8 requires compute capability of 90 (Hopper)\n"
              " MacheteLinearKernel cannot implement due to: Machete requires compute capability of 90 (Hopper)\n")
    assert (d.signature, d.category) == ("quant.no_kernel_for_gpu", "quantization")


def test_a_kernel_chosen_is_no_gate():
    d = top("INFO 05-01 10:00:00 [compressed_tensors_wNa16.py:95] Using MacheteLinearKernel for CompressedTensorsWNA16\n")
    assert d is None or d.signature != "quant.kernel_capability_gate"


def test_a_capability_gate_outside_quantized_kernels_stays_the_gpu():
    d = first("RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert d.category == "unsupported_gpu"


# ---- V0's spec-decode worker wrapper reached by a framework ------------------------------------------------

@pytest.mark.parametrize("text,cls", [
    ("AttributeError: 'SpecDecodeWorker' object has no attribute 'model_runner'\n", "SpecDecodeWorker"),
    ("AttributeError: 'MultiStepWorker' object has no attribute 'load_weights'\n", "MultiStepWorker"),
    ("运行后报错：**'SpecDecodeWorker' object has no attribute 'model_runner'**\n", "SpecDecodeWorker"),
])
def test_spec_decode_worker_without_the_attribute_is_speculative_decoding(text, cls):
    d = first(text)
    assert (d.signature, d.category) == ("speculative.worker_wrapper_attribute", "speculative_decoding")
    assert d.facts["cls"] == cls


def test_an_ordinary_worker_without_an_attribute_is_not_spec_decode():
    d = top("AttributeError: 'Worker' object has no attribute 'model_runner'\n")
    assert d is None or d.signature != "speculative.worker_wrapper_attribute"


# ---- a traceback cut inside vLLM's dtype check -------------------------------------------------------------

@pytest.mark.parametrize("frames", [
    # 0.2 - 0.10: vllm/worker/worker.py
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 71, in init_model\n'
    "    _check_if_gpu_supports_dtype(self.model_config.dtype)\n"
    '  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 231, in _check_if_gpu_supports_dtype\n'
    "    raise ValueError(\n",
    # since: the platform's check, called by the V1 GPU worker
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 175, in init_device\n'
    "    current_platform.check_if_supports_dtype(self.model_config.dtype)\n"
    '  File "/opt/venv/lib/python3.12/site-packages/vllm/platforms/rocm.py", line 512, in check_if_supports_dtype\n'
    "    raise ValueError(\n",
])
def test_traceback_cut_in_the_dtype_check_is_the_dtype(frames):
    d = first("Traceback (most recent call last):\n" + frames)
    assert (d.signature, d.category) == ("dtype.cut_in_dtype_check", "dtype_unsupported")


def test_the_dtype_checks_message_is_read_by_the_message_rule():
    d = first("Traceback (most recent call last):\n"
              '  File "/x/vllm/worker/worker.py", line 231, in _check_if_gpu_supports_dtype\n'
              "    raise ValueError(\n"
              "ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. "
              "Your Tesla T4 GPU has compute capability 7.5.\n")
    assert d.signature == "dtype.bf16_before_ampere"


def test_a_frame_that_only_passes_through_the_check_is_not_claimed():
    d = top("Traceback (most recent call last):\n"
            '  File "/x/vllm/platforms/cuda.py", line 423, in check_if_supports_dtype\n'
            "    cap = cls.get_device_capability()\n"
            '  File "/x/vllm/platforms/cuda.py", line 120, in get_device_capability\n'
            "    major, minor = torch.cuda.get_device_capability(device_id)\n")
    assert d is None or d.signature != "dtype.cut_in_dtype_check"


# ---- the Triton backends' KV-cache dtype gates, wrapped or shortened ---------------------------------------

@pytest.mark.parametrize("text,sig", [
    # v1/attention/backends/triton_attn.py (raised below SM89 only), a paste wrapped after "backend on"
    ("ValueError: FP8 KV cache is not supported by the Triton attention backend on\n"
     "Quadro RTX 8000 (compute capability 7.5); native FP8 (fp8e4nv) requires SM89+.\n", "dtype.fp8_unsupported"),
    # mla/triton_mla.py
    ("ValueError: FP8 KV cache is not supported by the Triton MLA backend on NVIDIA A100-SXM4-80GB (compute "
     "capability 8.0); native FP8 (fp8e4nv) requires SM89+. Re-run with --kv-cache-dtype bfloat16.\n",
     "dtype.fp8_unsupported"),
    # the bfloat16 gate (below SM80), wrapped
    ("ValueError: bfloat16 KV cache is not supported by the Triton attention backend\n"
     "on Tesla V100-SXM2-32GB (compute capability 7.0); bfloat16 requires SM80+.\n", "dtype.bf16_before_ampere"),
])
def test_triton_kv_cache_dtype_gates(text, sig):
    d = first(text)
    assert (d.signature, d.category) == (sig, "dtype_unsupported")


# ---- --quantization given a method this vLLM does not register ---------------------------------------------

@pytest.mark.parametrize("text,method", [
    ("vllm serve: error: argument --quantization/-q: invalid choice: 'ascend' (choose from 'aqlm', 'awq', 'fp8')\n",
     "ascend"),
    # Python 3.12.8+ argparse: value and choices unquoted
    ("vllm serve: error: argument --quantization/-q: invalid choice: squeezellm (choose from aqlm, awq, fp8)\n",
     "squeezellm"),
    ("api_server.py: error: argument --quantization: invalid choice: 'nvfp4' (choose from 'awq', 'gptq')\n", "nvfp4"),
])
def test_quantization_invalid_choice_is_the_quantization_method(text, method):
    d = first(text)
    assert (d.signature, d.category) == ("quant.invalid_method", "quantization")
    assert d.facts["quantization"] == method


def test_another_flags_invalid_choice_stays_engine_config():
    d = first("vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp4' (choose from 'auto', 'fp8')\n")
    assert (d.signature, d.category) == ("config.invalid_choice", "engine_config")


# ---- an exception message broken between two words by whoever pasted it (logread.scan._open_row) ----------

def _messages(text: str) -> list[str]:
    from triage.logread import scan_text

    return [e.message for e in scan_text(text.encode()).exceptions]


def test_a_message_broken_after_a_word_that_cannot_end_it_is_read_whole():
    assert _messages("ValueError: FP8 KV cache is not supported by the Triton attention backend on\n"
                     "Quadro RTX 8000 (compute capability 7.5); native FP8 (fp8e4nv) requires SM89+.\n") == [
        "FP8 KV cache is not supported by the Triton attention backend on Quadro RTX 8000 (compute capability 7.5); "
        "native FP8 (fp8e4nv) requires SM89+."]


@pytest.mark.parametrize("text", [
    # the message ended: the next row is the paste's own
    "ValueError: Quant type (int4) not supported.\nI tried again with fp16.\n",
    # a markdown fence, an indented source row, another header after a dangling word
    "ValueError: the layer is not divisible by the\n```\n",
    "ValueError: cannot load the\n    weights = load()\n",
    "ValueError: cannot load the\nINFO 01-01 00:00:00 [core.py:1] next\n",
])
def test_rows_that_do_not_continue_a_message_stay_apart(text):
    first_row = text.split("\n", 1)[0]
    assert _messages(text) == [first_row.split(": ", 1)[1]]


def test_a_paste_ending_on_the_workers_call_into_the_dtype_check_is_the_dtype():
    d = first('  File "/usr/local/lib/python3.10/dist-packages/vllm/worker/worker.py", line 71, in init_model\n'
              "    _check_if_gpu_supports_dtype(self.model_config.dtype)\n")
    assert (d.signature, d.category) == ("dtype.cut_in_dtype_check", "dtype_unsupported")


def test_the_call_into_the_dtype_check_mid_traceback_is_not_claimed():
    d = top('  File "/x/vllm/v1/worker/gpu_worker.py", line 175, in init_device\n'
            "    current_platform.check_if_supports_dtype(self.model_config.dtype)\n"
            '  File "/x/vllm/v1/worker/gpu_worker.py", line 190, in init_device\n'
            "    init_worker_distributed_environment(self.vllm_config, self.rank)\n")
    assert d is None or d.signature != "dtype.cut_in_dtype_check"
