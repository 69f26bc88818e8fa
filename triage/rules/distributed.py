"""Multi-GPU and multi-node plumbing: NCCL, Gloo, Ray, /dev/shm, fork vs spawn."""

from __future__ import annotations

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, not_in_passing

NODE_REQ_RE = lazy(r"'node:(?P<ip>[\d.]+|[0-9a-fA-F:]+)': ?0\.001")
RAY_IP_RE = lazy(r"\bip=(?P<ip>\d+\.\d+\.\d+\.\d+)\)|Local node IP: (?P<ip2>\d+\.\d+\.\d+\.\d+)|"
                 r"node_ip_address[=:' ]+(?P<ip3>\d+\.\d+\.\d+\.\d+)|NodeManagerAddress[=:' ]+(?P<ip4>\d+\.\d+\.\d+\.\d+)|"
                 r"Ray cluster at address: (?P<ip5>\d+\.\d+\.\d+\.\d+):\d+")


def _ray_facts(m, line, scan) -> dict:
    """vLLM pins its first bundle to the driver's node by IP ({'node:<ip>': 0.001}): an IP Ray does not know
    (multi-NIC hosts, containers) makes the request impossible however many GPUs the cluster has."""
    asked = None
    ray_ips: dict[str, None] = {}  # ordered: the cluster's own address first when the log gives it
    for ln in scan.lines:
        t = ln.text
        if asked is None and "'node:" in t:
            mm = NODE_REQ_RE.search(t)
            if mm:
                asked = mm.group("ip")
        for mm in RAY_IP_RE.finditer(t):
            ip = next(g for g in mm.groups() if g)
            if mm.group("ip5"):
                ray_ips = {ip: None, **ray_ips}
            else:
                ray_ips.setdefault(ip, None)
    out: dict = {}
    if asked:
        out["requested_node_ip"] = asked
        others = [ip for ip in ray_ips if ip != asked]
        if others and asked not in ray_ips:
            out["ray_node_ips"] = others
            out["advice"] = (f"vLLM asked Ray for a GPU on node {asked} (the address it detected for this host), but the "
                             f"Ray nodes in this log are {', '.join(others)}: no node matches, so the placement group can "
                             f"never be created. Set VLLM_HOST_IP on each node to the address Ray knows it by (here "
                             f"{others[0]}), or start Ray with --node-ip-address set to the address vLLM detects.")
        else:
            out["advice"] = (f"vLLM asked Ray for a GPU on node {asked} (the address it detected for this host): if Ray "
                             "registered this host under another address (several network interfaces, containers), the "
                             "request can never be met. Set VLLM_HOST_IP to the address Ray uses for this node (`ray "
                             "status` / `ray list nodes`), or start Ray with --node-ip-address set to it; then check that "
                             "tensor_parallel_size x pipeline_parallel_size fits the cluster's GPUs.")
    else:
        out["advice"] = ("The Ray cluster does not offer the GPUs vLLM asks for: check `ray status`, that every node joined "
                         "with its GPUs, and that tensor_parallel_size x pipeline_parallel_size fits the cluster.")
    return out


# Lines a start-up prints once its workers run: the placement group was created after all.
PROGRESSED = ("loading took", "weights took", "Graph capturing finished", "Maximum concurrency")


def _ray_gpus(scan: Scan) -> Diagnosis | None:
    """Placement-group trouble, unless all vLLM said were its waiting/warning lines and start-up went on
    afterwards (a worker node that joined late)."""
    d = RAY_GPUS.match_lines(scan)
    if d is None:
        return None
    levels = {ln.no: ln.level for ln in scan.lines}
    if all(levels.get(e.line) in ("INFO", "WARNING") for e in d.evidence):
        last = max(e.line for e in d.evidence)
        if any(ln.no > last and any(p in ln.text for p in PROGRESSED) for ln in scan.lines):
            return None
    return d


