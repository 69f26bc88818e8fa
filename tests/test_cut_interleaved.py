"""Two workers' tracebacks interleave and the paste ends inside both: each was cut by the end, though
only the other worker's lines follow the first one's last frame."""

from __future__ import annotations

from triage.logread import scan_text

HDR = "ERROR 11-29 20:52:18 [multiproc_executor.py:597] "


def _rows(rows: list[tuple[int, str]]) -> bytes:
    return "".join(f"(Worker_TP{w} pid={10 + w}) {HDR}{t}\n" for w, t in rows).encode()


TP0_FRAME = '  File "/x/vllm/model_executor/layers/quantization/compressed_tensors/compressed_tensors.py", line 117, in get_scheme'


def test_each_workers_cut_traceback_is_cut():
    rows = [(0, "Traceback (most recent call last):"), (1, "Traceback (most recent call last):"),
            (0, TP0_FRAME), (0, "    quant_scheme = self.get_scheme(layer=layer, layer_name=prefix)")]
    rows += [(1, f'  File "/x/vllm/model_executor/models/qwen3.py", line {90 + i}, in __init__') for i in range(6)]
    s = scan_text(_rows(rows))
    cut = {t.line.proc.split()[0]: t for t in s.cut_tracebacks}
    assert set(cut) == {"Worker_TP0", "Worker_TP1"}
    assert "compressed_tensors" in cut["Worker_TP0"].frames[-1].file


def test_a_traceback_whose_process_went_on_is_not_cut():
    # the same worker printed more after its frame (its exception line was just not selected): not cut
    rows = [(0, "Traceback (most recent call last):"), (0, TP0_FRAME)]
    rows += [(0, f"INFO line {i} about something else entirely") for i in range(3)]
    rows += [(1, f"frame noise {i}") for i in range(3)]
    rows += [(0, "done")]
    s = scan_text(_rows(rows))
    assert not [t for t in s.cut_tracebacks if t.line.proc.startswith("Worker_TP0")]
