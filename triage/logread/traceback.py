"""Reassemble Python tracebacks per process, even when several processes' lines interleave.

Every vLLM process prints its own traceback (workers, EngineCore, API server); with the process
tag peeled off by normalize.parse, lines of one process are fed to that process' assembler.
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.record import Record

# Compiled on first use (start-up); the needles are literals every match contains (triage.lazyre).
# (a paste may cut a frame after its file name, or lose the space in ",in": the file still counts)
FRAME_RE = lazy(r'^\s*File "(?P<file>[^"]+)"(?:, line (?P<line>\d+)(?:, ?in (?P<func>.+))?)?', needles=('File "',))
# "ValueError: msg", "torch.OutOfMemoryError: CUDA out of memory", "KeyError: 'x'", "SystemExit: 1",
# "triton.runtime.errors.OutOfResources: out of resource", "RuntimeError" (no message).
EXC_RE = lazy(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning|OutOfResources|Fault)"
    r"(?:\[[^\]]*\])?)(?::\s?(?P<msg>.*))?$",
    needles=("Error", "Exception", "Exit", "Interrupt", "Warning", "OutOfResources", "Fault"),
)
# Inside a traceback any "dotted.Name: message" line ends it (custom exception types).
EXC_IN_TB_RE = lazy(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s?(?P<msg>.*))?$")
# IPython / Jupyter frames: "File /usr/lib/python3.10/site-packages/vllm/utils.py:1037, in inner(*args)"
# (IPython 8) and "~/envs/x/lib/python3.10/site-packages/vllm/worker/worker.py in load_model(self)" (older).
IPY_FRAME_RE = lazy(r"^\s*(?:File\s+)?(?P<file>(?:/|~|[A-Za-z]:\\)[^:\s]*\.py)(?::(?P<line>\d+))?,? in (?P<func>[\w<>.]+)",
                    needles=(".py",))
IPY_HEAD = "Traceback (most recent call last)"  # IPython: "ValueError      Traceback (most recent call last)"
# faulthandler's stacks (a segfault, an abort, a watchdog dump): "  File "x.py", line 77 in capture_begin",
# most recent call first, under "Fatal Python error: Segmentation fault" and "Current thread 0x... (most
# recent call first):" (or "Stack (most recent call first):", Python 3.12+); other threads' stacks
# follow "Thread 0x... (most recent call first):".
FAULT_FRAME_RE = lazy(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S.*)$', needles=('File "',))
FATAL = "Fatal Python error: "
# A C++ exception nobody caught (torch's c10::Error, flashinfer::Error, std::runtime_error): libstdc++
# prints these two lines and aborts; the message is on the second.
TERMINATE = "terminate called after throwing an instance of '"
WHAT = "what():"
MAX_EXTRA = 4  # continuation lines of a message kept with its exception
CHAIN_CAUSE = "The above exception was the direct cause of the following exception"
CHAIN_CONTEXT = "During handling of the above exception, another exception occurred"

# Where in start-up a traceback died, from its frames' functions (vLLM's worker/model-runner functions, V0
# and V1). phase_of takes the first step listed that any frame is in; triage.rules.budget reads the same
# table innermost frame first.
STEPS = [
    ("capture_model", "CUDA graph capture"), ("capture_graphs", "CUDA graph capture"),
    ("_capture_cudagraphs", "CUDA graph capture"),
    ("_dummy_sampler_run", "sampler warm-up"),
    ("profile_run", "memory profiling"), ("determine_available_memory", "memory profiling"),
    ("determine_num_available_blocks", "memory profiling"),
    ("initialize_kv_cache", "KV cache allocation"), ("_allocate_kv_cache", "KV cache allocation"),
    ("initialize_cache", "KV cache allocation"), ("_init_cache_engine", "KV cache allocation"),
    ("load_weights", "weight loading"), ("load_model", "weight loading"),
    ("_dummy_run", "warm-up"), ("compile_or_warm_up_model", "warm-up"), ("_warmup", "warm-up"),
    ("init_worker_distributed_environment", "distributed start-up"),
    ("initialize_model_parallel", "distributed start-up"),
    ("init_device", "device start-up"), ("get_tokenizer", "tokenizer loading"), ("get_config", "config loading"),
    ("create_engine_config", "argument checking"),
]
JIT_FILES = ("/triton/compiler/", "/triton/runtime/", "/torch/_inductor/", "/flashinfer/jit/", "/deep_gemm/jit",
             "/torch/utils/cpp_extension.py", "/tvm_ffi/")


def phase_of(frames: list[Frame]) -> str | None:
    """The step of start-up these frames were in, in words ("CUDA graph capture", "JIT compilation
    during warm-up"); None when no frame says."""
    funcs = {f.func.rsplit(".", 1)[-1] for f in frames}  # IPython 8 qualifies a method: "GPUModelRunner.profile_run"
    step = next((name for fn, name in STEPS if fn in funcs), None)  # capture_model runs _dummy_run: first listed wins
    jit = any(j in f.file for f in frames[-8:] for j in JIT_FILES)
    if jit:
        return f"JIT compilation during {step}" if step else "JIT compilation"
    return step


class Frame(Record):
    # Plain classes, not dataclasses: see triage.record (start-up).
    __slots__ = ("file", "line", "func")
    _fields = __slots__

    def __init__(self, file: str, line: int, func: str) -> None:
        self.file = file
        self.line = line
        self.func = func


class ExceptionRecord(Record):
    __slots__ = ("type", "message", "line", "frames", "in_traceback", "caused_by", "extra")
    _fields = __slots__

    def __init__(self, type: str, message: str, line: Line, frames: list[Frame] | None = None,
                 in_traceback: bool = False, caused_by: ExceptionRecord | None = None,
                 extra: list[Line] | None = None) -> None:
        self.type = type  # as printed, possibly dotted: "torch.OutOfMemoryError"
        self.message = message
        self.line = line
        self.frames = [] if frames is None else frames
        self.in_traceback = in_traceback
        self.caused_by = caused_by  # the exception this one wraps (chained tracebacks)
        self.extra = [] if extra is None else extra  # continuation lines of a multi-line message

    @property
    def short_type(self) -> str:
        return self.type.rsplit(".", 1)[-1]

    @property
    def text(self) -> str:
        return f"{self.type}: {self.message}" if self.message else self.type


class _ProcState:
    __slots__ = ("frames", "in_tb", "chained", "last_exc", "tb_start", "tb_indent", "last_frame", "fatal",
                 "fault_blocks", "fault_mode", "fault_last", "terminate", "head_type")

    def __init__(self) -> None:
        self.head_type = ""  # IPython names the exception in its traceback's head: kept for a paste cut before the end
        self.fatal: ExceptionRecord | None = None  # "Fatal Python error: ..." whose stack may follow
        self.fault_blocks: list[tuple[bool, list[Frame]]] = []  # (marked the current thread, frames)
        self.fault_mode = ""  # "current" / "other": the header above the stack being read
        self.fault_last = -1  # number of the last faulthandler frame read
        self.terminate: ExceptionRecord | None = None  # an uncaught C++ exception, waiting for its what()
        self.last_frame: Line | None = None
        self.frames: list[Frame] = []
        self.in_tb = False
        self.chained = False
        self.last_exc: ExceptionRecord | None = None
        self.tb_start = 0
        self.tb_indent = 0  # the "Traceback" line's indentation: its exception line has the same


def _current_stack(blocks: list[tuple[bool, list[Frame]]]) -> list[Frame]:
    """Of the stacks faulthandler printed, the crashed thread's: the one marked current, else the first
    that is not a background thread's (those start in threading's _bootstrap)."""
    for current, frames in blocks:
        if current:
            return frames
    for _, frames in blocks:
        if frames and not (frames[0].file.endswith("threading.py") and frames[0].func.startswith("_bootstrap")):
            return frames
    return blocks[0][1] if blocks else []


class TracebackAssembler:
    MAX_FRAMES = 200
    MAX_RECORDS = 2000
    MAX_PROCS = 512  # a restart loop has a new pid every start: the oldest processes are forgotten

    def __init__(self) -> None:
        self._procs: dict[str, _ProcState] = {}
        self.records: list[ExceptionRecord] = []
        self.frame_files: set[str] = set()
        self._last_terminate: ExceptionRecord | None = None  # what() may come from another process tag

    def feed(self, line: Line) -> ExceptionRecord | None:
        st = self._procs.get(line.proc)
        if st is None:
            if len(self._procs) >= self.MAX_PROCS:
                del self._procs[next(iter(self._procs))]
            st = self._procs[line.proc] = _ProcState()
        text = line.text
        stripped = text.strip()
        if stripped.startswith(IPY_HEAD) or (stripped.endswith(IPY_HEAD) and stripped.split(None, 1)[-1] == IPY_HEAD
                                              and EXC_RE.match(stripped.split()[0]) is not None):
            st.in_tb = True
            st.frames = []
            st.tb_start = line.no
            st.tb_indent = len(text) - len(text.lstrip())
            st.head_type = "" if stripped.startswith(IPY_HEAD) else stripped.split()[0]
            return None
        if stripped.startswith((CHAIN_CAUSE, CHAIN_CONTEXT)):
            st.chained = True
            return None
        last = st.last_exc
        if (last is not None and not st.in_tb and stripped and len(last.extra) < MAX_EXTRA
                and line.no == (last.extra[-1].no if last.extra else last.line.no) + 1
                and line.level == last.line.level and line.src == last.line.src
                and not stripped.startswith(("Traceback", 'File "', CHAIN_CAUSE, CHAIN_CONTEXT, FATAL))
                and EXC_RE.match(stripped) is None):
            last.extra.append(line)  # the message goes on: "(major > 12 ...) and "NVCC version should be >= 12.3""
            return None
        if not st.in_tb:
            got = self._native(st, line, stripped)
            if got is not False:
                return got  # type: ignore[return-value]
            if stripped.startswith('File "') and ", line " in stripped and FRAME_RE.match(text):
                # A paste that starts inside a traceback (its head cut off): the frames still lead to
                # the exception line below them.
                st.in_tb = True
                st.frames = []
                st.tb_start = line.no
                st.tb_indent = max(0, len(text) - len(text.lstrip()) - 2)
                st.chained = False
                st.head_type = ""
        if st.in_tb:
            m = FRAME_RE.match(text)
            if m:
                if len(st.frames) < self.MAX_FRAMES:
                    st.frames.append(Frame(m.group("file"), int(m.group("line") or 0), (m.group("func") or "").strip()))
                st.last_frame = line
                if len(self.frame_files) < 5000:
                    self.frame_files.add(m.group("file"))
                return None
            m = IPY_FRAME_RE.match(text) if ".py" in stripped and " in " in stripped else None
            if m:
                if len(st.frames) < self.MAX_FRAMES:
                    st.frames.append(Frame(m.group("file"), int(m.group("line") or 0), m.group("func")))
                st.last_frame = line
                return None
            if not stripped or len(text) - len(text.lstrip()) > st.tb_indent or stripped.startswith(("^", "~", "…", "...")):
                return None  # source line or caret marker under a frame (indented deeper than the traceback)
            m = EXC_IN_TB_RE.match(stripped) or EXC_RE.match(stripped)
            if m and (":" in stripped or EXC_RE.match(stripped)):
                rec = ExceptionRecord(m.group("type"), (m.group("msg") or "").strip(), line,
                                      st.frames, True, st.last_exc if st.chained else None)
                st.in_tb = False
                st.chained = False
                st.frames = []
                st.last_exc = rec
                self._add(rec)
                return rec
            return None
        m = EXC_RE.match(stripped)
        if m:
            rec = ExceptionRecord(m.group("type"), (m.group("msg") or "").strip(), line, [], False, None)
            st.last_exc = rec
            self._add(rec)
            return rec
        return None

    def _native(self, st: _ProcState, line: Line, stripped: str) -> ExceptionRecord | None | bool:
        """What a crash outside Python's own traceback printing says: faulthandler's stack under a fatal
        signal, an uncaught C++ exception. The record it makes (or None when the line belongs to one);
        False when the line is none of these."""
        if stripped.startswith(FATAL):
            rec = ExceptionRecord("Fatal Python error", stripped[len(FATAL):].strip(), line, [], True)
            st.fatal, st.fault_blocks, st.fault_mode = rec, [], ""
            self._add(rec)
            return rec
        if stripped.endswith("(most recent call first):"):
            st.fault_mode = "other" if stripped.startswith("Thread ") else "current"
            st.fault_last = -1
            return None
        m = FAULT_FRAME_RE.match(line.text) if 'File "' in stripped else None
        if m is not None:
            if st.fault_mode == "other":
                return None
            fr = Frame(m.group("file"), int(m.group("line")), m.group("func").strip())
            if st.fault_last < 0 or line.no > st.fault_last + 1:
                st.fault_blocks.append((st.fault_mode == "current", []))
            st.fault_last = line.no
            st.last_frame = line
            blk = st.fault_blocks[-1][1]
            if len(blk) < self.MAX_FRAMES:
                blk.insert(0, fr)  # printed most recent first; kept innermost last, like a traceback
            if st.fatal is not None:
                st.fatal.frames = _current_stack(st.fault_blocks)
            return None
        if TERMINATE in stripped:
            name = stripped.split(TERMINATE, 1)[1].split("'", 1)[0]
            rec = ExceptionRecord(name.replace("::", ".") or "std.exception", "", line, [], True)
            self._last_terminate = st.terminate = rec
            self._add(rec)
            return rec
        if stripped.startswith(WHAT):
            thrown = st.terminate or self._last_terminate
            if thrown is not None and not thrown.message and line.no - thrown.line.no <= 3:
                thrown.message = stripped[len(WHAT):].strip()
                return None
        if st.fault_mode and not stripped.startswith(("File ", "...", "<")):
            st.fault_mode = ""  # the stack ended; "Extension modules: ..." and the like follow
        return False

    def cut(self) -> list[ExceptionRecord]:
        """Tracebacks that never reached their exception line (the log or the paste ends inside
        them): a record with an empty type (or the one an IPython head named), its frames, and the last frame's line. A faulthandler
        stack with no fatal-error line above it is one too."""
        out = [ExceptionRecord(st.head_type, "", st.last_frame, list(st.frames), True)
               for st in self._procs.values() if st.in_tb and st.frames and st.last_frame is not None]
        out += [ExceptionRecord("", "", st.last_frame, _current_stack(st.fault_blocks), True)
                for st in self._procs.values()
                if st.fatal is None and st.fault_blocks and not st.in_tb and st.last_frame is not None]
        return out

    def _add(self, rec: ExceptionRecord) -> None:
        if len(self.records) < self.MAX_RECORDS:
            self.records.append(rec)
        else:  # keep the newest: the end of a log is where processes die
            self.records[-1] = rec
