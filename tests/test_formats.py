"""Metamorphic: the same failure, in every shape a log reaches triage in, gets the same diagnosis.

Every fixture log (tests/logs, tests/logs/unseen) is rewritten by each transformation of
tests/format_transforms.py (docker compose, kubectl, journald, docker -t, CRLF, a coloured terminal,
blank lines, another process in between, Ray, Python logging formats, GitHub pastes, a terminal
hard-wrapped at 80 and 120 columns, gzip). The top diagnosis must keep its signature and category (a
log with nothing above 0.5 stays so), and where the transformation keeps the lines where they were,
its first evidence line too. In-process (scan_text) for all fixtures; the file and gzip paths (grep)
on a fixed sample; the real command line on standard input once per transformation.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import pytest

import format_transforms as ft
from conftest import run_triage
from triage.diagnose import diagnose
from triage.logread import scan_path, scan_text

LOGS = Path(__file__).parent / "logs"
FIXTURES = sorted(LOGS.glob("*.log")) + sorted((LOGS / "unseen").glob("*.log"))
SAMPLE = FIXTURES[:: max(1, len(FIXTURES) // 40)]  # ~40, spread over every category
ALL = {**ft.CHEAP, **ft.WRAPS}
FLAGSHIP = LOGS / "attention.no_valid_backend.log"

# Where the transformation keeps each line (1-based) of the original: for the evidence check.
LINE_MAP = {
    "blank_lines": lambda n: 2 * n - 1,
    "interleaved": lambda n: 2 * n - 1,
    "fenced": lambda n: n + 4,
}
MOVES_LINES = {"wrap80", "wrap120"}  # rows, not lines: a long line becomes several

# Documented limitations: (transformation, fixture) -> why it cannot keep its diagnosis.
# Each entry must still fail (a fixed limitation has to be taken off this list).
LIMITS: dict[tuple[str, str], str] = {
}


def _text(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace")


def verdict(diagnoses) -> tuple[str, str] | None:
    """(signature, category) of the failure reported first; None when nothing is above 0.5."""
    if not diagnoses or diagnoses[0].confidence <= 0.5:
        return None
    return diagnoses[0].signature, diagnoses[0].category


@lru_cache(maxsize=None)
def baseline(path: Path):
    diagnoses, _ = diagnose(scan_text(path.read_bytes()))
    first = diagnoses[0].evidence[0].line if diagnoses and diagnoses[0].evidence else None
    return verdict(diagnoses), first


def check(name: str, path: Path, diagnoses) -> str | None:
    """None when the transformed log keeps the original's verdict, else what differs."""
    want, first = baseline(path)
    got = verdict(diagnoses)
    if got != want:
        top = [(d.signature, round(d.confidence, 2)) for d in diagnoses[:3]]
        return f"{path.name}: {want} became {got} {top}"
    if want and name not in MOVES_LINES:
        at = LINE_MAP.get(name, lambda n: n)(first)
        lines = [e.line for e in diagnoses[0].evidence]
        if name == "interleaved" and at in lines:
            pass  # the other process' lines are selected: each line after one is selected too, so more evidence
        elif not lines or lines[0] != at:
            return f"{path.name}: first evidence line {lines[:1]} instead of {at}"
    return None


def test_fixture_inventory():
    assert len(FIXTURES) > 150 and 30 <= len(SAMPLE) <= 50
    assert any(baseline(p)[0] is None for p in FIXTURES), "harmless logs are part of the check"


@pytest.mark.parametrize("name", sorted(ALL))
def test_transformed_logs_keep_their_diagnosis(name):
    fn = ALL[name]
    failures, limited = [], []
    for path in FIXTURES:
        diagnoses, _ = diagnose(scan_text(fn(_text(path))))
        problem = check(name, path, diagnoses)
        if (name, path.name) in LIMITS:
            limited.append((path.name, problem))
        elif problem:
            failures.append(problem)
    assert not failures, f"{name}: {len(failures)} of {len(FIXTURES)} changed\n" + "\n".join(failures)
    fixed = [n for n, problem in limited if problem is None]
    assert not fixed, f"{name}: documented limitations that now pass (remove them from LIMITS): {fixed}"


