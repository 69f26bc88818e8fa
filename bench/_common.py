"""Helpers shared by the benchmarks: timing a command, its peak memory, a realistic big log."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_once(argv: list[str], env: dict | None = None) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds of the whole process tree, peak RSS in KiB) of one run in a fresh child
    (wait4's rusage is per child: its CPU time includes the children it waited for, grep's too)."""
    e = dict(os.environ, PYTHONPATH=str(ROOT))
    # Measure what users run: an installed package has its bytecode compiled (pip does it at
    # install time). With PYTHONDONTWRITEBYTECODE every run would recompile each module from source.
    e.pop("PYTHONDONTWRITEBYTECODE", None)
    if env:
        e.update(env)
    t = time.perf_counter()
    # Output to a real file, not /dev/null: GNU grep stops at the first match when its output is
    # /dev/null, which would make the baseline meaningless.
    with tempfile.TemporaryFile() as sink:
        # cwd: `python -m triage` imports the tree this bench belongs to, wherever it is started from
        p = subprocess.Popen(argv, stdout=sink, stderr=subprocess.DEVNULL, env=e, cwd=str(ROOT))
        _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    p.returncode = os.waitstatus_to_exitcode(status)
    return wall, ru.ru_utime + ru.ru_stime, ru.ru_maxrss


def run_timed(argv: list[str], repeat: int = 3, env: dict | None = None) -> tuple[float, int]:
    """Best wall time of `repeat` runs and the peak RSS (KiB) of the command, measured in a fresh
    child each time."""
    best = float("inf")
    peak = 0
    for i in range(repeat + 1):  # the first run may write bytecode caches: not counted
        wall, _, rss = run_once(argv, env)
        if i or repeat == 0:
            best = min(best, wall)
            peak = max(peak, rss)
    return best, peak


def run_pair(base: list[str], cmd: list[str], repeat: int = 3) -> tuple[tuple[float, float], tuple[float, float, int]]:
    """A baseline and a command run in turns (on a shared machine both meet the same load): the best wall
    and CPU times of each, and the command's peak RSS (KiB)."""
    bw = bc = cw = cc = float("inf")
    peak = 0
    for i in range(repeat + 1):  # the first round may write bytecode caches: not counted
        w1, c1, _ = run_once(base)
        w2, c2, rss = run_once(cmd)
        if i or repeat == 0:
            bw, bc, cw, cc = min(bw, w1), min(bc, c1), min(cw, w2), min(cc, c2)
            peak = max(peak, rss)
    return (bw, bc), (cw, cc, peak)


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def _tree_rss_kb(root: int) -> int:
    total, todo, seen = 0, [root], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
                        break
        except OSError:
            continue
        todo += _children(pid)
    return total


