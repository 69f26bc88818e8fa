"""`triage preflight` on a model directory: answers within 1 s and imports neither torch nor vLLM.

Two launches, each the median of N runs interleaved with a bare `python -c pass` (measured in the same
run, so a busy machine slows both alike):

- table: GLM-5 on 8x RTX PRO 6000 with no vLLM environment named (triage's capability table);
- source: the same with `--python` naming an environment that holds a real vLLM wheel (the backend
  conformance suite's cached release folders, linked into a site-packages), so the selector is walked
  in vLLM's own source. Skipped when no cached release is found.

Then once more under `python -X importtime`, to list every module the run imported: torch and vllm
must not be among them. Targets: under 1 s of CPU time (the wall clock is printed too: on a
shared machine it also counts the wait for a core), and no torch/vllm import.

    python bench/preflight.py [--repeat 10] [--vllm 0.33.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import ROOT

TARGET_S = 1.0
MODEL = ROOT / "tests" / "preflight" / "glm-5"


def _one(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system, from the child's rusage) of one run."""
    t = time.perf_counter()
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, _, ru = os.wait4(p.pid, 0)
    return time.perf_counter() - t, ru.ru_utime + ru.ru_stime


def _release_env(version: str, tmp: Path) -> str | None:
    """A prefix whose site-packages holds the cached real vLLM release (and its pure-Python deps)."""
    sys.path.insert(0, str(ROOT / "tests" / "conformance"))
    try:
        import vllm_envs
    except ImportError:
        return None
    cache = vllm_envs.cache_root()
    if not (cache / f"vllm-{version}" / ".complete").exists():
        return None
    try:
        paths = vllm_envs.release_paths(version)  # built already: only looked up
    except Exception:  # noqa: BLE001 - a broken cache just skips this half
        return None
    site = tmp / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for folder in paths:
        for entry in folder.iterdir():
            if not (site / entry.name).exists():
                (site / entry.name).symlink_to(entry)
    (tmp / "bin").mkdir()
    py = tmp / "bin" / "python"
    py.write_text("#!/bin/sh\nexit 99\n")  # read, never run
    py.chmod(0o755)
    return str(py)


def _imports(argv: list[str], env: dict[str, str]) -> set[str]:
    p = subprocess.run([sys.executable, "-X", "importtime", *argv], capture_output=True, text=True, env=env)
    mods = set()
    for line in p.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            mods.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return mods


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--vllm", default="0.33.0", help="the cached release to read for the source half")
    args = ap.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # bytecode compiled, as after pip install
    gpu = ["--gpu", "NVIDIA RTX PRO 6000", "--gpus", "8", "--cc", "12.0", "--gpu-mem-gib", "96"]
    launch = ["--", "vllm", "serve", str(MODEL), "-tp", "8", "--max-model-len", "32768"]
    base_cmd = [sys.executable, "-c", "pass"]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        py = _release_env(args.vllm, Path(tmp))
        runs = [("table", ["-m", "triage", "preflight", "--json", *gpu, *launch])]
        if py:
            runs.append((f"source (vLLM {args.vllm})", ["-m", "triage", "preflight", "--json", "--python", py, *gpu,
                                                        *launch]))
        else:
            print(f"source: skipped (no cached vLLM {args.vllm} release; run the conformance suite once)")
        for label, rest in runs:
            cmd = [sys.executable, *rest]
            _one(cmd, env), _one(base_cmd, env)  # the first runs write bytecode caches: not counted
            base, t = [], []
            for _ in range(args.repeat):
                base.append(_one(base_cmd, env))
                t.append(_one(cmd, env))
            b, m = (statistics.median(x[0] for x in base), statistics.median(x[0] for x in t))
            bc, mc = (statistics.median(x[1] for x in base), statistics.median(x[1] for x in t))
            heavy = sorted(_imports(rest, env) & {"torch", "vllm", "triton", "transformers", "numpy"})
            # the target is judged on CPU time: on a shared machine the wall clock also counts the wait for a core
            met = mc <= TARGET_S and not heavy
            ok &= met
            print(f"{label}: wall {m * 1000:.0f} ms, CPU {mc * 1000:.0f} ms (medians of {args.repeat}); "
                  f"python -c pass wall {b * 1000:.0f} ms, CPU {bc * 1000:.0f} ms; ratio {m / b:.1f}x wall, "
                  f"{mc / max(bc, 1e-3):.1f}x CPU; imports of torch/vllm/triton/transformers/numpy: {heavy or 'none'} "
                  f"(target CPU < {TARGET_S:g} s and none: {'met' if met else 'NOT met'})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