RAY_GPUS: Rule = Rule(
    signature="distributed.ray_gpus", category="distributed",
    title="Ray cannot place the workers on GPUs ({detail})",
    fix="{advice}", facts=_ray_facts,
    patterns=[r"(?P<detail>Ray does not allocate any GPUs on the driver node)",
              # 0.2-0.5's ray_utils checked the whole cluster before creating the group
              r"(?P<detail>The number of required \w+s exceeds the total number of available \w+s in the (?:placement group|cluster))",
              r"(?P<detail>Current node has no GPU available)",
              # ray_utils._verify_bundles (0.6-0.10): the placement group holds no GPU on the driver's node
              r"(?P<detail>driver node id \S+ is not included in a placement group)",
              r"(?P<detail>No available node types can fulfill resource request)",
              r"(?P<detail>Cannot provide a placement group) (?:of|requiring) .{0,400}within \d+ seconds",
              # ray_utils._wait_until_pg_ready logs this with a doubling interval (10, 30, 70 s ...)
              # until PG_WAIT_TIMEOUT; the first 10 s are normal while a node joins
              r"(?P<detail>Waiting for creating a placement group) of specs for (?:[3-9]\d|\d{3,}) seconds",
              # a report saying it hangs there ("vLLM hangs with log: Waiting for creating a placement group...")
              r"(?i)\bhang\w*\b.{0,40}(?P<detail>Waiting for creating a placement group)"],
    playbook="distributed", confidence=0.85, check=lambda scan, env: _ray_gpus(scan))


# NixlConnector's worker logs "NIXL is not available" at ERROR and then raises RuntimeError with it (a pod log cut
# before the traceback shows only the logged line); the module itself warns the same words at import whenever nixl
# is missing, which is harmless unless NixlConnector is used: a WARNING/INFO line alone is not the failure.
NIXL_UNAVAILABLE: Rule = Rule(
    signature="distributed.nixl_unavailable", category="distributed",
    title="The NixlConnector KV transfer needs NIXL, which is not installed",
    fix="--kv-transfer-config selects NixlConnector (disaggregated prefill) but the `nixl` package cannot be "
        "imported: install the NIXL build for this CUDA (e.g. `pip install nixl` / nixl_cu13) in vLLM's "
        "environment (a vendor image such as ROCm's may ship without it), or choose another kv_connector.",
    patterns=[r"RuntimeError: NIXL is not available", r"^NIXL is not available\s*$"],
    playbook="distributed", confidence=0.9,
    check=lambda scan, env: _nixl_unavailable(scan))


def _nixl_unavailable(scan: Scan) -> Diagnosis | None:
    """The rule on the lines not logged in passing (INFO/WARNING/DEBUG): the import-time warning is no evidence."""
    rule = NIXL_UNAVAILABLE
    hits = [(ln, m) for ln in scan.lines if ln.level not in ("INFO", "WARNING", "DEBUG") and "NIXL" in ln.text
            for m in [rule._search(0, ln.text) or rule._search(1, ln.text)] if m]
    return rule.diagnosis(scan, hits[:6]) if hits else None

