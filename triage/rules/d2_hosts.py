"""How the host or container names its devices and users, where vLLM expects something else.

Devices: vLLM maps a worker's local rank to the physical device by splitting CUDA_VISIBLE_DEVICES and calling
`int()` on the entry (Platform.device_id_to_physical_device_id, 0.6+; the Ray executors' per-node device lists
before that). MIG instances, and GPUs named by UUID, appear there as `MIG-<uuid>` / `GPU-<uuid>` (the
MIG-GPU-<uuid>/<gi>/<ci> form of older drivers too), so the cast raises Python's
`ValueError: invalid literal for int() with base 10: 'MIG-...'`. The launch arguments are not what is wrong.

Users: torch's inductor and dynamo caches name their folder after `getpass.getuser()`, which falls back to the
password database when LOGNAME/USER are unset. A container started with an arbitrary UID (OpenShift, KServe,
`docker run --user 1000`) that has no /etc/passwd entry then fails with `KeyError: 'getpwuid(): uid not found:
1000'` (Python's pwd module); Python 3.13's getpass turns it into `OSError: No username set in the environment`.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="environment.device_uuid_index", category="environment",
         title="CUDA_VISIBLE_DEVICES names a {kind} by UUID ({uuid}); vLLM expects device indices",
         fix="vLLM reads CUDA_VISIBLE_DEVICES as integer indices. Give the process its device as index 0 instead: "
             "for a MIG instance, pass only that instance into the container (`docker run --gpus '\"device=0:0\"'`, "
             "or NVIDIA_VISIBLE_DEVICES=<MIG-uuid> with CUDA_VISIBLE_DEVICES unset or 0; in Kubernetes request the "
             "nvidia.com/mig-<profile> resource); for whole GPUs use their indices (`nvidia-smi -L`). One process sees "
             "at most one MIG instance, so tensor parallelism across MIG instances is not possible.",
         patterns=[r"invalid literal for int\(\) with base 10: '(?P<uuid>(?P<kind>MIG|GPU)-[0-9A-Za-z/-]+)'"],
         facts=lambda m, line, scan: {"kind": "MIG instance" if m.group("kind") == "MIG" else "GPU"},
         playbook="environment", confidence=0.9),
    Rule(signature="environment.uid_without_passwd", category="environment",
         title="The process runs as a user ID with no passwd entry{uid_shown}: torch cannot name its cache folder",
         fix="Run the container as a user that exists in /etc/passwd, or set USER (getpass reads it first) and a "
             "writable HOME for the arbitrary UID: e.g. `-e USER=vllm -e HOME=/tmp` (Kubernetes: env USER, HOME and "
             "an emptyDir mounted there), and point TORCHINDUCTOR_CACHE_DIR / VLLM_CACHE_ROOT at writable folders.",
         patterns=[r"getpwuid\(\): uid not found: (?P<uid>\d+)",
                   r"OSError: No username set in the environment"],
         facts=lambda m, line, scan: {"uid_shown": f" (uid {m.group('uid')})" if m.groupdict().get("uid") else ""},
         playbook="environment", confidence=0.85),
]
