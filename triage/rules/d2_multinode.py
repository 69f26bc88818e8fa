"""Multi-node bring-up around vLLM: the Ray cluster its launch scripts build, Ray's own worker start, and the KV
transfer engines of disaggregated prefill.

- vLLM's examples/online_serving/multi-node-serving.sh (also shipped as ray_init.sh in the LeaderWorkerSet,
  kthena and production-stack examples) starts Ray on the leader and workers of a pod group. It stops with
  `Error: Missing argument --ray_address` / `--ray_cluster_size` when the variable holding the leader's address
  or the group size expanded empty, `Ray worker starts timeout, head address: H:P` when the worker never reached
  the head, and `Waiting for all ray workers to be active timed out.` when the leader never saw the group.
- Ray's core worker registers with the raylet of its node at start (core_worker.cc / core_worker_process.cc,
  every 2.x): `Failed to register worker [id] to Raylet[.:] IOError: [RayletClient] Unable to register worker
  with raylet. <why>`. The raylet is gone or not this process's (a stale /tmp/ray session, a driver outside the
  container that started Ray, a raylet that crashed on start).
- NixlConnector's handshake checks that the agent it reached is the engine the request named
  (`Remote NIXL agent engine ID mismatch. Expected X,received Y.`, 0.9+). The side channel it dials is
  VLLM_NIXL_SIDE_CHANNEL_HOST, `localhost` unless set, so a decode instance on another node reaches itself or a
  neighbour: the address, not NIXL, is wrong.
- NCCL's bootstrap picks the interface named by NCCL_SOCKET_IFNAME (any but lo/docker when unset) and stops with
  `Bootstrap : no socket interface found` (bootstrap.cc, every 2.x; `NET/Socket : No usable listening interface
  found` when NCCL_COMM_ID names the root) when none on this host matches: a name copied from another machine, an
  `=name` exact match an older NCCL does not know, a pod without the secondary network it names.
- Mooncake's transfer engine (MooncakeConnector, LMCache and checkpoint-engine use it) opens every RDMA NIC it
  discovers and logs `RdmaTransport: No available RNIC` / `RdmaTransport: cannot initialize RDMA resources` when
  none opens (port down, IB disabled, /dev/infiniband not passed into the container, a wrong GID index).
- Ray checks every process that joins a cluster against the versions the cluster was started with
  (ray/_private/utils.py check_version_info, every 2.x): `RuntimeError: Version mismatch: The cluster was started
  with: Ray: X Python: Y / This process on node N was started with: ...`. A head from one image and workers (or
  vLLM's own environment) from another are not one cluster.
- Up to 0.19 the Ray executor passes activations between pipeline stages through Ray Compiled Graphs
  (ray/dag, ray/experimental/channel); an exception raised inside those channels (the tensor channel's
  AssertionError of multi-node pipeline parallelism) is that transport failing, not the model. A channel's
  timeout or closed error is not: it waits on a worker that hung or died (distributed.ray_timeout). vLLM 0.20's
  RayExecutorV2 no longer uses Compiled Graphs.
- KVConnectorFactory (V0 and V1, 0.7+) looks the name of --kv-transfer-config's kv_connector up in its registry,
  or imports it from kv_connector_module_path, else raises `ValueError: Unsupported connector type: <name>`:
  LMCacheConnector (V0) is LMCacheConnectorV1 on the V1 engine, and a V1 name is unknown to a V0-only vLLM.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule


def _bringup_facts(m, line, scan) -> dict:
    g = m.groupdict()
    if g.get("missing"):
        return {"step": f"the launch script got no --{g['missing']}",
                "advice": "the variable the pod template passes (the leader's address, e.g. LWS_LEADER_ADDRESS, or "
                          "the group size) expanded empty: set it in the worker/leader template, e.g. "
                          "`multi-node-serving.sh worker --ray_address=$(LWS_LEADER_ADDRESS)`, and check the "
                          "variable's name against what the operator injects"}
    if g.get("head"):
        return {"step": f"the worker could not join the Ray head at {g['head']}",
                "advice": "the head is not reachable from the worker: check that the leader is up, that its "
                          "address resolves from the worker pod and that the Ray port (6379) is open between them"}
    return {"step": "the leader never saw every worker join",
            "advice": "the workers did not start or could not reach the head: read the worker pods' logs, and "
                      "check the group size against the number of worker pods"}


RULES = [
    Rule(signature="distributed.ray_cluster_bringup", category="distributed",
         title="The multi-node Ray cluster did not come up: {step}",
         fix="vLLM needs every node in one Ray cluster before it starts; {advice}.",
         patterns=[r"(?:^|Error: )Missing argument --(?P<missing>ray_address|ray_cluster_size)",
                   r"Ray worker starts timeout, head address: (?P<head>\S+)",
                   r"Waiting for all ray workers to be active timed out"],
         facts=_bringup_facts, playbook="distributed", confidence=0.85),
    Rule(signature="distributed.ray_worker_register", category="distributed",
         title="A Ray worker could not register with the raylet of its node ({detail})",
         fix="Ray on this node is not usable by this process: run vLLM inside the container (or host) that ran "
             "`ray start`, stop stale sessions (`ray stop --force`, then remove /tmp/ray) and start the cluster "
             "again, and read /tmp/ray/session_latest/logs/raylet.err for why the raylet went away.",
         patterns=[r"Failed to register worker(?: \S+)? to Raylet[.:]? ?(?:IOError: )?(?:\[RayletClient\] )?"
                   r"(?:Unable to register worker with raylet\. )?(?P<detail>[^\n]*?)(?: worker_id=\S+)?$"],
         facts=lambda m, line, scan: {"detail": m.group("detail").strip() or "no reason given"},
         playbook="distributed", confidence=0.8),
    Rule(signature="distributed.nixl_engine_mismatch", category="distributed",
         title="The NIXL handshake reached the wrong engine (engine ID mismatch): the side-channel address is wrong",
         fix="NixlConnector dials VLLM_NIXL_SIDE_CHANNEL_HOST (default localhost) for the KV handshake: on every "
             "prefill and decode instance set it to that node's (pod's) reachable IP, e.g. "
             "`VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -I | awk '{{print $1}}')` (Kubernetes: status.podIP), and give "
             "instances on one host distinct VLLM_NIXL_SIDE_CHANNEL_PORT values.",
         patterns=[r"Remote NIXL agent engine ID mismatch"],
         playbook="distributed", confidence=0.85),
    Rule(signature="distributed.nccl_no_interface", category="distributed",
         title="NCCL found no network interface to bootstrap on (NCCL_SOCKET_IFNAME matches none on this host)",
         fix="Compare NCCL_SOCKET_IFNAME (and GLOO_SOCKET_IFNAME) with `ip -br addr` on every node: name an interface "
             "that exists there and carries the address the nodes reach each other on (a prefix such as `eth` or "
             "`ens` matches eth0/ens5), or unset it on a single node; in Kubernetes make sure the secondary network "
             "it names is attached to the pod.",
         patterns=[r"(?:Bootstrap|NET/Socket) ?: [Nn]o (?:NCCL_SOCKET_IFNAME |usable listening |socket )interface found"],
         playbook="distributed", confidence=0.9),
    Rule(signature="distributed.rdma_no_nic", category="distributed",
         title="The KV/weight transfer engine found no usable RDMA NIC (Mooncake RdmaTransport)",
         fix="No RDMA device could be opened: check `ibv_devinfo` (port state ACTIVE, the GID index), pass the devices "
             "into the container (`--device=/dev/infiniband` or `--privileged`, `--network host`), name the NIC in the "
             "transfer config (device_name / MC_GID_INDEX), or switch the transfer protocol to tcp where no RDMA "
             "fabric exists.",
         patterns=[r"RdmaTransport: No available RNIC", r"RdmaTransport: cannot initialize RDMA resources"],
         playbook="distributed", confidence=0.85),
]


# ---- the versions of a Ray cluster ---------------------------------------------------------------------------
RAY_VERSION_RE = lazy(r"^\s*Ray: (?P<v>\S+)")


def _ray_version_facts(m, line, scan) -> dict:
    # the versions follow on the next rows: "    Ray: 2.43.0" for the cluster, then for this process
    seen = [mm.group("v") for ln in scan.lines if line.no < ln.no <= line.no + 8
            for mm in [RAY_VERSION_RE.match(ln.text)] if mm]
    if len(seen) >= 2 and seen[0] != seen[1]:
        return {"versions": f": cluster Ray {seen[0]}, this process Ray {seen[1]}"}
    return {"versions": ""}


def _ray_version_mismatch(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    d = RAY_VERSION_MISMATCH.match_lines(scan)
    if d is None:
        return None
    # the bare "RuntimeError: Version mismatch" is Ray's only when Ray is in the log at all
    full = any("The cluster was started with" in e.text for e in d.evidence)
    if not full and "ray" not in scan.joined_text().lower():
        return None
    return d


RAY_VERSION_MISMATCH: Rule = Rule(
    signature="distributed.ray_version_mismatch", category="distributed",
    title="A process joined a Ray cluster started with another Ray/Python version{versions}",
    fix="Every node of the cluster and the process that runs vLLM must have the same Ray and Python versions: start "
        "head and workers from one image (not a CPU image for the head and a GPU image for the workers), and install "
        "vLLM's environment with the cluster's Ray (`pip install ray==<the cluster's version>`), or start the "
        "cluster from vLLM's environment.",
    patterns=[r"Version mismatch: The cluster was started with", r"RuntimeError: Version mismatch\s*$"],
    facts=_ray_version_facts, playbook="distributed", confidence=0.85,
    check=lambda scan, env: _ray_version_mismatch(scan, env))


# ---- Ray Compiled Graphs between pipeline stages ---------------------------------------------------------------
COMPILED_GRAPH_DIRS = ("/ray/experimental/channel/", "/ray/dag/")
COMPILED_GRAPH_PROSE_RE = lazy(
    r"(?:AssertionError|Error)\b.{0,160}ray/experimental/channel/(?P<where>[\w.]+\.py)"
    # an exception quoted without its traceback names the channel class (torch_tensor_accelerator_channel.py,
    # torch_tensor_nccl_channel.py): "AttributeError: '_TorchTensorAcceleratorChannel' object has no attribute ..."
    r"|(?:AssertionError|Error)\b.{0,60}'(?P<channel>_?TorchTensor(?:Accelerator|Nccl)Channel)'")
COMPILED_GRAPH_FIX = (
    "The Ray executor's Compiled Graphs transport between pipeline stages failed: upgrade vLLM (0.20+ replaces it "
    "with RayExecutorV2), or run without Ray Compiled Graphs (--distributed-executor-backend mp across nodes), or "
    "try the shared-memory channel (VLLM_USE_RAY_COMPILED_DAG_CHANNEL_TYPE=shm); keep Ray at the version vLLM pins.")


def _compiled_graph(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for exc in scan.exceptions:
        # a channel that timed out or was closed waits on a worker that hung or died elsewhere: not the transport
        if not exc.frames or "Timeout" in exc.type or "Closed" in exc.type:
            continue
        inner = "/" + exc.frames[-1].file.replace("\\", "/").lstrip("/")
        if any(d in inner for d in COMPILED_GRAPH_DIRS):
            where = inner.rsplit("/", 1)[-1]
            return _compiled_graph_diagnosis(exc.line.no, exc.line.shown, f"{exc.short_type} in {where}")
    for ln in scan.lines:
        m = COMPILED_GRAPH_PROSE_RE.search(ln.text)
        if m:
            where = m.group("where") or m.group("channel")
            return _compiled_graph_diagnosis(ln.no, ln.shown, f"an exception in {where}")
    return None


def _compiled_graph_diagnosis(no: int, shown: str, what: str) -> Diagnosis:
    return Diagnosis(
        category="distributed", signature="distributed.ray_compiled_graph",
        title=f"Ray Compiled Graphs failed between vLLM's pipeline stages ({what})",
        confidence=0.8, evidence=[Evidence(no, shown)], facts={"what": what},
        fix=Fix(COMPILED_GRAPH_FIX, "distributed"), first_line=no)


RAY_COMPILED_GRAPH: Rule = Rule(
    signature="distributed.ray_compiled_graph", category="distributed",
    title="Ray Compiled Graphs failed between vLLM's pipeline stages", fix=COMPILED_GRAPH_FIX,
    playbook="distributed", confidence=0.8, check=_compiled_graph)


# ---- a KV connector the installed vLLM does not have -----------------------------------------------------------
def _connector_facts(m, line, scan) -> dict:
    name = m.group("connector")
    if name.endswith("V1"):
        hint = (f"{name} is a V1-engine connector: upgrade vLLM to a release that ships it (or load it from its "
                "package with kv_connector_module_path)")
    elif name in ("LMCacheConnector",):
        hint = "on the V1 engine the LMCache connector is LMCacheConnectorV1"
    else:
        hint = ("name one the installed vLLM registers (vllm/distributed/kv_transfer/kv_connector/factory.py: "
                "NixlConnector, LMCacheConnectorV1, MooncakeConnector, P2pNcclConnector, ...) or set "
                "kv_connector_module_path to the package that defines it")
    return {"hint": hint}


RULES += [
    RAY_VERSION_MISMATCH,
    RAY_COMPILED_GRAPH,
    Rule(signature="engine_config.kv_connector_unknown", category="engine_config",
         title="--kv-transfer-config names a KV connector this vLLM does not have ({connector})",
         fix="vLLM has no connector registered under {connector}: {hint}.",
         patterns=[r"Unsupported connector type: (?P<connector>\w*Connector\w*)"],
         facts=_connector_facts, playbook="engine-config", confidence=0.85),
]