@pytest.mark.parametrize("name", ["blank_lines", "ansi", "crlf", "wrap80", "wrap120", "kubectl", "fenced"])
def test_file_path_agrees(name, tmp_path):
    """A file goes through grep (context lines, the wrap sniffing on the file's head), not Python's
    selection: same verdict, same evidence lines as in memory."""
    fn = ALL[name]
    failures = []
    for i, path in enumerate(SAMPLE):
        if (name, path.name) in LIMITS:
            continue
        data = fn(_text(path))
        f = tmp_path / f"{i}.log"
        f.write_text(data, newline="")
        d_file, _ = diagnose(scan_path(str(f)))
        d_mem, _ = diagnose(scan_text(data))
        problem = check(name, path, d_file)
        if problem:
            failures.append(problem)
        elif d_file and [e.line for e in d_file[0].evidence] != [e.line for e in d_mem[0].evidence]:
            failures.append(f"{path.name}: file and memory disagree on the evidence lines")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("inner", ["none", "kubectl", "wrap80"])
def test_gzip_keeps_the_diagnosis(inner, tmp_path):
    failures = []
    for i, path in enumerate(SAMPLE):
        text = _text(path) if inner == "none" else ALL[inner](_text(path))
        f = tmp_path / f"{i}.log.gz"
        f.write_bytes(ft.gzipped(text))
        problem = check("wrap80" if inner == "wrap80" else "gzip", path, diagnose(scan_path(str(f)))[0])
        if problem:
            failures.append(problem)
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", sorted(ALL) + ["gzip"])
def test_cli_reads_the_transformed_log_on_stdin(name):
    text = _text(FLAGSHIP)
    data = ft.gzipped(text) if name == "gzip" else ALL[name](text).encode()
    r = run_triage("--log", "-", "--json", "--offline", "--no-probe", input=data)
    assert r.returncode == 0, r.stderr.decode()
    report = json.loads(r.stdout)
    top = report["diagnoses"][0]
    assert (top["signature"], top["category"]) == ("attention.no_valid_backend", "attention_backend")
    # the backends' reasons were read whole (a wrapped or coloured line re-joined)
    assert set(top["facts"]["rejected"]) == {"FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA",
                                             "FLASHMLA_SPARSE"}
    assert top["facts"]["rejected"]["FLASHMLA_SPARSE"] == ["compute capability not supported"]
    assert report["input"]["lines"] == len(data.decode("utf-8", "replace").splitlines()) or name == "gzip"


# ---- the prefixes one by one -------------------------------------------------------------------

MSG = "ValueError: No valid attention backend found for cuda"


@pytest.mark.parametrize("raw, proc, level", [
    (f"Feb 14 10:12:44 gpu-node-03 vllm[4191]: (Worker_TP0 pid=8870) ERROR 02-14 21:57:23 [x.py:1] {MSG}", "Worker_TP0 pid=8870", "ERROR"),
    (f"Feb  4 10:12:44.123456 dgx01 start-vllm.sh[977]: ERROR 02-14 21:57:23 [x.py:1] {MSG}", "", "ERROR"),
    (f"2026-02-14T10:12:44.123456+0000 gpu-node-03 python3[4191]: {MSG}", "", ""),
    (f"[pod/vllm-7c9d8b6f5-x2x4z/vllm] 2026-02-14T10:12:44.123456789Z {MSG}", "", ""),
    (f"2026-02-14 10:12:44,123 - vllm.multiproc_executor - ERROR - {MSG}", "", "ERROR"),
    (f"(APIServer pid=1) [2026-02-14 10:12:44,123] [ERROR] [core.py:866] {MSG}", "APIServer pid=1", "ERROR"),
    (f"2026-02-14 10:12:44,123 WARNING vllm.engine: {MSG}", "", "WARNING"),
    (f"2026-02-14 10:12:44.123 | ERROR    | app.main:run:12 - {MSG}", "", "ERROR"),
    (f"(RayWorkerWrapper pid=2202490, ip=10.0.0.7) ERROR 02-14 21:57:23 [x.py:1] {MSG} [repeated 7x across cluster]",
     "RayWorkerWrapper pid=2202490", "ERROR"),
    (f"(pid=2202490) {MSG}", "pid=2202490", ""),
    (f"    (EngineCore_DP0 pid=5) ERROR 02-14 21:57:23 [x.py:1] {MSG}", "EngineCore_DP0 pid=5", "ERROR"),
    (f"  2026-02-14T10:12:44Z {MSG}", "", ""),
    (f"vllm-1  | 2026-02-14T10:12:44.1Z {MSG}", "", ""),
    (f"3597\t(APIServer pid=1) ERROR 02-14 21:57:23 [x.py:1] {MSG}", "APIServer pid=1", "ERROR"),  # a CI viewer's copy
    (f"  3597\t{MSG}", "", ""),  # cat -n
])
def test_prefixes_are_peeled(raw, proc, level):
    from triage.logread.normalize import parse

    ln = parse(1, raw)
    assert (ln.text, ln.proc, ln.level) == (MSG, proc, level)


