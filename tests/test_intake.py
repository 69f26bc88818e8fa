"""Log intake: prefixes of every kind, interleaved tracebacks, long lines, gzip, both selection paths."""

import gzip

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.logread import scan_path, scan_text
from triage.logread.normalize import parse
from triage.logread.select import MAX_LINE

OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 224.00 MiB."


@pytest.mark.parametrize("raw,proc,level,text", [
    ("\x1b[1;36m(Worker_TP3 pid=4191)\x1b[0;0m ERROR 02-14 10:12:44 [multiproc_executor.py:751] boom",
     "Worker_TP3 pid=4191", "ERROR", "boom"),
    ("(VllmWorker rank=0 pid=1110) INFO 04-24 16:06:40 worker_base.py:157] x", "VllmWorker rank=0 pid=1110", "INFO", "x"),
    ("(RayWorkerWrapper pid=2202490, ip=10.0.0.7) ERROR 04-24 16:06:40 worker_base.py:157] y",
     "RayWorkerWrapper pid=2202490", "ERROR", "y"),
    ("vllm-1  | (APIServer pid=1) WARNING 02-14 10:12:44 [api_server.py:1] z\r", "APIServer pid=1", "WARNING", "z"),
    ("2026-02-14T10:12:44.123456789Z [rank0]: " + OOM, "", "", OOM),
    ("Feb 14 10:12:44 gpu-a vllm[1234]: ERROR 02-14 10:12:44 [core.py:1] w", "", "ERROR", "w"),
    ("INFO 04-02 23:55:08 api_server.py:148] old form", "", "INFO", "old form"),
    ("(EngineCore_DP0 pid=9) ERROR 12-07 17:00:35 [core.py:867]   File \"/x/vllm/a.py\", line 3, in f",
     "EngineCore_DP0 pid=9", "ERROR", "  File \"/x/vllm/a.py\", line 3, in f"),
])
def test_prefixes_peeled(raw, proc, level, text):
    ln = parse(1, raw)
    assert (ln.proc, ln.level, ln.text) == (proc, level, text)
    assert "\x1b" not in ln.shown and "\r" not in ln.shown


def test_interleaved_tracebacks_reassembled_per_process():
    a, b = "(Worker_TP0 pid=1) ", "(Worker_TP1 pid=2) "
    log = "\n".join([
        a + "Traceback (most recent call last):",
        b + "Traceback (most recent call last):",
        a + '  File "/env/lib/python3.12/site-packages/vllm/worker.py", line 10, in load_model',
        b + '  File "/env/lib/python3.12/site-packages/vllm/other.py", line 20, in init_device',
        a + "    self.model = load()",
        b + "    torch.cuda.set_device(x)",
        b + "RuntimeError: CUDA error: invalid device ordinal",
        a + "ValueError: bad config",
    ]) + "\n"
    s = scan_text(log)
    by_type = {e.type: e for e in s.exceptions}
    assert [f.func for f in by_type["ValueError"].frames] == ["load_model"]
    assert [f.func for f in by_type["RuntimeError"].frames] == ["init_device"]
    assert by_type["ValueError"].line.no == 8
    assert s.facts["python_prefix"] == "/env" and s.facts["python_version"] == "3.12"


def test_chained_exception_links_cause():
    log = "\n".join([
        "Traceback (most recent call last):",
        '  File "/e/lib/python3.11/site-packages/vllm/a.py", line 1, in f',
        "KeyError: 'x'",
        "",
        "The above exception was the direct cause of the following exception:",
        "",
        "Traceback (most recent call last):",
        '  File "/e/lib/python3.11/site-packages/vllm/b.py", line 2, in g',
        "RuntimeError: wrapped",
    ]) + "\n"
    s = scan_text(log)
    outer = [e for e in s.exceptions if e.type == "RuntimeError"][0]
    assert outer.caused_by is not None and outer.caused_by.type == "KeyError"


def _write(tmp_path, name, data: bytes):
    p = tmp_path / name
    p.write_bytes(data)
    return p


@pytest.mark.parametrize("use_grep", [True, False])
def test_file_paths_agree(tmp_path, use_grep):
    body = b"INFO noise\n" * 1000 + (OOM + "\n").encode() + b"INFO tail\n" * 10 + b"no newline at end ERROR"
    p = _write(tmp_path, "v.log", body)
    s = scan_path(str(p), use_grep=use_grep)
    assert s.lines_total == 1012 and s.bytes == len(body)
    nos = [ln.no for ln in s.lines]
    assert 1001 in nos and 1012 in nos
    assert s.exceptions[0].line.no == 1001


def test_gzip_and_crlf_and_nul(tmp_path):
    body = ("INFO a\r\n" * 5 + OOM + "\r\n\x00\x00\n").encode()
    p = _write(tmp_path, "v.log.gz", gzip.compress(body))
    s = scan_path(str(p))
    assert s.exceptions[0].type == "torch.OutOfMemoryError"
    assert s.exceptions[0].line.no == 6
    assert s.lines_total == 7


