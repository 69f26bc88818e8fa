"""What people paste into a ticket instead of a whole log reaches the same rules as the whole log.

One to five lines without vLLM's header, a markdown quote, a code fence, a message printed as a
tuple of string pieces, a message inside an HTTP error body (escaped quotes, `\\n`), a traceback cut
before its last line, the cause stated only by memory profiling's INFO lines. Also the ranking of a
raised exception against a line printed before it, and the fallback's honesty about failures no rule
knows.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_triage
from triage.diagnose import diagnose
from triage.logread import scan_path, scan_text

HDR = "(EngineCore_DP0 pid=2390) ERROR 07-21 09:15:43 [core.py:586] "

FRAGMENTS = {
    # a bare message: no header, no exception type, no word the line selection looks for
    "bare-message": ("No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
                     "initializing the engine.\n", "kv_cache.no_memory_for_blocks"),
    "markdown-quote": ("> ValueError: The model's max seq len (131072) is larger than the maximum number of tokens "
                       "that can be stored in KV cache (45648). Try increasing `gpu_memory_utilization` or "
                       "decreasing `max_model_len` when initializing the engine.\n",
                       "kv_cache.max_len_exceeds_capacity"),
    "nested-quote-fenced": ("> > ```\n> > ValueError: No available memory for the cache blocks. Try increasing "
                            "`gpu_memory_utilization` when initializing the engine.\n> > ```\n",
                            "kv_cache.no_memory_for_blocks"),
    # raise ValueError("a ", "b") with a stray comma prints the pieces as a tuple: the rule's phrase
    # spans two pieces
    "tuple-pieces": ("ValueError: ('The quantization method awq_marlin is not supported for the current GPU. ', "
                     "'Minimum capability: 80. ', 'Current capability: 75.')\n", "quant.min_capability"),
    "tuple-no-type": ("('Total number of attention heads (28) must be divisible by tensor parallel size (8).',)\n"
                      "('Total number of attention heads (28)', ' must be divisible by tensor parallel size (8).')\n",
                      "config.tp_heads_not_divisible"),
    # vLLM's OpenAI-compatible error body, escaped
    "json-error-body": ('{"object":"error","message":"The model\'s max seq len (32768) is larger than the maximum '
                        'number of tokens that can be stored in KV cache (12032). Try increasing '
                        '`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",'
                        '"type":"BadRequestError","param":null,"code":400}\n', "kv_cache.max_len_exceeds_capacity"),
    # FastAPI's {"detail": ...} with a whole traceback inside, quotes escaped, line breaks as \n
    "json-detail-traceback": (
        '{"detail":"Traceback (most recent call last):\\n  File \\"/usr/local/lib/python3.12/dist-packages/vllm/'
        'model_executor/layers/quantization/utils/marlin_utils.py\\", line 166, in verify_marlin_supported\\n'
        '    raise ValueError(err_msg)\\nValueError: Weight output_size_per_partition = 2880 is not divisible by '
        'min_thread_n = 64. Consider reducing tensor_parallel_size or running with --quantization gptq.\\n"}\n',
        "quant.shape_unsupported"),
    # the OpenAI client's exception: a Python dict repr
    "openai-client-dict": (
        "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': \"Unknown quantization method: "
        "mxfp8. Must be one of ['awq', 'fp8', 'gptq'].\", 'type': 'BadRequestError', 'param': None, 'code': 400}\n",
        "quant.unknown_method"),
    # the newer body: {"error": {"message": ...}}
    "json-error-object": ('{"error":{"message":"\\"auto\\" tool choice requires --enable-auto-tool-choice and '
                          '--tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}}\n',
                          "config.tool_choice_flags"),
    # a traceback quoted as one Python string
    "escaped-traceback-string": (
        "'Traceback (most recent call last):\\n  File \"/opt/venv/lib/python3.12/site-packages/vllm/platforms/"
        "cuda.py\", line 121, in check_if_supports_dtype\\n    raise ValueError(\\nValueError: Bfloat16 is only "
        "supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute capability 7.5. "
        "You can use float16 instead by explicitly setting the `dtype` flag in CLI, for example: --dtype=half.\\n'\n",
        "dtype.bf16_before_ampere"),
    # the cause only in memory profiling's INFO lines; the traceback after them cut off
    "kv-info-only-v1": (
        "INFO 03-12 10:01:33 [gpu_worker.py:276] Available KV cache memory: -3.71 GiB\n"
        + HDR + "EngineCore failed to start.\n" + HDR + "Traceback (most recent call last):\n"
        + HDR + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 691, in run_engine_core\n',
        "kv_cache.negative_budget"),
    "kv-info-only-v0": (
        "INFO 12-22 10:55:34 worker.py:241] model weights take 8.51GiB; non_torch_memory takes 0.26GiB; PyTorch "
        "activation peak memory takes 12.94GiB; the rest of the memory reserved for KV Cache is -2.18GiB.\n"
        "INFO 12-22 10:55:35 gpu_executor.py:76] # GPU blocks: 0, # CPU blocks: 1310\n",
        "kv_cache.negative_budget"),
    "kv-zero-tokens": ("INFO 05-02 08:11:09 [kv_cache_utils.py:1087] GPU KV cache size: 0 tokens\n"
                       "INFO 05-02 08:11:09 [kv_cache_utils.py:1091] Maximum concurrency for 8,192 tokens per request: "
                       "0.00x\n", "kv_cache.negative_budget"),
    # the assertion's source line under its frame is all that says it
    "kv-assert-source-line": (
        'File "/usr/local/lib/python3.12/dist-packages/vllm/v1/core/sched/scheduler.py", line 142, in __init__\n'
        "    assert num_gpu_blocks is not None and num_gpu_blocks > 0\n"
        "AssertionError\n", "kv_cache.negative_budget"),
}


@pytest.mark.parametrize("name", sorted(FRAGMENTS), ids=sorted(FRAGMENTS))
def test_fragment_reaches_the_rule(name, tmp_path):
    text, sig = FRAGMENTS[name]
    p = tmp_path / "paste.txt"
    p.write_text(text)
    for scan in (scan_path(str(p)), scan_text(text)):
        ds, _ = diagnose(scan)
        assert ds, name
        assert ds[0].signature == sig, [(d.signature, d.confidence, d.title) for d in ds]
        assert ds[0].confidence > 0.5
        assert all(1 <= e.line <= text.count("\n") for e in ds[0].evidence)


def test_fragment_on_standard_input():
    text, sig = FRAGMENTS["tuple-pieces"]
    r = run_triage("--log", "-", "--json", "--offline", "--no-probe", input=text.encode())
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["diagnoses"][0]["signature"] == sig


def test_quoted_traceback_becomes_an_exception_record():
    s = scan_text(FRAGMENTS["json-detail-traceback"][0])
    exc = [e for e in s.exceptions if e.short_type == "ValueError"]
    assert exc and exc[0].in_traceback and exc[0].frames[-1].func == "verify_marlin_supported"
    assert exc[0].line.no == 1  # numbered as the line that holds it


def test_a_log_with_headers_is_selected_as_before():
    """Only a headerless paste is read whole: a log keeps the usual selection (the INFO lines with no
    selectable word stay out), whatever its size."""
    log = ("INFO 02-14 10:00:00 [core.py:1] something unremarkable\n"
           "ERROR 02-14 10:00:01 [core.py:2] No available memory for the cache blocks.\n")
    assert [ln.no for ln in scan_text(log).lines] == [2]
    assert [ln.no for ln in scan_text("something unremarkable\nNo available memory\n").lines] == [1, 2]


def test_tuple_that_is_not_a_message_is_left_alone():
    s = scan_text("INFO 02-14 10:00:00 [core.py:1] shapes: ('a', 1) and version 2\n")
    assert s.lines[0].text == "shapes: ('a', 1) and version 2"


# ---- ranking: what was raised against what was printed before it ---------------------------------

W = "(Worker_TP0 pid=4188) ERROR 02-14 10:11:36 [multiproc_executor.py:751] "


def test_raised_exception_outranks_a_warning_printed_before_it():
    log = (
        "(APIServer pid=911) WARNING 09-03 11:20:09 [cuda.py:98] Current CUDA Device does not support bfloat16. "
        "Please switch dtype to float16.\n"
        + W + "Traceback (most recent call last):\n"
        + W + '  File "/usr/local/lib/python3.12/dist-packages/vllm/vllm_flash_attn/flash_attn_interface.py", line 90, '
              'in flash_attn_varlen_func\n'
        + W + "RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert ds[0].signature == "gpu.compute_capability_too_low", [(d.signature, d.confidence) for d in ds]
    assert "dtype.bf16_before_ampere" in [d.signature for d in ds[1:]]


def test_printed_cause_of_the_same_kind_stays_first():
    # the import failure printed as a WARNING is the cause of the AttributeError raised later
    log = (
        "WARNING 02-14 11:11:14 [_custom_ops.py:20] Failed to import from vllm._C with ImportError('/usr/local/lib/"
        "python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi')\n"
        + W + "Traceback (most recent call last):\n"
        + W + '  File "/usr/local/lib/python3.12/dist-packages/torch/_ops.py", line 1270, in __getattr__\n'
        + W + "AttributeError: '_OpNamespace' '_C' object has no attribute 'rms_norm'\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert ds[0].signature == "install.undefined_symbol"


def test_wrapper_never_above_its_cause_when_both_are_raised():
    log = (
        W + "Traceback (most recent call last):\n"
        + W + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 1, in f\n'
        + W + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`.\n"
        + "(APIServer pid=1) Traceback (most recent call last):\n"
        + '(APIServer pid=1)   File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core_client.py", line 1, in g\n'
        + "(APIServer pid=1) RuntimeError: Engine core initialization failed. See root cause above. "
          "Failed core proc(s): {}\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert ds[0].signature == "kv_cache.no_memory_for_blocks"
    assert all("Engine core initialization" not in d.title for d in ds)


# ---- the fallback: a category only where the exception's words decide it ----------------------

def _fallback(text: str):
    ds, _ = diagnose(scan_text(text))
    assert ds and ds[0].signature.startswith("generic."), [(d.signature, d.title) for d in ds]
    return ds[0]


@pytest.mark.parametrize("line,category", [
    ("ImportError: cannot import name 'cute' from 'cutlass' (/opt/venv/lib/python3.12/site-packages/cutlass/__init__.py)",
     "kernel_library"),
    ("ModuleNotFoundError: No module named 'transformers.models.qwen3_omni_moe'", "model_support"),
    ("ModuleNotFoundError: No module named 'optimum.gptq'", "quantization"),
    ("ModuleNotFoundError: No module named 'mooncake'", "distributed"),
    ("RuntimeError: NCCL communicator init failed for a reason no rule knows", "distributed"),
    ("ValueError: expected the draft model's hidden size to be set for eagle3 proposers", "speculative_decoding"),
    ("RuntimeError: CUDA error: an unknown kernel launch failure happened", "kernel_library"),
])
def test_fallback_category_from_the_exception_words(line, category):
    d = _fallback(line + "\n")
    assert d.category == category
    assert 0.35 < d.confidence < 0.5
    assert d.facts["category_decided"] is True


def test_fallback_without_decisive_words_says_unrecognised_quietly():
    d = _fallback("Traceback (most recent call last):\n  File \"/srv/app.py\", line 3, in <module>\n"
                  "ValueError: something went sideways\n")
    assert d.title.startswith("Unrecognised failure")
    assert d.confidence <= 0.2 and d.facts["category_decided"] is False


def test_fallback_reads_a_bare_assertion_by_its_source_line():
    d = _fallback(
        W + "Traceback (most recent call last):\n"
        # (a frame in the runner's drafting step, propose_draft_token_ids, is named by speculative.drafter_crash
        # before any fallback: here only the assert's source line says it)
        + W + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_model_runner.py", line 2310, '
              "in execute_model\n"
        + W + "    assert self.drafter.num_speculative_tokens == len(draft_token_ids[0])\n"
        + W + "AssertionError\n")
    assert d.category == "speculative_decoding" and d.facts["category_decided"] is True


def test_a_tuple_inside_other_text_is_left_alone():
    s = scan_text("(APIServer pid=1) INFO 02-14 10:00:00 [utils.py:233] non-default args: {'model': 'm', "
                  "'allowed_media_domains': ('a.example', 'b.example')}\n")
    assert s.facts["launch_args"]["allowed_media_domains"] == ("a.example", "b.example")


def test_kv_info_line_in_a_big_log_is_selected(tmp_path):
    """In a log too big to read whole, memory profiling's INFO lines still reach the rule (the line
    selection keeps them)."""
    noise = "".join(f"(APIServer pid=1) INFO 02-14 10:{i // 60 % 60:02d}:{i % 60:02d} [loggers.py:123] Engine 000: "
                    f"Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs\n" for i in range(4000))
    log = (noise + "(Worker pid=2) INFO 02-14 11:00:00 [executor_base.py:118] Maximum concurrency for 32768 tokens "
           "per request: 0.41x\n" + noise)
    p = tmp_path / "big.log"
    p.write_text(log)
    for use_grep in (True, False):
        ds, _ = diagnose(scan_path(str(p), use_grep=use_grep))
        assert ds and ds[0].signature == "kv_cache.negative_budget", use_grep
        assert ds[0].evidence[0].line == 4001 and "0.41x" in ds[0].title


def _docker_json(text: str) -> str:
    """What `docker logs` keeps on disk with the json-file driver: one JSON object per line."""
    return "".join(json.dumps({"log": ln + "\n", "stream": "stderr", "time": "2026-02-14T10:12:44.123456789Z"})
                   + "\n" for ln in text.splitlines())


@pytest.mark.parametrize("name", ["quant.min_capability.log", "kv_cache.no_memory_for_blocks.log",
                                  "attention.no_valid_backend.log", "distributed.nccl_shm.log",
                                  "model_support.transformers_unknown_type.log", "kv_cache.negative_budget.log"])
def test_docker_json_file_log_keeps_its_diagnosis(name, tmp_path):
    from pathlib import Path

    src = Path(__file__).parent / "logs" / name
    want, _ = diagnose(scan_path(str(src)))
    p = tmp_path / "container-json.log"
    p.write_text(_docker_json(src.read_text()))
    got, _ = diagnose(scan_path(str(p)))
    assert got and got[0].signature == want[0].signature
    assert [e.line for e in got[0].evidence] == [e.line for e in want[0].evidence]
    assert got[0].evidence[0].text == want[0].evidence[0].text  # shown as the log line, not the JSON


def test_missing_root_cause_takes_its_category_from_the_quoted_worker_error():
    d = _fallback("RuntimeError: Worker failed with error 'the draft model proposed 0 tokens for a request "
                  "that needs 3', please check the stack trace above for the root cause\n")
    assert d.signature == "generic.root_cause_missing" and d.category == "speculative_decoding"
    assert d.confidence < 0.5


def test_fallback_category_from_the_library_of_the_exception_type():
    d = _fallback("Traceback (most recent call last):\n  File \"/srv/x.py\", line 1, in f\n"
                  "ray.exceptions.GetTimeoutError: Get timed out: some object(s) not ready.\n")
    assert d.category == "distributed" and d.facts["category_decided"] is True


def test_a_hub_lookup_that_failed_in_passing_is_not_the_failure():
    log = ("(APIServer pid=1) INFO 02-14 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0\n"
           "(APIServer pid=1) WARNING 02-14 10:00:01 [config.py:412] Could not fetch generation config from "
           "https://huggingface.co/Qwen/Qwen3-8B: Max retries exceeded with url: /api/models/Qwen/Qwen3-8B\n"
           "(APIServer pid=1) INFO:     Application startup complete.\n")
    ds, _ = diagnose(scan_text(log))
    assert all(d.confidence <= 0.5 for d in ds), [(d.signature, d.confidence) for d in ds]


def test_an_optional_import_warned_about_in_passing_is_not_the_failure():
    log = ("(APIServer pid=1) INFO 02-14 10:00:00 [api_server.py:1896] vLLM API server version 0.11.0\n"
           "(APIServer pid=1) WARNING 02-14 10:00:01 [ray_utils.py:48] Failed to import Ray with "
           "ModuleNotFoundError(\"No module named 'ray'\"). For multi-node inference, please install Ray with "
           "`pip install ray`.\n"
           "(EngineCore_DP0 pid=2) WARNING 02-14 10:00:09 [mxfp4.py:161] Failed to import triton_kernels: "
           "No module named 'triton_kernels'\n"
           "(APIServer pid=1) INFO:     Application startup complete.\n")
    ds, _ = diagnose(scan_text(log))
    assert all(d.confidence <= 0.5 for d in ds), [(d.signature, d.confidence) for d in ds]


def test_escapes_in_an_error_body_never_break_the_report():
    text = ('{"detail":"Traceback (most recent call last):\\n  File \\"/x/vllm/config/model.py\\", line 1, in f\\n'
            'ValueError: bad value \\ud800 for --max-model-len \\u00e9\\n"}\n')
    r = run_triage("--log", "-", "--json", "--offline", "--no-probe", input=text.encode())
    assert r.returncode in (0, 3), r.stderr
    json.loads(r.stdout)
