"""Run commands and probes on other machines over SSH (asyncssh), one host or a whole fleet.

- `--host [user@]host[:port]`; aliases, users, ports, keys, ProxyJump come from ~/.ssh/config
  (asyncssh reads it), keys from the agent and ~/.ssh/id_*.
- Host keys are always checked against known_hosts: known_hosts is passed explicitly (never None, so
  not even `UserKnownHostsFile none` in a config turns checking off). An unknown or changed key is an
  error that says which.
- Commands are argv lists, joined with shlex.join for the remote shell: a value from a log stays one
  inert argument there too. Environment variables go in as `env K=V ...` (servers refuse SSH env requests).

Probing hosts over this transport is triage.probes.over_ssh (probes depend on this module, not back).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ipaddress
import shlex
import socket
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import asyncssh

from triage.runner import Result


# What one remote command may send back: the probe's JSON is tens of KB; a host that sends more (a
# 50 MB line, /dev/zero) is cut off there, and the rest is never read.
MAX_OUTPUT = 8 << 20
MAX_LINE = 1 << 20  # a line kept in an error message is cut far shorter (clip_line)


def clip_line(text: str, limit: int = 300) -> str:
    """One line of a remote error for people: cleaned of terminal control, at most `limit` characters."""
    from triage.sanitize import clean

    text = clean(text[: limit * 4])
    return text if len(text) <= limit else text[:limit] + " ..."


class RemoteError(Exception):
    """A host could not be reached or refused us; the message is for people."""


@dataclass(frozen=True)
class Target:
    spec: str
    host: str
    user: str | None = None
    port: int | None = None


def parse_target(spec: str) -> Target:
    """`[user@]host[:port]`, with `[v6addr]:port` for IPv6. ValueError for anything else."""
    s = spec.strip()
    user = None
    rest = s
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not user or any(c.isspace() for c in user):
            raise ValueError(f"bad host {spec!r}: empty or invalid user")
    port: int | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or (tail and not tail.startswith(":")):
            raise ValueError(f"bad host {spec!r}: use [address]:port for IPv6")
        ptxt = tail[1:] if tail else None
    elif rest.count(":") == 1:
        host, ptxt = rest.split(":")
    else:
        host, ptxt = rest, None
        if rest.count(":") > 1:
            try:
                ipaddress.IPv6Address(rest)
            except ValueError:
                raise ValueError(f"bad host {spec!r}") from None
    if ptxt is not None:
        if not ptxt.isdigit() or not 0 < int(ptxt) < 65536:
            raise ValueError(f"bad host {spec!r}: port must be 1-65535")
        port = int(ptxt)
    if not host or host.startswith("-") or any(c.isspace() or c in "/\\'\"`$;" for c in host):
        raise ValueError(f"bad host {spec!r}")
    return Target(spec=s, host=host, user=user, port=port)


USER_KNOWN_HOSTS = ["~/.ssh/known_hosts", "~/.ssh/known_hosts2"]
GLOBAL_KNOWN_HOSTS = ["/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2"]


def _ssh_config(target: Target) -> Any:
    """~/.ssh/config as it applies to `target` (asyncssh's parser), or None."""
    import getpass

    path = Path("~", ".ssh", "config").expanduser()
    if not path.is_file():
        return None
    try:
        from asyncssh.config import SSHClientConfig

        return SSHClientConfig.load(None, [path], False, False, False, getpass.getuser(), target.user or (),
                                    target.host, target.port or ())
    except Exception:  # another asyncssh's signature, or an unreadable config: ssh's defaults
        return None


def _expand(path: str, target: Target | None) -> str:
    import getpass
    import os

    home = str(Path("~").expanduser())
    tokens = {"%%": "%", "%d": home, "%u": getpass.getuser(), "%h": target.host if target else "",
              "%n": target.host if target else ""}
    for k, v in tokens.items():
        path = path.replace(k, v)
    return os.path.expandvars(os.path.expanduser(path))


def known_hosts_files(target: Target | None = None) -> list[str]:
    """The known_hosts files ssh would check for `target`: UserKnownHostsFile and GlobalKnownHostsFile
    from ~/.ssh/config when set (`none` means no file: every key is then unknown), else ssh's defaults."""
    user, glob = USER_KNOWN_HOSTS, GLOBAL_KNOWN_HOSTS
    cfg = _ssh_config(target) if target is not None else None
    if cfg is not None:
        u, g = cfg.get("UserKnownHostsFile", None), cfg.get("GlobalKnownHostsFile", None)
        user = list(u) if isinstance(u, list) else user
        glob = list(g) if isinstance(g, list) else glob
    out = []
    for p in user + glob:
        full = _expand(p, target)
        if Path(full).is_file() and full not in out:
            out.append(full)
    return out


def _resolved(target: Target) -> tuple[str, int]:
    """HostName and Port after ~/.ssh/config, for messages and the known_hosts lookup."""
    try:
        opts = asyncssh.SSHClientConnectionOptions(host=target.host, port=target.port or (),
                                                   known_hosts=known_hosts_files(target) or b"")
        return str(opts.host), int(opts.port)
    except Exception:
        return target.host, target.port or 22


def _host_key_message(target: Target) -> str:
    host, port = _resolved(target)
    shown = host if port == 22 else f"[{host}]:{port}"
    addrs: set[str] = set()
    try:
        addrs |= {str(ai[4][0]) for ai in socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)}
    except OSError:
        pass
    for path in known_hosts_files(target):
        try:
            kh = asyncssh.read_known_hosts(path)
        except Exception:
            continue
        for addr in sorted(addrs) or [""]:
            try:
                trusted = kh.match(host, addr, port if port != 22 else None)[0]
            except (ValueError, TypeError):
                continue
            if trusted:
                return (f"host key of {target.spec} ({shown}) has CHANGED: it does not match {path}. "
                        "Someone may be intercepting the connection, or the host was reinstalled; verify the "
                        f"new key with its administrator, then remove the old one: ssh-keygen -R '{shown}'")
    login = f"{target.user}@{target.host}" if target.user else target.host
    ssh = shlex.join(["ssh"] + (["-p", str(target.port)] if target.port else []) + [login])
    return (f"host key of {target.spec} ({shown}) is not known: it is not in known_hosts. Verify and accept it "
            f"once with `{ssh}` (or add the verified key to ~/.ssh/known_hosts), then retry")


