"""A line too long to hold, in a file or a pipe: the diagnosis after it is still found. (Peak memory on
/dev/zero and a 1 GB line is measured by bench/hostile_memory.py, not here.)"""

from __future__ import annotations

import json

from tests.conftest import ROOT, run_triage
from triage.logread.select import GREP_MEMORY, LineClipper

DEMO = (ROOT / "triage" / "demo" / "glm5_sm120.log").read_bytes()


def _with_giant_line(mb: int) -> bytes:
    cut = DEMO.index(b"(Worker_TP0 pid=4188) ERROR")
    return DEMO[:cut] + b"A" * (mb << 20) + b"\n" + DEMO[cut:]


def test_giant_line_in_a_file_does_not_hide_the_crash(tmp_path):
    log = tmp_path / "giant.log"
    log.write_bytes(_with_giant_line((GREP_MEMORY >> 20) + 16))
    p = run_triage("--log", str(log), "--json", "--offline", "--no-probe")
    assert p.returncode == 0, p.stderr
    rep = json.loads(p.stdout)
    assert rep["diagnoses"][0]["category"] == "attention_backend"
    assert rep["input"]["lines"] == DEMO.count(b"\n") + 1  # counted past the line grep could not hold


def test_giant_line_in_a_pipe_does_not_hide_the_crash():
    p = run_triage("--log", "-", "--json", "--offline", "--no-probe", input=_with_giant_line(80))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["diagnoses"][0]["category"] == "attention_backend"


def test_line_clipper():
    c = LineClipper(10)
    assert [c(b"abc"), c(b"defghijklmnop"), c(b"qrs\nshort\ntail"), c(b"x\n")] == \
        [b"abc", b"defghij", b"\nshort\ntail", b"x\n"]
