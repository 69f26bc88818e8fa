"""The rule catalogue against fixture logs: one or more realistic vLLM logs per signature.

tests/logs/<signature>.log (variants: <signature>--<variant>.log) is a whole failed log in one of
the shapes vLLM really prints (process tags old and new, bracketed and bare headers, docker
compose, kubectl timestamps, torchrun's [rank0]:, ANSI colours) with the start-up cascade after the
root cause. The top diagnosis must carry the file's signature; a harmless fixture must produce no
diagnosis above 0.5 and a note with its signature.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage.diagnose import diagnose, rules
from triage.logread import scan_path, scan_text
from triage.model import CATEGORIES, EXIT_NO_FAILURE, Report
from triage.playbooks.load import load_library

LOGS = Path(__file__).parent / "logs"
FIXTURES = sorted(LOGS.glob("*.log"))


def playbooks_by_category() -> dict[str, set[str]]:
    """Category -> ids of the bundled playbooks that name it (the YAML's `categories`)."""
    lib = load_library(include_user=False)
    assert not lib.errors, lib.errors
    out: dict[str, set[str]] = {}
    for pb in lib.playbooks.values():
        for c in pb.categories:
            out.setdefault(c, set()).add(pb.id)
    return out


def signature_of(path: Path) -> str:
    return path.name[: -len(".log")].split("--", 1)[0]


def by_signature():
    """Every signature a rule can produce -> that rule (custom checks may emit several)."""
    out = {}
    for r in rules():
        for sig in (r.signature, *r.emits):
            out[sig] = r
    return out


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_fixture_diagnosed_as_its_signature(path):
    sig = signature_of(path)
    rule = by_signature().get(sig)
    assert rule is not None, f"{path.name}: no rule {sig}"
    # the file path goes through grep like a real log; check the Python selection agrees
    scan = scan_path(str(path))
    diagnoses, notes = diagnose(scan)
    if rule.harmless:
        assert all(d.confidence <= 0.5 for d in diagnoses), [(d.signature, d.confidence, d.title) for d in diagnoses]
        assert sig in {n.signature for n in notes}
        report = Report(source=str(path), bytes=scan.bytes, lines=scan.lines_total, diagnoses=diagnoses, notes=notes)
        assert report.exit_code == EXIT_NO_FAILURE
        return
    assert diagnoses, f"{path.name}: nothing diagnosed"
    if rule.confidence < 0.5:
        # a hint (e.g. a deprecated setting): listed beside the failure, never above it
        hint = next((d for d in diagnoses if d.signature == sig), None)
        assert hint is not None and diagnoses[0].signature != sig, [d.signature for d in diagnoses]
        assert diagnoses[0].confidence > 0.5
        return
    top = diagnoses[0]
    assert top.signature == sig, [(d.signature, round(d.confidence, 2), d.title) for d in diagnoses]
    assert top.category == rule.category
    assert top.confidence > 0.5
    assert top.evidence and all(e.line >= 1 for e in top.evidence)
    assert not re.search(r"(?<![\w])\?(?![\w])", top.title), f"unfilled fact in title: {top.title}"
    assert top.fix.summary and top.fix.playbook
    # the same verdict whether the log was read from a file (grep) or from memory (Python selection)
    d2, _ = diagnose(scan_text(path.read_bytes()))
    assert d2 and d2[0].signature == sig and [e.line for e in d2[0].evidence] == [e.line for e in top.evidence]


def test_every_rule_has_a_fixture():
    have = {signature_of(p) for p in FIXTURES}
    missing = sorted(sig for r in rules() if not r.wrapper for sig in (r.signature, *r.emits) if sig not in have)
    assert not missing, f"rules without a fixture log in tests/logs/: {missing}"


def test_no_orphan_fixtures():
    known = set(by_signature())
    assert not [p.name for p in FIXTURES if signature_of(p) not in known]


def test_rule_categories_and_playbooks():
    playbooks = playbooks_by_category()
    assert set(playbooks) == set(CATEGORIES)  # every category has a guided fix
    for r in rules():
        if r.wrapper or r.harmless:
            continue
        assert r.category in CATEGORIES, r.signature
        assert r.playbook in playbooks[r.category], (r.signature, r.playbook)
        assert r.fix.strip() or r.check is not None, f"{r.signature} has no fix"


def test_harmless_rules_carry_no_playbook():
    for r in rules():
        if r.harmless:
            assert r.playbook is None and not r.secondary


# ---- ranking ----------------------------------------------------------------------------------

W0 = "(Worker_TP0 pid=4188) ERROR 02-14 10:11:36 [multiproc_executor.py:751] "
W1 = "(Worker_TP1 pid=4189) ERROR 02-14 10:11:37 [multiproc_executor.py:751] "


def test_primary_failure_outranks_the_nccl_error_it_caused():
    log = (
        W0 + "WorkerProc failed to start.\n"
        + W0 + "Traceback (most recent call last):\n"
        + W0 + '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/worker/gpu_worker.py", line 273, in load_model\n'
        + W0 + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 0 has a total capacity of "
               "79.19 GiB of which 1.02 GiB is free.\n"
        + W1 + "WorkerProc hit an exception.\n"
        + W1 + "Traceback (most recent call last):\n"
        + W1 + '  File "/usr/local/lib/python3.12/dist-packages/torch/distributed/distributed_c10d.py", line 2806, in all_reduce\n'
        + W1 + "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, "
               "remote process exited or there was a network error, NCCL version 2.27.3\n"
        + "(EngineCore_DP0 pid=4012) ERROR 02-14 10:11:38 [core.py:866] EngineCore failed to start.\n"
        + "(APIServer pid=3900) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    ds, _ = diagnose(scan_text(log))
    sigs = [d.signature for d in ds]
    assert sigs[0] == "oom.cuda_out_of_memory"
    assert "distributed.nccl_error" in sigs
    assert ds[0].confidence > ds[sigs.index("distributed.nccl_error")].confidence


def test_secondary_first_in_time_still_ranks_below_the_primary():
    # the NCCL timeout is printed first (another rank), the real cause later
    log = (
        "[rank1]:[E214 10:41:02.104581117 ProcessGroupNCCL.cpp:632] [Rank 1] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=4, OpType=ALLREDUCE) ran for 600019 milliseconds before timing out.\n"
        + W0 + "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
               "initializing the engine.\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert ds[0].signature == "kv_cache.no_memory_for_blocks"
    assert ds[-1].signature == "distributed.collective_timeout"


def test_two_independent_failures_are_both_listed_earlier_first():
    # two unrelated failures of equal standing (a node's missing cuDNN, another rank's OOM): both are
    # reported, and the one that happened first leads
    log = (
        "INFO 02-14 10:11:30 [api_server.py:1896] vLLM API server version 0.11.2\n"
        + W1 + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity "
               "of 23.54 GiB of which 1.11 GiB is free.\n"
        + "INFO 02-14 10:11:35 [gpu_worker.py:298] loading\n"
        + W0 + "ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert [d.signature for d in ds[:2]] == ["oom.cuda_out_of_memory", "install.cuda_runtime_lib_missing"]
    assert all(d.confidence > 0.5 for d in ds[:2])
    # swapped in time, swapped in rank
    a, b = log.splitlines()[1], log.splitlines()[3]
    swapped = "\n".join([log.splitlines()[0], b, log.splitlines()[2], a]) + "\n"
    ds, _ = diagnose(scan_text(swapped))
    assert [d.signature for d in ds[:2]] == ["install.cuda_runtime_lib_missing", "oom.cuda_out_of_memory"]


def test_wrapper_lines_never_become_the_diagnosis():
    log = (
        "(EngineCore_DP0 pid=4012) ERROR 02-14 10:11:38 [core.py:866] EngineCore failed to start.\n"
        "(EngineCore_DP0 pid=4012) ERROR 02-14 10:11:38 [core.py:866] Exception: WorkerProc initialization failed due "
        "to an exception in a background process. See stack trace for root cause.\n"
        "(APIServer pid=3900) RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    )
    ds, _ = diagnose(scan_text(log))
    assert all(d.confidence < 0.5 for d in ds)
    assert not any("WorkerProc initialization failed" in d.title for d in ds)


def test_a_harmless_warning_alone_is_no_failure():
    log = (
        "INFO 02-14 10:11:30 [api_server.py:1896] vLLM API server version 0.11.2\n"
        "(Worker_TP0 pid=4188) ERROR 02-14 10:11:31 [fa_utils.py:64] Cannot use FA version 2 is not supported due to "
        "FA2 is only supported on devices with compute capability >= 8\n"
        "WARNING 02-14 10:11:32 [system_utils.py:297] Found ulimit of 1024 and failed to automatically increase with "
        "error current limit exceeds maximum limit.\n"
        "(APIServer pid=3900) INFO:     Application startup complete.\n"
    )
    ds, notes = diagnose(scan_text(log))
    assert not any(d.confidence > 0.5 for d in ds)
    assert {"harmless.fa_version_fallback", "harmless.ulimit"} <= {n.signature for n in notes}
    assert ds == []


def test_harmless_note_does_not_hide_the_real_failure_after_it():
    log = (
        "WARNING 02-14 10:11:31 [interface.py:347] Using 'pin_memory=False' as WSL is detected. This may slow down "
        "the performance.\n"
        + W0 + "ValueError: Free memory on device cuda:0 (5.31/23.56 GiB) on startup is less than desired GPU memory "
               "utilization (0.8, 18.85 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n"
    )
    ds, notes = diagnose(scan_text(log))
    assert ds[0].signature == "kv_cache.free_memory_below_utilization"
    assert ds[0].facts["free_gib"] == 5.31 and ds[0].facts["util"] == 0.8
    assert "harmless.wsl_pin_memory" in {n.signature for n in notes}


# ---- facts of selected rules ------------------------------------------------------------------

def _top(name):
    ds, _ = diagnose(scan_path(str(LOGS / name)))
    return ds[0]


def test_kv_cache_facts_and_suggestion():
    d = _top("kv_cache.insufficient_for_max_len.log")
    assert (d.facts["max_model_len"], d.facts["needed_gib"], d.facts["available_gib"]) == (40960, 10.0, 1.25)
    # One number for the limit: vLLM's own estimate, the same in the fix and the playbook's facts.
    assert d.facts["kv_capacity_tokens"] == d.facts["suggested_max_model_len"] == 5104
    assert "at most 5104 (vLLM's own estimate)" in d.fix.summary
    old = _top("kv_cache.max_len_exceeds_capacity.log")
    assert (old.facts["max_model_len"], old.facts["kv_capacity_tokens"]) == (32768, 16816)


def test_oom_phase_from_traceback():
    d = _top("oom.cuda_out_of_memory.log")
    assert d.facts["tried"] == "224.00 MiB" and d.facts["phase"] == "weight loading"
    assert "during weight loading" in d.title


def test_shared_memory_facts_on_a_99kb_gpu():
    d = _top("triton.out_of_shared_memory.log")
    assert d.facts["shared_required"] == 147456 and d.facts["shared_limit"] == 101376
    assert "99 KB" in d.facts["note"]
    assert d.facts["kernel_caller"].startswith("model_executor/layers/fused_moe/fused_moe.py")


def test_tp_heads_facts():
    d = _top("config.tp_heads_not_divisible.log")
    assert (d.facts["num_attention_heads"], d.facts["tensor_parallel_size"]) == (64, 3)
    assert d.title == "64 attention heads cannot be split over tensor parallel size 3"


def test_max_model_len_facts():
    d = _top("config.max_model_len_too_large.log")
    assert d.facts["max_model_len"] == 131072 and d.facts["max_position_embeddings"] == 32768.0
    assert "32768" in d.fix.summary


def test_gguf_speculators_names_gguf():
    d = _top("model_loading.gguf_speculators_override.log")
    assert d.facts["gguf"] is True and "GGUF" in d.title


def test_sparse_mla_fixture_routes_to_the_sparse_playbook():
    d = _top("attention.no_valid_backend.log")
    assert d.facts["use_sparse"] is True and d.fix.playbook == "attention-sparse-mla"
    d = _top("attention.no_valid_backend--old-form-qk-nope-192.log")
    assert d.facts["use_sparse"] is False and d.fix.playbook == "attention-backend"
    assert "qk_nope_head_dim" in " ".join(d.facts["rejected"]["FLASHINFER_MLA"])


# ---- the generic fallback's category guess ---------------------------------------------------

@pytest.mark.parametrize("frame_file,exc,category", [
    ("vllm/v1/core/kv_cache_utils.py", "ValueError: something new about blocks", "kv_cache_memory"),
    ("vllm/lora/worker_manager.py", "ValueError: adapter broken", "engine_config"),
    ("vllm/multimodal/processing.py", "KeyError: 'pixel_values'", "model_support"),
    ("vllm/compilation/backends.py", "AssertionError: graph mismatch", "triton_compile"),
    ("vllm/model_executor/layers/fused_moe/layer.py", "RuntimeError: unexpected expert layout", "kernel_library"),
    ("vllm/model_executor/model_loader/gguf_loader.py", "KeyError: 'blk.0.attn_q'", "model_loading"),
    ("vllm/entrypoints/openai/api_server.py", "huggingface_hub.errors.RepositoryNotFoundError: 404", "model_loading"),
])
def test_fallback_guesses_the_area_from_the_frames(frame_file, exc, category):
    log = ("Traceback (most recent call last):\n"
           f'  File "/usr/local/lib/python3.12/dist-packages/{frame_file}", line 10, in f\n'
           "    raise X\n"
           f"{exc}\n")
    ds, _ = diagnose(scan_text(log))
    assert ds and ds[0].signature == "generic.unrecognized_exception"
    assert ds[0].category == category and ds[0].confidence < 0.5
