"""grep looks for parts of PREFILTER's words (select.grep_keys: faster for its matcher) and each line it
prints as a match is checked for the words themselves: the selection must stay exactly the one the Python
strategy makes, numbers and totals included."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.logread.select import PREFILTER, _grep_pattern, _which_grep, grep_keys, select
from triage.logread.source import open_source

LOGS = Path(__file__).parent / "logs"
pytestmark = pytest.mark.skipif(_which_grep() is None, reason="no grep here")


def _three_ways(path: Path, gz: Path) -> list[tuple[list[tuple[int, bytes]], tuple[int, int]]]:
    out = []
    for src, use_grep in ((open_source(str(path)), True), (open_source(str(path)), False),
                          (open_source(str(gz)), True)):
        sel = select(src, use_grep=use_grep)
        lines = list(sel.lines)
        out.append((lines, sel.totals()))
    return out


def test_every_word_has_a_part_that_finds_it():
    words = PREFILTER.split("|")
    keys = grep_keys(words)
    assert all(any(k in w for k in keys) for w in words)
    assert _grep_pattern()[1] is not None  # PREFILTER is plain words: grep looks for the parts
    # fewer walks of grep's matcher: most parts start with a capital, punctuation or a rare letter
    lower = {k[0] for k in keys if k[0].islower()}
    assert len(lower) < len({w[0] for w in words if w[0].islower()})


def test_the_fixtures_are_selected_alike(tmp_path):
    data = b"".join(p.read_bytes() for p in sorted(LOGS.glob("*.log")))
    path = tmp_path / "all.log"
    path.write_bytes(data)
    gz = tmp_path / "all.log.gz"
    gz.write_bytes(gzip.compress(data))
    (g, gt), (py, pt), (s, st_) = _three_ways(path, gz)
    assert g == py == s
    assert gt == pt == st_ == (len(data), data.count(b"\n") + (not data.endswith(b"\n")))


# parts without their words ("quires" but not "requires"), words, and lines like a log's
_ROWS = ["INFO 02-14 10:12:44 [a.py:1] acquires a lock", "the initialization took 3 s", "requires 2 GPUs",
         "mirror of the weights", "Error: bad", "", "  ", "kend", "the backend is FLASH_ATTN",
         "weights took 3 GiB", "lights took", "tokens per request: 0", "request: 0", "x" * 70,
         "(EngineCore pid=3) Exception in worker", "a line", "1:2:3-4-5", "placement group ready"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(_ROWS), min_size=1, max_size=60), st.booleans())
def test_parts_without_their_words_are_no_matches(tmp_path_factory, rows, final_newline):
    d = tmp_path_factory.mktemp("keys")
    text = "\n".join(rows) + ("\n" if final_newline else "")
    # past the small-file and fragment paths: padded with a header-like noise block at the start
    data = ("".join(f"INFO 02-14 10:12:{i % 60:02d} [b.py:2] noise {i}\n" for i in range(9000)) + text).encode()
    path = d / "x.log"
    path.write_bytes(data)
    gz = d / "x.log.gz"
    gz.write_bytes(gzip.compress(data))
    (g, gt), (py, pt), (s, st_) = _three_ways(path, gz)
    assert g == py == s
    assert gt == pt == st_


# What a server prints per request and per stats interval, for hours (bench/_common.py NOISE and real V0/V1
# forms): a grep part found in these sends every line of a big log to Python (bench/intake.py, sparse).
SERVED = [
    '(APIServer pid=2114) INFO:     10.1.2.3:40112 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=2114) INFO 02-14 10:12:44 [loggers.py:127] Engine 000: Avg prompt throughput: 12.1 tokens/s, "
    "Avg generation throughput: 90.4 tokens/s, Running: 3 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.2%, "
    "Prefix cache hit rate: 40.0%",
    "INFO 02-14 10:12:44 metrics.py:351] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 31.2 "
    "tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.1%, CPU KV cache usage: 0.0%.",
    "(APIServer pid=2114) INFO 02-14 10:12:44 [chat_utils.py:560] Detected the chat template content format to be "
    "'openai'. You can set `--chat-template-content-format` to override this.",
    "(APIServer pid=2114) INFO 02-14 10:12:44 [logger.py:43] Received request chatcmpl-9f2: prompt: '<|user|>Hi', "
    "params: SamplingParams(n=1, temperature=0.7, top_p=0.95, max_tokens=1024), prompt_token_ids: None, "
    "lora_request: None.",
    "INFO 02-14 10:12:44 [async_llm.py:270] Added request chatcmpl-9f2.",
    "INFO 02-14 10:12:44 engine.py:310] Finished request chatcmpl-9f2.",
]


@pytest.mark.parametrize("line", SERVED)
def test_a_served_servers_routine_lines_hold_no_grep_part(line):
    keys = _grep_pattern()[0].split("|")
    assert not [k for k in keys if k in line]
