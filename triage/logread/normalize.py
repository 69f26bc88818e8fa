"""Turn a raw log line into (process, level, source, message).

Real logs wrap vLLM's own header (`LEVEL MM-DD HH:MM:SS [file.py:N] `) in layers: ANSI colours,
CRLF from vLLM's NewLineFormatter, a process tag `(Worker_TP3 pid=4191)` (older
`(VllmWorker rank=0 pid=1110)`, Ray's `(RayWorkerWrapper pid=..., ip=...)`), torchrun's `[rank0]:`,
docker compose's `vllm-1  | `, kubectl/journald timestamps; Python logging's own asctime formats
when an application configured them, Ray's `[repeated 7x across cluster]`, the indentation of a
GitHub paste. The layers come in any order, so the prefixes are peeled in a loop until none applies.
"""

from __future__ import annotations

from triage.lazyre import lazy
from triage.record import Record

# Compiled on first use, and each tried only on a line that can hold it (the cheap check before
# it): most logs never show most of these layers, and compiling them all costs start-up time.
ANSI_RE = lazy(r"\x1b(?:\[[0-9;?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
CTRL_RE = lazy(r"[\x00-\x08\x0b-\x1f\x7f]")
# A colour escape pasted in caret notation (`cat -v`, less, a terminal copied as text): "^[[1;36m(EngineCore ...".
CARET_ANSI_RE = lazy(r"\^\[\[[0-9;]*[mK]")
# A log pasted through a web page keeps its HTML escapes: "&nbsp; File &quot;/x.py&quot;".
HTML_ENTITY_RE = lazy(r"&(?:nbsp|quot|lt|gt|amp|apos|#\d{1,5}|#x[0-9a-fA-F]{1,4});")

_ISO_TIME = r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?"
# (a condition every match meets, the pattern)
_PREFIXES = [
    # journald / syslog: "Feb 14 10:12:44 host vllm[1234]: ", -o short-precise "Feb  4 10:12:44.123456 ...",
    # -o short-iso(-precise) "2026-02-14T10:12:44.123456+0000 host python3[1234]: " (there the pid is
    # required, so that a timestamped "Process EngineCore_DP0:" is not taken for a host and a command)
    (lambda s: (s[3:4] == " " and s[9:10] == ":") or s[:1].isdecimal(),
     lazy(r"(?:[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}(?:\.\d+)? [\w.-]+ [\w.@/-]+(?:\[\d+\])?"
          r"|" + _ISO_TIME + r" [\w.-]+ [\w.@/-]+\[\d+\]): ")),
    # 2026-02-14T10:12:44.123456789Z (kubectl --timestamps, docker logs -t); the CRI format of a node's
    # /var/log/pods files and `crictl logs` adds the stream and a full/partial tag: "<time> stdout F "
    (lambda s: s[:1].isdecimal(), lazy(_ISO_TIME + r"\s+(?:std(?:out|err) [FP] )?")),
    # kubectl logs --prefix: "[pod/vllm-7c9d8b6f5-x2x4z/vllm] "
    (lambda s: s.startswith("[pod/"), lazy(r"\[pod/[^\]\s]+\] ")),
    # docker compose: "vllm-1  | ", "vllm_server_1 | " (one space after the bar: the line's own
    # indentation, a traceback's frames, stays)
    (lambda s: "|" in s, lazy(r"[A-Za-z0-9][\w.-]*\s+\|(?: |$)")),
    # torchrun / torch.distributed: "[rank0]: ", "[rank3]:[W214 ...]"
    (lambda s: s.startswith("[rank"), lazy(r"\[rank\d+\]:\s?")),
    # a line number and a tab: `cat -n` ("  3597\t"), CI log viewers' copy
    (lambda s: "\t" in s[:9], lazy(r" *\d{1,7}\t")),
    # run: Google Cloud Logging's copy (GKE, Vertex AI): "INFO 2025-11-19T20:16:36.0966Z [resource.labels.containerName:
    # vllm] " (its severity, not vLLM's: vLLM's own header follows)
    (lambda s: "[resource.labels." in s[:90],
     lazy(r"(?:DEFAULT|DEBUG|INFO|NOTICE|WARNING|ERROR|CRITICAL|ALERT|EMERGENCY) " + _ISO_TIME
          + r" \[resource\.labels\.[\w.]+: [^\]]*\] ")),
    # --- form: launchers' and viewers' own prefixes around vLLM's lines
    # Buildkite's log viewer copied: a gutter bar before each line ("  | (EngineCore_DP0 pid=6804) ...")
    (lambda s: s[:1] == " " and "| " in s[:6], lazy(r" {1,4}\|(?: |$)")),
    # Slurm `srun --label` ("0: ", "12: "), Open MPI `--tag-output` ("[1,0]<stderr>:")
    (lambda s: s[:1].isdecimal() and ": " in s[:7], lazy(r"\d{1,5}: ")),
    (lambda s: s.startswith("[") and ">:" in s[:24], lazy(r"\[\d+,\d+\]<std(?:out|err)>:\s?")),
    # pm2's log view: "0|vllm     | "
    (lambda s: s[:1].isdecimal() and "|" in s[:4], lazy(r"\d+\|[\w.-]+\s*\| ")),
    # a supervising script's "[2025-09-25 20:03:20] [/bin/sh]: " (a bracketed time, then its own tag)
    (lambda s: s[:2] == "[2" and "]: " in s[:80], lazy(r"\[" + _ISO_TIME + r"\]\s+\[[^\]]{1,40}\]:\s?")),
    # pytest's failure lines: "E       ValueError: ..." (a test that started vLLM)
    (lambda s: s[:3] == "E  ", lazy(r"E {3,}")),
    # --- end form
]

# (EngineCore_DP0 pid=1576), (Worker_TP3_EP3 pid=4191), (VllmWorker rank=0 pid=1110),
# (RayWorkerWrapper pid=2202490, ip=10.0.0.7), (VllmWorkerProcess pid=221), (APIServer pid=1)
# (VllmWorker TP0 pid=2748156) of 0.10, Ray Serve's (ServeReplica:llms:LLMServer:qwen pid=2345, ip=10.0.0.1)
PROC_RE = lazy(
    r"\((?:(?P<name>[A-Za-z_][\w:.-]*(?: (?!rank=)[\w:.-]+)*) )?(?:rank=(?P<rank>\d+) )?pid=(?P<pid>\d+)"
    r"(?:, ip=(?P<ip>[\w.:-]+))?\)\s?"
)

# vLLM's header: "ERROR 02-14 10:12:44 [multiproc_executor.py:751] ", older "INFO 04-24 16:06:40 worker_base.py:157] "
HEADER_RE = lazy(
    r"(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+(?P<date>\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:[.,]\d+)?\s+\[?(?P<src>[\w./-]+\.py:\d+)\]\s?"
)
_LEVEL_WORDS = ("DEBUG", "INFO", "WARN", "ERROR", "CRITICAL")  # what both patterns below start with
# uvicorn/std logging: "INFO:     127.0.0.1:..." or "ERROR:root:..."
PLAIN_LEVEL_RE = lazy(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):(?:\s+|(?=\w+:))")
# Python logging's own formats, when vLLM runs inside an application that configured them:
# "2026-02-14 10:12:44,123 - vllm.core - ERROR - ", "[2026-02-14 10:12:44,123] [ERROR] [core.py:866] ",
# "2026-02-14 10:12:44,123 ERROR vllm.core: ", loguru's "2026-02-14 10:12:44.123 | ERROR    | mod:fn:12 - ".
# Never vLLM's own header behind a timestamp ("...Z INFO 02-14 10:12:44 [...]").
PYLOG_RE = lazy(
    r"\[?" + _ISO_TIME + r"\]?\s+(?:[-|]\s+)?(?:[\w.]+\s+-\s+)?"
    r"\[?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|Debug|Info|Warning|Warn|Error|Critical)\]?"
    r"(?:\s*[-|]\s+(?:[\w.]+:[\w<>]+:\d+\s+-\s+)?|\s+\[(?P<src>[\w./-]+(?::\d+)?)\]\s?"
    r"|\s+(?:[a-z_]\w*(?:\.[a-z_]\w*)*:\s)?|:\s*)(?!\d{2}-\d{2} \d{2}:)"
)
# Ray's C++ core logs (glog style): "[2025-12-12 15:10:48,710 E 322780 345750] raylet_client.cc:199: ",
# "[... C 42791 42791] (raylet) experimental_mutable_object_provider.cc:153: ".
RAY_CPP_RE = lazy(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ (?P<level>[DIWEFC]) \d+ \d+\] (?:\([\w-]+\) )?"
                  r"(?P<src>[\w./-]+\.(?:cc|cpp|h):\d+):\s*")
