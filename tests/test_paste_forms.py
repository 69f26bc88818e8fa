"""How people paste a failure into a ticket, each form read back to the failure it holds (the generic layer:
triage/logread, the fallback's words). Each case is the shape of a real paste; the message is vLLM's own."""

from __future__ import annotations

from tests.dev_sets import first
from triage.logread import scan_text

NO_BLOCKS = "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the engine."
HEADER = "ERROR 09-28 15:47:24 [core.py:718] "


def _cut(text: str, width: int) -> str:
    """What a terminal `width` columns wide shows of one long line: rows of exactly that width."""
    return "\n".join(text[i:i + width] for i in range(0, len(text), width))


def test_a_line_a_terminal_cut_before_a_word_is_joined_again():
    """The cut falls just before a word: the next row starts with that one space (a traceback's rows have two)."""
    line = HEADER + NO_BLOCKS
    at = line.index(" blocks")
    scan = scan_text(line[:at] + "\n" + line[at:] + "\n")
    assert scan.lines[0].text.endswith("Try increasing `gpu_memory_utilization` when initializing the engine.")
    assert first(line[:at] + "\n" + line[at:]).category == "kv_cache_memory"


def test_a_line_cut_over_three_rows_is_joined_whole():
    msg = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
           "stored in KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
           "when initializing the engine.")
    text = _cut(HEADER + msg, 80)
    assert text.count("\n") >= 2
    scan = scan_text(text + "\n")
    assert scan.exceptions[0].message == msg.split(": ", 1)[1]
    assert first(text).category == "kv_cache_memory"


def test_rows_that_follow_a_short_row_are_lines_of_their_own():
    """Only a row as wide as the terminal was cut: the line after a short continuation is not joined."""
    msg = "ValueError: " + "x" * 90
    scan = scan_text(_cut(msg, 80) + "\nsomething else\n")
    assert scan.exceptions[0].message == "x" * 90
    assert scan.lines[-1].text == "something else"


def test_a_frame_row_is_never_taken_for_a_cut():
    scan = scan_text("RuntimeError: " + "y" * 80 + "\n  File \"/x/vllm/engine/core.py\", line 3, in f\n")
    assert scan.exceptions[0].message == "y" * 80


def test_vllm_header_with_its_level_and_time_cut_off():
    """"[core.py:712] ValueError: ..." (the paste began inside vLLM's header): the exception is read, the
    source kept; the older header form "worker_base.py:157] " too."""
    scan = scan_text(" [core.py:712] ValueError: pixel_values dim[2] expected 448, got 384\n")
    assert (scan.lines[0].src, scan.exceptions[0].type) == ("core.py:712", "ValueError")
    scan = scan_text("worker_base.py:157] RuntimeError: CUDA error: no kernel image is available for execution on the device\n")
    assert (scan.lines[0].src, scan.exceptions[0].type) == ("worker_base.py:157", "RuntimeError")
    assert first("worker_base.py:157] RuntimeError: CUDA error: no kernel image is available for execution on "
                 "the device").category == "unsupported_gpu"


def test_a_multimodal_input_a_model_cannot_take_reads_as_model_support():
    """vLLM's input schemas (utils/tensor_schema.py) refuse a processor's output the model was not written for;
    no rule knows the message, the words of a model's multimodal inputs place it."""
    d = first("```bash\n...\n [core.py:712] ValueError: pixel_values dim[2] expected 448, got 384\n```")
    assert d.category == "model_support" and d.confidence < 0.5


