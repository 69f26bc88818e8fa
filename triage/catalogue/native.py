"""Messages that no Python source raises: libraries' native code (Ray's raylet and memory monitor)
prints them, so the mined catalogue cannot hold them. Each is copied from where the library writes it
and reviewed by hand; a log line holding one names its category the way a mined template does.
"""

from __future__ import annotations

from triage.record import Record


class Native(Record):
    __slots__ = ("package", "where", "text", "category", "meaning")
    _fields = __slots__

    def __init__(self, package: str, where: str, text: str, category: str, meaning: str) -> None:
        self.package = package
        self.where = where  # the part of that library that writes it
        self.text = text  # a piece of the message that every release prints verbatim
        self.category = category
        self.meaning = meaning  # what it says, in plain words


NATIVE: list[Native] = [
    # Ray's memory monitor kills workers when the HOST's RAM passes RAY_memory_usage_threshold (0.95):
    # the summary the raylet prints, the per-worker detail, and the exception text Ray raises from it.
    Native("ray", "the raylet (C++)", "killed due to memory pressure (OOM)", "environment",
           "Ray's memory monitor killed workers because the host ran out of RAM (not GPU memory)"),
    Native("ray", "the raylet's memory monitor (C++)", "which exceeds the memory usage threshold", "environment",
           "Ray's memory monitor killed a worker because the host's RAM use passed its threshold (not GPU memory)"),
    Native("ray", "the raylet (C++)", "Task was killed due to the node running low on memory",
           "environment", "Ray killed the task because the host ran out of RAM (not GPU memory)"),
    Native("ray", "the raylet (C++)", "to address the out of memory issue: https://docs.ray.io",
           "environment", "Ray's memory monitor killed workers because the host ran out of RAM (not GPU memory)"),
    # RAY_CHECK failing in Ray's core: an internal error of Ray itself, in a cluster's data path.
    Native("ray", "Ray's C++ core (a failed RAY_CHECK)", "You have likely discovered a bug in Ray", "distributed",
           "Ray's own core hit an internal error (a Ray bug, often a broken channel between nodes)"),
    # The shell's report of SIGILL: the process ran an instruction this CPU does not have (a wheel or a
    # CPU backend built for AVX-512/AVX2 on an older CPU).
    Native("shell", "the shell's report of a fatal signal (SIGILL)", "Illegal instruction (core dumped)",
           "environment", "the process used a CPU instruction this CPU lacks (a build for a newer CPU, e.g. AVX-512)"),
    # The GCS lost a node: its raylet died or the network between the nodes failed.
    Native("ray", "the GCS, Ray's head service (C++)",
           "has been marked dead because the detector has missed too many heartbeats", "distributed",
           "the Ray head lost a node of the cluster (its raylet died, or the network between the nodes failed)"),
]


def find(text: str) -> Native | None:
    for n in NATIVE:
        if n.text in text:
            return n
    return None
