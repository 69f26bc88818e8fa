"""The generic layer: what decides a diagnosis when no hand rule knows the failure.

Crash reports that are not a Python exception line (faulthandler's stacks, an uncaught C++ exception,
Ray's native OOM killer), tracebacks pasted without their head, messages that go on over several lines,
frames that only pass a failure through, and the real pasted forms of tests/logs/dev-core through the CLI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.dev_sets import check, load, params
from tests.dev_sets import first as _top
from triage.areas import area_of_frames, category_for, pass_through
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-core")
SITE = "/usr/local/lib/python3.12/dist-packages"




# ---- faulthandler: "Fatal Python error" and the stacks under it ---------------------------------

SEGV = f"""Fatal Python error: Segmentation fault

Thread 0x00007f74511ef700 (most recent call first):
  File "{SITE}/ray/_private/worker.py", line 869 in print_logs
  File "/usr/lib/python3.12/threading.py", line 910 in run
  File "/usr/lib/python3.12/threading.py", line 973 in _bootstrap_inner

Current thread 0x00007fcf597eb640 (most recent call first):
  File "{SITE}/torch/cuda/graphs.py", line 77 in capture_begin
  File "{SITE}/vllm/worker/model_runner.py", line 782 in capture
  File "{SITE}/vllm/worker/model_runner.py", line 725 in capture_model

Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)
"""


def test_a_segfault_is_an_exception_with_the_crashed_threads_stack():
    scan = scan_text(SEGV)
    (rec,) = [e for e in scan.exceptions if e.type == "Fatal Python error"]
    assert rec.message == "Segmentation fault" and rec.in_traceback
    # printed most recent call first; kept innermost last, the other thread's stack left out
    assert [f.func for f in rec.frames] == ["capture_model", "capture", "capture_begin"]
    d = _top(SEGV)
    assert d.category == "cudagraph_capture" and 0.3 <= d.confidence < 0.5
    assert d.facts["phase"] == "CUDA graph capture"


def test_faulthandler_frames_without_their_header_are_a_cut_stack():
    # Ray prefixes every line; the header lines were not pasted
    log = "".join(f'(RayWorkerWrapper pid=336, ip=10.0.0.2)   File "{SITE}/{f}", line {n} in {fn}\n' for f, n, fn in [
        ("vllm/distributed/device_communicators/pynccl.py", 99, "__init__"),
        ("vllm/distributed/parallel_state.py", 207, "__init__"),
        ("vllm/v1/worker/gpu_worker.py", 113, "init_device")])
    scan = scan_text(log)
    assert scan.cut_tracebacks and scan.cut_tracebacks[0].frames[-1].func == "__init__"
    d = _top(log)
    assert d.category == "distributed" and d.signature == "catalogue.cut_traceback"


# ---- an uncaught C++ exception -----------------------------------------------------------------

@pytest.mark.parametrize("kind,what,category", [
    ("flashinfer::Error", "Error in function 'operator()' at src/flashinfer_adapter.cu:408: Unsupported group_size: 64",
     "kernel_library"),
    ("c10::DistBackendError", "[PG ID 0 PG GUID 0 Rank 1] Process group watchdog thread terminated with exception",
     "distributed"),
])
def test_terminate_called_after_throwing_is_read_as_an_exception(kind, what, category):
    log = f"terminate called after throwing an instance of '{kind}'\n  what():  {what}\n"
    scan = scan_text(log)
    (rec,) = scan.exceptions
    assert rec.type == kind.replace("::", ".") and rec.message == what
    assert _top(log).category == category


# ---- tracebacks pasted without their head; messages over several lines ----------------------------

def test_a_paste_that_starts_inside_a_traceback_keeps_its_frames():
    log = (f'  File "{SITE}/vllm/utils/deep_gemm.py", line 211, in fp8_gemm_nt\n'
           "    return _fp8_gemm_nt_impl(*args, **kwargs)\n"
           "RuntimeError: Assertion error (csrc/jit/kernel_runtime.hpp:45): exit_code == 0\n")
    (rec,) = scan_text(log).exceptions
    assert rec.in_traceback and rec.frames[-1].func == "fp8_gemm_nt"
    d = _top(log)
    # DeepGEMM's own check format names the library (rules/kernel_native.py), with or without the frames
    assert d.category == "kernel_library" and d.facts.get("library") == "DeepGEMM"


def test_the_message_lines_after_an_exception_count_as_its_words():
    log = ('RuntimeError: Assertion error (.../jit/compiler.hpp:187):\n'
           '(major > 12 or (major == 12 and minor >= 3)) and "NVCC version should be >= 12.3"\n')
    (rec,) = scan_text(log).exceptions
    assert len(rec.extra) == 1
    assert _top(log).category == "kernel_library"


# ---- frames: the innermost one that is not plumbing decides --------------------------------------

def test_plumbing_frames_never_decide():
    files = [f"{SITE}/vllm/entrypoints/cli/main.py", "<frozen importlib._bootstrap>",
             f"{SITE}/vllm/v1/engine/core.py", f"{SITE}/vllm/v1/executor/multiproc_executor.py",
             "/usr/lib/python3.12/multiprocessing/process.py"]
    assert all(pass_through(f) for f in files)
    assert area_of_frames(files) is None
    assert area_of_frames(files + [f"{SITE}/vllm/model_executor/layers/quantization/awq_marlin.py",
                                   f"{SITE}/vllm/utils/__init__.py"])[0] == "quantization"


def test_where_it_was_raised_outranks_topical_words():
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/v1/engine/core.py", line 10, in run\n'
           f'  File "{SITE}/vllm/model_executor/layers/quantization/awq_marlin.py", line 310, in apply\n'
           "    assert x\n"
           "AssertionError: the tokenizer's vocabulary is larger than the packed lm_head\n")
    d = _top(log)
    assert d.category == "quantization" and d.confidence < 0.4
    assert d.explanation and "likely" in d.explanation[0]


def test_words_that_name_a_subsystem_outright_still_win():
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/model_executor/layers/quantization/fp8.py", line 10, in apply\n'
           "RuntimeError: NCCL error: unhandled system error\n")
    assert _top(log).category == "distributed"


# ---- native messages and module overrides in the catalogue -------------------------------------

def test_rays_oom_killer_is_host_memory():
    log = ("#033[2m#033[33m(raylet)#033[0m [2024-05-01 10:00:00,000 E 1 1] (raylet) node_manager.cc:3007: "
           "2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons\n")
    d = _top(log)
    # the hand rule for a host OOM kill knows Ray's words too, and a hand rule wins over the native table
    assert d.category == "environment" and d.signature == "environment.host_oom_killed"
    assert "#033" not in d.evidence[0].text


def test_module_overrides_and_strong_words():
    assert category_for("vllm/distributed/utils.py", "25 is not divisible by 4", "AssertionError") == "engine_config"
    assert category_for("vllm/distributed/utils.py", "Gloo connection closed", "RuntimeError") == "distributed"
    assert category_for("vllm/model_executor/model_loader/utils.py",
                        "Foo has no vLLM implementation and the Transformers implementation is not compatible",
                        "ValueError") == "model_support"


# ---- the dev set, through the CLI -----------------------------------------------------------------

# Misses, each with why: hand rules of other modules decide two (a TPU build reported as "no GPU";
# dynamo tracing on XLA read as an Inductor failure), and two hold nothing that says their cause.
KNOWN_MISSES = {
    "tpu-xla-nightly-failed-infer-device.log": "a hand rule outside the generic layer decides this log",
    "tpu-qwen2vl-dynamo-ray-repeated.log": "a hand rule outside the generic layer decides this log",
    "bnb-keyerror-down-proj-fragment.log": "a plain weight name: nothing says the checkpoint is quantized",
    "multistep-advance-step-max-tokens-zero.log": "an op's shape check: nothing names the flag combination",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name], min_confidence=0.5)


# ---- launcher prefixes; quantized tensors' names -------------------------------------------------

def test_a_launchers_timestamp_level_and_tag_before_vllms_process_tag_are_peeled():
    from triage.logread.normalize import parse

    ln = parse(1, "2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=2651) ERROR 05-08 11:47:02 "
                  "[core.py:1136] torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.95 GiB.")
    assert ln.text.startswith("torch.OutOfMemoryError: HIP out of memory")
    assert (ln.proc, ln.level, ln.src) == ("EngineCore pid=2651", "ERROR", "core.py:1136")
    ln = parse(2, "2026-05-08 11:47:02.256 [Info] (Process) (EngineCore pid=2651)     tensor = torch.zeros(")
    assert ln.text == "    tensor = torch.zeros(" and ln.level == "INFO"


@pytest.mark.parametrize("name", ["layers.35.mlp.gate.g_idx",
                                  "layers.3.mlp.down_proj.weight.absmax"])
def test_a_missing_quantized_tensor_is_a_quantization_failure(name):
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/model_executor/models/qwen3_moe.py", line 574, in load_weights\n'
           "    param = params_dict[name]\n"
           f"KeyError: '{name}'\n")
    assert _top(log).category == "quantization"


# ---- a warning the rules know, then an exception no rule knows -----------------------------------

def test_an_exception_raised_after_warnings_outranks_them_when_its_words_decide():
    log = ("WARNING 02-14 08:41:15 [_custom_ops.py:20] Failed to import from vllm._C with "
           "ModuleNotFoundError(\"No module named 'vllm._C'\")\n"
           "Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/distributed/device_communicators/pynccl.py", line 99, in __init__\n'
           "RuntimeError: NCCL communicator init failed for a reason no rule knows\n")
    ds, _ = diagnose(scan_text(log))
    assert [d.category for d in ds[:2]] == ["distributed", "install_mismatch"], [(d.signature, d.confidence) for d in ds]
    # without the exception the warning stays the diagnosis
    assert _top(log.split("Traceback")[0]).category == "install_mismatch"


# ---- Ray's own log lines; a message quoted in an HTTP error body ---------------------------------

def test_rays_cpp_log_prefix_and_daemon_tags_are_peeled():
    from triage.logread.normalize import parse

    ln = parse(1, "(EngineCore_DP0 pid=3) (raylet, ip=172.27.221.101) [2025-12-12 15:10:48,697 C 42791 42791] "
                  "(raylet) experimental_mutable_object_provider.cc:153:  An unexpected system state has occurred.")
    assert ln.text == "An unexpected system state has occurred."
    assert (ln.proc, ln.ip, ln.level, ln.src) == ("raylet", "172.27.221.101", "CRITICAL",
                                                  "experimental_mutable_object_provider.cc:153")
    ln = parse(2, "[2025-12-12 15:10:48,710 E 322780 345750] raylet_client.cc:199: Error pushing mutable object")
    assert (ln.text, ln.level) == ("Error pushing mutable object", "ERROR")


def test_glog_and_c10_log_prefixes_give_level_and_source():
    from triage.logread.normalize import parse

    ln = parse(1, "E0911 06:19:37.204720  3746 rdma_transport.cpp:426] RdmaTransport: No available RNIC")
    assert (ln.text, ln.level, ln.src) == ("RdmaTransport: No available RNIC", "ERROR", "rdma_transport.cpp:426")
    ln = parse(2, "[rank0]:[W1201 10:12:44.123456 12345 torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1234] "
                  "Warning: WorkNCCL timed out")
    assert (ln.level, ln.src, ln.text) == ("WARNING", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1234",
                                           "Warning: WorkNCCL timed out")
    ln = parse(3, "[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation timeout")
    assert (ln.level, ln.text) == ("ERROR", "[Rank 0] Watchdog caught collective operation timeout")
    # a word that only looks like a level letter stays text
    for text in ("E 1234 something", "Exception: boom", "I0911 is not a log line"):
        assert parse(4, text).level == "" and parse(4, text).text == text


def test_a_failed_ray_check_is_a_distributed_failure():
    log = ("(raylet, ip=10.0.0.7) [2025-12-12 15:10:48,697 C 42791 42791] (raylet) x.cc:153:  An unexpected "
           "system state has occurred. You have likely discovered a bug in Ray. Check failed: ok\n")
    d = _top(log)
    assert d.category == "distributed" and d.signature == "catalogue.native.ray"


def test_the_message_of_an_http_error_body_is_looked_up_in_the_catalogue():
    log = ("openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'stop strings are only "
           "supported when detokenize is True. Set detokenize=True to use stop.', 'type': 'BadRequestError', "
           "'param': None, 'code': 400}\n")
    d = _top(log)
    # the lookup is what is checked here: the category may then be the word model's (it overrules a mined module
    # when all but certain, which on the dev logs left out of its training gains more than it loses)
    assert d.signature.startswith("catalogue.vllm.")
    assert "sampling_params" in d.facts["catalogue"]["module"]


@pytest.mark.parametrize("module,category", [
    ("vllm/third_party/tml_fa4/interface.py", "kernel_library"),
    ("vllm/third_party/fmha_sm100/api.py", "kernel_library"),
    ("vllm/models/deepseek_v4/nvidia/ops/sparse_attn_compress_cutedsl.py", "kernel_library"),
    ("vllm/models/step5/nvidia/model.py", "model_support"),
    ("vllm/models/deepseek_v4/nvidia/mtp.py", "speculative_decoding"),
    ("vllm/models/glm5next/glm5next_mtp.py", "speculative_decoding"),
    ("vllm/sampling_params.py", "engine_config"),
    ("vllm/v1/core/single_type_kv_cache_manager.py", "kv_cache_memory"),
    ("vllm/snapshot/runtime.py", "environment"),
])
def test_newer_vllm_layouts_have_an_area(module, category):
    from triage.areas import area_of

    assert area_of(module) == category


# ---- a notebook's error output: the .ipynb JSON, IPython's frames ------------------------------

NOTEBOOK = Path(__file__).parent / "fixtures" / "notebook-error-output.json.txt"


def test_a_notebooks_json_error_output_is_read_as_its_traceback():
    # written from nbformat's error output (ename, evalue, traceback strings with ANSI colours escaped)
    scan = scan_text(NOTEBOOK.read_text())
    (rec,) = scan.exceptions
    assert rec.type == "ValueError" and rec.message.startswith("Bfloat16 is only supported")
    assert [f.func for f in rec.frames] == ["_check_if_gpu_supports_dtype"]
    assert rec.frames[0].line == 489 and rec.frames[0].file.endswith("vllm/worker/worker.py")


def test_ipython_frames_of_both_forms_are_frames():
    log = ("ValueError                                Traceback (most recent call last)\n"
           "Cell In[1], line 15\n"
           "---> 15 llm = LLM(\n"
           "File ~/envs/x/lib/python3.11/site-packages/vllm/utils.py:1037, in deprecate_args.<locals>.inner(*a)\n"
           "~/envs/x/lib/python3.11/site-packages/vllm/model_executor/model_loader/loader.py in load_model(self)\n"
           "ValueError: something new\n")
    (rec,) = scan_text(log).exceptions
    assert [f.func for f in rec.frames] == ["deprecate_args.<locals>.inner", "load_model"]


# ---- a mined message from a module that says nothing: frames or words decide, quietly ---------

def test_a_catalogue_match_in_an_unmapped_module_takes_its_frames_and_says_less():
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 2000, in _dummy_run\n'
           f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 2100, in _gather_mm_embeddings\n'
           "RuntimeError: Encoder cache miss for 3f2a.\n")
    d = _top(log)
    assert d.signature.startswith("catalogue.vllm.v1.worker.")
    assert d.confidence <= 0.3  # neither the module, the frames nor the words place it
    log2 = log.replace("RuntimeError: Encoder cache miss",
                       f'  File "{SITE}/vllm/multimodal/cache.py", line 10, in get\n'
                       "RuntimeError: Encoder cache miss")
    d2 = _top(log2)
    assert d2.category == "model_support" and 0.3 < d2.confidence < 0.4
    assert any("likely" in x for x in d2.explanation)


def test_a_frame_cut_after_its_file_name_still_names_the_file():
    log = (f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 6209,in _get_spec_decode_draft_probs\n'
           "    return get_aligned_draft_probs(\n"
           f'  File "{SITE}/vllm/v1/spec_decode/draft_prob_alignment.py", li\n'
           "ne 115, in get_aligned_draft_probs\n"
           "RuntimeError: Missing cached draft probabilities for request 7\n")
    (rec,) = scan_text(log).exceptions
    assert [f.file.rsplit("/", 1)[-1] for f in rec.frames] == ["gpu_model_runner.py", "draft_prob_alignment.py"]
    assert rec.frames[0].func == "_get_spec_decode_draft_probs"
    assert _top(log).category == "speculative_decoding"


def test_the_call_into_a_compiled_op_does_not_decide():
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/_custom_ops.py", line 230, in advance_step_flashattn\n'
           f'  File "{SITE}/torch/_ops.py", line 1116, in __call__\n'
           "RuntimeError: tensor: name = sampled_token_ids, shape = [27, 1] is not as expected\n")
    d = _top(log)
    assert d.confidence <= 0.2 and d.facts["category_decided"] is False


# ---- a paste with no level and no exception line -------------------------------------------------

@pytest.mark.parametrize("text,category", [
    ("Cannot find NCCL library libnccl.so.2 in your environment\n", "distributed"),
    ("   some context line\nFailed to load the tokenizer from /models/x: the file is corrupt\n", "tokenizer_chat_template"),
])
def test_a_fragment_line_that_calls_itself_an_error_is_read(text, category):
    d = _top(text)
    assert d.signature == "generic.error_line" and d.category == category and d.confidence <= 0.25


def test_an_error_word_inside_a_long_logs_plain_line_is_not_a_failure():
    lines = [f"INFO 02-14 10:12:{i % 60:02d} [engine.py:1] step {i}: no error callback registered" for i in range(60)]
    ds, _ = diagnose(scan_text("\n".join(lines) + "\n"))
    assert not ds


def test_an_illegal_instruction_is_the_cpu():
    log = ("INFO 02-14 10:12:44 [__init__.py:216] Automatically detected platform cpu.\n"
           "Illegal instruction (core dumped)\n")
    d = _top(log)
    assert d.category == "environment" and d.signature == "catalogue.native.shell"
    assert "CPU" in d.title


def test_a_warning_before_a_bare_failure_cascade_names_its_likely_part():
    log = ("WARNING 02-14 10:12:44 [utils.py:1] Failed to build the FlashInfer sampling kernels, falling back\n"
           "ERROR 02-14 10:12:50 [core.py:700] EngineCore failed to start.\n"
           "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    d = _top(log)
    assert d.signature == "generic.root_cause_missing" and d.category == "kernel_library"
    assert d.confidence <= 0.2 and "warning" in d.facts["category_guessed_from"]


RAISED = ("Traceback (most recent call last):\n"
          '  File "/x/site-packages/vllm/model_executor/layers/quantization/awq.py", line 9, in f\n'
          "    raise ValueError('frobnication width 7 is not one of 4, 8')\n"
          "ValueError: frobnication width 7 is not one of 4, 8\n")
CUT = ("ERROR 01-02 03:04:05 [core.py:1] EngineCore failed to start.\n"
       "Traceback (most recent call last):\n"
       '  File "/x/site-packages/vllm/model_executor/layers/quantization/awq.py", line 9, in f\n')


@pytest.mark.parametrize("layer, log, named", [
    ("diagnose_unknown", RAISED, "message catalogue failed"), ("from_frames", CUT, "frame reading failed"),
])
def test_a_broken_layer_of_the_fallback_is_a_warning_not_a_crash(monkeypatch, layer, log, named):
    """A layer that raises (broken data, a bug) is skipped with a warning; the plainer layers still answer."""
    from triage.catalogue import infer

    def broken(*_a, **_k):
        raise RuntimeError("data unreadable")

    monkeypatch.setattr(infer, layer, broken)
    scan = scan_text(log)
    ds, _ = diagnose(scan)
    assert any(w.startswith(named + ": RuntimeError: data unreadable") for w in scan.warnings), scan.warnings
    if log is RAISED:
        assert ds[0].signature == "generic.unrecognized_exception" and ds[0].category == "quantization"