def test_interleaved_workers_cut_inside_their_frames():
    """Two workers' tracebacks interleave and the paste ends inside both, without their Traceback lines: each is
    cut after its own last frame (its source and caret rows follow), however many of the other's lines come."""
    p = "(Worker_TP{0} pid=17{0}) ERROR 11-29 20:52:18 [multiproc_executor.py:597] "
    site = "/usr/lib/python3.12/site-packages/vllm/model_executor/"
    lines = [p.format(0) + f'  File "{site}layers/quantization/compressed_tensors/compressed_tensors.py", line 599, in get_scheme',
             p.format(1) + f'  File "{site}models/qwen3.py", line 90, in __init__',
             p.format(0) + "    quant_scheme = self.get_scheme(layer=layer, layer_name=prefix)",
             p.format(1) + "    self.qkv_proj = QKVParallelLinear(",
             p.format(0) + "                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
             p.format(1) + "                    ^^^^^^^^^^^^^^^^^^"]
    scan = scan_text("\n".join(lines) + "\n")
    assert sorted(t.line.proc for t in scan.cut_tracebacks) == ["Worker_TP0 pid=170", "Worker_TP1 pid=171"]
    # a worker that went on printing after its frame was not cut there
    more = lines + [p.format(0) + w for w in ("Loading weights", "Model loading took", "Memory profiling", "Done")]
    assert [t.line.proc for t in scan_text("\n".join(more) + "\n").cut_tracebacks] == ["Worker_TP1 pid=171"]


def _unknown_traceback(prefix: str) -> str:
    """A traceback no rule knows, raised in quantization code: only read whole (frames and exception line under
    the same process) does it name its category."""
    tb = ['Traceback (most recent call last):',
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/v1/engine/core.py", line 100, in run_engine_core',
          '    engine_core = EngineCoreProc(*args, **kwargs)',
          '  File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/zzz.py", line 42, in create_weights',
          '    raise ValueError("frobnicated widgets disagree")',
          'ValueError: frobnicated widgets disagree']
    return "\n".join(prefix + line for line in tb)


def test_launchers_and_viewers_prefixes_are_peeled_off_a_traceback():
    for prefix in ("(VllmWorker TP0 pid=2748156) ERROR 08-13 22:40:00 [multiproc_executor.py:596] ",  # vLLM 0.10
                   "(ServeReplica:llms:LLMServer:qwen2_5-0_5b pid=2345, ip=10.0.0.1) ",  # Ray Serve
                   "  | ",  # Buildkite's log viewer
                   "0: ", "12: ",  # srun --label
                   "[1,0]<stderr>:",  # mpirun --tag-output
                   "0|vllm     | ",  # pm2
                   "2024-11-18T21:24:57,141 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - ",  # TorchServe
                   "[2025-09-25 20:03:20] [/bin/sh]: "):  # a supervising script
        scan = scan_text(_unknown_traceback(prefix) + "\n")
        [exc] = scan.exceptions
        assert (exc.type, len(exc.frames)) == ("ValueError", 2), prefix
        d = first(_unknown_traceback(prefix))
        assert d.category == "quantization", (prefix, d.title)


def test_process_tags_keep_their_names():
    from triage.logread.normalize import parse

    assert parse(1, "(VllmWorker TP0 pid=2748156) INFO 08-13 22:40:00 [x.py:1] hi").proc == "VllmWorker TP0 pid=2748156"
    ln = parse(1, "(ServeReplica:llms:LLMServer pid=2345, ip=10.0.0.1) hi")
    assert (ln.proc, ln.ip, ln.text) == ("ServeReplica:llms:LLMServer pid=2345", "10.0.0.1", "hi")
    assert parse(1, "(VllmWorker rank=0 pid=1110) hi").proc == "VllmWorker rank=0 pid=1110"


def test_a_table_or_a_number_is_not_a_prefix():
    """nvidia-smi's table rows and a time of day stay as they are."""
    from triage.logread.normalize import parse

    row = "| NVIDIA-SMI 535.171.04             Driver Version: 535.171.04   CUDA Version: 12.2     |"
    assert parse(1, row).text == row
    assert parse(1, "12:34:56 something").text == "12:34:56 something"
    assert parse(1, "    x = a | b").text == "    x = a | b"


def test_a_traceback_pasted_through_a_web_page_keeps_its_frames():
    """HTML escapes left in a paste ("&nbsp; File &quot;/x.py&quot;") are the characters they stand for."""
    import html

    tb = _unknown_traceback("(EngineCore_DP0 pid=142) ERROR 11-27 07:15:17 [core.py:718] ")
    for pasted in (html.escape(tb), tb.replace("  ", "&nbsp;&nbsp;"), tb.replace('"', "&quot;")):
        [exc] = scan_text(pasted + "\n").exceptions
        assert (exc.type, len(exc.frames)) == ("ValueError", 2)
        assert first(pasted).category == "quantization"
    assert scan_text("a &amp;&amp; b; x &lt; y\n").lines[0].text == "a && b; x < y"


