"""Cached Python environments holding one real vLLM release each, for the conformance suite.

A release's environment is three folders put in front of the running interpreter's own
site-packages (which has the CPU torch and triton the suite's venv installed):

    <cache>/vllm-<X>        the vLLM wheel, unpacked with `pip install --no-deps --target`
    <cache>/hf-<hash>       transformers / tokenizers / huggingface_hub in the range that wheel requires
    <cache>/common-<hash>   the pure-Python packages vLLM's config, attention and selector modules import

No CUDA build of anything is installed: vLLM's compiled extensions are present but fail to load,
and the probe replaces exactly those (see probe.py). Folders are built once, under a lock, into a
temporary name and renamed, so parallel runs and interrupted builds never see half an environment.

The cache is `$TRIAGE_VLLM_CACHE`, or `~/.cache/triage/vllm-conformance`. Wheels already
downloaded elsewhere can be offered with `$TRIAGE_VLLM_WHEELS` (a folder; pip uses it as find-links).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from contextlib import contextmanager
from email.parser import Parser
from pathlib import Path

# What vLLM's config, attention, platform and selector modules import besides torch (read from the
# wheels, 0.15 to 0.33). Resolved with their own dependencies.
COMMON = [
    "aiohttp", "blake3", "cachetools", "cbor2", "cloudpickle", "einops", "filelock", "fsspec", "gguf",
    "jinja2", "msgspec", "openai", "partial-json-parser", "pillow", "prometheus_client", "psutil",
    "py-cpuinfo", "pybase64", "pydantic", "pyyaml", "pyzmq", "regex", "requests", "sentencepiece",
    "tqdm", "uvloop", "fastapi", "safetensors", "rich", "typer", "protobuf", "diskcache",
    "lark", "llguidance", "outlines_core", "depyf", "watchfiles", "python-json-logger",
    "setproctitle", "apache-tvm-ffi",
]
# Imported at module level by vLLM but pulling torch or CUDA packages as dependencies: no deps.
NO_DEPS = ["openai-harmony", "xgrammar", "mistral_common", "compressed-tensors"]
# Packages that must come from the suite's own environment only.
_OUTER_ONLY = {"torch", "triton", "nvidia", "torchgen", "functorch"}
HF = ("transformers", "tokenizers", "huggingface_hub")


def cache_root() -> Path:
    root = os.environ.get("TRIAGE_VLLM_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "triage" / "vllm-conformance"


def _pip(*args: str, timeout: float = 1800) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(str(path) + ".lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _build_once(dest: Path, fill) -> Path:
    """Run fill(tmp_folder) unless dest exists; publish by rename."""
    if (dest / ".complete").exists():
        return dest
    with _locked(dest):
        if (dest / ".complete").exists():
            return dest
        tmp = dest.with_name(dest.name + ".building")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(dest, ignore_errors=True)
        tmp.mkdir(parents=True)
        fill(tmp)
        stray = [p.name for p in tmp.iterdir() if p.name.split("-")[0] in _OUTER_ONLY]
        if stray:  # a CUDA torch here would shadow the suite's CPU torch
            raise RuntimeError(f"{dest.name}: pip pulled in {', '.join(sorted(stray))}")
        (tmp / ".complete").write_text("ok\n")
        tmp.rename(dest)
    return dest


def _find_links() -> list[str]:
    out = []
    for d in (os.environ.get("TRIAGE_VLLM_WHEELS"), str(cache_root() / "wheels")):
        if d and os.path.isdir(d):
            out += ["--find-links", d]
    return out


def wheel_path(version: str) -> Path:
    """The release's wheel, downloaded once into the cache (or found where TRIAGE_VLLM_WHEELS says)."""
    for d in (os.environ.get("TRIAGE_VLLM_WHEELS"), str(cache_root() / "wheels")):
        if d and os.path.isdir(d):
            hits = sorted(Path(d).glob(f"vllm-{version}-*.whl"))
            if hits:
                return hits[0]
    wheels = cache_root() / "wheels"
    with _locked(wheels / f"vllm-{version}"):
        hits = sorted(wheels.glob(f"vllm-{version}-*.whl"))
        if not hits:
            # --no-cache-dir: the wheel is kept here; a second copy in pip's cache would double 0.3-0.5 GB
            _pip("download", "--no-cache-dir", "--no-deps", "--only-binary=:all:", f"vllm=={version}", "-d", str(wheels))
            hits = sorted(wheels.glob(f"vllm-{version}-*.whl"))
    if not hits:
        raise RuntimeError(f"pip download vllm=={version} produced no wheel")
    return hits[0]


def _requires(vllm_dir: Path) -> dict[str, str]:
    meta = next(vllm_dir.glob("vllm-*.dist-info/METADATA"))
    msg = Parser().parsestr(meta.read_text(encoding="utf-8"))
    out = {}
    for req in msg.get_all("Requires-Dist") or []:
        if ";" in req and "extra ==" in req:
            continue
        spec = req.split(";")[0].strip()
        name = spec.split("<")[0].split(">")[0].split("=")[0].split("!")[0].split("[")[0].strip().lower()
        out[name.replace("_", "-")] = spec
    return out


def _tag(*parts: str) -> str:
    py = f"py{sys.version_info[0]}{sys.version_info[1]}"
    return py + "-" + hashlib.sha256("\n".join(parts).encode()).hexdigest()[:10]


def release_paths(version: str) -> list[Path]:
    """The folders to put first on PYTHONPATH for this vLLM release (built on first use)."""
    root = cache_root()
    def unpack(tmp: Path) -> None:
        wheel = wheel_path(version)
        _pip("install", "--no-deps", "--no-compile", "--target", str(tmp), str(wheel))
        if wheel.parent == root / "wheels":  # ours, not one offered by TRIAGE_VLLM_WHEELS: 0.3-0.5 GB less
            wheel.unlink()

    vdir = _build_once(root / f"vllm-{version}", unpack)
    reqs = _requires(vdir)
    hf_specs = [reqs.get(n.replace("_", "-"), n) for n in HF]
    nodeps = [reqs.get(n.lower().replace("_", "-"), n) for n in NO_DEPS]
    hdir = _build_once(root / f"hf-{_tag(*hf_specs, *nodeps)}",
                       lambda tmp: (_pip("install", "--no-compile", "--target", str(tmp), *hf_specs),
                                    _pip("install", "--no-deps", "--no-compile", "--target", str(tmp), *nodeps)))
    cdir = _build_once(root / f"common-{_tag(*COMMON)}",
                       lambda tmp: _pip("install", "--no-compile", "--target", str(tmp), *COMMON))
    return [vdir, hdir, cdir]


def outer_site_packages() -> str:
    return sysconfig.get_paths()["purelib"]


if __name__ == "__main__":  # prebuild: python tests/conformance/vllm_envs.py 0.33.0 0.28.0 ...
    for v in sys.argv[1:]:
        print(v, [str(p) for p in release_paths(v)])
