"""The Python environment that runs vLLM, read from installed metadata without importing vllm or torch.

Standard-library only and free of triage imports: its source is pasted into the probe script that
runs in the target interpreter (another venv here, or a remote host's Python). It returns raw facts;
triage decodes them (version strings, provenance) on its own side.

- Versions of the packages that matter for vLLM launches (importlib.metadata, never pip).
- vLLM's dist-info: INSTALLER (pip/uv), PEP 610 direct_url.json (editable, git, archive URL),
  and the files that differ from the wheel's RECORD (sha256, urlsafe base64 without padding):
  the hand patches. Editable installs have no per-file RECORD: git in the source tree tells instead.
- torch's CUDA version from torch/version.py (text, not an import); `deep` imports torch in a
  subprocess with a timeout for the compiled arch list.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import os
import platform
import re
import subprocess
import sys
from typing import Any

# Packages whose versions decide whether a vLLM launch works; every nvidia-* package is added too.
_WANTED = {
    "vllm", "torch", "triton", "pytorch-triton", "triton-kernels", "flashinfer-python", "flashinfer-cubin",
    "flashinfer-jit-cache", "flash-attn", "vllm-flash-attn", "flash-mla", "deep-gemm", "deep-ep",
    "transformers", "xformers", "torchvision", "torchaudio", "numpy", "ray", "tokenizers", "huggingface-hub",
    "safetensors", "compressed-tensors", "xgrammar", "llguidance", "mistral-common", "accelerate",
    "bitsandbytes", "pynvml", "nvidia-ml-py", "nvidia-ml-py3", "cupy-cuda12x", "triage",
}


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_path(dist: Any) -> str | None:
    p = getattr(dist, "_path", None)
    return str(p) if p is not None else None


def _packages() -> tuple[dict[str, str], dict[str, list[dict[str, str]]]]:
    from importlib import metadata

    seen: dict[str, list[dict[str, str]]] = {}
    for dist in metadata.distributions():
        name = _norm(dist.metadata.get("Name") or "")
        if not name or not (name in _WANTED or name.startswith("nvidia-")):
            continue
        seen.setdefault(name, []).append({"version": dist.version, "path": _dist_path(dist) or ""})
    # The first one on sys.path is the one Python imports.
    packages = {n: v[0]["version"] for n, v in sorted(seen.items())}
    dups = {n: v for n, v in seen.items() if len({x["path"] for x in v}) > 1}
    return packages, dups


def _record_hash(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def check_record(dist: Any, package: str = "vllm") -> dict[str, Any]:
    """Compare the installed `package/**/*.py` with the hashes in the dist's RECORD."""
    text = dist.read_text("RECORD")
    if text is None:
        return {"checked": 0, "patched": [], "missing": [], "added": [], "record": False}
    base = str(dist.locate_file(""))
    recorded = set()
    patched, missing = [], []
    checked = 0
    for row in csv.reader(io.StringIO(text)):
        if len(row) < 2:
            continue
        path, digest = row[0], row[1]
        if not path.startswith(package + "/") or not path.endswith(".py"):
            continue
        recorded.add(path)
        if not digest.startswith("sha256="):
            continue
        full = os.path.join(base, path)
        try:
            with open(full, "rb") as f:
                data = f.read()
        except OSError:
            missing.append(path)
            continue
        checked += 1
        if _record_hash(data) != digest[len("sha256="):]:
            patched.append(path)
    added = []
    root = os.path.join(base, package)
    if recorded and os.path.isdir(root):
        for dirpath, _dirs, files in os.walk(root):
            for fn in files:
                if fn.endswith(".py"):
                    rel = os.path.relpath(os.path.join(dirpath, fn), base).replace(os.sep, "/")
                    if rel not in recorded:
                        added.append(rel)
    return {"checked": checked, "patched": sorted(patched), "missing": sorted(missing), "added": sorted(added),
            "record": True}


def _git(src: str, *args: str, timeout: float = 10.0) -> str | None:
    try:
        p = subprocess.run(["git", "-C", src] + list(args), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def git_state(src: str, package: str = "vllm") -> dict[str, Any]:
    """For an editable install: the checkout's commit, its describe, and the files changed under package/."""
    head = _git(src, "rev-parse", "HEAD")
    if head is None:
        return {"source": src, "git": False}
    status = _git(src, "status", "--porcelain", "--untracked-files=all", "--", package) or ""
    modified, untracked = [], []
    for line in status.splitlines():
        code, path = line[:2], line[3:].strip()
        if " -> " in path:
            path = path.split(" -> ", 1)[1]
        if not path.endswith(".py"):
            continue
        (untracked if code == "??" else modified).append(path)
    return {
        "source": src,
        "git": True,
        "commit": head.strip(),
        "describe": (_git(src, "describe", "--tags", "--always", "--dirty") or "").strip() or None,
        "branch": (_git(src, "rev-parse", "--abbrev-ref", "HEAD") or "").strip() or None,
        "modified": sorted(modified),
        "untracked": sorted(untracked),
    }


def _file_url_path(url: str) -> str | None:
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(url).path)