def test_a_message_cut_before_the_word_it_is_filed_under_is_found_by_its_first_words():
    """vLLM 0.10.2+'s model_loader/__init__.py "The model loader must be a subclass of `BaseModelLoader`.",
    pasted cut: the catalogue finds it by its first words."""
    from triage.catalogue.store import load

    cat = load()
    [m, *_] = cat.match("The model loader must be a subclass of")
    assert m.template.module == "vllm/model_executor/model_loader/__init__.py" and m.share < 1
    d = first("The model loader must be a subclass of")
    assert d.category == "model_loading" and d.signature.startswith("catalogue.") and d.confidence < 0.5
    assert not cat.match("hello world, this is a plain line of a program's output")


def test_an_exception_group_gives_way_to_the_exceptions_it_holds():
    """Python 3.11+'s TaskGroup failure (starlette in the API server): the group first, then the exception it
    holds, each behind a "| " gutter."""
    text = "\n".join([
        "  + Exception Group Traceback (most recent call last):",
        '  |   File "/usr/local/lib/python3.12/dist-packages/starlette/middleware/base.py", line 189, in __call__',
        "  |     with collapse_excgroups():",
        "  | ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)",
        "  +-+---------------- 1 ----------------",
        "    | Traceback (most recent call last):",
        '    |   File "/usr/local/lib/python3.12/dist-packages/vllm/model_executor/layers/quantization/zzz.py", line 42, in f',
        '    |     raise ValueError("frobnicated widgets disagree")',
        "    | ValueError: frobnicated widgets disagree",
        "    +------------------------------------"])
    assert [e.type for e in scan_text(text + "\n").exceptions] == ["ExceptionGroup", "ValueError"]
    d = first(text)
    assert d.category == "quantization" and "frobnicated" in d.title


def test_pytests_failure_lines():
    scan = scan_text("E       ValueError: The quantization method awq is not supported for the current GPU. "
                     "Minimum capability: 75. Current capability: 70.\n")
    assert scan.exceptions[0].type == "ValueError"
    assert first(scan.lines[0].shown).category == "quantization"


def test_an_exception_quoted_in_prose_between_backticks_is_read_as_raised():
    """"I hit `ValueError: ...`", "- `RuntimeError: ...`": the quoted exception is the failure; a type named in
    passing (`ValueError` docs) or a backticked argument is not."""
    scan = scan_text("When I start it I hit `ValueError: " + NO_BLOCKS.split(": ", 1)[1] + "` every time.\n")
    assert [e.short_type for e in scan.exceptions] == ["ValueError"]
    assert first("- `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB` during warm-up"
                 ).category == "gpu_oom"
    assert first("It fails with `" + NO_BLOCKS + "`").category == "kv_cache_memory"
    assert not scan_text("uses `torch_dtype`, which is deprecated; see the `ValueError` docs\n").exceptions


def test_an_exception_a_logger_quotes_as_advice_is_not_raised():
    warn = ("WARNING 09-14 11:02:10 [utils.py:2816] Found ulimit of 1024 and failed to automatically increase with "
            "error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: [Errno 24] Too "
            "many open files`. Consider increasing with ulimit -n\n")
    assert not scan_text(warn).exceptions


def test_an_exception_line_after_a_source_line_as_wide_as_the_terminal_is_its_own_line():
    """A hard-wrapped traceback (80 columns) whose source line is exactly 80 wide: the exception's line after
    it is not that source line's rest; a row that starts mid-word ("nductor.exc.InductorError: ...") still is."""
    src = "    self.model = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(**engine_args))"
    assert len(src) == 80
    head = '  File "/opt/LLaMA-Factory/src/llamafactory/chat/vllm_engine.py", line 99, in __'
    log = ["Traceback (most recent call last):", head, "init__", src,
           "TypeError: __init__() got an unexpected keyword argument 'limit_mm_per_prompt'", "x" * 80, "y" * 20,
           "z" * 80, "w"]
    scan = scan_text("\n".join(log) + "\n")
    (exc,) = scan.exceptions
    assert exc.type == "TypeError" and exc.frames[-1].func == "__init__"
