"""Reassemble Python tracebacks per process, even when several processes' lines interleave.

Every vLLM process prints its own traceback (workers, EngineCore, API server); with the process
tag peeled off by normalize.parse, lines of one process are fed to that process' assembler.
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.record import Record

# Compiled on first use (start-up); the needles are literals every match contains (triage.lazyre).
FRAME_RE = lazy(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?', needles=('File "',))
# "ValueError: msg", "torch.OutOfMemoryError: CUDA out of memory", "KeyError: 'x'", "SystemExit: 1",
# "triton.runtime.errors.OutOfResources: out of resource", "RuntimeError" (no message).
EXC_RE = lazy(
    r"^(?P<type>(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt|Warning|OutOfResources|Fault)"
    r"(?:\[[^\]]*\])?)(?::\s?(?P<msg>.*))?$",
    needles=("Error", "Exception", "Exit", "Interrupt", "Warning", "OutOfResources", "Fault"),
)
# Inside a traceback any "dotted.Name: message" line ends it (custom exception types).
EXC_IN_TB_RE = lazy(r"^(?P<type>(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*)(?::\s?(?P<msg>.*))?$")
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
    funcs = {f.func for f in frames}
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
    __slots__ = ("frames", "in_tb", "chained", "last_exc", "tb_start", "tb_indent", "last_frame")

    def __init__(self) -> None:
        self.last_frame: Line | None = None
        self.frames: list[Frame] = []
        self.in_tb = False
        self.chained = False
        self.last_exc: ExceptionRecord | None = None
        self.tb_start = 0
        self.tb_indent = 0  # the "Traceback" line's indentation: its exception line has the same


class TracebackAssembler:
    MAX_FRAMES = 200
    MAX_RECORDS = 2000
    MAX_PROCS = 512  # a restart loop has a new pid every start: the oldest processes are forgotten

    def __init__(self) -> None:
        self._procs: dict[str, _ProcState] = {}
        self.records: list[ExceptionRecord] = []
        self.frame_files: set[str] = set()

    def feed(self, line: Line) -> ExceptionRecord | None:
        st = self._procs.get(line.proc)
        if st is None:
            if len(self._procs) >= self.MAX_PROCS:
                del self._procs[next(iter(self._procs))]
            st = self._procs[line.proc] = _ProcState()
        text = line.text
        stripped = text.strip()
        if stripped.startswith("Traceback (most recent call last)"):
            st.in_tb = True
            st.frames = []
            st.tb_start = line.no
            st.tb_indent = len(text) - len(text.lstrip())
            return None
        if stripped.startswith((CHAIN_CAUSE, CHAIN_CONTEXT)):
            st.chained = True
            return None
        if not st.in_tb and st.last_exc is None and not st.frames and FRAME_RE.match(text):
            # A paste that starts mid-traceback (its "Traceback" line cut away): the frames still count,
            # with the "Traceback" line taken two columns left of the first frame, as Python prints it.
            st.in_tb = True
            st.tb_start = line.no
            st.tb_indent = max(0, len(text) - len(text.lstrip()) - 2)
        if st.in_tb:
            m = FRAME_RE.match(text)
            if m:
                if len(st.frames) < self.MAX_FRAMES:
                    st.frames.append(Frame(m.group("file"), int(m.group("line")), (m.group("func") or "").strip()))
                st.last_frame = line
                if len(self.frame_files) < 5000:
                    self.frame_files.add(m.group("file"))
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
            self._add(rec)
            return rec
        return None

    def cut(self) -> list[ExceptionRecord]:
        """Tracebacks that never reached their exception line (the log or the paste ends inside
        them): a record with an empty type, its frames, and the last frame's line."""
        return [ExceptionRecord("", "", st.last_frame, list(st.frames), True)
                for st in self._procs.values() if st.in_tb and st.frames and st.last_frame is not None]

    def _add(self, rec: ExceptionRecord) -> None:
        if len(self.records) < self.MAX_RECORDS:
            self.records.append(rec)
        else:  # keep the newest: the end of a log is where processes die
            self.records[-1] = rec
