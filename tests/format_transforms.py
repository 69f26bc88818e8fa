"""The shapes a vLLM log takes on its way to triage, as pure functions text -> text.

Each function rewrites a whole log the way a real tool or a person does: docker compose, kubectl,
journald, docker -t, Windows line endings, a coloured terminal kept by `script`/`tee`, a paste with
blank lines, another process writing in between, Ray's tags and de-duplication, Python logging's
asctime formats, GitHub pastes (indented or fenced) and a terminal copy hard-wrapped at its width.
The diagnosis must not care (tests/test_formats.py).
"""

from __future__ import annotations

import gzip
import re

# The vLLM header as printed (optionally coloured): "ERROR 02-14 21:57:23 [multiproc_executor.py:751] "
_HEADER = re.compile(
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<date>\d{2}-\d{2}) (?P<time>\d{2}:\d{2}:\d{2})"
    r"(?:\.\d+)? \[?(?P<src>[\w./-]+\.py):(?P<no>\d+)\] "
)
_PROC = re.compile(r"\((?P<name>[A-Za-z_][\w-]*)(?: rank=\d+)? pid=(?P<pid>\d+)(?:, ip=[\w.:-]+)?\) ")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _lines(text: str) -> list[str]:
    """The log's lines without their newlines (a final newline does not make an empty line)."""
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _each(text: str, fn) -> str:
    return "\n".join(fn(i, ln) for i, ln in enumerate(_lines(text))) + "\n"


def _stamp(i: int) -> tuple[str, str]:
    """A clock that advances with the line number: (HH:MM:SS, fraction)."""
    s = 44 + i // 7
    return f"10:{12 + s // 60:02d}:{s % 60:02d}", f"{(i * 7919) % 1000000:06d}"


# ---- collectors -------------------------------------------------------------------------------

def compose(text: str) -> str:
    """`docker compose logs`: the service name, padded to the longest service's width, and a bar."""
    return _each(text, lambda i, ln: f"vllm-openai-1  | {ln}")


def compose_timestamps(text: str) -> str:
    """`docker compose logs -t`: the bar, then docker's RFC3339Nano timestamp."""
    return _each(text, lambda i, ln: f"vllm-1  | 2026-02-14T{_stamp(i)[0]}.{_stamp(i)[1]}123Z {ln}")


def kubectl(text: str) -> str:
    """`kubectl logs --timestamps`: RFC3339 with nanoseconds, UTC."""
    return _each(text, lambda i, ln: f"2026-02-14T{_stamp(i)[0]}.{_stamp(i)[1]}789Z {ln}")


def kubectl_prefix(text: str) -> str:
    """`kubectl logs --prefix --timestamps` (and `-l app=vllm`): the pod/container, then the time."""
    return _each(text, lambda i, ln: f"[pod/vllm-7c9d8b6f5-x2x4z/vllm] 2026-02-14T{_stamp(i)[0]}.{_stamp(i)[1]}Z {ln}")


def docker_t(text: str) -> str:
    """`docker logs -t`: RFC3339Nano with a numeric zone when the daemon is not in UTC."""
    return _each(text, lambda i, ln: f"2026-02-14T{_stamp(i)[0]}.{_stamp(i)[1]}000+01:00 {ln}")


def journald(text: str) -> str:
    """`journalctl -u vllm` (short format): syslog time, host, the unit's process and pid."""
    return _each(text, lambda i, ln: f"Feb 14 {_stamp(i)[0]} gpu-node-03 vllm[4191]: {ln}")


def journald_precise(text: str) -> str:
    """`journalctl -o short-iso-precise`: ISO time with microseconds and zone, host, the command."""
    return _each(text, lambda i, ln: f"2026-02-14T{_stamp(i)[0]}.{_stamp(i)[1]}+0000 gpu-node-03 python3[4191]: {ln}")


def journald_short_precise(text: str) -> str:
    """`journalctl -o short-precise`: syslog time with microseconds; a script as the unit's command."""
    return _each(text, lambda i, ln: f"Feb  4 {_stamp(i)[0]}.{_stamp(i)[1]} dgx01 start-vllm.sh[977]: {ln}")


# ---- terminals --------------------------------------------------------------------------------

def crlf(text: str) -> str:
    """Windows line endings (a log saved or pasted on Windows)."""
    return text.replace("\r\n", "\n").replace("\n", "\r\n")


def _colour_header(ln: str) -> str:
    m = _HEADER.search(ln)
    if m:
        lv = {"ERROR": "31", "WARNING": "33", "INFO": "32", "DEBUG": "37", "CRITICAL": "1;31"}[m.group("level")]
        ln = (ln[:m.start()] + f"\x1b[{lv}m{m.group('level')}\x1b[0m \x1b[90m{m.group('date')} {m.group('time')}\x1b[0m "
              f"\x1b[90m[{m.group('src')}:{m.group('no')}]\x1b[0m " + ln[m.end():])
    m = _PROC.match(ln)
    if m:
        ln = f"\x1b[1;36m{m.group(0)[:-1]}\x1b[0;0m " + ln[m.end():]
    return ln


_FRAME = re.compile(r'^(?P<pre>.*?  File )"(?P<file>[^"]+)", line (?P<no>\d+), in (?P<fn>.+)$')
_EXC = re.compile(r"^(?P<pre>.*?)(?P<type>\b[A-Za-z_][\w.]*(?:Error|Exception)): (?P<msg>.+)$")