def describe_error(exc: BaseException, target: Target, timeout: float | None = None) -> str:
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return _host_key_message(target)
    if isinstance(exc, asyncssh.PermissionDenied):
        who = f"{target.user}@" if target.user else ""
        return (f"authentication to {who}{target.host} failed: no key was accepted "
                "(check ssh-agent, IdentityFile in ~/.ssh/config, or the User)")
    if isinstance(exc, asyncssh.DisconnectError):
        return f"SSH connection to {target.spec} failed: {exc.reason}"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"no answer from {target.spec} within {timeout:g}s" if timeout else f"{target.spec} timed out"
    if isinstance(exc, ConnectionRefusedError):
        return f"cannot connect to {target.spec}: connection refused (is sshd running on that port?)"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host {target.host}: {exc.strerror}"
    if isinstance(exc, OSError):
        return f"cannot connect to {target.spec}: {exc.strerror or exc}"
    if isinstance(exc, (asyncssh.Error, ValueError)):
        return f"SSH error with {target.spec}: {exc}"
    return f"{target.spec}: {type(exc).__name__}: {exc}"


def _text(data: bytearray) -> str:
    """Output as text, with lines longer than MAX_LINE cut (nothing downstream needs one longer)."""
    text = bytes(data).decode("utf-8", "replace")
    if len(text) <= MAX_LINE or all(len(line) <= MAX_LINE for line in text.split("\n")):
        return text
    return "\n".join(line if len(line) <= MAX_LINE else line[:MAX_LINE] + " ..." for line in text.split("\n"))


# ------------------------------------------------------------------ a loop for the sync API
_loop_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _loop_lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="triage-ssh", daemon=True).start()
            _loop = loop
        return _loop