# glog / abseil / c10 logging, used by C++ libraries vLLM loads (torch's ProcessGroupNCCL, Mooncake, Triton
# server, gRPC): "E0911 06:19:37.204720  3746 rdma_context.cpp:70] ", torch's "[W1201 10:12:44.123 12345
# ProcessGroupNCCL.cpp:1234] " and its older dateless "[E ProcessGroupNCCL.cpp:475] ".
GLOG_RE = lazy(r"(?:\[(?P<level>[IWEF])(?:\d{4} \d\d:\d\d:\d\d(?:\.\d+)?(?: +\d+)?)? +(?P<src>[\w./+-]+\.(?:cc|cpp|cu|h|py):\d+)\]"
               r"|(?P<level2>[IWEF])\d{4} \d\d:\d\d:\d\d(?:\.\d+)? +\d+ +(?P<src2>[\w./+-]+\.(?:cc|cpp|cu|h|py):\d+)\])\s?")
# Ray forwards its daemons' output to the driver under their name: "(raylet) ", "(raylet, ip=10.0.0.7) ".
RAY_DAEMON_RE = lazy(r"\((?P<name>raylet|gcs_server|dashboard|autoscaler|monitor)(?:, ip=(?P<ip>[\w.:-]+))?\)(?: |$)")
# --- down: loggers of projects that drive vLLM. lm-evaluation-harness: "2024-06-10:18:05:24,757 INFO     [evaluator.py:362] ";
# transformers' format as LlamaFactory configures it: "[WARNING|logging.py:329] 2025-03-10 21:43:12,326 >> "
FRAMEWORK_LOG_RE = lazy(
    r"(?:\d{4}-\d{2}-\d{2}:\d{2}:\d{2}:\d{2}(?:,\d+)?\s+(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\[(?P<src>[\w./-]+:\d+)\]"
    r"|\[(?P<level2>DEBUG|INFO|WARNING|ERROR|CRITICAL)\|(?P<src2>[\w./-]+:\d+)\] " + _ISO_TIME + r" >>)\s?"
)
# --- end down
_GLOG_LEVELS = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL", "C": "CRITICAL"}
# A launcher's own source tag in front of vLLM's process tag ("[Error] (Process) (EngineCore pid=2651) ").
TAG_BEFORE_PROC_RE = lazy(r"\([A-Za-z][\w.-]*\)\s+(?=\((?:[A-Za-z_][\w-]* )?(?:rank=\d+ )?pid=\d+)")
# vLLM's header with its level and time cut off by the paste: "[core.py:712] ", older "worker_base.py:157] ".
BARE_SRC_RE = lazy(r"\[?(?P<src>[\w./-]+\.py:\d+)\]\s?")
# --- form: TorchServe's frontend relays a worker's output under its own level (not the line's):
# "2024-11-18T21:24:57,141 [INFO ] W-9000-model_1.0-stdout MODEL_LOG - "
TORCHSERVE_RE = lazy(r"\S+ \[[A-Z]+ ?\] \S+ MODEL_LOG - ")
# Ray prints a line that several workers printed alike once, with this suffix.
RAY_REPEAT_RE = lazy(r"\s*\[repeated \d+x across cluster\]\s*$")
# run: a rendered quote copied with its bar (chat and terminal markdown renderers print "▎ " for "> ")
QUOTE_BARS = "\u258e\u258d\u258c\u258f"
# A ticket's markdown heading made of the exception line ("# AttributeError: Qwen2Tokenizer has no attribute ..."):
# the marks go, the message stays (only before an exception's name: a shell comment keeps its "#").
MD_HEADING_RE = lazy(r"#{1,6} +(?=(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Warning)\b:)")

