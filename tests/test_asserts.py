"""Bare asserts, quoted bodies that lost a colon, and cut tracebacks read by the line before them:
the generic layer's mechanisms for failures no hand rule knows (tests/logs/dev-gen holds real ones)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from triage.catalogue.asserts import expression, load
from triage.catalogue.infer import _module_of
from triage.diagnose import diagnose
from triage.logread import scan_text
from tests.dev_sets import first as _top

SITE = "/usr/local/lib/python3.12/dist-packages"




@pytest.mark.parametrize("line, expr", [
    ("    assert self.block_quant is None", "self.block_quant is None"),
    ("assert  x%y==0", "x % y == 0"),
    ('assert x % y == 0, f"{x} is not divisible by {y}"', "x % y == 0"),
    ("assert layer.custom_routing_function == Llama4MoE.custom_routing_function, \\",
     "layer.custom_routing_function == Llama4MoE.custom_routing_function"),
    ("assert (a, b) == c", "(a, b) == c"),
    ("assert f(a, b", None),  # cut mid-expression
    ("return x", None),
])
def test_an_assert_line_gives_its_expression_as_unparse_writes_it(line, expr):
    assert expression(line) == expr


def test_the_mined_asserts_span_every_release_and_the_newest_layouts():
    table = load()
    assert table is not None
    assert table.releases[0].startswith("0.6") and table.releases[-1] == "0.33.0" and len(table.releases) >= 6
    # modules that only the newest releases have (vLLM 0.25+ moved code under vllm/v1/ and vllm/config/)
    assert any(m.startswith("vllm/v1/") for m in table.modules) and any(m.startswith("vllm/config/")
                                                                        for m in table.modules)
    (site,) = [s for s in table.sites("not self.act_q_static")
               if s.module == "vllm/model_executor/layers/quantization/fp8.py"]
    assert (site.first, site.last, site.newest) == ("0.16.0", "0.33.0", "0.33.0")


BARE = f"""(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700] Traceback (most recent call last):
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700]   File "{SITE}/vllm/v1/engine/core.py", line 90, in __init__
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700]     self.model_executor = executor_class(vllm_config)
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700]   File "{SITE}/vllm/model_executor/layers/quantization/fp8.py", line 612, in create_weights
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700]     assert not self.act_q_static
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700]            ^^^^^^^^^^^^^^^^^^^^^
(EngineCore pid=7) ERROR 10-01 10:00:00 [core.py:700] AssertionError
"""


def test_a_bare_assert_is_placed_by_the_module_that_holds_its_expression():
    d = _top(BARE)
    assert d.category == "quantization" and d.confidence == 0.45
    a = d.facts["assert"]
    assert a["expression"] == "not self.act_q_static"
    assert a["module"] == "vllm/model_executor/layers/quantization/fp8.py" and a["last_release"] == "0.33.0"


def test_a_bare_assert_pasted_without_frames_is_placed_by_its_source_line_alone():
    text = "    assert not self.act_q_static\nAssertionError\n"
    d = _top(text)
    assert d.category == "quantization" and d.confidence == 0.4


def test_an_assert_no_release_has_leaves_the_fallback_to_decide():
    d = _top("    assert self.frobnicated_widget_count == 3\nAssertionError\n")
    assert "assert" not in d.facts and d.confidence <= 0.35


def test_an_assert_with_a_message_is_not_read_as_a_bare_one():
    d = _top("    assert not self.act_q_static\nAssertionError: static activation scales are not supported here\n")
    assert "assert" not in d.facts


def test_a_quoted_message_key_that_lost_its_colon_is_still_unquoted():
    d = _top("Error code: 400 - {'object': 'error', 'message' 'max_tokens must be at least 1, got -2815., "
             "'type' 'BadRequestError', 'param': None, 'code': 400}")
    # (SamplingParams' own rule reads the message too)
    assert d.category == "engine_config" and (d.signature.startswith("catalogue.")
                                              or d.signature == "sampling.max_tokens_below_one")


CUT = """(Worker pid=1) 2026-03-13 12:01:42,816 - WARNING - autotuner.py:490 - flashinfer.jit: [Autotuner]: Skipping tactic x [32, 15], due to failure while profiling: Got CUDA error. See above for details.
(Worker pid=1) ERROR 03-13 12:01:42 [multiproc_executor.py:932] WorkerProc hit an exception.
(Worker pid=1) ERROR 03-13 12:01:42 [multiproc_executor.py:932] Traceback (most recent call last):
(Worker pid=1) ERROR 03-13 12:01:42 [multiproc_executor.py:932]   File "<REDACTED_PATH>/multiproc_executor.py", line 927, in worker_busy_loop
(Worker pid=1) ERROR 03-13 12:01:42 [multiproc_executor.py:932]     output = func(*args, **kwargs)
(Worker pid=1) ERROR 03-13 12:01:42 [multiproc_executor.py:932]   File "<REDACTED_PATH>/gpu_worker.py", line 594, in compile_or_warm_up_model
"""


def test_a_cut_traceback_with_frames_of_no_subsystem_is_read_by_the_failure_printed_before_it():
    d = _top(CUT)
    assert d.category == "kernel_library" and d.confidence == 0.35
    assert d.facts["phase"] == "warm-up" and d.evidence[0].line == 1


def test_an_info_line_before_a_cut_traceback_is_not_taken_for_its_cause():
    text = CUT.replace("- WARNING -", "").replace("due to failure while profiling: Got CUDA error. See above for details.",
                                                  "")
    text = "INFO 03-13 12:01:40 [kernel_warmup.py:69] Warming up FlashInfer attention.\n" + text.split("\n", 1)[1]
    d = _top(text)
    # the word model may still guess from the traceback's own words (said as a guess), never from the INFO line
    assert all(e.line != 1 for e in d.evidence)
    assert d.confidence <= 0.2 or d.category != "kernel_library" or (
        d.confidence <= 0.3 and "flashinfer" not in d.facts.get("category_guessed_from", "").lower())


def test_the_module_shown_for_a_frame_is_under_the_last_package_folder():
    assert _module_of("/home/u/code/vllm/venv/lib/python3.10/site-packages/flashinfer/autotuner.py") == \
        "flashinfer/autotuner.py"
    assert _module_of(f"{SITE}/vllm/v1/worker/gpu_worker.py") == "vllm/v1/worker/gpu_worker.py"


def test_the_assert_table_is_not_loaded_to_diagnose_a_failure_that_needs_none():
    code = ("import sys\nfrom triage.diagnose import diagnose\nfrom triage.logread import scan_text\n"
            "diagnose(scan_text('ValueError: max_model_len is too large\\n'))\n"
            "print('triage.catalogue.asserts' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_mined_exception_raised_after_a_known_warning_outranks_the_warning():
    # a warning a rule knows (vllm._C's CUDA runtime missing), then a message of vLLM's source (no hand
    # rule) actually raised: that is what stopped the start-up
    text = ("WARNING 05-01 10:00:00 [config.py:100] Failed to import from vllm._C with ImportError("
            "'libcudart.so.12: cannot open shared object file')\n"
            "Traceback (most recent call last):\n"
            f'  File "{SITE}/vllm/sampling_params.py", line 300, in _verify_args\n'
            "    raise ValueError(\n"
            "ValueError: max_tokens must be at least 1, got -5.\n")
    ds, _ = diagnose(scan_text(text))
    assert (ds[0].signature.startswith("catalogue.") or ds[0].signature == "sampling.max_tokens_below_one") \
        and ds[0].first_line == 5
    assert [d.signature for d in ds[1:]] == ["install.cuda_runtime_lib_missing"]


@pytest.mark.parametrize("expr", ["self.total_num_kv_heads % tp_size == 0",  # mined: in vllm/model_executor/models/
                                  "self.num_experts_per_rank % self.ep_size == 0"])  # in no mined release
def test_an_assert_that_model_sizes_split_over_parallel_ranks_is_the_launch_config(expr):
    d = _top(f'  File "{SITE}/vllm/model_executor/models/llama.py", line 122, in __init__\n'
             f"    assert {expr}\nAssertionError\n")
    assert d.category == "engine_config" and d.confidence >= 0.4
    assert d.facts["assert"]["expression"] == expr


@pytest.mark.parametrize("module, category", [
    ("vllm/v1/worker/gpu/spec_decode/speculator.py", "speculative_decoding"),  # the newest releases' runner
    ("vllm/utils/nccl.py", "distributed"),
])
def test_the_newest_releases_modules_have_an_area(module, category):
    from triage.areas import area_of

    assert area_of(module) == category


def test_a_message_that_ends_with_a_value_matches_however_long_the_value():
    from triage.catalogue.store import load

    line = ("Failed to import from vllm._C with ImportError('dlopen(/Users/u/vllm/vllm/_C.abi3.so, 0x0002): Symbol not "
            "found: __ZNK3c1011StorageImpl27throw_data_ptr_access_errorEv  Referenced from: /Users/u/vllm/_C.abi3.so')")
    (best, *_) = load().match(line)
    assert best.template.module == "vllm/_custom_ops.py" and best.template.open_end
    # a message that ends with its own words still has to cover most of a long line
    assert not [m for m in load().match("x" * 200 + " is not supported yet. " + "y" * 200)
                if not m.template.open_end and m.matched < 40]


@pytest.mark.parametrize("text", ["_C.abi3.so: undefined symbol: _ZN3c104cuda9SetDeviceEi",
                                  "dlopen(_C.abi3.so, 0x0002): Symbol not found: __ZNK3c1011StorageImpl",
                                  "python3: symbol lookup error: flash_attn_2_cuda.so: undefined symbol: _ZN2at4_ops"])
def test_a_library_that_does_not_link_is_an_install_mismatch_whatever_imports_it(text):
    from triage.exception_words import category_from_words, decisive

    cat, why = category_from_words("ImportError", text)
    assert cat == "install_mismatch" and decisive(cat, why)


def test_a_placed_assert_gives_the_upgrade_advisor_its_release_range():
    from triage.upstream.advisor import release_range_evidence

    d = _top(BARE)
    cat = d.facts["catalogue"]
    assert (cat["first_release"], cat["last_release"], cat["absent_in"], cat["gone_by"]) == \
        ("0.16.0", "0.33.0", "0.10.2", None)
    say, line = release_range_evidence(cat, "0.20.1")
    assert say == "does-not-fix" and "still in vLLM 0.33.0" in line
    assert any("upgrading alone does not remove this check" in w for w in d.explanation)


CAPTURE_CUT = f"""Traceback (most recent call last):
  File "{SITE}/vllm/v1/worker/gpu_worker.py", line 400, in compile_or_warm_up_model
    self.model_runner.capture_model()
  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 3100, in capture_model
    self._capture_cudagraphs(
  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 3200, in _capture_cudagraphs
"""


KV_ALLOC_CUT = f"""Traceback (most recent call last):
  File "{SITE}/vllm/v1/engine/core.py", line 90, in __init__
    self._initialize_kv_caches(vllm_config)
  File "{SITE}/vllm/v1/worker/gpu_worker.py", line 300, in initialize_kv_cache
    self.model_runner.initialize_kv_cache(kv_cache_config)
  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 3500, in initialize_kv_cache
"""


def test_a_cut_traceback_of_no_mapped_frame_is_guessed_from_a_step_of_one_subsystem():
    d = _top(KV_ALLOC_CUT)
    assert d.category == "kv_cache_memory" and d.confidence == 0.3 and d.facts["phase"] == "KV cache allocation"


def test_a_cut_traceback_in_the_capture_step_is_the_capture_rules():
    # the CUDA-graph rules (rules/cudagraph_frames.py) own a traceback cut inside vLLM's capture step
    d = _top(CAPTURE_CUT)
    assert d.category == "cudagraph_capture" and d.signature == "cudagraph.capture_step_failed" and d.confidence <= 0.5


def test_a_cut_traceback_in_a_step_of_every_kind_says_no_category():
    text = CAPTURE_CUT.replace("capture_model", "profile_run").replace("_capture_cudagraphs", "_dummy_run")
    ds, _ = diagnose(scan_text(text))
    assert not ds or ds[0].confidence <= 0.2


def test_a_short_paste_of_a_mined_warning_is_read_as_a_likely_cause_below_the_harmless_ceiling():
    line = ("WARNING 03-19 00:20:58 [_custom_ops.py:21] Failed to import from vllm._C with ImportError("
            "'initialization failed')")
    d = _top(line + "\n")
    assert d.signature == "catalogue.vllm._custom_ops" and d.confidence <= 0.4
    # the same warning in a healthy start-up that goes on is no failure
    healthy = "\n".join([line] + [f"INFO 03-19 00:21:{i:02d} [loader.py:1] Loading weights shard {i}" for i in range(20)])
    ds, _ = diagnose(scan_text(healthy + "\n"))
    assert not ds or all(x.confidence <= 0.5 for x in ds)
