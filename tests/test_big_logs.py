"""Logs full of errors: repeats counted instead of read again, long lines cut, a failed read said."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _common import make_error_dense_log, make_log, make_restart_loop_log  # noqa: E402
from conftest import run_triage  # noqa: E402
from triage.logread import scan_text  # noqa: E402
from triage.logread.scan import MAX_SHAPES, Scanner  # noqa: E402

LOGS = Path(__file__).parent / "logs"


def _report(path, **kw):
    r = run_triage("--log", str(path), "--json", "--offline", "--no-probe", **kw)
    assert r.returncode in (0, 3), r.stderr
    return json.loads(r.stdout)


def test_a_restart_loop_is_one_diagnosis_with_its_count(tmp_path):
    one_start = (LOGS / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log").read_bytes()
    log = make_restart_loop_log(tmp_path / "loop.log", 200 * len(one_start))
    starts = log.read_bytes().count(b"vLLM API server version")
    rep = _report(log)
    top = rep["diagnoses"][0]
    assert top["signature"] == "kv_cache.no_memory_for_blocks"
    rep_facts = top["facts"]["repeated"]
    assert rep_facts["count"] == starts
    assert rep_facts["first_line"] == top["evidence"][0]["line"]
    assert rep_facts["last_line"] > rep["input"]["lines"] - 40  # in the last start
    assert len({d["signature"] for d in rep["diagnoses"]}) == len(rep["diagnoses"])  # none twice


def test_the_text_report_says_how_often(tmp_path):
    one_start = (LOGS / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log").read_bytes()
    log = make_restart_loop_log(tmp_path / "loop.log", 20 * len(one_start))
    starts = log.read_bytes().count(b"vLLM API server version")
    r = run_triage("--log", str(log), "--report", "--offline", "--no-probe")
    assert f"Repeated {starts} times (first at line 13, last at line" in r.stdout.decode()


def test_repeated_lines_are_read_once_and_the_failure_at_the_end_is_found(tmp_path):
    log = make_error_dense_log(tmp_path / "dense.log", 3_000_000)
    rep = _report(log)
    assert rep["diagnoses"][0]["signature"] == "attention.no_valid_backend"
    sc = Scanner()
    no = 0
    for no, raw in enumerate(log.read_bytes().splitlines(), 1):
        sc.feed(no, raw)
    scan = sc.finish(log.stat().st_size, no)
    # two shapes of repeated errors (with their ids and numbers) stand for thousands of lines
    assert len(scan.lines) < 400
    assert max(t for t, _ in scan.spans.values()) > 1000


def test_shapes_never_hide_a_second_traceback_of_the_same_process():
    p = "(EngineCore_DP0 pid=4242) ERROR 01-01 10:00:0{} [core.py:708] "
    log = "\n".join([
        p.format(1) + "Traceback (most recent call last):",
        p.format(1) + '  File "/e/lib/python3.12/site-packages/vllm/v1/engine/core.py", line 1, in run_engine_core',
        p.format(1) + "RuntimeError: first",
        p.format(2) + "",
        p.format(2) + "The above exception was the direct cause of the following exception:",
        p.format(3) + "Traceback (most recent call last):",
        p.format(3) + '  File "/e/lib/python3.12/site-packages/vllm/v1/worker/gpu_worker.py", line 9, in load_model',
        p.format(3) + "ValueError: second",
    ]) + "\n"
    scan = scan_text(log)
    second = next(e for e in scan.exceptions if e.type == "ValueError")
    assert [f.func for f in second.frames] == ["load_model"]


def test_one_row_per_gpu_is_never_taken_for_a_repeat():
    log = "".join(f"GPU {i}: NVIDIA RTX PRO 6000 Blackwell Server Edition\n" for i in range(8))
    log = "Collecting environment information...\n" + log
    scan = scan_text(log)
    assert [g["index"] for g in scan.facts["gpus"]] == list(range(8))


def test_shape_memory_is_bounded():
    sc = Scanner()
    for i in range(MAX_SHAPES + 5000):
        # every line a new shape: letters, not numbers, differ
        word = "".join(chr(ord("g") + int(d)) for d in str(i))
        sc.feed(i + 1, f"WARNING 01-01 10:00:00 [x.py:1] unusual message {word} here".encode())
    assert len({id(v) for v in sc._shapes.values()}) <= MAX_SHAPES


def test_a_line_longer_than_any_buffer_is_cut_and_said(tmp_path):
    log = tmp_path / "long.log"
    with open(log, "wb") as fh:
        fh.write(b"ERROR " + b"x" * (3 << 20))  # 3 MB without a newline, a line grep selects
        fh.write(b"\n")
        fh.write((LOGS / "attention.no_valid_backend.log").read_bytes())
    for rep in (_report(log), json.loads(run_triage("--log", "-", "--json", "--offline", "--no-probe",
                                                    input=log.read_bytes()).stdout)):
        assert rep["input"]["truncated"] is True
        assert rep["diagnoses"][0]["signature"] == "attention.no_valid_backend"
        assert any("were cut" in w for w in rep["warnings"])


def test_a_failed_grep_is_said_not_taken_for_a_healthy_log(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    grep = fake / "grep"
    grep.write_text("#!/bin/sh\nexit 2\n")
    grep.chmod(grep.stat().st_mode | stat.S_IXUSR)
    big = make_log(tmp_path / "big.log", 2_000_000)  # past the small-file path; sparse: grep selects its lines
    rep = _report(big, env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert rep["input"].get("truncated") is True
    assert any("grep stopped with status 2" in w for w in rep["warnings"])


def test_a_grep_killed_midway_is_said(tmp_path):
    """grep killed by a signal (the OOM killer, a user) before the end: a warning and input.truncated,
    never a silent "no failure"."""
    fake = tmp_path / "bin"
    fake.mkdir()
    grep = fake / "grep"
    grep.write_text("#!/bin/sh\nkill -9 $$\n")
    grep.chmod(grep.stat().st_mode | stat.S_IXUSR)
    big = make_log(tmp_path / "big.log", 2_000_000)
    rep = _report(big, env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}"})
    assert rep["input"].get("truncated") is True
    assert any("grep stopped with status -9" in w for w in rep["warnings"])


def test_a_piped_restart_loop_is_one_diagnosis_with_its_count(tmp_path):
    one_start = (LOGS / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log").read_bytes()
    log = make_restart_loop_log(tmp_path / "loop.log", 300 * len(one_start))
    data = log.read_bytes()
    starts = data.count(b"vLLM API server version")
    r = run_triage("--log", "-", "--json", "--offline", "--no-probe", input=data)
    rep = json.loads(r.stdout)
    top = rep["diagnoses"][0]
    assert top["signature"] == "kv_cache.no_memory_for_blocks"
    assert top["facts"]["repeated"]["count"] == starts
    assert len({d["signature"] for d in rep["diagnoses"]}) == len(rep["diagnoses"])
