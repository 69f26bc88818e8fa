"""Pick the lines worth reading out of a log of any size.

A failed vLLM log is mostly INFO noise (request lines, throughput); everything a rule or an
extractor needs sits on lines carrying one of a few words (errors, tracebacks, warnings, the version,
launch args, backend selection). Both strategies below keep exactly the lines matching PREFILTER,
plus the line after each (the source line under `File "..."`, the second line of a message; a blank
line there does not count, for pastes with a blank line between lines), with their original 1-based
numbers:

- a regular file goes through `grep -E` (many times faster than any Python loop over 200 MB), which
  looks for parts of PREFILTER's words that its matcher finds faster (each line it prints as a match is
  checked for the words), and prints byte offsets: the lines after the last one it printed are counted
  here, not by a second pass over the file;
- stdin, gzip and machines without grep go through the same pattern in Python, chunk by chunk.

Memory stays flat: lines are yielded as they come, and a line longer than MAX_LINE is cut there
(the rest is skipped without being held).
"""

from __future__ import annotations

import os
import re

from triage.lazyre import lazy

from typing import Callable, Iterable, Iterator

from triage.logread.source import InputError, LogSource, chunks
from triage.record import Record

# Plain literals only, so the same text is a valid POSIX ERE (grep -E) and Python pattern.
# Measured on a 200 MB log: ~1.5x the time of `grep -c -E 'ERROR|Error|error'`.
PREFILTER = (
    'Error|ERROR|error|Exception|Traceback|File "|WARN|Warning|CRITICAL|FATAL|Killed|Segmentation|'
    "Aborted|version|Version|args|backend|NCCL|capability|architecture|with config|Collecting env|"
    "above exception|NumPy|bootstrapping|fatal|only supports|plugin|"
    # memory profiling's INFO lines when nothing is left for the KV cache
    "KV cache memory: -|KV Cache is -|blocks: 0,|blocks: -|cache size: 0 tokens|tokens per request: 0|"
    # the memory budget (V0's budget line, the weights' size): what the memory rules' explanations are made of.
    # Plain "memory" would cost ~20% of grep's time on a big log; these cost nothing measurable.
    "gpu_memory_utilization|loading took|weights took|"
    # rows of a wrapped message whose first row was kept (attention reasons, shared-memory numbers)
    "head_size|use_mla|not supported|Reasons|requires|Ray cluster|placement group|OOM|UnspecifiedPlatform|libcuda|lcuda|"
    "ATTENTION_BACKEND|ENABLE_KVCACHED|"
    # native libraries' own statements of a cause (triage.catalogue.native: Ray's OOM killer, a lost node)
    "killed due to|memory usage threshold|marked dead|Check failed|discovered a bug|Illegal instruction|"
    # Python 3.13+ colours a traceback on a terminal: 'File \x1b[35m"...'; kept by script/tee
    "File \x1b"
    # --- mcfg: the step a message-less failure came in (building the speculative-decoding drafter) ---
    "|drafter|EAGLE head|SpecDecodeWorker"
    # -- tool: a device's bounds check on an index (CANN: a request's out-of-vocab token id used as a logits index)
    "|exceeds bounds"
    # -- envi: a worker killed by a signal (executors' "died" lines, absl's and faulthandler's signal reports);
    # installers' solver output (uv and conda print no error word)
    "|died|received at time|Fatal Python|No solution found|unsatisfiable|No matching distribution"
    # the platform vLLM picked (a CUDA call on a TPU/XPU/CPU machine is no missing GPU)
    "|detected platform|PJRT_DEVICE|communicate with the NVIDIA driver"
    # -- end envi
    # (attk) CUDA-graph capture started / finished: the step a bare CUDA error interrupted (rules/cudagraph_frames.py)
    "|Capturing CUDA graph|Capturing cudagraphs|Capturing the model for CUDA|capturing finished"
    # kern: a kernel's dispatch refusing its parameters prints no error word ("Unsupported sparse-MLA prefill
    # configuration: model=DSV4 num_heads=16 ...", "Unsupported head dimensions: ...")
    "|Unsupported "
    # -- inst: lines with no error word that still state the cause: pip's / uv's failed build step, a shell that
    # cannot find a program, a path the OS refused, a thread it could not start
    "|did not run successfully|command not found|Permission denied|Thread creation failed|pthread_create"
    # -- end inst
    # -- inst2: CUDA's no-kernel-image message quoted in prose or a ticket title, without "CUDA error:"
    "|kernel image"
    # -- end inst2
    # -- k3: ptxas refusing an architecture it does not know, quoted without its "fatal" (a title, prose)
    "|gpu-name|is not defined"
    # FlashInfer's JIT logger ("flashinfer.jit: Loading JIT ops: sampling"): which kernels it built in this process
    "|JIT ops"
    # -- end k3
    # -- d2: multi-node bring-up and KV-transfer engines stating the cause with no error word: Ray's raylet
    # registration (glog-style "E" lines), multi-node-serving.sh's echo lines, Mooncake's RDMA transport; the
    # rows of Ray's version check that name each side ("... was started with:" then "    Ray: 2.43.0")
    "|Raylet|Missing argument|ray workers to be active|Ray worker starts|RNIC|RDMA resources|was started with"
    # -- end d2
    # -- m2: the launch's own --trust-remote-code (a shell script's continuation line has no other kept word)
    "|trust-remote-code|trust_remote_code"
    # -- s3: the multimodal budget check quoted in prose without its ValueError (one item above the step's tokens)
    "|max_tokens_per_mm_item"
    # -- end s3
    # start-up's steps and the server's start (triage.catalogue.stall: the step a log with no error stops in);
    # each printed once per start-up, never per request
    "|P2P access cache|using nccl|Found nccl|message queue communication|world size|world_size="
    "|Starting to load model|checkpoint shards|weights format|Dynamo bytecode|Compiling a graph|compile takes|for vLLM's torch"
    "|startup complete|Uvicorn running|API server|Available routes|create kv cache|GPU blocks|KV cache size"
    "|Maximum concurrency|Memory profiling"
    # -- mm: transformers' check_imports warning for a checkpoint's remote code ("Encountered exception while
    # importing decord: No module named 'decord'"); vLLM's PlaceholderModule hint quoted without its ImportError
    "|while importing|Please install"
    # harmless notes of the multimodal path (rules/mm_media.py HARMLESS): a processor kwarg "will be ignored", the
    # fast/slow image processor switch
    "|will be ignored|fast processor|slow image processor|already rescaled"
    # -- end mm
    # -- ctr: transformers' / diffusers' warning that the HF cache cannot be created (no error word; the cause of a
    # failure a pod's arbitrary UID or read-only mount brings)
    "|your cache folder"
    # the kubelet's probe events in a pasted `kubectl describe pod` ("Liveness probe failed: ...", "Container vllm
    # failed liveness probe, will be restarted"): no error word
    "|probe failed|probe, will be restarted"
    # the kubelet's eviction messages (ephemeral storage, memory pressure)
    "|low on resource|ephemeral local storage"
    # -- end ctr
    # -- rl: Unsloth's own lines with no error word: its banner (which patched vLLM is running), the vLLM child
    # dying before its readiness line, and the newer releases' print of the failure without a raise; vLLM's
    # sleep-mode INFO line ("It took 0.53 seconds to wake up."): the step a sleep-mode allocator OOM came in
    "|Unsloth|readiness message|vllm_process failed|to wake up"
    # -- end rl
    # -- oom: a title or prose line saying the device ran out of memory in the reporter's words ("CUDA out of
    # memory when setting limit_mm_per_prompt"), with no error word of its own
    "|out of memory"
    # -- amd: the Gaudi generation a user or hl-smi names (first-generation Gaudi fails with no word about it)
    "|Gaudi|HL-205"
    # an import's missing module quoted without its ModuleNotFoundError (a ticket title, prose); an op missing told
    # in prose ("init_shm_manager is not implemented when NOT AVX512_FOUND")
    "|No module named|is not implemented"
    # the kernel of a WSL2 machine (collect_env's "Python platform" row): GPU detection differs there
    "|WSL2"
    # an extension's ABI mismatch told in words ("_C ABI mismatch", "ABI-incompatible with that runtime's torch")
    "|ABI"
    # -- end amd
    # -- dist: multi-node causes stated with no error word: Ray's GCS client (glog "W" lines), NCCL's duplicate-GPU
    # check and torch's errno name quoted in a title, HCCL's bind failure rows, Gloo's buffer timeout, the Mooncake
    # transfer engine's glog rows naming the peer it could not reach
    "|GCS|Duplicate GPU|EADDRINUSE|bound already|listen start failed|Timed out waiting"
    "|connect to segment|connect to target"
    # -- end dist
    # -- pool: sleep mode's refusal of PyTorch expandable segments quoted in a title or prose (`assert
    # "expandable_segments:True" not in conf`), a causal LM reached by a pooling request told in prose
    "|expandable_segments|has no attribute 'pooler'"
    # -- end pool
    # -- tpu: a platform's refusal retold without "not supported" ("mxfp4 is not currently supported on gaudi3"),
    # Mosaic failing to lower the TPU attention kernel for a head size it does not take, a native crash's report
    # (oneCCL's "!!!!!!! Segfault encountered !!!!!!!")
    "|not currently supported|base memref|Segfault"
    # -- end tpu
    # pip's refusal of an option it does not know (older than the command; uv's says "error:")
    "|no such option"
    # -- mix6: Python's call error quoted without its TypeError (a ticket title: "AsyncLLMEngine.generate() got an
    # unexpected keyword argument 'inputs'"), a chat template's refusal of the roles without an error word
    "|unexpected keyword argument|roles must alternate"
    # -- end mix6
    # a Markdown code block's fence: where a pasted block ends, a traceback in it was cut (scan.CUT_TB_TAIL)
    "|```"
    # -- edge: the unified-memory boards a report names (Jetson, DGX Spark / GB10, their container images), where a
    # SIGKILL is vLLM's own GPU memory budget; Unsloth named in prose (lower case) beside TRL's server client
    "|Jetson|dustynv/|L4T|GB10|DGX Spark|unsloth"
    # the linear kernel vLLM selected once at start-up ("Selected CutlassFP8ScaledMMLinearKernel for ..."), the one a
    # CUTLASS status failure names for VLLM_DISABLED_KERNELS
    "|ScaledMM|VLLM_DISABLED_KERNELS"
    # -- end edge
    # -- hyb: a quantized shape check retold without its ValueError (a title: "output_size (80) not divisible by FP8
    # block_n=128"); mamba cache mode 'all' named in a report or a config repr (rules/hyb_mamba.py: with a drafter)
    "|not divisible by|mamba_cache_mode='all'|mamba_cache_mode 'all'"
    # -- end hyb
    # -- stk: a container runtime refusing the pod's command (`exec: "vllm": executable file not found in $PATH`)
    "|executable file"
    # -- end stk
    # -- msg: the multiprocessing executor's GPU count check (0.5-0.9) quoted without its AssertionError (a ticket
    # title), and --engine-use-ray on the launch line (0.4-0.5: the engine's Ray actor sees one GPU)
    "|max local gpu count|engine-use-ray"
    # -- end msg
    # -- dwn2: the dynamic loader's undefined symbol quoted without its ImportError (a ticket title:
    # "`/vllm/_C.abi3.so: undefined symbol:` MoE")
    "|undefined symbol"
    # -- end dwn2
    # -- mdl2: vLLM's processor type check retold as a report's title, without its TypeError
    # ("vllm serve 报错: Invalid type of HuggingFace processor")
    "|Invalid type of HuggingFace"
    # -- end mdl2
    # -- lib: libraries' messages quoted without an error word (a ticket title or prose): transformers' processor
    # component check, the tokenizers decoder refusing a None token, a fast tokenizer's concurrent borrow
    "|for argument|cannot be converted to|Already borrowed"
    # -- end lib
    # -- mix7: what a report states about the install with no error word (rules/mix7_stated.py): a release gap
    # ("which only exists in vLLM 0.23.0+"), two wheels writing the same files ("a self-inconsistent
    # nvidia_cutlass_dsl", "the file collision")
    "|only exist|exists only|exist only|only available|only present|only defined|only ship|nconsistent|ollision"
    "|same file"
    # -- end mix7
)
PREFILTER_RE = lazy(PREFILTER.encode())
# A log's own marks, not a fragment's: vLLM's header ("INFO 02-14 10:12:44 ", coloured or not), a
# timestamp of another logger, a process tag "(EngineCore_DP0 pid=1576)".
VLLM_HEADER_RE = lazy(rb"(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)(?:\x1b\[[0-9;]*m)*\s+\d\d-\d\d \d\d:\d\d"
                      rb"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d|pid=\d+(?:, ip=[\w.:-]+)?\)")
