"""Probe hosts over SSH (triage.remote is the transport): one host, or a fleet concurrently with a bound.

Each host runs under its own timeout; one dead host never blocks the rest and comes back as a HostProbe
with ok=False and the reason. The probe script runs in the interpreter the user named, else python3 (or
python) on the host's PATH; an environment a log names is read from its files there, never run.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from triage.probes.collect import HostProbe, interpret_result, log_env_args, probe_from_raw, python_candidates
from triage.remote import RemoteError, SSHRunner, background_loop, describe_error


async def probe_host(spec: str, *, python: str | None = None, python_prefix: str | None = None,
                     site_packages: str | None = None, deep: bool = False, timeout: float = 60.0,
                     connect_timeout: float = 15.0) -> HostProbe:
    """Probe one host; every failure comes back as ok=False with a reason, never as an exception."""
    from triage.probes.script import probe_script

    try:
        runner = SSHRunner(spec, connect_timeout=min(connect_timeout, timeout))
    except ValueError as exc:
        return HostProbe(host=spec, ok=False, error=str(exc))
    extra = [] if python else log_env_args(python_prefix, site_packages)

    async def go() -> HostProbe:
        err = None
        for py in python_candidates(python, remote=True):
            argv = [py, "-", "--sections", "gpu,host,pyenv"] + (["--deep"] if deep else []) + extra
            res = await runner.arun(argv, timeout=timeout, input=probe_script())
            raw, err, try_next = interpret_result(res, py, runner.where, timeout)
            if raw is not None:
                hp = probe_from_raw(spec, raw)
                return hp
            if not try_next:
                break
        return HostProbe(host=spec, ok=False, error=err or f"no Python found on {spec}")

    try:
        return await asyncio.wait_for(go(), timeout + 1.0)
    except RemoteError as exc:
        return HostProbe(host=spec, ok=False, error=str(exc))
    except (asyncio.TimeoutError, TimeoutError):
        return HostProbe(host=spec, ok=False, error=f"no answer from {spec} within {timeout:g}s")
    except Exception as exc:
        return HostProbe(host=spec, ok=False, error=describe_error(exc, runner.target, timeout))
    finally:
        try:
            await asyncio.wait_for(runner.aclose(), 5)
        except Exception:
            pass


async def probe_fleet(specs: Sequence[str], *, concurrency: int = 16, **kw: Any) -> list[HostProbe]:
    """Probe hosts concurrently (at most `concurrency` at once); results in the order given."""
    sem = asyncio.Semaphore(max(1, concurrency))

    async def one(spec: str) -> HostProbe:
        async with sem:
            return await probe_host(spec, **kw)

    return list(await asyncio.gather(*(one(s) for s in specs)))


def probe_hosts(specs: Sequence[str], **kw: Any) -> list[HostProbe]:
    """Synchronous entry for the CLI (works inside or outside a running event loop)."""
    return asyncio.run_coroutine_threadsafe(probe_fleet(specs, **kw), background_loop()).result()


def probe_host_sync(spec: str, **kw: Any) -> HostProbe:
    return probe_hosts([spec], **kw)[0]


__all__ = ["probe_fleet", "probe_host", "probe_host_sync", "probe_hosts"]
