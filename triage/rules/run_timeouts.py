"""Waits that ran out between vLLM's processes: the front-end waiting for its engine cores, the engine waiting
for its workers' replies, a rendezvous waiting for the other ranks, a Ray call waiting for its actors.

Each names the wait, not what made the other side late: an engine that crashed (its own traceback, above), a
warm-up that outlasts the deadline (DeepGEMM, FlashInfer, torch.compile of a big model), a worker hung in a
collective, ranks that never started or cannot reach the host. So they are secondary: a failure some rule
names on the other side of the wait comes first. The messages are vLLM's (v1/engine/core_client.py,
v1/executor/multiproc_executor.py, distributed/utils.py), torch's TCPStore (c10d) and Ray's, every release.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.logread.traceback import Frame
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

RULES = [
    Rule(signature="distributed.engine_startup_timeout", category="distributed",
         title="The API server gave up waiting for the engine core processes to start",
         fix="The front-end waited for its engine cores' first handshake message and timed out. Look above for an "
             "engine core's own error first (it crashed, and this is only the consequence). If the engines were "
             "still busy (slow weight loading, DeepGEMM/FlashInfer warm-up or torch.compile of a big model), raise "
             "VLLM_ENGINE_READY_TIMEOUT_S (seconds; older releases wait a fixed time). With data parallelism over "
             "several nodes, check that every engine can reach the front-end's --data-parallel-address and ports.",
         # 0.9-0.16 ("...to send" "initial message..." joined without a space), 0.25+, and elastic scale-up
         patterns=[r"Timed out waiting for (?:new )?engines to send ?initial message",
                   r"Timed out waiting for (?:new )?engine core processes to start",
                   # the raise's source line under its frame, when the paste stops there
                   r"raise TimeoutError\(\s*f?\"Timed out waiting for (?:new )?engines? (?:core processes )?to"],
         playbook="distributed", confidence=0.7, secondary=True),
    Rule(signature="distributed.worker_rpc_timeout", category="distributed",
         title="The engine timed out waiting for its workers to answer {method}",
         fix="A worker process stopped answering the engine's call ({method}): find that worker's own last lines "
             "(a traceback, a hang in a collective, NCCL_DEBUG=INFO output). A worker stuck in NCCL usually means a "
             "peer died or the GPUs cannot reach each other; a slow but healthy step can be given more time with "
             "VLLM_RPC_TIMEOUT (ms).",
         patterns=[r"RPC call to (?P<method>\w+) timed out"],
         playbook="distributed", confidence=0.7, secondary=True),
    Rule(signature="distributed.rendezvous_timeout", category="distributed",
         title="Only {joined} of {world} processes reached the distributed rendezvous before it timed out",
         fix="torch.distributed's store waited for all {world} ranks and only {joined} arrived: the others never "
             "started or cannot reach this host's address and port. Check that every rank was launched (data "
             "parallel ranks, other nodes), that MASTER_ADDR / VLLM_HOST_IP / --data-parallel-address is an "
             "address the other processes can reach, and that the port is open between them.",
         # torch c10d TCPStore (TCPStoreBackend / TCPStore.cpp waitForWorkers)
         patterns=[r"Timed out after \d+ seconds waiting for clients\. (?P<joined>\d+)/(?P<world>\d+) clients joined"],
         playbook="distributed", confidence=0.7, secondary=True),
    Rule(signature="distributed.barrier_timeout", category="distributed",
         title="A barrier between vLLM's processes timed out (a rank never arrived)",
         fix="vLLM's CPU barrier across ranks timed out: one rank is stuck or died before reaching it. Find the first "
             "error of any rank above; on several nodes check they run the same vLLM/torch and reach each other.",
         # vllm/distributed/utils.py stateless barrier; elastic EP's barrier
         patterns=[r"Barrier (?:departure )?timed out after (?:[\d.]+ ?|%f )s"],
         playbook="distributed", confidence=0.7, secondary=True),
    Rule(signature="distributed.ray_timeout", category="distributed",
         title="A call to the Ray workers timed out ({what})",
         fix="vLLM's executor waited on its Ray workers and the wait ran out: a worker is hung (often in a collective "
             "across nodes) or died. Check `ray status` and the workers' own logs (`ray logs`); for compiled graphs "
             "(pipeline parallelism over Ray) a slow first step can be given more time with RAY_CGRAPH_get_timeout, "
             "and --distributed-executor-backend mp on one node takes Ray out of the picture.",
         # (ray.get's own GetTimeoutError: the fallback names it by its library, distributed, already)
         patterns=[r"ray\.exceptions\.(?P<what>RayChannelTimeoutError)"],
         playbook="distributed", confidence=0.7, secondary=True),
]


# ---- a traceback that ends while the engine waits on its workers ------------------------------------------
# The engine's calls into its workers block in a few places every release names alike: Ray's get (through
# vllm/(v1/)executor/ray_utils.py or the Ray executor), Ray compiled-graph channels (ray/experimental/channel),
# and the shared-memory reply queue of the multiprocess executor (shm_broadcast: dequeue / acquire_read). A paste
# that stops inside these frames says the engine was waiting for its workers when it failed: a worker's
# error (re-raised through the wait), a timeout or a hang. Said as likely, for the message is cut.
WAIT_FRAMES = ("/ray/_private/worker.py", "/ray/experimental/channel/", "/ray/dag/compiled_dag_node.py",
               "/vllm/distributed/device_communicators/shm_broadcast.py")
WAIT_CALLERS = ("/vllm/executor/ray_", "/vllm/v1/executor/ray_", "/vllm/v1/executor/multiproc_executor.py",
                "/vllm/executor/multiproc_")
RAY_PLUMBING = ("/ray/_private/auto_init_hook.py", "/ray/_private/client_mode_hook.py")


def _path(f: Frame) -> str:
    return "/" + f.file.replace("\\", "/").lstrip("/")


def _waiting(frames: list[Frame]) -> Frame | None:
    """The frame where the engine waits on its workers, when the traceback ends in that wait."""
    inner = [f for f in frames if not any(p in _path(f) for p in RAY_PLUMBING)]
    if not inner:
        return None
    last = inner[-1]
    if any(w in _path(last) for w in WAIT_FRAMES):
        return last
    # vLLM's own wrapper around ray.get, the last frame before Ray's plumbing
    if any(c in _path(last) for c in WAIT_CALLERS) and len(inner) < len(frames):
        return last
    return None


def _waiting_on_workers(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for tb in scan.cut_tracebacks:
        f = _waiting(tb.frames)
        if f is None:
            continue
        where = f"{f.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{f.line} ({f.func})"
        return Diagnosis(
            category="distributed", signature="distributed.waiting_on_workers",
            title=f"The engine failed while waiting for its workers (in {where}); the error itself is cut off",
            confidence=0.4, evidence=[Evidence(tb.line.no, tb.line.shown)],
            facts={"wait_frame": where, "category_guessed_from": "traceback frames (the exception line is cut)"},
            fix=Fix("The traceback stops where vLLM's engine waits for its worker processes (Ray or the multiprocess "
                    "executor's reply queue): a worker failed or hung, or the wait timed out. The worker's own output "
                    "(its rank's traceback, `ray logs`) has the cause; paste the whole log (`2>&1 | tee vllm.log`).",
                    "distributed"),
            first_line=tb.line.no)
    return None


RULES += [
    Rule(signature="distributed.waiting_on_workers", category="distributed",
         title="The engine failed while waiting for its workers", fix="", check=_waiting_on_workers,
         confidence=0.4, playbook="distributed"),
]


# ---- a collective that ran inside CUDA-graph capture --------------------------------------------------------
# torch's and CUDA's capture refusals raised from inside a torch.distributed / vLLM communicator call: the
# collective's backend cannot be captured (Gloo, the only one torch ships on Windows and for CPU tensors; a
# process group on another stream), so it is that communicator, not the model, that breaks capture.
CAPTURE_REFUSALS = ("operation not permitted when stream is capturing", "StreamCaptureUnsupported",
                    "StreamCaptureInvalidated", "STREAM_CAPTURE_UNSUPPORTED", "STREAM_CAPTURE_INVALIDATED")
COLLECTIVE_FILES = ("/torch/distributed/distributed_c10d.py", "/torch/distributed/c10d_logger.py",
                    "/vllm/distributed/device_communicators/", "/vllm/distributed/parallel_state.py",
                    "/vllm/distributed/communication_op.py")


def _collective_in_capture(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for exc in scan.exceptions:
        if not exc.frames or not any(w in exc.text for w in CAPTURE_REFUSALS):
            continue
        last = exc.frames[-1]
        if not any(c in _path(last) for c in COLLECTIVE_FILES):
            continue
        windows = ":\\" in last.file or "\\Lib\\site-packages\\" in last.file
        where = f"{last.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{last.line} ({last.func})"
        hint = ("This is Windows, whose torch has no NCCL: tensor parallelism there goes through Gloo, which "
                "cannot run inside a CUDA graph. Launch with --enforce-eager, or run tensor parallelism under "
                "Linux/WSL with NCCL (or a vLLM-for-Windows build that brings its own NCCL). "
                if windows else "")
        # the same refusal printed before the traceback (vLLM logs the message, then the stack) starts it
        said = next((ln for ln in scan.lines if ln.no < exc.line.no and any(w in ln.text for w in CAPTURE_REFUSALS)),
                    exc.line)
        return Diagnosis(
            category="distributed", signature="distributed.collective_in_capture",
            title=f"A collective ({last.func}) could not be captured into a CUDA graph",
            confidence=0.92, evidence=[Evidence(ln.no, ln.shown) for ln in ([said, exc.line] if said is not exc.line else [exc.line])],
            facts={"collective_frame": where, "windows": windows},
            fix=Fix(hint + "The tensor-parallel all-reduce ran through a process group whose backend cannot be "
                    "captured (Gloo, or a communicator on the wrong stream). Relaunch with --enforce-eager to serve "
                    "now; check that the device group uses NCCL (NCCL_DEBUG=INFO shows it) and try "
                    "--disable-custom-all-reduce.", "distributed"),
            first_line=said.no)
    return None


RULES += [
    Rule(signature="distributed.collective_in_capture", category="distributed",
         title="A collective could not be captured into a CUDA graph", fix="", check=_collective_in_capture,
         confidence=0.92, playbook="distributed"),
]