MAX_LINE = 64 * 1024
BLOCK_MARKER = b"Collecting environment information"
BLOCK_BYTES = 64 * 1024
BLOCK_LINES = 400
CONTEXT_AFTER = 1
# Below this size a regular file is selected in Python: starting grep (and the thread that counts
# lines) costs more than reading it here. Both ways select the same lines.
GREP_MIN_BYTES = 256 * 1024
# A paste this small is read whole (is_fragment).
FRAGMENT_LINES = 40
FRAGMENT_BYTES = 16 * 1024
FRAGMENT_WAIT = 0.2  # seconds a stream may take to show that it has ended


class Selection(Record):
    """Selected lines, streamed; the totals are final once the iterator is exhausted."""

    __slots__ = ("lines", "_totals", "warnings", "blocks", "truncated")
    _fields = __slots__

    def __init__(self, lines: Iterator[tuple[int, bytes]], _totals: Callable[[], tuple[int, int]],
                 warnings: list[str] | None = None, blocks: list[tuple[int, bytes]] | None = None) -> None:
        self.lines = lines
        self._totals = _totals
        self.warnings = [] if warnings is None else warnings
        # A stream cannot be read twice: a pasted `vllm collect-env` block (few selectable words in it)
        # is kept aside whole while it streams by, as (number of its first line, its bytes).
        self.blocks = [] if blocks is None else blocks
        self.truncated = False  # set while streaming: a line was cut, or grep failed before the end

    def totals(self) -> tuple[int, int]:
        """(bytes, lines) of the whole input. Call after consuming `lines`."""
        return self._totals()