RULES = [
    NIXL_UNAVAILABLE,
    Rule(signature="distributed.nccl_shm", category="distributed",
         title="Not enough shared memory (/dev/shm) for NCCL or vLLM's broadcast buffers (too small or not writable)",
         fix="Give the container enough shared memory: `docker run --ipc=host` or `--shm-size=16g` "
             "(Kubernetes: an emptyDir with medium Memory mounted at /dev/shm).",
         patterns=[r"Error while creating shared memory segment /dev/shm/\S+(?: \(size (?P<segment_bytes>\d+)\))?",
                   r"unable to allocate shared memory", r"No space left on device.{0,60}/dev/shm",
                   r"/dev/shm.{0,60}(?:No space left|too small)",
                   # a title or prose saying it ("run out of /dev/shm space", "/dev/shm is full")
                   r"out of (?:shared memory \()?/dev/shm", r"/dev/shm (?:is |was |gets )?full",
                   # vLLM's own shared-memory broadcast queue (shm_broadcast.py, 0.28+)
                   r"Insufficient space in \S+(?: for .{1,80})?: [\d.]+ MiB required, [\d.]+ MiB free"],
         playbook="distributed-shm", confidence=0.95),
    Rule(signature="distributed.bus_error_shm", category="distributed",
         title="Bus error: usually /dev/shm is too small in a container",
         fix="Run the container with --ipc=host or --shm-size=16g (or larger).",
         patterns=[r"^Bus error(?: \(core dumped\))?", r"ERROR: Unexpected bus error encountered in worker",
                   r"insufficient shared memory \(shm\)",
                   # a title or prose pairing the two, however the rest is spelled ("bus error, insufficient ... (shm)")
                   r"[Bb]us error.{0,40}\(shm\)"],
         playbook="distributed-shm", confidence=0.8),
    Rule(signature="distributed.nccl_error", category="distributed",
         title="NCCL communication failed ({nccl_error})",
         fix="Run with NCCL_DEBUG=INFO to see the failing transport. Common causes: /dev/shm too small (docker "
             "--ipc=host), P2P/IB misconfiguration (try NCCL_P2P_DISABLE=1 or NCCL_IB_DISABLE=1 to confirm), "
             "mismatched NCCL versions between nodes, or a peer process that died first (look above).",
         # (a title typed from a screenshot may lose the space: "NCCLerror: unhandled system error")
         patterns=[r"NCCL ?error(?: in: \S+,|:) (?P<nccl_error>unhandled system error|unhandled cuda error|internal error|invalid usage|remote process exited or there was a network error)",
                   r"(?P<nccl_error>ncclSystemError|ncclUnhandledCudaError|ncclInternalError|ncclRemoteError|ncclInvalidUsage)",
                   # CuPy's wrapper, which vLLM 0.2.7-0.3.x used for all-reduce inside CUDA graphs
                   r"NcclError: NCCL_ERROR_\w+: (?P<nccl_error>unhandled system error|unhandled cuda error|internal error|invalid usage|remote process exited or there was a network error)",
                   # (quoted in prose, the warning ends at its closing backtick or a link after it)
                   r"NCCL WARN (?P<nccl_error>[^`\n]+?)(?:`|\s+https?://|\s*$)", r"DistBackendError: NCCL error"],
         playbook="distributed", confidence=0.8, secondary=True),
    Rule(signature="distributed.cuda_fork", category="distributed",
         title="CUDA was initialised before worker processes were forked",
         fix="Set VLLM_WORKER_MULTIPROC_METHOD=spawn (and avoid touching CUDA before creating the LLM in your "
             "script; wrap it in `if __name__ == '__main__':`).",
         patterns=[r"Cannot re-initialize CUDA in forked subprocess",
                   r"To use CUDA with multiprocessing, you must use the 'spawn' start method"],
         playbook="distributed", confidence=0.95),
    Rule(signature="distributed.spawn_main_guard", category="distributed",
         title="spawned workers re-ran the script (missing `if __name__ == '__main__':` guard)",
         fix="Put the code that creates the LLM under `if __name__ == '__main__':` when using spawn.",
         patterns=[r"An attempt has been made to start a new process before the(?:\s*current process has finished its bootstrapping phase)?"],
         playbook="distributed", confidence=0.9),
    Rule(signature="distributed.collective_timeout", category="distributed",
         title="A collective operation timed out (a rank hung or died)",
         fix="One rank stopped answering: look for the first error of any rank above; check node-to-node network "
             "(NCCL_SOCKET_IFNAME), and that all nodes run identical vLLM/torch/NCCL versions.",
         patterns=[r"Watchdog caught collective operation timeout", r"ProcessGroupNCCL.{0,60}[Tt]imeout",
                   r"NCCL communicator was aborted", r"Timed out waiting for.{0,40}(?:rank|worker|store)",
                   # the CPU-side store/barrier of a multi-node start-up that never completes
                   r"DistStoreError: wait timeout after \d+ms",
                   r"Fault detected in EP all2all communication: one or more ranks timed out", r"\[c10d\] waitForInput: socket .{0,200}timed out after \d+ms"],
         playbook="distributed", confidence=0.75, secondary=True),
    Rule(signature="distributed.gloo_failed", category="distributed",
         title="Gloo could not connect the processes ({detail})",
         fix="Gloo (CPU-side coordination) uses the host's network: set GLOO_SOCKET_IFNAME / VLLM_HOST_IP to the "
             "interface the nodes share, and open the ports between nodes.",
         patterns=[r"Gloo connectFullMesh failed(?: with (?P<detail>.+))?", r"\[enforce fail at .*gloo.*\] (?P<detail>.+)",
                   r"gloo/transport/tcp.{0,80}(?P<detail>Connection refused|Connection reset|timed out)",
                   # any error Gloo's TCP transport reports from its own source ("pair.cc:534] Connection closed by
                   # peer [10.0.0.7]:36271", "Read error", "Socket Timeout"): the peer's link, not vLLM
                   # (its buffer timeout is distributed.gloo_timeout: a peer that never answered, not a link)
                   r"gloo/transport/tcp/\w+\.cc:\d+\] (?!Timed out waiting)(?P<detail>[A-Za-z][^\[\]]{2,80}?)(?: \[|:? *$)"],
         playbook="distributed", confidence=0.85),
    Rule(signature="distributed.master_port", category="distributed",
         title="torch.distributed could not bind or reach its rendezvous address",
         fix="The distributed init port is taken or unreachable: pick a free one (VLLM_PORT / MASTER_PORT), make "
             "sure no old vLLM is still running, and that nodes can reach each other. In containers, an address like "
             "172.17.x.x is the docker bridge, unreachable from other nodes: run with --network host and set "
             "VLLM_HOST_IP to each node's routable address.",
         patterns=[r"DistNetworkError.{0,120}(?:address already in use|failed to listen|Connection refused|timed out)",
                   r"The server socket has failed to (?:listen|bind) on any local network address",
                   # torch c10d socket.cpp's warning per address tried, before the error above
                   r"The server socket has failed to bind to \S+ \(errno: 98 - Address already in use\)",
                   r"The client socket has timed out after \d+\w* while trying to connect to",
                   # torch's TCPStore client (c10d socket.cpp) and NCCL's unique-id exchange through the store
                   # (not errno 99 "Cannot assign requested address" nor 97 "Address family not supported by
                   # protocol": one of the addresses a name resolves to, IPv6 ::1 for localhost or an IPv4-mapped
                   # [::ffff:a.b.c.d], tried before the one that works)
                   r"The client socket has failed to connect to(?!.{0,80}errno: 9[79])",
                   r"retrieving ncclUniqueId from \[\d+\] via c10d key-value store.{0,80}got error",
                   # a retelling that quotes the errno before the exception ("reports 'Address already in use'; the
                   # error comes from torch.distributed.DistNetworkError")
                   r"[Aa]ddress already in use.{0,80}\bDistNetworkError\b",
                   # a title or prose naming the errno torch prints ("... the same init port and fail with EADDRINUSE")
                   r"\b(?:[Ff]ail\w*|[Ee]rror)\b.{0,40}\bEADDRINUSE\b"],
         playbook="distributed", confidence=0.85),
    RAY_GPUS,
    Rule(signature="distributed.ray_actor_died", category="distributed",
         title="A Ray worker died",
         fix="A Ray actor exited: its own log (above, or `ray logs`) has the root cause; often OOM or a crash on one node.",
         patterns=[r"ray\.exceptions\.(?:RayActorError|ActorDiedError|RaySystemError)",
                   r"The actor died unexpectedly before finishing this task"],
         playbook="distributed", confidence=0.6, secondary=True),
    Rule(signature="distributed.p2p_unsupported", category="distributed",
         title="GPU peer-to-peer access is not available between the GPUs",
         fix="The GPUs cannot talk directly (PCIe ACS/IOMMU, or consumer GPUs): try --disable-custom-all-reduce or "
             "NCCL_P2P_DISABLE=1; on bare metal check ACS settings.",
         patterns=[r"peer access is not supported between these two devices", r"cudaErrorPeerAccessUnsupported",
                   # cudaErrorTooManyPeers: more peers than the hardware can map (beyond 8 GPUs on PCIe)
                   r"peer mapping resources exhausted", r"cudaErrorTooManyPeers",
                   r"P2P .{0,30}(?:not supported|failed)"],
         playbook="distributed", confidence=0.8),
]