def vllm_facts(package: str = "vllm") -> dict[str, Any] | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None
    out: dict[str, Any] = {
        "version": dist.version,
        "dist_info": _dist_path(dist),
        "location": str(dist.locate_file("")),
        "installer": (dist.read_text("INSTALLER") or "").strip() or None,
        "requested": dist.read_text("REQUESTED") is not None,
        "direct_url": None,
    }
    raw = dist.read_text("direct_url.json")
    if raw:
        try:
            out["direct_url"] = json.loads(raw)
        except ValueError:
            out["direct_url"] = {"unparsed": raw[:500]}
    du = out["direct_url"] or {}
    editable = bool((du.get("dir_info") or {}).get("editable"))
    if editable:
        src = _file_url_path(du.get("url", "")) or ""
        out["git"] = git_state(src, package) if src else None
        out["files"] = {"checked": 0, "patched": [], "missing": [], "added": [], "record": False}
    else:
        out["files"] = check_record(dist, package)
    pkg_dir = os.path.join(out["location"], package)
    try:
        names = os.listdir(pkg_dir)
    except OSError:
        names = []
    out["compiled_extension"] = any(n.startswith("_C.") and n.endswith((".so", ".pyd")) for n in names)
    return out


def torch_facts() -> dict[str, Any] | None:
    """torch's CUDA/HIP version and git commit from torch/version.py, without importing torch."""
    from importlib import metadata

    try:
        dist = metadata.distribution("torch")
    except metadata.PackageNotFoundError:
        return None
    text = None
    try:
        with open(str(dist.locate_file("torch/version.py")), "r", errors="replace") as f:
            text = f.read(20000)
    except OSError:
        pass
    out: dict[str, Any] = {"version": dist.version, "cuda": None, "hip": None, "git_version": None}
    if text:
        for key in ("cuda", "hip", "git_version"):
            m = re.search(r"^%s\s*(?::[^=\n]*)?=\s*['\"]([^'\"]*)['\"]" % key, text, re.M)
            if m:
                out[key] = m.group(1)
    return out


_DEEP = r"""
import json, sys
out = {}
try:
    import torch
    out["torch_version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    out["arch_list"] = torch.cuda.get_arch_list() if hasattr(torch.cuda, "get_arch_list") else None
    out["cuda_available"] = torch.cuda.is_available()
    out["device_count"] = torch.cuda.device_count() if out["cuda_available"] else 0
    out["capabilities"] = ["%d.%d" % torch.cuda.get_device_capability(i) for i in range(out["device_count"])]
    out["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    out["cxx11_abi"] = bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", False))
except BaseException as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write(json.dumps(out))
"""


def deep_torch(timeout: float = 90.0) -> dict[str, Any]:
    """Import torch in a subprocess (it may hang or crash in a broken environment) with a timeout."""
    try:
        p = subprocess.run([sys.executable, "-c", _DEEP], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": "importing torch timed out after %gs" % timeout}
    except OSError as exc:
        return {"error": str(exc)}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (p.stderr or "").strip().splitlines()
        return {"error": "python exited %d: %s" % (p.returncode, tail[-1] if tail else "no output")}


def probe_pyenv(deep: bool = False, deep_timeout: float = 90.0) -> dict[str, Any]:
    packages, dups = _packages()
    facts: dict[str, Any] = {
        "python": {
            "executable": sys.executable,
            "version": platform.python_version(),
            "implementation": platform.python_implementation(),
            "prefix": sys.prefix,
            "base_prefix": getattr(sys, "base_prefix", sys.prefix),
            "virtualenv": getattr(sys, "base_prefix", sys.prefix) != sys.prefix,
            "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        },
        "packages": packages,
        "duplicate_packages": dups,
        "vllm": vllm_facts(),
        "torch": torch_facts(),
    }
    if deep and packages.get("torch"):
        facts["torch_deep"] = deep_torch(deep_timeout)
    return facts