@pytest.mark.parametrize("raw, text", [
    ("vllm-1  |   File \"/x/vllm/core.py\", line 3, in f", "  File \"/x/vllm/core.py\", line 3, in f"),  # compose keeps indentation
    ("2026-02-14T10:12:44Z INFO 02-14 10:12:44 [api_server.py:1] vLLM API server version 0.11.2",
     "vLLM API server version 0.11.2"),  # vLLM's header behind a timestamp is not taken for Python logging's
    ("2026-02-14T10:12:44Z Process EngineCore_DP0:", "Process EngineCore_DP0:"),  # not a host and a command
    ("    flags |= x", "    flags |= x"),  # source code is not a compose prefix
    ("12345678\tcolumns", "12345678\tcolumns"),  # a long number before a tab is data, not a line number
])
def test_what_is_not_a_prefix_stays(raw, text):
    from triage.logread.normalize import parse

    assert parse(1, raw).text == text


def test_indented_paste_keeps_the_traceback_shape():
    """A bare traceback inside an indented paste: the paste's indentation is learnt from the prefixed
    lines, and the exception line (as indented as its "Traceback" line) still ends the traceback."""
    log = "\n".join("    " + ln for ln in [
        "INFO 02-14 10:12:44 [api_server.py:1] vLLM API server version 0.11.2",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3.12/site-packages/vllm/engine/arg_utils.py", line 10, in create',
        "    raise ValueError(msg)",
        "ValueError: max_model_len is too large",
    ]) + "\n"
    scan = scan_text(log)
    [exc] = scan.exceptions
    assert (exc.type, exc.message, exc.in_traceback, len(exc.frames)) == ("ValueError", "max_model_len is too large", True, 1)
    assert scan.exceptions[0].frames[0].func == "create"


def test_unwrap_leaves_unwrapped_logs_alone():
    """No fixture was hard-wrapped but one, a paste from a terminal 180 columns wide."""
    from triage.logread.unwrap import SAMPLE as HEAD, wrap_width

    wrapped = {p.name: w for p in FIXTURES if (w := wrap_width(p.read_bytes()[:HEAD]))}
    assert wrapped == {"cuda_driver--driver-too-old-12080-wrapped.log": 180}
    for p in SAMPLE:
        assert wrap_width(ft.wrap80(_text(p)).encode()) in (80, None)


def test_one_cut_row_after_an_exception_is_joined():
    """A terminal that cut one line only gives no width away; the scanner joins an exception line
    with the prefix-less row right after it, and keeps that row as a line of its own too."""
    msg = ("huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name' or "
           "'namespace/repo_name': '/data/models/llama'. Use `repo_type` argument if needed.")
    scan = scan_text(msg[:100] + "\n" + msg[100:] + "\n")
    assert scan.exceptions[0].message == msg.split(": ", 1)[1]
    assert scan.lines[0].text == msg and scan.lines[1].text == msg[100:]
    # a line that ends a sentence was not cut there
    scan = scan_text("RuntimeError: " + "x" * 80 + ".\nProcess SpawnProcess-1:\n")
    assert scan.exceptions[0].message == "x" * 80 + "."