# A GitHub paste as an indented code block (or inside an indented fence): spaces before a prefix.
# (Compose's "name | " must look like a compose service here, not like source code "flags |= x".)
_INDENTED_PREFIX_RE = lazy(
    r" +(?=\(\w[\w-]* (?:rank=\d+ )?pid=\d+|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} |\[?\d{4}-\d{2}-\d{2}[T ]"
    r"|[A-Z][a-z]{2} [ \d]\d \d{2}:|\[rank\d+\]:|\[pod/|[A-Za-z0-9][\w.-]*[-_]\d+ +\| |\[[\w./-]+\.py:\d+\] )"
)


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
    if "#033[" in s:  # syslog (rsyslog) writes the escape character as "#033"
        s = s.replace("#033[", "\x1b[")
    if "\x1b" in s:
        s = ANSI_RE.sub("", s)
    if "^[[" in s:
        s = CARET_ANSI_RE.sub("", s)
    if "\r" in s:
        # NewLineFormatter writes "\r\n" + header; a bare \r inside a line is a progress bar:
        # what the terminal would show is the text after the last \r.
        s = s.rstrip("\r")
        if "\r" in s:
            s = s.rsplit("\r", 1)[-1]
    if "&" in s and ";" in s and HTML_ENTITY_RE.search(s):
        import html

        s = html.unescape(s).replace("\xa0", " ")
    if not s.isprintable() and CTRL_RE.search(s):  # control characters are not printable
        s = CTRL_RE.sub("", s.replace("\t", "    "))
    return s


