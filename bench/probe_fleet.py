"""Fleet probe scaling: 12 and 50 hosts against one, over real SSH servers on loopback.

    python bench/probe_fleet.py [--latency 0.5] [--repeat 3]

Each "host" is an asyncssh server on its own port with its own host key, running the real probe script
in a real venv (fake NVML on its path). Prints the wall time of 1, 12 and 50 hosts and the ratios
against one host, measured in the same run. Target: 12 hosts in at most 3x the time of one.

On loopback every host's probe runs on *this* machine's cores, which a real fleet does not do (each
host has its own CPUs), so the CPU-bound figure is a pessimistic bound for small CI machines. --latency
adds a per-command delay on the server side, standing for network round trips and the remote host's own
work (NVML init without persistence mode takes seconds): that is where concurrency pays.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.fakes import fake_pynvml  # noqa: E402
from tests.fakes.fake_env import vllm_env  # noqa: E402
from tests.fakes.ssh_server import LoopThread, SSHServer, client_home  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--latency", type=float, default=0.0, help="server-side delay per command (s)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--sizes", default="1,12,50")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="triage-bench-"))
    os.environ["HOME"] = str(tmp / "home")
    os.environ.pop("SSH_AUTH_SOCK", None)
    auth = client_home(tmp / "home")
    nvml = tmp / "nvml"
    nvml.mkdir()
    shutil.copy(fake_pynvml.__file__, nvml / "pynvml.py")
    python, _ = vllm_env(tmp / "env")
    env = {"PATH": f"{python.parent}:{os.environ['PATH']}", "PYTHONPATH": str(nvml),
           "FAKE_NVML_PROFILE": "rtxpro6000x8"}

    from triage.probes.over_ssh import probe_hosts

    loop = LoopThread()
    servers = []
    try:
        for _ in range(max(sizes)):
            s = SSHServer(loop, authorized_keys=auth, env=env, delay=args.latency)
            servers.append(s)
        (tmp / "home/.ssh/known_hosts").write_text("".join(s.known_hosts_line() for s in servers))
        specs = [f"127.0.0.1:{s.port}" for s in servers]
        probe_hosts(specs[:1], timeout=120)  # warm-up: imports, page cache

        results: dict[int, float] = {}
        for n in sizes:
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                probes = probe_hosts(specs[:n], timeout=300, concurrency=64)
                times.append(time.perf_counter() - t0)
                bad = [p for p in probes if not p.ok]
                if bad:
                    print(f"{len(bad)} host(s) failed: {bad[0].error}", file=sys.stderr)
                    return 1
            results[n] = statistics.median(times)
        # The same probes run as local processes, concurrently, without SSH: the floor this machine's
        # cores set, so fleet/raw shows what triage's SSH fan-out itself costs.
        import subprocess

        from triage.probes.script import probe_script

        script = probe_script()
        raw: dict[int, float] = {}
        penv = dict(os.environ, **env)
        for n in sizes:
            times = []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                procs = [subprocess.Popen([str(python), "-"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, env=penv) for _ in range(n)]
                for p in procs:
                    p.communicate(script)
                times.append(time.perf_counter() - t0 + args.latency)
            raw[n] = statistics.median(times)
        base = results[sizes[0]]
        print(f"fleet probe over loopback SSH, latency {args.latency:g}s, {os.cpu_count()} CPUs, "
              f"median of {args.repeat}")
        for n in sizes:
            print(f"  {n:3d} hosts: {results[n]:7.3f} s   ratio vs {sizes[0]} host: {results[n] / base:5.2f}x"
                  f"   ({results[n] / n * 1000:6.1f} ms/host)   same probes locally without SSH: "
                  f"{raw[n]:6.3f} s (SSH fan-out overhead {results[n] / raw[n]:4.2f}x)")
        if 12 in results:
            ok = results[12] / base <= 3.0
            print(f"target 12 hosts <= 3x one host: {'met' if ok else 'NOT met'} ({results[12] / base:.2f}x)")
    finally:
        for s in servers:
            s.close()
        loop.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
