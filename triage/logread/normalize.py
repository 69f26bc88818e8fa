"""Turn a raw log line into (process, level, source, message).

Real logs wrap vLLM's own header (`LEVEL MM-DD HH:MM:SS [file.py:N] `) in layers: ANSI colours,
CRLF from vLLM's NewLineFormatter, a process tag `(Worker_TP3 pid=4191)` (older
`(VllmWorker rank=0 pid=1110)`, Ray's `(RayWorkerWrapper pid=..., ip=...)`), torchrun's `[rank0]:`,
docker compose's `vllm-1  | `, kubectl/journald timestamps. The layers come in any order, so the
prefixes are peeled in a loop until none applies.
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.record import Record

# Compiled on first use, and each tried only on a line that can hold it (the cheap check before
# it): most logs never show most of these layers, and compiling them all costs start-up time.
ANSI_RE = lazy(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
CTRL_RE = lazy(r"[\x00-\x08\x0b-\x1f\x7f]")

# (a condition every match meets, the pattern)
_PREFIXES = [
    # 2026-02-14T10:12:44.123456789Z (kubectl --timestamps, docker logs -t)
    (lambda s: s[:1].isdecimal(),  # \d is a Unicode decimal digit, as isdecimal()
     lazy(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+")),
    # Feb 14 10:12:44 host vllm[1234]:  (journald / syslog)
    (lambda s: s[3:4] == " " and s[9:10] == ":",
     lazy(r"[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} [\w.-]+ [\w.@/-]+(?:\[\d+\])?: ")),
    # docker compose: "vllm-1  | ", "vllm_server_1 | "
    (lambda s: "|" in s, lazy(r"[A-Za-z0-9][\w.-]*\s+\|\s?(?=\S|$)")),
    # torchrun / torch.distributed: "[rank0]: ", "[rank3]:[W214 ...]"
    (lambda s: s.startswith("[rank"), lazy(r"\[rank\d+\]:\s?")),
]

# (EngineCore_DP0 pid=1576), (Worker_TP3_EP3 pid=4191), (VllmWorker rank=0 pid=1110),
# (RayWorkerWrapper pid=2202490, ip=10.0.0.7), (VllmWorkerProcess pid=221), (APIServer pid=1)
PROC_RE = lazy(
    r"\((?P<name>[A-Za-z_][\w-]*)(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)(?:, ip=(?P<ip>[\w.:-]+))?\)\s?"
)

# vLLM's header: "ERROR 02-14 10:12:44 [multiproc_executor.py:751] ", older "INFO 04-24 16:06:40 worker_base.py:157] "
HEADER_RE = lazy(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<date>\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:[.,]\d+)?\s+\[?(?P<src>[\w./-]+\.py:\d+)\]\s?"
)
_LEVEL_WORDS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")  # what both patterns below start with
# uvicorn/std logging: "INFO:     127.0.0.1:..." or "ERROR:root:..."
PLAIN_LEVEL_RE = lazy(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:\s+|(?=\w+:))")


class Line(Record):
    # A plain class, not a dataclass: see triage.record (start-up).
    __slots__ = ("no", "text", "shown", "proc", "level", "src", "ip")
    _fields = __slots__

    def __init__(self, no: int, text: str, shown: str, proc: str = "", level: str = "", src: str = "",
                 ip: str = "") -> None:
        self.no = no  # 1-based line number in the input
        self.text = text  # the message, all prefixes removed, indentation kept
        self.shown = shown  # the whole line without colours/control characters, for evidence
        self.proc = proc  # "Worker_TP3 pid=4191"; "" when the line has no process tag
        self.level = level  # INFO / WARNING / ERROR / ... when the line has a header
        self.src = src  # "multiproc_executor.py:751"
        self.ip = ip  # Ray's node address, when given


def clean(raw: bytes | str) -> str:
    """Decode (invalid UTF-8 replaced), drop colours, CR and other control characters."""
    s = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
    if "\x1b" in s:
        s = ANSI_RE.sub("", s)
    if "\r" in s:
        # NewLineFormatter writes "\r\n" + header; a bare \r inside a line is a progress bar:
        # what the terminal would show is the text after the last \r.
        s = s.rstrip("\r")
        if "\r" in s:
            s = s.rsplit("\r", 1)[-1]
    if not s.isprintable() and CTRL_RE.search(s):  # control characters are not printable
        s = CTRL_RE.sub("", s.replace("\t", "    "))
    return s


def parse(no: int, raw: bytes | str) -> Line:
    shown = clean(raw)
    s = shown
    proc = level = src = ip = ""
    for _ in range(6):  # layers come in any order; a handful is the most seen in practice
        changed = False
        for may, rx in _PREFIXES:
            m = rx.match(s) if may(s) else None
            if m and m.end() > 0:
                s = s[m.end():]
                changed = True
        m = PROC_RE.match(s) if s[:1] == "(" else None
        if m:
            name = m.group("name")
            if m.group("rank") is not None:
                name = f"{name} rank={m.group('rank')}"
            proc = f"{name} pid={m.group('pid')}"
            ip = m.group("ip") or ip
            s = s[m.end():]
            changed = True
        if not level and s.startswith(_LEVEL_WORDS):
            m = HEADER_RE.match(s)
            if m:
                level = "WARNING" if m.group("level") == "WARN" else m.group("level")
                src = m.group("src")
                s = s[m.end():]
                changed = True
        if not changed:
            break
    if not level and s.startswith(_LEVEL_WORDS):
        m = PLAIN_LEVEL_RE.match(s)
        if m:
            level = m.group("level")
            s = s[m.end():]
    return Line(no, s, shown, proc, level, src, ip)
