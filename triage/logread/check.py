"""Whether a file is a vLLM log at all, before it is diagnosed: an empty file or binary data is not a
log that shows no failure (exit 3) but unreadable input (exit 2, one line); and a log that stops during
start-up without an error was likely cut off, or captured without stderr."""

from __future__ import annotations

# What a started server writes: a log without it and without an error may have been cut short.
READY_MARKERS = (b"Application startup complete", b"Uvicorn running on", b"Starting vLLM API server",
                 b"Available routes are", b"Started server process")

_CONTROL = bytes(c for c in range(32) if c not in b"\t\n\r\x1b\x0c")


def input_problem(path: str) -> str | None:
    """Why a log file cannot be diagnosed at all (empty, binary), in one line; None when it can be read.
    A log with a few NUL bytes or invalid UTF-8 is still a log: only mostly-binary data is refused."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(65536)
    except OSError:
        return None  # the reader says why, in its own words
    if head[:2] == b"\x1f\x8b":
        import gzip

        try:
            with gzip.open(path, "rb") as fh:
                head = fh.read(65536)
        except (OSError, EOFError):
            return f"{path} is not a readable gzip file"
    if not head.strip():
        return f"{path} is empty: no log to diagnose (capture vLLM's output with `2>&1 | tee vllm.log`)"
    chars = head.decode("utf-8", "replace")
    # control characters: ASCII bytes, never part of a UTF-8 sequence, so counted in the bytes (in C)
    bad = chars.count("\ufffd") + len(head) - len(head.translate(None, _CONTROL))
    if bad > len(chars) // 10:
        return f"{path} is binary data, not a text log"
    return None


def cut_short(path: str) -> bool:
    """The log shows vLLM starting but neither an error nor a started server: it ends mid start-up."""
    try:
        import gzip

        opener = gzip.open if path.endswith(".gz") else open
        with opener(path, "rb") as fh:
            data = fh.read(8 << 20)
    except (OSError, EOFError):
        return False
    starting = b"vllm" in data.lower() or b"vLLM" in data
    return starting and not any(m in data for m in READY_MARKERS)


CUT_SHORT = ("the log ends during start-up without an error: it may be cut off, or only stdout was captured "
             "(vLLM writes errors to stderr: capture with `2>&1`)")