class TreePeak:
    """Samples the peak RSS of a process and its children every 10 ms on a thread, until stop()."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.peak = max(self.peak, _tree_rss_kb(self.pid))
            time.sleep(0.01)

    def stop(self) -> int:
        """The peak, in KiB."""
        self._done.set()
        self._thread.join()
        return self.peak


NOISE = [
    '(APIServer pid=2114) INFO:     10.1.{a}.{b}:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK',
    "(APIServer pid=2114) INFO 02-14 {h:02d}:{m:02d}:{s:02d} [loggers.py:127] Engine 000: Avg prompt throughput: "
    "{x:.1f} tokens/s, Avg generation throughput: {y:.1f} tokens/s, Running: {r} reqs, Waiting: 0 reqs, "
    "GPU KV cache usage: {u:.1f}%, Prefix cache hit rate: {p:.1f}%",
    "(APIServer pid=2114) INFO 02-14 {h:02d}:{m:02d}:{s:02d} [chat_utils.py:560] Detected the chat template content "
    "format to be 'openai'. You can set `--chat-template-content-format` to override this.",
    "(APIServer pid=2114) INFO 02-14 {h:02d}:{m:02d}:{s:02d} [logger.py:43] Received request chatcmpl-{id}: prompt: "
    "'<|user|>Summarise the following text ...', params: SamplingParams(n=1, temperature=0.7, top_p=0.95, "
    "max_tokens=1024), prompt_token_ids: None, lora_request: None.",
]


def _served_log(path: Path, size_bytes: int, seed: int, pick, extra=None) -> Path:
    """The bundled demo's start-up, then request lines (`pick(i)` is line i's template, filled with
    fresh numbers, plus `extra(rnd)`'s), then the demo's crash at the end."""
    rnd = random.Random(seed)
    demo = (ROOT / "triage" / "demo" / "glm5_sm120.log").read_text()
    head, crash = demo[: demo.index("(Worker_TP0 pid=4188) ERROR")], demo[demo.index("(Worker_TP0 pid=4188) ERROR"):]
    with open(path, "w") as f:
        f.write(head)
        written = len(head)
        i = 0
        while written < size_bytes - len(crash):
            fields = dict(a=rnd.randrange(256), b=rnd.randrange(256), port=rnd.randrange(30000, 60000),
                          h=rnd.randrange(24), m=rnd.randrange(60), s=rnd.randrange(60), x=rnd.random() * 9000,
                          y=rnd.random() * 3000, r=rnd.randrange(64), u=rnd.random() * 100, p=rnd.random() * 100,
                          id=rnd.getrandbits(64))
            if extra:
                fields.update(extra(rnd))
            line = pick(i).format(**fields) + "\n"
            f.write(line)
            written += len(line)
            i += 1
        f.write(crash)
    return path


RARE_WARNING = ("(APIServer pid=2114) WARNING 02-14 10:{m:02d}:{s:02d} [protocol.py:72] The following fields "
                "were present in the request but ignored: {{'stream_options'}}")


def make_log(path: Path, size_bytes: int, seed: int = 7) -> Path:
    """A served-for-hours vLLM log: the real start-up, then request noise (with the odd warning),
    then the crash at the end (the flagship failure from the bundled demo)."""
    return _served_log(path, size_bytes, seed, lambda i: RARE_WARNING if i % 5000 == 4999 else NOISE[i % len(NOISE)])


ERROR_DENSE = [
    # what a server that runs for hours but rejects requests prints: errors that are not the failure
    "(APIServer pid=2114) ERROR 02-14 {h:02d}:{m:02d}:{s:02d} [serving_chat.py:1245] Error in preprocessing prompt "
    "inputs: This model's maximum context length is 32768 tokens. However, you requested {n} tokens "
    "(chatcmpl-{id:x}).",
    "(APIServer pid=2114) WARNING 02-14 {h:02d}:{m:02d}:{s:02d} [protocol.py:72] The following fields were present "
    "in the request but ignored: {{'stream_options'}} (request chatcmpl-{id:x}, error count {n})",
]


def make_error_dense_log(path: Path, size_bytes: int, seed: int = 11) -> Path:
    """A served-for-hours log where one line in eight is a repeated error or warning (not the failure),
    ending in the flagship crash: the cost must follow the distinct messages, not the matching lines."""
    return _served_log(path, size_bytes, seed,
                       lambda i: ERROR_DENSE[(i // 8) % 2] if i % 8 == 7 else NOISE[i % len(NOISE)],
                       extra=lambda rnd: {"n": rnd.randrange(32769, 200000)})


def make_restart_loop_log(path: Path, size_bytes: int, seed: int = 13) -> Path:
    """`kubectl logs` of a pod that restarts forever: the same KV-cache failure, start after start, each
    with its own pids and timestamps."""
    rnd = random.Random(seed)
    start = (ROOT / "tests" / "logs" / "unseen" / "kv_cache_memory--gpt-oss-120b-util-05.log").read_text()
    with open(path, "w") as f:
        written = 0
        n = 0
        while written < size_bytes:
            api, core = rnd.randrange(100, 99999), rnd.randrange(100, 99999)
            h, m = divmod(n % 1440, 60)
            text = (start.replace("223611", str(api)).replace("223840", str(core))
                    .replace("10-25 13:", f"10-25 {h:02d}:").replace(":08:", f":{m:02d}:"))
            f.write(text)
            written += len(text)
            n += 1
    return path


def triage_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "triage", *args]
