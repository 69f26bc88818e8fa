"""A failure inside CUDA-graph capture, named by the capture step in its traceback's frames.

vLLM captures its CUDA graphs in a few places that every release names the same way: the V0 model
runner's `capture_model` / CUDAGraphRunner.`capture`, the V1 model runner's `capture_model` ->
`_capture_cudagraphs` (-> `_warmup_and_capture`), the CUDA-graph wrapper of compiled graphs
(vllm/compilation/cuda_graph.py, older cuda_piecewise_backend.py / backends.py) and torch's own
`torch.cuda.graph` (torch/cuda/graphs.py: capture_begin / capture_end). A paste often stops inside these
frames, before the exception line, or ends in torch's capture_end with a bare CUDA error: the step is
then all the log says, and it says the graph capture failed. A library that failed while being captured
(a JIT build, a Triton compile, NCCL) is that library's failure, named by its own frames and rules.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.logread.traceback import ExceptionRecord, Frame
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

CAPTURE_FUNCS = {"capture_model", "_capture_cudagraphs", "capture_graphs", "_warmup_and_capture",
                 "capture_begin", "capture_end"}
# files where a frame in `capture` / `__call__` / `__exit__` is the capture itself
CAPTURE_FILES = ("/vllm/worker/model_runner.py", "/vllm/worker/cuda_graph_runner.py", "/vllm/compilation/cuda_graph.py",
                 "/vllm/compilation/cuda_piecewise_backend.py", "/vllm/v1/worker/gpu/cudagraph_utils.py",
                 "/torch/cuda/graphs.py")
CAPTURE_FILE_FUNCS = {"capture", "__call__", "__exit__", "__enter__"}
# Libraries whose frames inside the capture name a failure of their own (a JIT build, a Triton or Inductor
# compile, a collective, an attention backend's metadata): then the capture step is only where it happened.
# The model's own code and torch's module plumbing run inside every capture and say nothing more.
INNER_LIBRARIES = ("/flashinfer/", "/triton/", "/torch/_inductor/", "/torch/_dynamo/", "/deep_gemm/", "/flash_attn/",
                   "/vllm_flash_attn/", "/torch/distributed/", "/vllm/distributed/", "/torch/utils/cpp_extension.py",
                   "/tvm_ffi/", "/xformers/", "/vllm/attention/", "/vllm/v1/attention/", "/aiter/")
# messages that are some other failure that merely happened during capture (their own rules name them)
OTHER_CAUSES = ("out of memory", "OutOfMemory", "illegal memory access", "no kernel image", "NCCL", "nccl",
                "device-side assert")


CUDA_ERROR_WORDS = ("CUDA error", "HIP error", "cudaError", "hipError", "CUDA driver error", "AcceleratorError")


def _capture_step(frames: list[Frame]) -> Frame | None:
    for f in reversed(frames):
        path = "/" + f.file.replace("\\", "/").lstrip("/")
        if f.func in CAPTURE_FUNCS or (f.func in CAPTURE_FILE_FUNCS and path.endswith(CAPTURE_FILES)):
            return f
    return None


def _library_inside(frames: list[Frame], step: Frame) -> bool:
    inner = frames[frames.index(step) + 1:]
    return any(lib in "/" + f.file.replace("\\", "/").lstrip("/") for f in inner for lib in INNER_LIBRARIES)


def _diagnosis(tb: ExceptionRecord, step: Frame, cut: bool) -> Diagnosis:
    where = f"{step.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{step.line} ({step.func})"
    said = "the traceback stops there, before its message" if cut else f"it ends in {tb.text.strip()[:160]}"
    return Diagnosis(
        category="cudagraph_capture", signature="cudagraph.capture_step_failed",
        title=f"Start-up failed while capturing CUDA graphs (in {where})",
        confidence=0.5 if cut else 0.6, evidence=[Evidence(tb.line.no, tb.line.shown)],
        facts={"capture_frame": where, "message_cut": cut, **({} if cut else {"exception": tb.type})},
        fix=Fix("The failure happened inside CUDA-graph capture (" + said + "). Relaunch with --enforce-eager to "
                "confirm that capture is the trigger and to serve meanwhile; then narrow it: fewer capture sizes "
                "(--max-num-seqs, --cuda-graph-sizes / -cc.cudagraph_capture_sizes), cudagraph_mode PIECEWISE "
                "instead of FULL (-cc.cudagraph_mode), --disable-custom-all-reduce with tensor parallelism, or "
                "another vLLM release when the model's code is not capturable there (report it upstream with "
                "the whole traceback).", "cudagraph-capture"),
        first_line=tb.line.no)


def _capture_step_failed(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for tb in scan.cut_tracebacks:
        step = _capture_step(tb.frames)
        if step is not None and not _library_inside(tb.frames, step):
            return _diagnosis(tb, step, cut=True)
    for exc in scan.exceptions:
        # a bare CUDA error raised by torch's capture itself (capture_begin / capture_end)
        if not exc.frames or "/torch/cuda/graphs.py" not in exc.frames[-1].file.replace("\\", "/"):
            continue
        if any(w in exc.text for w in OTHER_CAUSES) or not any(e in exc.text for e in CUDA_ERROR_WORDS):
            continue  # a crash of the process (a segfault) says less: the generic layer guesses it
        step = _capture_step(exc.frames)
        if step is not None:
            return _diagnosis(exc, step, cut=False)
    return None


RULES = [
    Rule(signature="cudagraph.capture_step_failed", category="cudagraph_capture",
         title="Start-up failed while capturing CUDA graphs", fix="", check=_capture_step_failed,
         confidence=0.6, playbook="cudagraph-capture"),
]


# torch's and the CUDA runtime's own refusals of an operation while a graph is being captured: a host
# synchronisation, a pageable copy, an RNG seed query, work from another thread or stream joined wrongly
# (c10/cuda/CUDAGraphsC10Utils.h, CUDAGeneratorImpl.cpp, Copy.cu; cudaErrorStreamCapture* / CUDA_ERROR_STREAM_CAPTURE_*
# and their HIP names). Wherever vLLM captures, these say the captured code did something a graph cannot hold.
RULES += [
    Rule(signature="cudagraph.capture_op_refused", category="cudagraph_capture",
         title="An operation that CUDA graphs cannot hold ran during capture",
         fix="Something in the captured forward pass (model code, a custom op, a library call) synchronised with "
             "the host, copied from pageable memory, queried the RNG or used another stream/thread while vLLM "
             "captured CUDA graphs. Relaunch with --enforce-eager to serve now; then try cudagraph_mode PIECEWISE "
             "(-cc.cudagraph_mode=PIECEWISE) and report the op upstream, or use a release where the model is capturable.",
         patterns=[r"(?:during|while) (?:CUDA|HIP) graph capture",
                   r"(?:cuda|hip)ErrorStreamCapture(?:Unsupported|Invalidated|Merge|Unmatched|Unjoined|Isolation|"
                   r"Implicit|WrongThread)",
                   r"CUDA_ERROR_STREAM_CAPTURE_(?:UNSUPPORTED|INVALIDATED|MERGE|UNMATCHED|UNJOINED|ISOLATION|IMPLICIT|"
                   r"WRONG_THREAD)",
                   r"(?:cuda|hip)ErrorCapturedEvent", r"operation not permitted on an event last recorded in a capturing stream",
                   r"capture (?:sequence )?(?:was )?invalidated", r"dependency created on uncaptured work in another stream",
                   r"operation would make the legacy stream depend on a capturing blocking stream",
                   # the CUDA runtime's strings for the other cudaErrorStreamCapture* codes (902-908)
                   r"merge of separate capture sequences", r"capture was not initiated in this stream",
                   r"capturing stream has unjoined work", r"thread-local capture sequence from another thread",
                   r"CUDA graphs must be captured on a non-default stream"],
         # below cudagraph.capture_failed (0.9): where both match, its words come first
         playbook="cudagraph-capture", confidence=0.8),
]


# The step a bare CUDA error interrupted, from vLLM's own progress lines: capture started ("Capturing CUDA
# graph shapes: 3%", V1's "Capturing CUDA graphs (decode, FULL): ...", V0's "Capturing cudagraphs for
# decoding" / "Capturing the model for CUDA graphs") and did not finish ("Graph capturing finished in N secs")
# before the error. Custom all-reduce registers its graph buffers as capture ends; its CUDACHECK prints
# "Failed: Cuda error <file>:<line> '<error>'" and exits. An error some rule names (OOM, an illegal address,
# NCCL) is that rule's.
CAPTURE_STARTS = ("Capturing CUDA graph", "Capturing cudagraphs", "Capturing the model for CUDA graphs")
CAPTURE_ENDS = ("Graph capturing finished", "graph capturing finished")
BARE_CUDA_ERRORS = ("CUDA error: ", "Cuda error ", "HIP error: ", "hipError", "cudaError")


def _error_during_capture(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    capturing = None
    for ln in scan.lines:
        t = ln.text
        if any(c in t for c in CAPTURE_ENDS):
            capturing = None
        elif any(c in t for c in CAPTURE_STARTS):
            capturing = capturing or ln
        elif capturing is not None and any(e in t for e in BARE_CUDA_ERRORS) and not any(w in t for w in OTHER_CAUSES):
            if t.startswith(("CUDA kernel errors", "Search for", "For debugging", "Compile with")):
                continue
            return Diagnosis(
                category="cudagraph_capture", signature="cudagraph.error_during_capture",
                title=f"A CUDA error stopped CUDA-graph capture: {t.strip()[:120]}",
                confidence=0.55, evidence=[Evidence(capturing.no, capturing.shown), Evidence(ln.no, ln.shown)],
                facts={"error": t.strip()[:300], "capture_line": capturing.no},
                fix=Fix("The error came while vLLM was capturing CUDA graphs (capture had started and not finished). "
                        "Relaunch with --enforce-eager to confirm and to serve meanwhile. With tensor parallelism, "
                        "custom all-reduce registers its buffers at the end of capture and fails where GPUs cannot "
                        "share memory (no P2P, some VMs and containers): try --disable-custom-all-reduce. Otherwise "
                        "reduce the capture sizes or use cudagraph_mode PIECEWISE, and report it upstream.",
                        "cudagraph-capture"),
                first_line=ln.no)
    return None


RULES += [
    Rule(signature="cudagraph.error_during_capture", category="cudagraph_capture",
         title="A CUDA error stopped CUDA-graph capture", fix="", check=_error_during_capture, confidence=0.55,
         playbook="cudagraph-capture"),
]


# An illegal address (or a misaligned one, a failed launch) raised from inside vLLM's capture step, with no
# kernel library's frames below the step: the forward pass faults only as it is captured (the graph replays
# buffers sized for the largest capture size, a FULL graph bakes an attention backend's metadata in), which
# --enforce-eager confirms. A library's frames below the step name that library (kernels.illegal_memory_access).
FAULTS = ("an illegal memory access was encountered", "misaligned address", "unspecified launch failure")


def _fault_in_capture(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for exc in scan.exceptions:
        fault = next((f for f in FAULTS if f in exc.text), None)
        if fault is None or not exc.frames:
            continue
        step = _capture_step(exc.frames)
        if step is None or _library_inside(exc.frames, step):
            continue
        where = f"{step.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{step.line} ({step.func})"
        return Diagnosis(
            category="cudagraph_capture", signature="cudagraph.fault_during_capture",
            title=f"The GPU faulted ({fault}) while capturing CUDA graphs (in {where})",
            confidence=0.75, evidence=[Evidence(exc.line.no, exc.line.shown)],
            facts={"capture_frame": where, "fault": fault},
            fix=Fix("The fault came from the forward pass vLLM was capturing. Relaunch with --enforce-eager: if it "
                    "starts, capture is the trigger; then try cudagraph_mode PIECEWISE (-cc.cudagraph_mode=PIECEWISE), "
                    "fewer capture sizes (-cc.cudagraph_capture_sizes / --max-num-seqs), --disable-custom-all-reduce "
                    "with tensor parallelism, or another attention backend, and report it upstream with "
                    "CUDA_LAUNCH_BLOCKING=1 output.", "cudagraph-capture"),
            first_line=exc.line.no)
    return None


RULES += [
    Rule(signature="cudagraph.fault_during_capture", category="cudagraph_capture",
         title="The GPU faulted while capturing CUDA graphs", fix="", check=_fault_in_capture, confidence=0.75,
         playbook="cudagraph-capture"),
]