@pytest.mark.parametrize("use_grep", [True, False])
def test_very_long_line_is_cut_and_numbering_kept(tmp_path, use_grep):
    body = b"ERROR " + b"x" * (3 * MAX_LINE) + b"\n" + OOM.encode() + b"\n"
    p = _write(tmp_path, "long.log", body)
    s = scan_path(str(p), use_grep=use_grep)
    assert max(len(ln.shown) for ln in s.lines) <= MAX_LINE
    assert s.exceptions[-1].line.no == 2
    assert s.lines_total == 2


def test_invalid_utf8_is_replaced():
    s = scan_text(b"RuntimeError: bad \xff\xfe bytes\n")
    assert s.exceptions[0].message.startswith("bad ")


def test_collect_env_block_is_read(tmp_path):
    env = "\n".join([
        "Collecting environment information...",
        "==============================",
        "        System Info",
        "==============================",
        "OS                           : Ubuntu 24.04.1 LTS (x86_64)",
        "==============================",
        "       PyTorch Info",
        "==============================",
        "PyTorch version              : 2.9.0+cu129",
        "CUDA used to build PyTorch   : 12.9",
        "GPU models and configuration : ",
        "GPU 0: NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "GPU 1: NVIDIA RTX PRO 6000 Blackwell Server Edition",
        "Nvidia driver version        : 580.82.07",
        "[pip3] flashinfer-python==0.5.2",
        "[pip3] torch==2.9.0+cu129",
        "[pip3] triton==3.5.0",
        "vLLM Version                 : 0.11.1rc6.dev16+g933cdea44.cu129",
    ]) + "\n"
    p = _write(tmp_path, "env.log", ("INFO x\n" * 50 + env).encode())
    for s in (scan_path(str(p)), scan_text(("INFO x\n" * 50 + env))):
        f = s.facts
        assert f["torch_version"] == "2.9.0+cu129" and f["cuda_version"] == "12.9"
        assert f["driver_version"] == "580.82.07"
        assert f["packages"]["flashinfer-python"] == "0.5.2" and f["packages"]["triton"] == "3.5.0"
        assert f["vllm_version"] == "0.11.1rc6.dev16+g933cdea44.cu129"
        assert [g["name"] for g in f["gpus"]] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 2
        assert f["os"]["name"].startswith("Ubuntu 24.04")


def test_old_collect_env_format():
    env = "\n".join([
        "Collecting environment information...",
        "PyTorch version: 2.5.1+cu124",
        "CUDA used to build PyTorch: 12.4",
        "GPU models and configuration: GPU 0: NVIDIA A100-SXM4-80GB",
        "Nvidia driver version: 550.54.15",
        "Versions of relevant libraries:",
        "[pip3] torch==2.5.1",
        "vLLM Version: 0.6.4.post1",
    ]) + "\n"
    f = scan_text(env).facts
    assert f["torch_version"] == "2.5.1+cu124" and f["driver_version"] == "550.54.15"
    assert f["vllm_version"] == "0.6.4.post1"


def test_launch_facts_from_log():
    log = ("(APIServer pid=1) INFO 02-14 10:11:02 [utils.py:189] non-default args: {'model_tag': 'zai-org/GLM-5', "
           "'tensor_parallel_size': 8, 'max_model_len': 65536}\n"
           "(APIServer pid=1) INFO 02-14 10:11:02 [api_server.py:1] vLLM API server version 0.13.0\n"
           "INFO 01-01 00:00:00 [model.py:1] Resolved architecture: GlmMoeDsaForCausalLM\n")
    f = scan_text(log).facts
    assert f["model"] == "zai-org/GLM-5" and f["tensor_parallel_size"] == 8 and f["max_model_len"] == 65536
    assert f["vllm_version"] == "0.13.0" and f["architecture"] == "GlmMoeDsaForCausalLM"


def test_log_text_is_never_evaluated():
    # literal_eval only: a call inside the args dict is not executed, it just fails to parse.
    f = scan_text("INFO 01-01 00:00:00 [x.py:1] non-default args: {'model': __import__('os').system('touch /tmp/pwned')}\n").facts
    assert "launch_args" not in f


def test_fifo_is_read_once_without_losing_its_head(tmp_path):
    # /dev/stdin, <(cmd) and named pipes are not regular files: nothing may be peeked from them.
    import os
    import threading

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    body = (OOM + "\n").encode() + b"INFO x\n" * 3

    def writer():
        with open(fifo, "wb") as f:
            f.write(body)

    t = threading.Thread(target=writer)
    t.start()
    s = scan_path(str(fifo))
    t.join()
    assert s.bytes == len(body) and s.lines_total == 4
    assert s.exceptions[0].line.no == 1