def select(src: LogSource, *, use_grep: bool | None = None, data: Iterator[bytes] | None = None) -> Selection:
    """`data`: a stream's chunks when the caller has read some already (they are handed back in order)."""
    data, width, whole = _sniff_wrap(src, data)
    if width:
        return _select_unwrapped(data, width, whole)
    if src.fd is not None:
        whole, data = _whole_if_fragment(src, data)
        if whole is not None:
            return _select_all(whole)
    if use_grep is None and src.path is not None and 0 <= _size(src.path) <= FRAGMENT_BYTES:
        whole = _head(chunks(src), FRAGMENT_BYTES + 1)
        if is_fragment(whole):
            return _select_all(whole)
    if use_grep is None and src.is_plain_file:
        size = _size(src.path)
        if size <= GREP_MIN_BYTES:
            # A small file is read faster here than grep and a thread can be started.
            if 0 <= size <= MAX_LINE and _prefilter_literals() is not None:
                return _select_small(src)
            return _select_python(src, data)
    grep = _which_grep() if use_grep is not False else None
    if grep and src.is_plain_file:
        return _select_grep(src, grep)
    if grep:
        return _select_grep_stream(src, grep, data)
    return _select_python(src, data)


def _sniff_wrap(src: LogSource, data: Iterator[bytes] | None = None) -> tuple[Iterator[bytes], int | None, bool]:
    """Whether a terminal hard-wrapped the log (see unwrap.py), from its head, and whether that head is
    the whole input and a fragment (read whole). A stream cannot be read twice: its chunks are handed
    back, the head included."""
    from triage.logread.unwrap import SAMPLE, wrap_width

    if src.is_plain_file:
        assert src.path is not None
        try:
            with open(src.path, "rb") as fh:
                head = fh.read(SAMPLE)
        except OSError:
            return chunks(src), None, False  # the strategies below report it
        width = wrap_width(head)
        return chunks(src), width, bool(width) and len(head) < SAMPLE and is_fragment(head)
    it = chunks(src) if data is None else data
    head = next(it, b"")
    width = wrap_width(head[:SAMPLE])
    # (a stream's first chunk may not be all of it: a live pipe's fragment is read the usual way)
    return _prepend(head, it), width, False


