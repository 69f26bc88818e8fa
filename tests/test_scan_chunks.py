"""A dense log read whole, a chunk at a time (logread.bulk): the same scan as grep's selection read line by
line, whatever the chunk size; long lines cut and said; shapes bounded and their overflow said."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

from _common import make_error_dense_log, make_log, make_restart_loop_log  # noqa: E402
from triage.logread import bulk  # noqa: E402
from triage.logread import scan as scan_mod  # noqa: E402
from triage.logread.scan import scan_path  # noqa: E402
from triage.logread.select import iter_lines  # noqa: E402
from triage.logread.source import open_source  # noqa: E402

LOGS = Path(__file__).parent / "logs"
ONE_START = (LOGS / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log").read_text()


def _fingerprint(scan):
    # scan.repeats is left out: feed counts a short line's texts, bulk its shape
    return ([(ln.no, ln.text) for ln in scan.lines], sorted(scan.spans.items()),
            [(e.type, e.message, e.line.no, [f.func for f in e.frames]) for e in scan.exceptions],
            [(e.line.no, len(e.frames)) for e in scan.cut_tracebacks], repr(scan.facts), scan.lines_total,
            scan.truncated)


def _both(path, monkeypatch, chunk):
    monkeypatch.setattr(bulk, "CHUNK", chunk)
    monkeypatch.setattr(bulk, "FIRST_CHUNK", min(chunk, bulk.FIRST_CHUNK))
    assert bulk.dense(str(path))
    return scan_path(str(path)), scan_path(str(path), use_grep=True)


@pytest.mark.parametrize("chunk", [50_000, 333_333, 4 << 20])
def test_read_whole_in_chunks_gives_grep_selections_scan(tmp_path, monkeypatch, chunk):
    for log in (make_restart_loop_log(tmp_path / "loop.log", 2_000_000),
                make_error_dense_log(tmp_path / "dense.log", 2_000_000)):
        whole, grep = _both(log, monkeypatch, chunk)
        assert max(t for t, _ in whole.spans.values()) > 100
        assert _fingerprint(whole) == _fingerprint(grep)


@pytest.mark.parametrize("kind", ["kv-cache", "flagship"])
def test_a_restart_loop_is_counted_in_blocks(tmp_path, monkeypatch, kind):
    if kind == "kv-cache":
        log = make_restart_loop_log(tmp_path / "loop.log", 8_000_000)
    else:  # its failure names the compute capability: those lines are read per message
        demo = (Path(scan_mod.__file__).parent.parent / "demo" / "glm5_sm120.log").read_text()
        log = tmp_path / "loop.log"
        log.write_text("".join(demo.replace("pid=4188", f"pid={4188 + i % 7}") for i in range(500)))
    used = []
    real = bulk.BulkReader._feed_blocks

    def spy(self, *a):
        used.append(real(self, *a))
        return used[-1]

    monkeypatch.setattr(bulk.BulkReader, "_feed_blocks", spy)
    whole, grep = _both(log, monkeypatch, 1 << 20)
    assert sum(1 for n in used if n) >= 4  # most chunks never cut into lines
    assert _fingerprint(whole) == _fingerprint(grep)
    assert max(t for t, _ in whole.spans.values()) >= 500


def _loop_then(tmp_path, tail: str, starts: int = 300) -> Path:
    log = tmp_path / "loop_tail.log"
    log.write_text(ONE_START * starts + tail)
    return log


def test_a_new_traceback_whose_first_line_is_a_repeat_keeps_its_frames(tmp_path, monkeypatch):
    # Its "Traceback" line has the shape of hundreds before it; its frames are new: the traceback is
    # assembled whole wherever a chunk ends.
    p = "(EngineCore_DP0 pid=223840) ERROR 10-25 13:08:43 [core.py:708] "
    tail = "".join(p + x + "\n" for x in [
        "Traceback (most recent call last):",
        '  File "/opt/vllm/v1/worker/gpu_worker.py", line 9, in load_model',
        "    self.model_runner.load_model()",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    ])
    log = _loop_then(tmp_path, tail)
    size = log.stat().st_size
    for cut in range(len(tail) - 5, 0, -37):
        whole, grep = _both(log, monkeypatch, size - cut)
        oom = [e for e in whole.exceptions if "OutOfMemory" in e.type]
        assert oom and [f.func for f in oom[0].frames] == ["load_model"], cut
        assert _fingerprint(whole) == _fingerprint(grep)


def test_gpu_rows_are_each_read_in_a_dense_log(tmp_path, monkeypatch):
    rows = "Collecting environment information...\n" + "".join(
        f"GPU {i}: NVIDIA RTX PRO 6000 Blackwell Server Edition\n" for i in range(8))
    log = _loop_then(tmp_path, rows + "RuntimeError: the end\n")
    whole, grep = _both(log, monkeypatch, 100_000)
    assert [g["index"] for g in whole.facts["gpus"]] == list(range(8))
    assert _fingerprint(whole) == _fingerprint(grep)


def test_a_zero_is_not_hidden_by_the_shape_of_another_number(tmp_path, monkeypatch):
    # "blocks: 0," is a PREFILTER word; the same line with another number is not
    noise = "".join(f"INFO 10-25 13:0{i % 10}:00 [executor.py:1] # GPU blocks: {i % 9 + 1}, # CPU blocks: 4096\n"
                    for i in range(100))
    log = tmp_path / "zero.log"
    log.write_text((ONE_START + noise) * 200 + "INFO 10-25 13:09:00 [executor.py:1] # GPU blocks: 0, # CPU blocks: 4096\n"
                   + (LOGS / "attention.no_valid_backend.log").read_text())
    whole, grep = _both(log, monkeypatch, 100_000)
    assert any("GPU blocks: 0," in ln.text for ln in grep.lines)
    assert any("GPU blocks: 0," in ln.text for ln in whole.lines)


def test_file_bodies_cut_long_lines_and_keep_memory_flat(tmp_path, monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 64)
    monkeypatch.setattr(bulk, "FIRST_CHUNK", 40)
    monkeypatch.setattr(bulk, "MAX_LINE", 20)
    rnd = random.Random(5)
    log = tmp_path / "x.log"
    for _ in range(300):
        data = b"".join(rnd.choice([b"\n", b"x" * rnd.randrange(1, 200), b"ab\ncd", b"0123456789" * 3])
                        for _ in range(rnd.randrange(1, 40)))
        log.write_bytes(data)
        rd = bulk.BulkReader(scan_mod.Scanner())
        got: list[bytes] = []
        total = 0
        for body, tail, size in bulk.file_bodies(str(log)):
            total += size
            assert body is None or len(body) <= 64  # never more than a chunk
            if body is not None:
                assert rd.feed(len(got), body, tail) == body.count(b"\n") + (not tail)
                got += [k[:20] for k in body.split(b"\n")][:len(body.split(b"\n")) - tail]
        assert total == len(data)
        assert got == list(iter_lines([data], 20)), data


def test_a_long_line_in_a_dense_log_is_cut_and_said(tmp_path):
    one = ONE_START.encode()
    log = tmp_path / "long.log"
    with open(log, "wb") as fh:
        fh.write(one * 2000)
        fh.write(b"ERROR " + b"x" * (5 << 20) + b"\n")  # longer than a chunk
        fh.write(one * 2000)
        fh.write(b"ERROR " + b"y" * (200 << 10) + b"\n")  # longer than MAX_LINE, inside a chunk
        fh.write((LOGS / "attention.no_valid_backend.log").read_bytes())
    assert bulk.dense(str(log))
    scan = scan_path(str(log))
    assert scan.truncated and any("2 line(s) longer than" in w for w in scan.warnings)
    assert any("No valid attention backend" in ln.text for ln in scan.lines)
    assert scan.lines_total == log.read_bytes().count(b"\n")


def test_too_many_shapes_are_said(tmp_path, monkeypatch):
    monkeypatch.setattr(scan_mod, "MAX_SHAPES", 500)
    log = _loop_then(tmp_path, "".join(
        f"WARNING 10-25 13:08:43 [x.py:1] unusual message {''.join(chr(ord('g') + int(d)) for d in str(i))}\n"
        for i in range(3000)))
    scan, sc, _ = bulk.scan_whole(open_source(str(log)))
    assert any("distinct message shapes" in w for w in scan.warnings)
    assert len({id(v) for v in sc._shapes.values()}) <= 500


def test_dense_logs_are_read_whole_sparse_ones_through_grep(tmp_path):
    assert bulk.dense(str(make_restart_loop_log(tmp_path / "loop.log", 3_000_000)))
    assert bulk.dense(str(make_error_dense_log(tmp_path / "dense.log", 3_000_000)))
    assert not bulk.dense(str(make_log(tmp_path / "sparse.log", 3_000_000)))


@pytest.mark.parametrize("name", ["attention.no_valid_backend.log", "quant.min_capability.log",
                                  "dtype.bf16_before_ampere.log", "distributed.spawn_main_guard.log",
                                  "kv_cache.negative_budget--v0-gpu-blocks-zero.log", "oom.cuda_out_of_memory.log"])
def test_a_fixture_in_a_loop_is_diagnosed_alike_either_way(tmp_path, name):
    from triage.diagnose import diagnose
    from triage.pipeline import environment_from_log, mark_repeats

    def report(scan):
        env = environment_from_log(scan)
        found, _ = diagnose(scan, env)
        mark_repeats(found, scan)
        return [(d.signature, [e.line for e in d.evidence], d.facts.get("repeated")) for d in found], env

    data = (LOGS / name).read_bytes().rstrip(b"\n") + b"\n"
    log = tmp_path / "loop.log"
    log.write_bytes(data * (1_200_000 // len(data) + 2))
    assert bulk.dense(str(log))
    whole, grep = report(scan_path(str(log))), report(scan_path(str(log), use_grep=True))
    assert whole == grep
    assert whole[0][0][2]["count"] > 1  # the failure counted, not read again


def _piped(path, monkeypatch, chunk):
    import os
    import threading

    monkeypatch.setattr(bulk, "CHUNK", chunk)
    r, w = os.pipe()

    def write():
        with os.fdopen(w, "wb") as fh:
            fh.write(path.read_bytes())

    t = threading.Thread(target=write)
    t.start()
    try:
        return scan_mod.scan_source(open_source("-", fd=r))
    finally:
        t.join()
        os.close(r)


@pytest.mark.parametrize("chunk", [300_000, 4 << 20])
def test_a_dense_stream_is_read_whole_too(tmp_path, monkeypatch, chunk):
    import gzip

    log = make_restart_loop_log(tmp_path / "loop.log", 3_000_000)
    log.write_bytes(log.read_bytes().replace(b"Available KV cache memory", b"Collecting environment information\n"
                                             b"GPU 0: NVIDIA H100\nAvailable KV cache memory", 1))
    grep = scan_path(str(log), use_grep=True)
    used = []
    real = bulk.scan_whole
    monkeypatch.setattr(bulk, "scan_whole", lambda *a: used.append(1) or real(*a))
    assert _fingerprint(_piped(log, monkeypatch, chunk)) == _fingerprint(grep)
    gz = tmp_path / "loop.log.gz"
    gz.write_bytes(gzip.compress(log.read_bytes(), 1))
    assert _fingerprint(scan_path(str(gz))) == _fingerprint(grep)
    assert len(used) == 2
    assert grep.facts["gpus"][0]["name"] == "NVIDIA H100"


def test_stream_bodies_cut_long_lines_and_keep_memory_flat(monkeypatch):
    monkeypatch.setattr(bulk, "CHUNK", 64)
    monkeypatch.setattr(bulk, "MAX_LINE", 20)
    rnd = random.Random(7)
    for _ in range(300):
        data = b"".join(rnd.choice([b"\n", b"x" * rnd.randrange(1, 200), b"ab\ncd", b"0123456789" * 3])
                        for _ in range(rnd.randrange(1, 40)))
        cuts = sorted({0, len(data), *(rnd.randrange(len(data) + 1) for _ in range(len(data) // 30))})
        pieces = [data[a:b] for a, b in zip(cuts, cuts[1:])]
        rd = bulk.BulkReader(scan_mod.Scanner())
        got: list[bytes] = []
        total = 0
        for body, tail, size in bulk.stream_bodies(pieces):
            total += size
            assert body is None or len(body) <= 2 * (64 + max(map(len, pieces)))  # never the whole input
            if body is not None:
                rd.feed(len(got), body, tail)
                got += [k[:20] for k in body.split(b"\n")][:len(body.split(b"\n")) - tail]
        assert total == len(data)
        assert got == list(iter_lines([data], 20)), data