class SSHRunner:
    """triage.runner.Runner over SSH. `run` is synchronous (a background loop); `arun` is the coroutine."""

    def __init__(self, spec: str, *, connect_timeout: float = 15.0):
        self.target = parse_target(spec)
        self.where = self.target.spec
        self.connect_timeout = connect_timeout
        self._conn: Any = None
        self._lock: asyncio.Lock | None = None

    async def connect(self) -> Any:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._conn is None:
                t = self.target
                # Never None (that turns checking off), whatever the config says.
                kwargs: dict[str, Any] = {"known_hosts": known_hosts_files(t) or b"",
                                          "connect_timeout": self.connect_timeout}
                if t.port:
                    kwargs["port"] = t.port
                if t.user:
                    kwargs["username"] = t.user
                try:
                    self._conn = await asyncssh.connect(t.host, **kwargs)
                except Exception as exc:
                    raise RemoteError(describe_error(exc, t, self.connect_timeout)) from None
            return self._conn

    async def arun(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
                   env: dict[str, str] | None = None) -> Result:
        args = [str(a) for a in argv]
        if env:
            args = ["env"] + [f"{k}={v}" for k, v in env.items()] + args
        conn = await self.connect()
        command = shlex.join(args)
        try:
            # Without input, stdin is /dev/null (as LocalRunner does): a command reading it gets EOF.
            proc = await conn.create_process(command, encoding=None,
                                             stdin=asyncssh.PIPE if input else asyncssh.DEVNULL)
        except (asyncssh.Error, OSError) as exc:
            raise RemoteError(describe_error(exc, self.target)) from None
        out, err = bytearray(), bytearray()
        note = ""

        async def pump(stream: Any, buf: bytearray) -> None:
            nonlocal note
            while True:
                chunk = await stream.read(65536)
                if not chunk:
                    return
                room = MAX_OUTPUT - len(out) - len(err)
                buf += chunk[:max(0, room)]
                if len(chunk) > room:
                    note = f"\noutput cut at {MAX_OUTPUT >> 20} MB: the host sent more"
                    proc.close()
                    return

        async def talk() -> None:
            if input:
                proc.stdin.write(input.encode())
                proc.stdin.write_eof()
            await asyncio.gather(pump(proc.stdout, out), pump(proc.stderr, err))
            if not note:
                await proc.wait_closed()

        try:
            await asyncio.wait_for(talk(), timeout)
        except (asyncio.TimeoutError, TimeoutError):
            proc.close()
            return Result(args, 124, _text(out), _text(err) + f"\ntimed out after {timeout:g}s", timed_out=True)
        except (asyncssh.Error, OSError, BrokenPipeError) as exc:
            proc.close()
            if not (out or err):
                raise RemoteError(describe_error(exc, self.target)) from None
        code = proc.exit_status if proc.exit_status is not None and not note else -1
        return Result(args, code, _text(out), _text(err) + note)

    def run(self, argv: Sequence[str], *, timeout: float = 60.0, input: str | None = None,
            env: dict[str, str] | None = None) -> Result:
        """The Runner protocol: never raises for the remote side; an unreachable host or a refused
        host key is a Result with returncode -1 and the reason in stderr."""
        fut = asyncio.run_coroutine_threadsafe(self.arun(argv, timeout=timeout, input=input, env=env),
                                               background_loop())
        try:
            return fut.result(timeout + self.connect_timeout + 5)
        except RemoteError as exc:
            return Result([str(a) for a in argv], -1, "", str(exc))
        except concurrent.futures.TimeoutError:  # not the builtin TimeoutError before Python 3.11
            fut.cancel()
            return Result([str(a) for a in argv], 124, "", f"{self.where}: no answer within {timeout:g}s",
                          timed_out=True)

    async def aclose(self) -> None:
        if self._conn is not None:
            self._conn.close()
            try:
                await self._conn.wait_closed()
            except Exception:
                pass
            self._conn = None

    def close(self) -> None:
        if self._conn is not None:
            asyncio.run_coroutine_threadsafe(self.aclose(), background_loop()).result(10)


def fetch_text(spec: str, path: str, *, timeout: float = 30.0) -> str | None:
    """A remote file's text (used by --save-patches), or None."""
    r = SSHRunner(spec)
    try:
        res = r.run(["cat", "--", path], timeout=timeout)
    finally:
        r.close()
    return res.stdout if res.ok else None


__all__ = ["SSHRunner", "RemoteError", "Target", "parse_target", "describe_error", "known_hosts_files",
           "fetch_text", "background_loop"]
