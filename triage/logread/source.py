"""Open the log the user named and hand it out as byte chunks.

A log can be gigabytes, gzip-compressed, a pipe that is still being written, or not a log at all;
everything here streams, and every way it can be unreadable becomes an InputError (one line, exit 2).
"""

from __future__ import annotations

import os
import stat
import sys
import zlib

from triage.record import Record

from typing import BinaryIO, Iterator

CHUNK = 1 << 20
GZIP_MAGIC = b"\x1f\x8b"


class InputError(Exception):
    """The input cannot be read; the message is one line meant for the user."""


class LogSource(Record):
    """What the user asked us to read."""

    __slots__ = ("name", "path", "fd", "gzip")
    _fields = __slots__

    def __init__(self, name: str, path: str | None, fd: int | None = None, gzip: bool = False) -> None:
        self.name = name  # as the report shows it: a path, or "-"
        self.path = path  # a regular file we may hand to grep, else None
        self.fd = fd  # an open descriptor (stdin or a pipe kept aside for the TUI)
        self.gzip = gzip

    @property
    def is_plain_file(self) -> bool:
        return self.path is not None and not self.gzip


def open_source(name: str, fd: int | None = None) -> LogSource:
    """Validate `name` ("-" for stdin) without consuming it."""
    if name == "-":
        use_fd = sys.stdin.fileno() if fd is None else fd
        try:
            st = os.fstat(use_fd)
        except OSError as exc:
            raise InputError(f"cannot read standard input: {exc.strerror}") from None
        if fd is None and os.isatty(use_fd):
            raise InputError("--log - reads a log from a pipe, but standard input is a terminal "
                             "(try: vllm serve ... 2>&1 | tee vllm.log | triage --log -)")
        if stat.S_ISDIR(st.st_mode):
            raise InputError("standard input is a directory")
        return LogSource("-", None, use_fd)
    if not os.path.exists(name):
        if os.path.islink(name):  # a dangling link or a loop of links: say which
            try:
                os.stat(name)
            except OSError as exc:
                raise InputError(f"{name}: {(exc.strerror or 'unreadable link').lower()}") from None
        raise InputError(f"{name}: no such file")
    if os.path.isdir(name):
        raise InputError(f"{name}: is a directory, not a log file")
    try:
        st = os.stat(name)
        if not stat.S_ISREG(st.st_mode):
            # A FIFO, /dev/stdin, <(process substitution): readable once. Open it now and stream
            # from that descriptor; peeking for the gzip magic would swallow a buffer of it.
            return LogSource(name, None, os.open(name, os.O_RDONLY))
        with open(name, "rb") as fh:
            head = fh.read(2)
    except PermissionError:
        raise InputError(f"{name}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return LogSource(name, name, None, gzip=head == GZIP_MAGIC)


def _raw_chunks(src: LogSource) -> Iterator[bytes]:
    if src.fd is not None:
        while True:
            try:
                b = os.read(src.fd, CHUNK)
            except OSError as exc:
                raise InputError(f"reading standard input failed: {exc.strerror}") from None
            if not b:
                return
            yield b
        return
    assert src.name != "-"
    try:
        fh: BinaryIO = open(src.name, "rb")
    except OSError as exc:
        raise InputError(f"{src.name}: cannot read ({exc.strerror or exc})") from None
    with fh:
        while True:
            try:
                b = fh.read(CHUNK)
            except OSError as exc:
                raise InputError(f"{src.name}: read failed ({exc.strerror or exc})") from None
            if not b:
                return
            yield b


def chunks(src: LogSource) -> Iterator[bytes]:
    """The decompressed bytes of the log, chunk by chunk. Gzip is detected by its magic bytes
    (also on stdin), and several concatenated gzip members are read as one stream."""
    raw = _raw_chunks(src)
    first = next(raw, b"")
    if not first:
        return
    if not (src.gzip or first[:2] == GZIP_MAGIC):
        yield first
        yield from raw
        return
    dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
    pending = first
    try:
        while True:
            while pending:
                out = dec.decompress(pending, CHUNK)
                pending = dec.unconsumed_tail
                if out:
                    yield out
                if dec.eof:
                    rest = dec.unused_data
                    dec = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    pending = rest + pending
                    if not pending:
                        break
            nxt = next(raw, None)
            if nxt is None:
                tail = dec.flush()
                if tail:
                    yield tail
                return
            pending = nxt
    except zlib.error as exc:
        raise InputError(f"{src.name}: not a valid gzip file ({exc})") from None