def parse(no: int, raw: bytes | str, indent: int = 0) -> Line:
    """`indent`: the indentation of a pasted log, learnt from its lines with a prefix (see
    paste_indent); removed from lines without one, so that their own indentation is what remains."""
    shown = clean(raw)
    s = shown
    while s and (s[0] == ">" or s[0] in QUOTE_BARS):  # a markdown quote ("> ", nested "> > ") around a pasted log
        s = s[2:] if s[1:2] == " " else s[1:]
    if s[:1] == "`" and s[-1:] == "`" and len(s) > 2 and s.count("`") == 2:
        s = s[1:-1]  # a whole log line quoted as markdown inline code in a ticket's prose: its text is the line
    if s[:1] == "#":
        m = MD_HEADING_RE.match(s)
        s = s[m.end():] if m else s
    if s[:1] == " ":
        m = _INDENTED_PREFIX_RE.match(s)
        if m:
            s = s[m.end():]
        elif indent and s[:indent].isspace():
            s = s[indent:]
    if s.endswith("cluster]"):
        s = RAY_REPEAT_RE.sub("", s)
    if "MODEL_LOG - " in s[:120]:
        m = TORCHSERVE_RE.match(s)
        s = s[m.end():] if m else s
    proc = level = src = ip = ""
    for _ in range(6):  # layers come in any order; a handful is the most seen in practice
        changed = False
        if not level and s[:1] in "[0123456789":
            m = PYLOG_RE.match(s)
            if m:
                level = m.group("level").upper()
                level = "WARNING" if level == "WARN" else level
                src = m.group("src") or ""
                s = s[m.end():]
                changed = True
        if not level and (s[:1].isdecimal() or s[:2] in ("[D", "[I", "[W", "[E", "[C")):
            m = FRAMEWORK_LOG_RE.match(s)
            if m:
                level = m.group("level") or m.group("level2")
                src = m.group("src") or m.group("src2")
                s = s[m.end():]
                changed = True
        if not level and s[:2] == "[2":
            m = RAY_CPP_RE.match(s)
            if m:
                level, src = _GLOG_LEVELS[m.group("level")], m.group("src")
                s = s[m.end():]
                changed = True
        if not level and (s[:1] in "IWEF" and s[1:5].isdecimal() or s[:1] == "[" and s[1:2] in "IWEF"):
            m = GLOG_RE.match(s)
            if m:
                level = _GLOG_LEVELS[m.group("level") or m.group("level2")]
                src = m.group("src") or m.group("src2")
                s = s[m.end():]
                changed = True
        for may, rx in _PREFIXES:
            m = rx.match(s) if may(s) else None
            if m and m.end() > 0:
                s = s[m.end():]
                changed = True
        if s[:1] == "(" and "pid=" in s:
            t = TAG_BEFORE_PROC_RE.match(s)
            if t:
                s = s[t.end():]
        m = RAY_DAEMON_RE.match(s) if s[:1] == "(" else None
        if m:
            proc, ip = m.group("name"), m.group("ip") or ip
            s = s[m.end():]
            changed = True
        m = PROC_RE.match(s) if s[:1] == "(" else None
        if m:
            name = m.group("name") or ""  # Ray's task lines: "(pid=2202490) ..."
            if m.group("rank") is not None:
                name = f"{name} rank={m.group('rank')}".lstrip()
            proc = f"{name} pid={m.group('pid')}".lstrip()
            ip = m.group("ip") or ip
            s = s[m.end():]
            changed = True
        if s.startswith(_LEVEL_WORDS):  # vLLM's own header wins over a launcher's level in front of it
            m = HEADER_RE.match(s)
            if m:
                level = "WARNING" if m.group("level") == "WARN" else m.group("level")
                src = m.group("src")
                s = s[m.end():]
                changed = True
        if not src and not changed and (s[:1] == "[" or ".py:" in s[:60]):
            m = BARE_SRC_RE.match(s)
            if m:
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


def paste_indent(ln: Line) -> int:
    """The indentation a pasted log's prefixed lines carry (0 when they carry none)."""
    if ln.shown[:1] == " " and (ln.proc or ln.level):
        return len(ln.shown) - len(ln.shown.lstrip(" "))
    return 0