def test_collect_env_block_from_a_pipe(tmp_path):
    """A stream is read once: the collect-env block is kept aside as it goes by."""
    import gzip as gz

    env = "\n".join(["Collecting environment information...", "PyTorch version              : 2.9.0+cu129",
                     "CUDA used to build PyTorch   : 12.9", "GPU 0: NVIDIA GB10",
                     "[pip3] flashinfer-python==0.5.2"]) + "\n"
    p = tmp_path / "env.log.gz"  # gzip goes through the stream path, like stdin
    p.write_bytes(gz.compress(("INFO x\n" * 20 + env).encode()))
    f = scan_path(str(p)).facts
    assert f["cuda_version"] == "12.9" and f["packages"]["flashinfer-python"] == "0.5.2"
    assert f["gpus"][0]["name"] == "NVIDIA GB10"


_WORDS = ["INFO fine", "ERROR bad", "Traceback (most recent call last):", '  File "x.py", line 1', "", "x" * 50,
          "version 1", "noise\r", "\x00\xff", "error and Error"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=30), st.booleans())
def test_small_file_selection_agrees_with_the_streaming_one(tmp_path_factory, lines, final_newline):
    """A small file is selected with plain find()s (no regex to compile): the same lines, numbers
    and totals as the streaming selection."""
    from triage.logread.select import _select_python, _select_small
    from triage.logread.source import chunks, open_source

    body = "\n".join(lines).encode("latin-1") + (b"\n" if final_newline and lines else b"")
    p = tmp_path_factory.mktemp("sel") / "s.log"
    p.write_bytes(body)
    src = open_source(str(p))
    a, b = _select_small(open_source(str(p))), _select_python(src, chunks(src))
    assert list(a.lines) == list(b.lines)
    assert a.totals() == b.totals()


def test_the_tuis_pipe_reader_keeps_the_collect_env_facts():
    """The live TUI reads a pipe line by line (not through scan_source): the collect-env block kept aside
    by its selection gives the same facts as the headless reader of the same stream."""
    import os as _os
    import threading

    from triage.logread.scan import scan_source
    from triage.logread.source import open_source
    from triage.tui.intake import LiveLog

    env = "\n".join(["Collecting environment information...", "PyTorch version              : 2.9.0+cu129",
                     "CUDA used to build PyTorch   : 12.9", "GPU 0: NVIDIA GB10",
                     "[pip3] flashinfer-python==0.5.2"]) + "\n"
    head = "".join(f"(APIServer pid=7) INFO 02-14 10:12:{i % 60:02d} [loggers.py:127] Running: {i} reqs\n"
                   for i in range(3000))
    data = (head + env + "(APIServer pid=7) ERROR 02-14 10:13:00 [core.py:1] boom\n").encode()

    def piped() -> int:
        r, w = _os.pipe()

        def write() -> None:
            with _os.fdopen(w, "wb") as fh:
                fh.write(data)

        threading.Thread(target=write, daemon=True).start()
        return r

    live = LiveLog("-", piped(), spool=False)
    tui = live.run().facts
    headless = scan_source(open_source("-", piped())).facts
    assert tui == headless
    assert tui["cuda_version"] == "12.9"
    assert tui["packages"]["flashinfer-python"] == "0.5.2"
    assert tui["gpus"] == headless["gpus"] and tui["gpus"][0]["name"] == "NVIDIA GB10"


def test_the_tuis_pipe_reader_reads_a_dense_pipe_as_the_headless_reader_does(tmp_path):
    """A fast pipe full of errors is read by the TUI in whole chunks, as the headless reader reads it
    (bulk), chunk by chunk as it arrives: the same lines, repeats, facts and totals."""
    import os as _os
    import sys as _sys
    import threading
    from pathlib import Path as _Path

    _sys.path.insert(0, str(_Path(__file__).resolve().parent.parent / "bench"))
    from _common import make_error_dense_log

    from triage.logread.scan import scan_source
    from triage.logread.source import open_source
    from triage.tui.intake import LiveLog

    data = make_error_dense_log(tmp_path / "dense.log", 6_000_000).read_bytes()

    def piped(step: int) -> int:
        r, w = _os.pipe()

        def write() -> None:
            with _os.fdopen(w, "wb") as fh:
                for i in range(0, len(data), step):
                    fh.write(data[i:i + step])
                    fh.flush()

        threading.Thread(target=write, daemon=True).start()
        return r

    headless = scan_source(open_source("-", piped(1 << 20)))
    live = LiveLog("-", piped(50_000), spool=False)
    tui = live.run()
    assert live.fed > 0
    assert [(ln.no, ln.text) for ln in tui.lines] == [(ln.no, ln.text) for ln in headless.lines]
    assert tui.spans == headless.spans and tui.facts == headless.facts
    assert (tui.bytes, tui.lines_total) == (headless.bytes, headless.lines_total) == (len(data), data.count(b"\n"))
    assert [e.type for e in tui.exceptions] == [e.type for e in headless.exceptions]
    assert any(t > 1000 for t, _ in tui.spans.values())  # repeats counted, not read
