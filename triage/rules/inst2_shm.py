"""Shared memory (/dev/shm) running out under torch's or vLLM's own shared buffers.

torch passes tensors between processes through files in /dev/shm (libshm: "unable to mmap N bytes from file
</torch_...>", "unable to write to file </torch_...>"); vLLM's broadcast queues and multimodal caches use
Python's multiprocessing.shared_memory. A container's 64 MB default /dev/shm fills and the error names no
path at all: "[Errno 28] No space left on device" raised from shared_memory.py reads like a full disk.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# torch's libshm / storage sharing, the file named by its shm name (no /dev/shm prefix)
TORCH_SHM_RE = lazy(r"unable to (?:mmap \d+ bytes from|write to|open shared memory object) (?:file )?</?torch_\w+>"
                    r"(?:: (?P<why>Cannot allocate memory|No space left on device|[\w ]+))?")
ENOSPC_RE = lazy(r"\[Errno 28\] No space left on device|No space left on device \(28\)")
# where shared-memory segments are created: Python's module, vLLM's broadcast queue and object storage
SHM_FRAMES = ("multiprocessing/shared_memory.py", "device_communicators/shm_broadcast.py", "shm_object_storage.py")

FIX = ("Give the container more shared memory: `docker run --ipc=host` or `--shm-size=16g` (Kubernetes: an "
       "emptyDir with medium Memory mounted at /dev/shm); `df -h /dev/shm` shows its size.")


def _shm_exhausted(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for ln in scan.lines:
        m = TORCH_SHM_RE.search(ln.text)
        if m:
            return _diagnosis(ln.no, ln.shown, "torch could not map a shared tensor", 0.9)
    for rec in scan.exceptions:
        if ENOSPC_RE.search(rec.text) and any(f.file.endswith(SHM_FRAMES) for f in rec.frames):
            return _diagnosis(rec.line.no, rec.line.shown, "no space left creating a shared-memory segment", 0.9)
    return None


def _diagnosis(no: int, shown: str, what: str, conf: float) -> Diagnosis:
    return Diagnosis(category="distributed", signature="distributed.shm_exhausted",
                     title=f"Shared memory (/dev/shm) exhausted: {what}", confidence=conf,
                     evidence=[Evidence(no, shown)], facts={"what": what}, fix=Fix(FIX, "distributed-shm"), first_line=no)


RULES = [
    Rule(signature="distributed.shm_exhausted", category="distributed", title="Shared memory (/dev/shm) exhausted",
         fix=FIX, check=_shm_exhausted, playbook="distributed-shm", confidence=0.9),
]