def _colour_traceback(ln: str) -> str:
    """Python 3.13 colours tracebacks on a terminal: the file, line and function of each frame, and
    the exception's type and message."""
    m = _FRAME.match(ln)
    if m:
        return (f'{m.group("pre")}\x1b[35m"{m.group("file")}"\x1b[0m, line \x1b[35m{m.group("no")}\x1b[0m, '
                f'in \x1b[35m{m.group("fn")}\x1b[0m')
    m = _EXC.match(ln)
    if m and "Traceback" not in ln:
        return f"{m.group('pre')}\x1b[1;35m{m.group('type')}\x1b[0m: \x1b[35m{m.group('msg')}\x1b[0m"
    return ln


def ansi(text: str) -> str:
    """A coloured terminal kept by `script` or `tee`: vLLM's coloured levels, grey times and
    sources, cyan process tags, Python 3.13's coloured tracebacks, and `script`'s CRLF."""
    out = []
    for ln in _lines(_ANSI.sub("", text)):
        out.append(_colour_traceback(_colour_header(ln)))
    return "\r\n".join(out) + "\r\n"


def blank_lines(text: str) -> str:
    """A paste that put an empty line between every two lines (some chat and issue editors)."""
    return "\n\n".join(_lines(text)) + "\n"


def interleaved(text: str) -> str:
    """Another process writes between every two lines (its lines are selected: they carry WARNING),
    as a worker that is still alive does while the failing one prints its traceback."""
    noise = ("(Worker_TP7 pid=31337) WARNING 02-14 21:57:23 [shm_broadcast.py:466] No available shared memory "
             "broadcast block found in 60 seconds. This typically happens when some processes are hanging.")
    out = []
    for ln in _lines(text):
        out.append(ln)
        out.append(noise)
    return "\n".join(out) + "\n"


def ray(text: str) -> str:
    """Ray: workers run as actors, tagged `(RayWorkerWrapper pid=..., ip=...)`; a line printed alike
    by several workers is shown once with a `[repeated Nx across cluster]` suffix."""
    def one(i: int, ln: str) -> str:
        plain = _ANSI.sub("", ln)
        m = _PROC.search(plain)
        if not m or not m.group("name").startswith(("Worker", "VllmWorker", "RayWorkerWrapper")):
            return ln
        plain = plain[:m.start()] + f"(RayWorkerWrapper pid={m.group('pid')}, ip=10.0.0.7) " + plain[m.end():]
        return plain + (f" [repeated {i % 7 + 2}x across cluster]" if plain.strip() else "")
    return _each(text, one)


def pylogging(text: str) -> str:
    """Python logging's `%(asctime)s - %(name)s - %(levelname)s - %(message)s`, as used when vLLM
    runs inside an application that configured logging itself (the default basicConfig shape)."""
    def one(i: int, ln: str) -> str:
        plain = _ANSI.sub("", ln)
        m = _HEADER.search(plain)
        if not m:
            return ln
        name = "vllm." + m.group("src").rsplit("/", 1)[-1][:-3]
        return (plain[:m.start()] + f"2026-02-14 {m.group('time')},{(i * 37) % 1000:03d} - {name} - {m.group('level')} - "
                + plain[m.end():])
    return _each(text, one)


def pylogging_bracketed(text: str) -> str:
    """Another common logging format: `[%(asctime)s] [%(levelname)s] [%(name)s] %(message)s`."""
    def one(i: int, ln: str) -> str:
        plain = _ANSI.sub("", ln)
        m = _HEADER.search(plain)
        if not m:
            return ln
        src = m.group("src").rsplit("/", 1)[-1]
        return (plain[:m.start()] + f"[2026-02-14 {m.group('time')},{(i * 37) % 1000:03d}] [{m.group('level')}] "
                f"[{src}:{m.group('no')}] " + plain[m.end():])
    return _each(text, one)


# ---- pastes -----------------------------------------------------------------------------------

def indented(text: str) -> str:
    """A GitHub issue paste as an indented code block (four spaces before every line)."""
    return _each(text, lambda i, ln: "    " + ln if ln else ln)


def fenced(text: str) -> str:
    """A GitHub issue paste inside a ``` fence, with a sentence before and after, indented by two
    spaces as a fence inside a list item is."""
    body = _each(text, lambda i, ln: "  " + ln if ln else ln)
    return "Launching the server on the new node gives:\n\n- log:\n  ```text\n" + body + "  ```\n\nAny idea?\n"


def _wrap(text: str, width: int) -> str:
    """A terminal copy of lines wider than the terminal: cut every `width` columns, with no header
    on the continuation (colours are not columns; the cut falls on visible characters)."""
    out = []
    for ln in _lines(_ANSI.sub("", text)):
        ln = ln.rstrip("\r")
        while len(ln) > width:
            out.append(ln[:width])
            ln = ln[width:]
        out.append(ln)
    return "\n".join(out) + "\n"


def wrap80(text: str) -> str:
    return _wrap(text, 80)


def wrap120(text: str) -> str:
    return _wrap(text, 120)


def gzipped(text: str) -> bytes:
    """`gzip vllm.log` (mtime fixed: the same bytes every run)."""
    return gzip.compress(text.encode(), mtime=0)


CHEAP = {
    "compose": compose, "compose_timestamps": compose_timestamps, "kubectl": kubectl,
    "kubectl_prefix": kubectl_prefix, "docker_t": docker_t, "journald": journald,
    "journald_precise": journald_precise, "journald_short_precise": journald_short_precise,
    "crlf": crlf, "ansi": ansi, "blank_lines": blank_lines, "interleaved": interleaved, "ray": ray,
    "pylogging": pylogging, "pylogging_bracketed": pylogging_bracketed, "indented": indented, "fenced": fenced,
}
WRAPS = {"wrap80": wrap80, "wrap120": wrap120}
