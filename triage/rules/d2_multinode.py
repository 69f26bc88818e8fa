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
"""

from __future__ import annotations

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
         patterns=[r"Error: Missing argument --(?P<missing>ray_address|ray_cluster_size)",
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
