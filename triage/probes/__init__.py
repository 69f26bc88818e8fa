"""Probes: what the machine is (GPUs, host, the Python environment that runs vLLM), here or over SSH.

    from triage.probes import gather, load_snapshot
    probe = gather()                      # this machine
    probe = gather(host="gpu-a")          # over SSH (triage.remote)
    probe.to_json()                       # {"host", "ok", "error", "facts", "findings"}

Nothing heavy is imported here: NVML is loaded on the first GPU query, asyncssh only for remote hosts.
"""

from triage.probes.collect import HostProbe, build_facts, gather, load_snapshot, python_candidates

__all__ = ["HostProbe", "build_facts", "gather", "load_snapshot", "python_candidates"]
