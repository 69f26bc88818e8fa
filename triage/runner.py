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

    where: str

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
            proc = subprocess.run(
                argv,
                input=input,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                env=full_env,
                stdin=None if input is not None else subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
            return Result(argv, 124, out, err + f"\ntimed out after {timeout:g}s", timed_out=True)
        except OSError as exc:
            return Result(argv, -1, "", f"{argv[0]}: {exc.strerror or exc}")
        return Result(argv, proc.returncode, proc.stdout, proc.stderr)