RAY_MISSING: Rule = Rule(
    signature="distributed.ray_missing", category="distributed",
    title="Ray is needed for this launch but is not installed",
    fix="Install Ray into vLLM's environment (`pip install 'ray[default]'`, or `ray[cgraph]` for compiled "
        "graphs), or use --distributed-executor-backend mp on a single node.",
    patterns=[r"[Pp]lease install Ray with `pip install ray`", r"No module named 'ray'",
              # ray_utils of 0.2-0.4 (initialize_cluster with Ray absent)
              r"Ray is not installed\. Please install Ray to use (?:distributed|multi-node) serving",
              r"Using Ray backend requires installation of ray",
              r"Ray Compiled Graph is not installed", r"Run `pip install ray\[cgraph\]`",
              r"Ray accelerated DAG is not installed", r"Run `pip install ray\[adag\]`"],
    playbook="distributed", confidence=0.85,
    check=lambda scan, env: not_in_passing(RAY_MISSING, scan))

RULES += [
    RAY_MISSING,
]


# ---- a worker process killed by a signal --------------------------------------------------------------
# vLLM's executors report a dead worker with its exit code (V0 multiproc_worker_utils: "Worker %s pid %s died,
# exit code: %s"; V1 multiproc_executor 0.3x: "Worker proc %s died unexpectedly (exit code: %s)"; v1/utils:
# "Process %s (PID: %s) died with exit code %s"); a shell or container runtime says 128+N; Python's faulthandler
# and absl's failure-signal handler (Ray workers) name the signal. -N is signal N. SIGKILL is the host's OOM killer
# (environment.host_oom_killed); the crash signals say a native library in the worker crashed, and the frames
# printed with them (absl's "PC: @ ... <symbol>", a backtrace, a faulthandler stack) say which one.
EXIT_CODE_RE = lazy(r"(?:Worker \S+ pid \d+ died, exit code: |died unexpectedly \(exit code: |"
                    r"\(PID: \d+\) died with exit code |exited with code |died \()(?P<code>-?\d+)")
