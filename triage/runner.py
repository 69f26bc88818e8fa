"""Run a command on the machine being triaged: here, or over SSH (triage.remote).

Commands are argv lists, never shell text: a value taken from a log (a model path containing
`$(...)`, a backtick or `;`) reaches the program as one inert argument. The SSH runner quotes each
argument with shlex.quote for the remote shell; locally no shell is involved at all.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass
class Result:
    argv: list[str]
    returncode: int  # -1 when it could not start, 124 on timeout
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out


class Runner(Protocol):
    """Where commands run. `where` names it for people ("this machine", "gpu-a")."""

    @property
    def where(self) -> str: ...

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Result: ...


class LocalRunner:
    where = "this machine"

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float = 60.0,
        input: str | None = None,
        env: dict[str, str] | None = None,
    ) -> Result:
        argv = [str(a) for a in argv]
        full_env = None
        if env:
            full_env = dict(os.environ)
            full_env.update(env)
        try:
            # A session of its own, so that a timeout can stop everything the command started
            # (a `vllm serve` in a verify step leaves workers holding GPU memory otherwise).
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                env=full_env, start_new_session=True,
            )
        except OSError as exc:
            return Result(argv, -1, "", f"{argv[0]}: {exc.strerror or exc}")
        try:
            out, err = proc.communicate(input=input, timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            out, err = proc.communicate()
            return Result(argv, 124, out or "", (err or "") + f"\ntimed out after {timeout:g}s", timed_out=True)
        except BaseException:
            _kill_group(proc)
            raise
        return Result(argv, proc.returncode, out, err)


def _kill_group(proc: "subprocess.Popen[str]") -> None:
    import signal

    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=3)
            return
        except subprocess.TimeoutExpired:
            continue
