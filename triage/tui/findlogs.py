"""Find vLLM logs on this machine for a bare `triage`: containers' logs and common files.

Containers: `docker ps -a` (argv lists, through a Runner), those whose image or name mentions vLLM,
newest first; their log is read with `docker logs --timestamps --tail N` and stdout and stderr are
merged back into one stream by timestamp (docker keeps them apart). Files: `*vllm*.log` in the
current folder, the home folder and /tmp, newest first. No textual here.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from triage.lazyre import lazy
from triage.runner import LocalRunner

TAIL = 20000
MAX_CONTAINERS = 30
FILE_PATTERNS = ("*vllm*.log", "*vllm*.log.gz", "*vLLM*.log")
TS_RE = lazy(r"^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?)\s")


@dataclass
class Candidate:
    label: str
    detail: str
    mtime: float
    fetch: Callable[[], str] = field(repr=False)  # returns a readable path; may raise OSError/RuntimeError


def _containers(runner: Any) -> list[Candidate]:
    r = runner.run(["docker", "ps", "-a", "--last", str(MAX_CONTAINERS), "--format",
                    "{{.ID}}\t{{.Image}}\t{{.Names}}\t{{.Status}}"], timeout=10)
    if not r.ok:
        return []
    out = []
    for n, line in enumerate(r.stdout.splitlines()):
        parts = line.split("\t")
        if len(parts) < 4:
            continue
        cid, image, name, status = parts[:4]
        if "vllm" not in (image + name).lower():
            continue
        out.append(Candidate(f"container {name}", f"{image} · {status}", -n,
                             _fetcher(runner, cid, name)))
    return out


def merge_streams(stdout: str, stderr: str) -> str:
    """docker logs --timestamps puts the container's stdout and stderr on two streams; put the lines
    back in time order (stable, so lines with equal stamps keep their stream order)."""
    lines = []
    for i, text in enumerate((stdout, stderr)):
        for k, line in enumerate(text.splitlines()):
            m = TS_RE.match(line)
            lines.append((m.group(1) if m else "", i, k, line))
    lines.sort(key=lambda t: (t[0], t[1], t[2]))
    return "\n".join(t[3] for t in lines) + ("\n" if lines else "")


def _fetcher(runner: Any, cid: str, name: str) -> Callable[[], str]:
    def fetch() -> str:
        r = runner.run(["docker", "logs", "--timestamps", "--tail", str(TAIL), cid], timeout=60)
        if r.returncode != 0 and not (r.stdout or r.stderr):
            raise RuntimeError(f"docker logs failed ({r.returncode})")
        from triage.paths import cache_dir

        folder = cache_dir() / "container-logs"
        folder.mkdir(parents=True, exist_ok=True)
        safe = re.sub(r"[^\w.-]", "_", name)[:80] or cid[:12]
        path = folder / f"{safe}.log"
        path.write_text(merge_streams(r.stdout, r.stderr), encoding="utf-8")
        return str(path)

    return fetch


def _files(dirs: list[str]) -> list[Candidate]:
    seen: set[str] = set()
    out = []
    for d in dirs:
        for pat in FILE_PATTERNS:
            for p in glob.glob(os.path.join(d, pat)):
                real = os.path.realpath(p)
                if real in seen or not os.path.isfile(p):
                    continue
                seen.add(real)
                st = os.stat(p)
                out.append(Candidate(p, f"{st.st_size:,} bytes", st.st_mtime, lambda p=p: p))
    out.sort(key=lambda c: -c.mtime)
    return out


def find(runner: Any = None, dirs: list[str] | None = None) -> list[Candidate]:
    """Containers first (a failed `docker run vllm/vllm-openai` is the common case), then files."""
    runner = runner or LocalRunner()
    dirs = dirs if dirs is not None else [os.getcwd(), os.path.expanduser("~"), "/tmp"]
    try:
        cont = _containers(runner)
    except OSError:
        cont = []
    return cont + _files(dirs)