SIGNAL_RE = lazy(r"\*\*\* (?P<sig>SIG[A-Z]+) received at time=|Fatal Python error: (?P<py>Segmentation fault|"
                 r"Bus error|Aborted|Floating point exception|Illegal instruction)|<Signals\.(?P<enum>SIG[A-Z]+):"
                 r"|^(?P<shell>Segmentation fault|Aborted|Bus error)(?: \(core dumped\))?\s*$")
DIED_RE = lazy(r"Worker proc \S+ died unexpectedly|Engine core proc \S+ died unexpectedly|"
               r"RayWorkerProc rank=\S+ died unexpectedly|ChildProcessError: worker died")
SIGNALS = {4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
PY_SIGNALS = {"Segmentation fault": "SIGSEGV", "Bus error": "SIGBUS", "Aborted": "SIGABRT",
              "Floating point exception": "SIGFPE", "Illegal instruction": "SIGILL"}
# Where the crash happened, from the symbols and files printed around it.
NCCL_SITE_RE = lazy(r"libnccl|\bnccl[A-Z]\w*|addProxyOp|pynccl|custom_all_reduce|ProcessGroupNCCL|\bncclProxy")


def _signal_of(text: str) -> tuple[str | None, int | None]:
    m = EXIT_CODE_RE.search(text)
    if m:
        code = int(m.group("code"))
        num = -code if code < 0 else code - 128 if 128 < code < 160 else None
        if num is None:
            return None, None  # an ordinary exit status: the process failed on an error of its own
        return SIGNALS.get(num, f"signal {num}"), code
    m = SIGNAL_RE.search(text)
    if m:
        sig = m.group("sig") or m.group("enum") or PY_SIGNALS.get(m.group("py") or m.group("shell") or "")
        return sig, None
    return None, None


def _worker_crashed(scan: Scan) -> Diagnosis | None:
    sig: str | None = None
    code: int | None = None
    hits = []
    for ln in scan.lines:
        s, c = _signal_of(ln.text)
        if s or c is not None or DIED_RE.search(ln.text):
            hits.append(ln)
            if s and sig in (None, "SIGTERM"):
                sig, code = s, c
    if not hits or sig in ("SIGKILL", "SIGILL"):  # the host OOM rule's and the CPU-instruction table's
        return None
    nccl = next((ln for ln in scan.lines if NCCL_SITE_RE.search(ln.text)
                 and not ln.text.lstrip().startswith(("INFO", "DEBUG")) and "vLLM is using nccl" not in ln.text), None)
    if nccl is None and sig != "SIGBUS" and any(e.frames for e in scan.exceptions + scan.cut_tracebacks):
        return None  # the stack printed with the crash (faulthandler's) names its site better than a guess
    named = sig or (f"exit code {code}" if code is not None else "no exit status")
    if nccl is not None and sig not in (None, "SIGTERM"):
        title, conf = f"A worker process crashed inside NCCL ({named})", 0.75
        fix = ("A worker died of a signal in NCCL's native code while setting up or running GPU communication: run "
               "with NCCL_DEBUG=INFO to see the transport it chose, try NCCL_P2P_DISABLE=1 / NCCL_IB_DISABLE=1 (and "
               "--disable-custom-all-reduce) to find the failing path, and make every node run the same NCCL; on "
               "virtual GPUs (vGPU) peer-to-peer and NVLink paths are often missing.")
    elif sig == "SIGBUS":
        title, conf = "A worker process died of SIGBUS (bus error: usually /dev/shm too small)", 0.6
        fix = ("A bus error in a worker nearly always means the shared memory it maps ran out: run the container "
               "with --ipc=host or --shm-size=16g (Kubernetes: an emptyDir with medium Memory at /dev/shm).")
    else:
        title = f"A vLLM process died ({named}); the cause is in that process's own output"
        conf = 0.45 if sig in ("SIGSEGV", "SIGABRT", "SIGFPE") else 0.35
        fix = ("The executor only saw the worker vanish. Find the worker's own last lines (its rank's traceback, a "
               "'Fatal Python error' stack, dmesg for segfaults or OOM kills). A segfault during start-up with "
               "several GPUs is most often in NCCL or the custom all-reduce: retry with --disable-custom-all-reduce "
               "and NCCL_DEBUG=INFO; with one GPU, retry with --enforce-eager to rule out graph capture.")
    ev = [Evidence(ln.no, ln.shown) for ln in hits[:4]]
    if nccl is not None and conf >= 0.75:
        ev.append(Evidence(nccl.no, nccl.shown))
    return Diagnosis(category="distributed", signature="distributed.worker_crashed", title=title,
                     confidence=conf, evidence=ev, facts={"signal": sig, "exit_code": code},
                     fix=Fix(fix, "distributed"), first_line=hits[0].no)


WORKER_CRASHED: Rule = Rule(
    signature="distributed.worker_crashed", category="distributed",
    title="A worker process died of a signal", fix="",
    playbook="distributed", confidence=0.75, secondary=True, check=lambda scan, env: _worker_crashed(scan))

RULES += [WORKER_CRASHED]

RULES += [
    Rule(signature="distributed.ray_not_running", category="distributed",
         title="vLLM was told to join a Ray cluster that is not running here ({detail})",
         fix="Start the cluster first (`ray start --head` on the head node, `ray start --address=<head>:6379` on the "
             "others) and launch vLLM on a node of it, or point RAY_ADDRESS at the running head; on one node without "
             "Ray, use --distributed-executor-backend mp.",
         patterns=[r"(?P<detail>Could not find any running Ray instance)", r"(?P<detail>Ray has not been started yet)",
                   r"Ray is trying to start at \S+, but is (?P<detail>already running at \S+)"],
         playbook="distributed", confidence=0.8),
]
