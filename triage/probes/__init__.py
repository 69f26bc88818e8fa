"""Probes: what the machine is (GPUs, host, the Python environment that runs vLLM), here or over SSH.

    from triage.probes import gather, load_snapshot
    probe = gather()                      # this machine
    probe = gather(host="gpu-a")          # over SSH (triage.remote)
    probe.to_json()                       # {"host", "ok", "error", "facts", "findings"}

Nothing heavy is imported here: NVML is loaded on the first GPU query, asyncssh only for remote hosts.
"""

from pathlib import Path

from triage import demo
from triage.probes.collect import HostProbe, build_facts, gather, load_snapshot, python_candidates

# A recorded `triage probe --json` of an 8x RTX PRO 6000 (SM120) server with a nightly vLLM and two
# hand-patched files: the machine of `triage --demo`.
DEMO_SNAPSHOT = Path(demo.DEMO_SNAPSHOT).resolve()


def demo_probe() -> HostProbe:
    return load_snapshot(DEMO_SNAPSHOT)


__all__ = ["DEMO_SNAPSHOT", "HostProbe", "build_facts", "demo_probe", "gather", "load_snapshot",
           "python_candidates"]
