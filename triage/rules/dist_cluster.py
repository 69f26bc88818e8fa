"""Multi-GPU and multi-node plumbing the other distributed modules do not name: CUDA IPC in the custom
all-reduce, Ray's GCS, two ranks on one GPU, collective bootstrap ports, Gloo timeouts, KV-transfer engines.

- vLLM's custom all-reduce (csrc/custom_all_reduce.cuh) opens the other ranks' buffers through CUDA IPC and stops
  the process with `Failed: Cuda error <file>:<line> '<cuda error>'` (CUDACHECK, 0.4.1+; `Failed: <file>:<line>
  '<error>'` before) and no Python traceback. IPC handles only work between processes of one node that share an
  IPC namespace, on memory from one cudaMalloc: a TP group spanning nodes (MNNVL), expandable_segments with DP and
  TP, containers without --ipc=host, an old driver or NCCL all end there. --disable-custom-all-reduce uses NCCL.
- Ray's clients wait for the cluster's GCS (gcs_rpc_client.h / gcs_client.cc, Ray 2.x): `Failed to connect to GCS
  at address H:P within N seconds` (a warning per retry), `Failed to get cluster ID from GCS server: TimedOut`,
  `Failed to connect to GCS within 60 seconds. GCS may have been killed` (older), and node.py's `Unable to
  connect to GCS at H:P`. A head that is down, an address that expanded empty (`--address=:6379`), a firewall, or
  Ray initialised outside the main thread.
- NCCL refuses a communicator with two ranks on one device (init.cc, every 2.x): `Duplicate GPU detected : rank A
  and rank B both on CUDA device X`. Ray placed two workers of one group on one GPU (fractional num_gpus,
  colocated worker groups, a runtime_env hook that initialises CUDA before Ray sets the device), or
  CUDA_VISIBLE_DEVICES names a GPU twice.
- HCCL's bootstrap binds a host port per rank (CANN EJ0003, `Communication_Error_Bind_IP_Port`): `Failed to bind the
  IP port. Reason: The IP address and port have been bound already.`, often beside `host nic listen start failed,
  port[60000]` and `HcclGetRootInfo ... error code is 11` / `hcclCommInitRootInfoConfig ... error code is 7`. A second
  job on the host, or the ports of an earlier run not yet released.
- Gloo's TCP buffers give up after the process group timeout (gloo/transport/tcp/unbound_buffer.cc): `Timed out
  waiting <ms>ms for recv operation to complete` (or send): the peer rank hung or died, or vLLM's CPU-side traffic
  crossed nodes on a path that never delivers (multi-node DP under RayExecutorV2).
- Mooncake's KV transfer (vLLM's MooncakeConnector 0.11+, vllm-ascend's mooncake connectors) reports a failed
  batch read as `Mooncake transfer failed for request ...` / `RuntimeError: Mooncake transfer failed, ret: -1`, the
  engine beneath as `Failed to connect to segment: H:P` / `Failed to connect to target: H:P`.
- A ZMQ socket bound to an address the host does not own fails with `ZMQError: Cannot assign requested address
  (addr='tcp://IP:PORT')`: NixlConnector's handshake listener binds VLLM_NIXL_SIDE_CHANNEL_HOST, the DP engines
  bind --data-parallel-address: an address computed on one node and passed to another.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.cudagraph_frames import BARE_CUDA_ERRORS, CAPTURE_ENDS, CAPTURE_STARTS

# ---- the custom all-reduce's CUDA IPC -------------------------------------------------------------------------


def _custom_ar_facts(m, line, scan) -> dict:
    err = m.group("cuda_error")
    text = scan.joined_text()
    if "expandable_segments" in text:
        advice = ("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True hands the custom all-reduce memory CUDA IPC "
                  "cannot export: unset it (or drop expandable_segments) for this server, or start with "
                  "--disable-custom-all-reduce")
    elif err == "invalid resource handle" or re.search(r"multi-?node|MNNVL|NVL72|across (?:two|both|\d+) nodes", text,
                                                       re.IGNORECASE):
        advice = ("an IPC handle opens only on the node that made it: when a TP group spans nodes the custom "
                  "all-reduce cannot work, start with --disable-custom-all-reduce (NCCL does the all-reduce)")
    else:
        advice = ("start with --disable-custom-all-reduce (NCCL does the all-reduce); to keep the custom one, check "
                  "that the workers share an IPC namespace (docker --ipc=host), that the driver and NCCL are current, "
                  "and that PYTORCH_CUDA_ALLOC_CONF does not set expandable_segments")
    return {"cuda_error": err, "advice": advice}


def _custom_ar(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    d = CUSTOM_AR_IPC.match_lines(scan)
    if d is None:
        return None
    # the graph buffers it registers as CUDA-graph capture ends: inside a capture that never finished the error
    # is cudagraph.error_during_capture's (for the wordings it reads), which says so and names the custom
    # all-reduce too
    first = min(e.line for e in d.evidence)
    capturing = False
    for ln in scan.lines:
        if ln.no >= first:
            break
        if any(c in ln.text for c in CAPTURE_ENDS):
            capturing = False
        elif any(c in ln.text for c in CAPTURE_STARTS):
            capturing = True
    said = next((e.text for e in d.evidence if e.line == first), "")
    return None if capturing and any(b in said for b in BARE_CUDA_ERRORS) else d


CUSTOM_AR_IPC: Rule = Rule(
    signature="distributed.custom_ar_cuda_ipc", category="distributed",
    title="vLLM's custom all-reduce failed a CUDA IPC call ('{cuda_error}')",
    fix="The custom all-reduce shares GPU buffers between the TP workers through CUDA IPC and that failed: {advice}.",
    patterns=[r"(?:Failed: (?:Cuda error )?|Cuda error )\S*custom_all_reduce\.cuh:\d+ '(?P<cuda_error>[^']+)'"],
    facts=_custom_ar_facts, playbook="distributed", confidence=0.85, check=_custom_ar)


# ---- Ray's GCS out of reach ----------------------------------------------------------------------------------
GCS_RE = (r"Failed to connect to GCS at address (?P<address>\S*) within \d+ seconds",
          r"Failed to connect to GCS within \d+ seconds",
          r"Failed to get cluster ID from GCS server",
          r"Unable to connect to GCS at (?P<address>\S+?)\.? Check that")
# lines a Ray client prints once it did reach the cluster: a retry warning before them was passing
GCS_REACHED = ("Connected to Ray cluster", "Started a local Ray instance", "Ray runtime started", "SUCC scripts.py")


def _gcs_facts(m, line, scan) -> dict:
    address = (m.groupdict().get("address") or "").rstrip(".,")
    if address.startswith(":"):
        return {"where": f" (address `{address}`: the head's host is empty)",
                "advice": "the head's address expanded empty (`ray start --address=:6379`): set the variable that "
                          "carries it (MASTER_ADDR, the leader's address) before starting the worker"}
    return {"where": f" at {address}" if address else "",
            "advice": "check that the head is running (`ray status` on the head), that its address and port (6379) are "
                      "reachable from this node and that every node runs the same Ray version; when vLLM is created "
                      "from a thread other than the main one, call ray.init() in the main thread first"}


def _gcs(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    d = RAY_GCS.match_lines(scan)
    if d is None:
        return None
    last = max(e.line for e in d.evidence)
    if any(ln.no > last and any(s in ln.text for s in GCS_REACHED) for ln in scan.lines):
        return None  # Ray retried and got through
    return d


RAY_GCS: Rule = Rule(
    signature="distributed.ray_gcs_unreachable", category="distributed",
    title="A Ray process could not reach the cluster's GCS{where}",
    fix="Ray's control store (GCS, on the head node) did not answer: {advice}.",
    patterns=list(GCS_RE), facts=_gcs_facts, playbook="distributed", confidence=0.8,
    check=_gcs)


# ---- collectives and their bootstrap -------------------------------------------------------------------------
RULES = [
    CUSTOM_AR_IPC,
    RAY_GCS,
    Rule(signature="distributed.duplicate_gpu", category="distributed",
         title="Two ranks of one NCCL group run on the same GPU (rank {rank_a} and rank {rank_b})",
         fix="Every rank needs its own GPU: when Ray starts the workers, give each a whole GPU (num_gpus=1, one worker "
             "group per GPU, e.g. max_colocate_count=1 in verl-based scripts) and drop runtime_env hooks that touch "
             "CUDA before Ray assigns devices; otherwise check that CUDA_VISIBLE_DEVICES names no GPU twice.",
         patterns=[r"Duplicate GPU detected ?: rank (?P<rank_a>\d+) and rank (?P<rank_b>\d+) both on CUDA device"],
         playbook="distributed", confidence=0.85),
    Rule(signature="distributed.hccl_port_in_use", category="distributed",
         title="HCCL could not bind its host port: another process holds it{port_suffix}",
         fix="HCCL's bootstrap port on this host is taken, by a second job or by an earlier run that has not released "
             "it: stop leftover processes (`npu-smi info` lists them), and give jobs sharing a host their own ports "
             "(`export HCCL_HOST_SOCKET_PORT_RANGE=auto`, or distinct HCCL_IF_BASE_PORT values).",
         patterns=[r"Failed to bind the IP port\. Reason: The IP address and port have been bound already(?P<port>)",
                   r"host nic listen start failed, port\[(?P<port>\d+)\]"],
         facts=lambda m, line, scan: {"port_suffix": f" (port {m.group('port')})" if m.group("port") else ""},
         playbook="distributed", confidence=0.85),
    Rule(signature="distributed.gloo_timeout", category="distributed",
         title="A CPU-side (Gloo) exchange timed out waiting for another rank",
         fix="Gloo waited the whole process-group timeout for a peer: find the first error of any rank or node above "
             "(a rank that died or hangs); across nodes set GLOO_SOCKET_IFNAME / VLLM_HOST_IP to the interface they "
             "share. With data parallelism over Ray on several nodes, try the other executor "
             "(--distributed-executor-backend mp with --nnodes/--node-rank) or another vLLM release.",
         patterns=[r"Timed out waiting \d+ms for (?:recv|send) operation to complete"],
         playbook="distributed", confidence=0.7, secondary=True),
    Rule(signature="distributed.mooncake_transfer_failed", category="distributed",
         title="Mooncake could not move the KV cache between prefill and decode{peer_suffix}",
         fix="{advice}",
         patterns=[r"Mooncake transfer failed(?: for request| with status|, ret: -?\d+)",
                   r"Failed to transfer KV cache for request \S+: Mooncake"],
         facts=lambda m, line, scan: _mooncake_facts(scan), playbook="distributed", confidence=0.8),
    Rule(signature="distributed.zmq_bind_foreign_address", category="distributed",
         title="A ZMQ socket was told to bind an address this host does not have ({addr})",
         fix="The address vLLM binds belongs to another machine: on each node set VLLM_NIXL_SIDE_CHANNEL_HOST (KV "
             "handshake), VLLM_HOST_IP and --data-parallel-address as that node needs them, from the node itself "
             "(`hostname -I`, Kubernetes status.podIP), never one value computed on the head and copied to all.",
         patterns=[r"ZMQError: Cannot assign requested address \(addr='(?P<addr>[^']+)'\)"],
         playbook="distributed", confidence=0.8),
]

PEER_RE = lazy(r"Failed to connect to (?:segment|target): (?P<peer>\S+?)(?:,|$)")


def _mooncake_facts(scan: Scan) -> dict:
    peer = next((m.group("peer") for ln in scan.lines for m in [PEER_RE.search(ln.text)] if m), None)
    if "ascend_direct" in scan.joined_text():
        advice = ("On Ascend the transfer goes through Mooncake's ascend_direct transport: it needs CANN 8.3.RC1 or "
                  "newer and `\"use_ascend_direct\": true` in kv_connector_extra_config on both instances; check that "
                  "the prefill node's address and kv_port are reachable from the decode node.")
    else:
        advice = ("The transfer engine could not read the blocks from the peer: check that the prefill and decode "
                  "nodes reach each other on the address and kv port the connector advertises, that the transport "
                  "(mooncake_protocol rdma or tcp, the NIC in device_name, MC_GID_INDEX) matches the fabric, and "
                  "that both ends run the same Mooncake build.")
    return {"peer_suffix": f" (peer {peer} unreachable)" if peer else "", "advice": advice}