def is_fragment(data: bytes) -> bool:
    """A paste of a few lines cut out of a log (what people put in a ticket), without vLLM's own
    headers: every line is kept, not only those with a PREFILTER word, for such a paste is often a
    bare message ("No available memory for the cache blocks ..."). A log with vLLM's headers is read
    the usual way whatever its size: the same lines are selected whichever way it reaches triage."""
    return (len(data) <= FRAGMENT_BYTES and data.count(b"\n", 0, FRAGMENT_BYTES) <= FRAGMENT_LINES
            and VLLM_HEADER_RE.search(data) is None)


def _head(data: Iterable[bytes], limit: int) -> bytes:
    out = b""
    for chunk in data:
        out += chunk
        if len(out) >= limit:
            break
    return out


def _whole_if_fragment(src: LogSource, data: Iterator[bytes]) -> tuple[bytes | None, Iterator[bytes]]:
    """A stream whose writer has already finished after a fragment's worth of text: its bytes. A live
    pipe (vLLM still writing) is never waited for longer than a moment."""
    head = next(data, b"")
    if not is_fragment(head):
        return None, _prepend(head, data)
    import select as _select_mod

    try:
        ready, _, _ = _select_mod.select([src.fd], [], [], FRAGMENT_WAIT)
    except (OSError, ValueError):
        ready = []
    if not ready:
        return None, _prepend(head, data)
    nxt = next(data, b"")
    if nxt:
        return None, _prepend(head, _prepend(nxt, data))
    return head, iter(())


def _select_all(data: bytes) -> Selection:
    out = list(enumerate(iter_lines([data]), 1))
    return Selection(iter(out), lambda: (len(data), len(out)))


def _prepend(first: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if first:
        yield first
    yield from rest


def _size(path: str | None) -> int:
    try:
        return os.path.getsize(path)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return -1


def _which_grep() -> str | None:
    import shutil

    return shutil.which("grep")


# ---- grep ---------------------------------------------------------------------------------

def _select_grep(src: LogSource, grep: str) -> Selection:
    import subprocess

    assert src.path is not None
    env = dict(os.environ, LC_ALL="C")
    size = os.path.getsize(src.path)
    pattern, exact = _grep_pattern()
    # -b: each line's byte offset, so that the lines after the last one printed are counted here (no
    # second pass over the whole file to count its lines).
    proc = subprocess.Popen(
        [grep, "-n", "-b", "-a", "-E", f"-A{CONTEXT_AFTER + 1}", "-e", pattern, "--", src.path],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, preexec_fn=_grep_memory_cap,
    )
    assert proc.stdout is not None
    rest: list[Selection] = []
    cuts = [0]
    at = [0, 0]  # number and byte offset of the last line grep printed

    def gen() -> Iterator[tuple[int, bytes]]:
        last = 0
        try:
            for no, line in _grep_lines(proc.stdout, cuts, exact, at):
                last = no
                yield no, line
        finally:
            proc.stdout.close()
            proc.wait()
        if proc.returncode == 2:
            # grep gave up, out of memory on a line too long to hold (its cap): the rest of the file
            # goes the stream way, its lines cut short before grep sees them.
            again = _select_grep_stream(src, grep, chunks(src))
            rest.append(again)
            yield from ((no, line) for no, line in again.lines if no > last)
            sel.truncated = again.truncated
            sel.warnings.extend(again.warnings)
        else:
            _grep_outcome(sel, proc.returncode, cuts[0])

    def totals() -> tuple[int, int]:
        if rest:
            return rest[0].totals()
        return size, _lines_from(src.path, at[0], at[1])

    sel = Selection(gen(), totals)
    return sel


def _lines_from(path: str | None, no: int, offset: int) -> int:
    """The number of lines of a file whose line `no` (1-based; 0: none) starts at byte `offset`: the lines
    before it, and those from it to the end (a last line without a newline counts, as `grep -c ''` does)."""
    lines = max(no - 1, 0)
    last = b"\n"
    try:
        with open(path, "rb") as fh:  # type: ignore[arg-type]
            fh.seek(offset if no else 0)
            while True:
                b = fh.read(1 << 20)
                if not b:
                    break
                lines += b.count(b"\n")
                last = b[-1:]
    except (OSError, TypeError):
        return lines
    return lines + (last != b"\n")


GREP_MEMORY = 64 << 20  # address space for a grep reading a file: ample for any line LineClipper lets by


def _grep_memory_cap() -> None:
    import resource

    try:
        resource.setrlimit(resource.RLIMIT_AS, (GREP_MEMORY, GREP_MEMORY))
    except (ValueError, OSError):
        pass


class LineClipper:
    """Cuts a stream's lines at `limit` bytes on its way to grep, which holds a whole line in memory
    (a 1 GB line, or /dev/zero, would cost that much). A few finds a chunk: the lines inside one
    chunk are shorter than the chunk, so only a line that spans chunks can run long."""

    LIMIT = 1 << 20

    def __init__(self, limit: int = LIMIT):
        self.limit = limit
        self.run = 0  # bytes of the current line seen so far
        self.cut = 0  # lines cut

    def __call__(self, chunk: bytes) -> bytes:
        first = chunk.find(b"\n")
        room = max(0, self.limit - self.run)
        if first < 0:
            if self.run <= self.limit < self.run + len(chunk):
                self.cut += 1
            self.run += len(chunk)
            return chunk if len(chunk) <= room else chunk[:room]
        if first > room:
            self.cut += 1
        out = chunk if first <= room else chunk[:room] + chunk[first:]
        self.run = len(chunk) - chunk.rfind(b"\n") - 1
        return out


def _select_grep_stream(src: LogSource, grep: str, data: Iterable[bytes]) -> Selection:
    """A pipe or a gzip file: we read (and decompress) it, count it, and feed grep from a thread."""
    import subprocess
    import threading

    env = dict(os.environ, LC_ALL="C")
    proc = subprocess.Popen(
        # --line-buffered and an unbuffered stdin: a live pipe (vLLM still writing) must reach the
        # reader line by line, not when a 4 KB buffer fills.
        [grep, "--line-buffered", "-n", "-a", "-E", f"-A{CONTEXT_AFTER + 1}", "-e", _grep_pattern()[0]],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, bufsize=0,
    )
    assert proc.stdin is not None and proc.stdout is not None
    state: dict[str, object] = {"bytes": 0, "lines": 0, "last": b"\n", "error": None}

    sel_blocks: list[tuple[int, bytes]] = []
    clip = LineClipper()

    def feed() -> None:
        nbytes = nlines = 0
        last = b"\n"
        keep = 0  # bytes of a collect-env block still to keep
        try:
            for chunk in data:
                if keep:
                    no, got = sel_blocks[-1]
                    sel_blocks[-1] = (no, got + chunk[:keep])
                    keep = max(0, keep - len(chunk))
                elif not sel_blocks:
                    at = chunk.find(BLOCK_MARKER)
                    if at >= 0:
                        start = chunk.rfind(b"\n", 0, at) + 1
                        sel_blocks.append((nlines + chunk.count(b"\n", 0, start) + 1, chunk[start:start + BLOCK_BYTES]))
                        keep = max(0, BLOCK_BYTES - (len(chunk) - start))
                nbytes += len(chunk)
                nlines += chunk.count(b"\n")
                last = chunk[-1:]
                proc.stdin.write(clip(chunk))
        except BrokenPipeError:
            pass
        except InputError as exc:
            state["error"] = exc
        finally:
            state["bytes"], state["lines"], state["last"] = nbytes, nlines, last
            try:
                proc.stdin.close()
            except OSError:
                pass

    t = threading.Thread(target=feed, daemon=True)
    t.start()

    cuts = [0]

    def gen() -> Iterator[tuple[int, bytes]]:
        try:
            yield from _grep_lines(proc.stdout, cuts, _grep_pattern()[1])
        finally:
            t.join()
            proc.stdout.close()
            proc.wait()
        if state["error"] is not None:
            raise state["error"]  # type: ignore[misc]
        _grep_outcome(sel, proc.returncode, max(clip.cut, cuts[0]))

    def totals() -> tuple[int, int]:
        lines = int(state["lines"])  # type: ignore[arg-type]
        if state["bytes"] and state["last"] != b"\n":
            lines += 1  # a last line without a newline still counts
        return int(state["bytes"]), lines  # type: ignore[arg-type]

    sel = Selection(gen(), totals, blocks=sel_blocks)
    return sel


def _grep_outcome(sel: Selection, returncode: int | None, cut: int) -> None:
    """What the report must say about a read that was not whole: lines cut, or grep dying before the end
    (exit 0: lines found, 1: none, 2 or a signal: it failed)."""
    if cut:
        sel.truncated = True
        sel.warnings.append(f"{cut} line(s) longer than {MAX_LINE >> 10} KiB were cut there")
    if returncode not in (0, 1):
        sel.truncated = True
        sel.warnings.append(f"grep stopped with status {returncode}: the log may not have been read to its end")


def _grep_lines(fh, cuts: list[int] | None = None, exact=None,
                at: list[int] | None = None) -> Iterator[tuple[int, bytes]]:
    """Parse `grep -n -A2` output: "N:text" for a match, "N-text" for context, "--" between groups
    (with -b, "N:B:text": `at` gets the number and offset B of the last line). Of the context, the second
    line after a match is kept only when the first is blank. `exact`: grep searched for a superset of
    PREFILTER (see _grep_pattern): a match is one only when `exact` finds a PREFILTER word in it (else
    it is a line like any other, kept when it follows a match).

    Whole chunks are split at once (bytes.split, in C); a line longer than MAX_LINE, which no chunk
    split can hold whole, sends that chunk through iter_lines."""
    hit = -1  # number of the last match
    blank_after = False  # the line after it is blank
    num = (_GREP_NUM_OFFSET if at is not None else _GREP_NUM).match
    no = off = 0
    for lines in _grep_batches(fh, cuts):
        for raw in lines:
            m = num(raw)
            if m is None:
                continue
            no = int(m.group(1))
            if at is not None:
                off = int(m.group(3))
            line = raw[m.end():]
            if m.group(2) == b":" and (exact is None or exact(line)):  # a match
                hit = no
            elif no == hit + 1:
                blank_after = not line.strip()
            elif not (no == hit + 2 and blank_after):
                continue
            yield no, line
    if at is not None and no:
        at[0], at[1] = no, off


def _grep_batches(fh, cuts: list[int] | None) -> Iterator[list[bytes]]:
    pending = b""
    for chunk in _pipe_chunks(fh):
        if pending:
            chunk = pending + chunk
        end = chunk.rfind(b"\n")
        if end < 0 or len(chunk) - end > MAX_LINE:
            # a line longer than a chunk: the careful path, which cuts it and skips the rest
            yield list(iter_lines(_prepend(chunk, _pipe_chunks(fh)), MAX_LINE, cuts))
            return
        pending = chunk[end + 1:]
        lines = chunk[:end].split(b"\n")
        if cuts is not None and len(chunk) > MAX_LINE:
            long = [i for i, ln in enumerate(lines) if len(ln) > MAX_LINE]
            for i in long:
                lines[i] = lines[i][:MAX_LINE]
            cuts[0] += len(long)
        yield lines
    if pending:
        yield [pending[:MAX_LINE]]


_GREP_NUM = re.compile(rb"(\d+)([:-])")
_GREP_NUM_OFFSET = re.compile(rb"(\d+)([:-])(\d+)[:-]")


def _pipe_chunks(fh) -> Iterator[bytes]:
    while True:
        b = fh.read(1 << 20)
        if not b:
            return
        yield b


def iter_lines(data: Iterable[bytes], max_len: int = MAX_LINE, cuts: list[int] | None = None) -> Iterator[bytes]:
    """Split a byte stream into lines without the newline; a line longer than max_len is cut (and
    counted in cuts[0] when given)."""
    pending = b""
    skipping = False
    for chunk in data:
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not skipping:
                    pending += chunk[start:]
                    if len(pending) > max_len:
                        pending = pending[:max_len]
                        skipping = True
                        if cuts is not None:
                            cuts[0] += 1
                break
            if skipping:
                yield pending
                pending = b""
                skipping = False
            else:
                piece = chunk[start:nl]
                if pending:
                    piece = (pending + piece)[:max_len]
                    pending = b""
                elif len(piece) > max_len:
                    piece = piece[:max_len]
                    if cuts is not None:
                        cuts[0] += 1
                yield piece
            start = nl + 1
    if pending:
        yield pending


# ---- python -------------------------------------------------------------------------------

_LITERALS: list[bytes] | None = None


def _prefilter_literals() -> list[bytes] | None:
    """PREFILTER's alternatives, when each is plain text (no regex syntax), else None."""
    global _LITERALS
    if _LITERALS is None:
        parts = PREFILTER.split("|")
        plain = all(p and not any(c in p for c in "\\.^$*+?()[]{}") for p in parts)
        _LITERALS = [p.encode() for p in parts] if plain else []
    return _LITERALS or None


# grep's matcher (a DFA) runs fastest through bytes that start no word it looks for; each byte that starts
# one leaves that loop, and lowercase letters are most of a log's text. A word is looked for by a part of
# it (its tail from a rarer byte: "requires" by "quires"); a line holding such a part is checked for the
# whole words as grep's output is read. Measured: 25% less of grep's time on a served log (bench/intake.py,
# sparse), 15% on the fixtures' failures; the lines checked are the same but for the few that hold a part
# and not its word.
# The bytes that start walks most often, most often first (English letter frequency; a log's spaces and
# digits and the punctuation of its headers above all); a byte not listed (capitals, most punctuation) is
# rare in a log's text.
_COMMON_STARTS = " 0123456789:.-/,=etaoinshrdlcumw_fgypbvkjxqz"
KEY_MIN = 4  # a part this long at least: a shorter one would match too many lines
_GREP_PATTERN: tuple[str, object] | None = None


def _grep_pattern() -> tuple[str, object]:
    """(the pattern grep searches for, the check of each line it prints as a match: whether it holds one of
    PREFILTER's words, or None when grep searches for PREFILTER itself)."""
    global _GREP_PATTERN
    if _GREP_PATTERN is None:
        lits = _prefilter_literals()
        if lits is None:
            _GREP_PATTERN = (PREFILTER, None)
        else:
            keys = grep_keys([lit.decode() for lit in lits])
            words = tuple(lits)  # in PREFILTER's order: the common words ("Error", "WARN") are tried first

            def exact(line: bytes) -> bool:
                return any(map(line.__contains__, words))  # a few finds: cheaper than PREFILTER_RE

            _GREP_PATTERN = ("|".join(keys), exact)
    return _GREP_PATTERN


def grep_keys(words: list[str]) -> list[str]:
    """A part of each word (its tail from one of its bytes, KEY_MIN long at least) such that the bytes the
    parts start with are few and rare: a word that can start with a byte already taken, or a rare one,
    does; the others take their rarest. Parts that hold another part are dropped (that one finds them)."""
    rank = {c: len(_COMMON_STARTS) - i for i, c in enumerate(_COMMON_STARTS)}
    taken: set[str] = set()

    def cost(c: str) -> int:
        return 0 if c in taken else rank.get(c, 0)

    def starts(w: str) -> range:
        return range(max(1, len(w) - KEY_MIN + 1))

    keys = []
    for w in sorted(words, key=lambda w: min(cost(w[i]) for i in starts(w))):
        i = min(starts(w), key=lambda j: (cost(w[j]), j))  # the longest part among the cheapest
        taken.add(w[i])
        keys.append(w[i:])
    return [k for k in dict.fromkeys(keys) if not any(o != k and o in k for o in keys)]


def _select_small(src: LogSource) -> Selection:
    """_select_python's selection for a file no longer than MAX_LINE (no line to cut), found with
    bytes.find per literal: compiling PREFILTER_RE costs more than reading such a file."""
    data = b"".join(chunks(src))
    starts: set[int] = set()  # offsets of the lines that hold a literal
    for lit in _prefilter_literals() or ():
        i = data.find(lit)
        while i >= 0:
            starts.add(data.rfind(b"\n", 0, i) + 1)
            nl = data.find(b"\n", i)
            if nl < 0:
                break
            i = data.find(lit, nl + 1)
    out: list[tuple[int, bytes]] = []
    n = len(data)
    pos = no = want = 0
    first_ctx = False  # the next context line is the first after a match (a blank one does not count)
    while pos < n:
        le = data.find(b"\n", pos)
        if le < 0:
            le = n
        no += 1
        line = data[pos:le]
        if pos in starts:
            out.append((no, line))
            want = CONTEXT_AFTER
            first_ctx = True
        elif want:
            out.append((no, line))
            want -= 1
            if first_ctx and not line.strip():
                want += 1
            first_ctx = False
        pos = le + 1
    return Selection(iter(out), lambda: (n, no))


def _select_python(src: LogSource, data: Iterable[bytes]) -> Selection:
    state = {"bytes": 0, "lines": 0}

    def gen() -> Iterator[tuple[int, bytes]]:
        lineno = 0  # lines fully consumed so far
        want_next = 0  # context lines still owed after a match
        first_ctx = False  # the next context line is the first after a match (a blank one does not count)
        for buf, nlines, nbytes in _line_blocks(data):
            state["bytes"] += nbytes
            pos = 0
            size = len(buf)
            while pos < size:
                if want_next:
                    le = buf.find(b"\n", pos)
                    if le < 0:
                        le = size
                    lineno += 1
                    line = buf[pos:min(le, pos + MAX_LINE)]
                    want_next -= 1
                    if PREFILTER_RE.search(line):
                        want_next = CONTEXT_AFTER
                        first_ctx = True
                    elif first_ctx and not line.strip():
                        want_next += 1
                        first_ctx = False
                    else:
                        first_ctx = False
                    yield lineno, line
                    pos = le + 1
                    continue
                m = PREFILTER_RE.search(buf, pos)
                if m is None:
                    break
                ls = buf.rfind(b"\n", pos, m.start()) + 1
                if ls == 0:
                    ls = pos
                lineno += buf.count(b"\n", pos, ls)
                le = buf.find(b"\n", m.end())
                if le < 0:
                    le = size
                lineno += 1
                yield lineno, buf[ls:min(le, ls + MAX_LINE)]
                want_next = CONTEXT_AFTER
                first_ctx = True
                pos = le + 1
            if pos < size:
                lineno += buf.count(b"\n", pos, size) + (0 if buf.endswith(b"\n") else 1)
            state["lines"] = lineno
        state["lines"] = lineno

    return Selection(gen(), lambda: (state["bytes"], state["lines"]))


def _line_blocks(data: Iterable[bytes]) -> Iterator[tuple[bytes, int, int]]:
    """Regroup chunks into blocks of whole lines (a block never ends mid-line), cutting lines
    longer than MAX_LINE. Yields (block, lines, original bytes); the block's last line has no
    trailing newline only at the very end of the input."""
    pending = b""
    skipping = False  # inside an over-long line whose head was already emitted
    for chunk in data:
        nbytes = len(chunk)
        if skipping:
            nl = chunk.find(b"\n")
            if nl < 0:
                yield b"", 0, nbytes
                continue
            chunk = chunk[nl + 1:]
            skipping = False
        buf = pending + chunk if pending else chunk
        last = buf.rfind(b"\n")
        if last < 0:
            if len(buf) > MAX_LINE:
                # An over-long line: hand out its head as a line of its own, skip the rest.
                yield buf[:MAX_LINE] + b"\n", 1, nbytes
                pending = b""
                skipping = True
            else:
                pending = buf
                yield b"", 0, nbytes
            continue
        pending = buf[last + 1:]
        block = buf[: last + 1]
        if len(pending) > MAX_LINE:
            block += pending[:MAX_LINE] + b"\n"
            pending = b""
            skipping = True
        yield block, 0, nbytes
    if pending:
        yield pending, 0, 0


# ---- a hard-wrapped paste ------------------------------------------------------------------

def _select_unwrapped(data: Iterable[bytes], width: int, whole: bool = False) -> Selection:
    """Rows re-joined into lines first (a paste: small), then the same selection as above; `whole`: a
    fragment, every line kept (like is_fragment's)."""
    from triage.logread.unwrap import unwrap_lines

    state = {"bytes": 0, "lines": 0}

    def counted() -> Iterator[tuple[int, bytes]]:
        def sized() -> Iterator[bytes]:
            for chunk in data:
                state["bytes"] += len(chunk)
                yield chunk
        for no, row in enumerate(iter_lines(sized()), 1):
            state["lines"] = no
            yield no, row

    def gen() -> Iterator[tuple[int, bytes]]:
        want = 0
        env_until = 0  # a pasted collect-env block is kept whole
        for no, line in unwrap_lines(counted(), width, MAX_LINE):
            hit = whole or PREFILTER_RE.search(line) is not None
            if hit or want or no <= env_until:
                yield no, line
                if BLOCK_MARKER in line:
                    env_until = no + BLOCK_LINES
            want = 2 if hit else 1 if want == 2 and not line.strip() else 0

    return Selection(gen(), lambda: (state["bytes"], state["lines"]))


def read_all_lines(src: LogSource) -> Iterator[tuple[int, bytes]]:
    """Every line with its number (for small inputs and tests)."""
    for i, line in enumerate(iter_lines(chunks(src)), 1):
        yield i, line


__all__ = ["Selection", "select", "iter_lines", "PREFILTER", "InputError"]
