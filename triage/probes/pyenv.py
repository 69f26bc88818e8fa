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
- `probe_pyenv_at(prefix, site_packages)`: another environment (one a log names) read from its files
  alone, nothing in it run: dist-info METADATA/RECORD/direct_url.json, pyvenv.cfg, .git/HEAD. Every
  read is bounded and only of regular files (a METADATA that is a link to /dev/zero reads as nothing).
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


# Bounds on what is read from an environment nobody vouched for.
MAX_META = 1 << 20  # METADATA, INSTALLER, direct_url.json, pyvenv.cfg
MAX_RECORD = 32 << 20
MAX_HASHED = 16 << 20  # a single .py file compared with RECORD
MAX_WALK = 50000  # files looked at for additions to the package
MAX_DISTS = 5000  # dist-infos in one site directory


def read_bounded(path: str, limit: int = MAX_META) -> bytes | None:
    """A regular file's bytes when it is no bigger than `limit`; None for anything else (a device,
    a FIFO, a directory, a link to /dev/zero, a file too big)."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks, total = [], 0
        while total <= limit:
            b = os.read(fd, min(1 << 20, limit + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
        return None if total > limit else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _dist_path(dist: Any) -> str | None:
    p = getattr(dist, "_path", None)
    return str(p) if p is not None else None


def _packages() -> tuple[dict[str, str], dict[str, list[dict[str, str]]]]:
    from importlib import metadata

    seen: dict[str, list[dict[str, str]]] = {}
    for dist in metadata.distributions():
        name = _norm(dist.metadata.get("Name") or "")  # type: ignore[attr-defined]  # an email Message
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
        if not os.path.lexists(full):
            missing.append(path)
            continue
        data = read_bounded(full, MAX_HASHED)
        if data is None:  # a device, a link to one, or a file too big to be vLLM source
            patched.append(path)
            continue
        checked += 1
        if _record_hash(data) != digest[len("sha256="):]:
            patched.append(path)
    added = []
    root = os.path.join(base, package)
    if recorded and os.path.isdir(root):
        seen = 0
        for dirpath, _dirs, files in os.walk(root):
            seen += len(files)
            if seen > MAX_WALK:
                break
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
    modified: list[str] = []
    untracked: list[str] = []
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


def git_head(src: str) -> dict[str, Any]:
    """The checkout's commit read from .git/HEAD (and its ref) without running git in it."""
    gitdir = os.path.join(src, ".git")
    raw = read_bounded(os.path.join(gitdir, "HEAD"), 4096)
    if raw is None:
        return {"source": src, "git": False}
    head = raw.decode("utf-8", "replace").strip()
    branch = None
    if head.startswith("ref: "):
        ref = head[5:].strip()
        branch = ref.rsplit("/", 1)[-1]
        got = read_bounded(os.path.join(gitdir, *ref.split("/")), 4096) if ".." not in ref else None
        head = got.decode("utf-8", "replace").strip() if got else ""
        if not head:
            packed = read_bounded(os.path.join(gitdir, "packed-refs"), MAX_META) or b""
            for line in packed.decode("utf-8", "replace").splitlines():
                if line.endswith(" " + ref):
                    head = line.split(" ", 1)[0]
    commit = head if re.fullmatch(r"[0-9a-f]{40,64}", head or "") else None
    return {"source": src, "git": bool(commit), "commit": commit, "describe": None, "branch": branch,
            "modified": [], "untracked": [], "read_from": "disk"}


def _file_url_path(url: str) -> str | None:
    if not url.startswith("file://"):
        return None
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(url).path)


def vllm_facts(package: str = "vllm", dist: Any = None, run_git: bool = True) -> dict[str, Any] | None:
    if dist is None:
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
        # git runs the checkout's own hooks and fsmonitor: only in an environment we were pointed at.
        out["git"] = (git_state(src, package) if run_git else git_head(src)) if src else None
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


def torch_facts(dist: Any = None) -> dict[str, Any] | None:
    """torch's CUDA/HIP version and git commit from torch/version.py, without importing torch."""
    if dist is None:
        from importlib import metadata

        try:
            dist = metadata.distribution("torch")
        except metadata.PackageNotFoundError:
            return None
    raw = read_bounded(str(dist.locate_file("torch/version.py")), 200000)
    text = raw.decode("utf-8", "replace") if raw is not None else None
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
            "read_from": "interpreter",
        },
        "packages": packages,
        "duplicate_packages": dups,
        "vllm": vllm_facts(),
        "torch": torch_facts(),
    }
    if deep and packages.get("torch"):
        facts["torch_deep"] = deep_torch(deep_timeout)
    return facts


# ------------------------------------------------------------------ another environment, from its files
class DiskDist:
    """One *.dist-info read with bounded reads of regular files only (the importlib.metadata
    Distribution methods the probe uses: read_text, locate_file, version, metadata)."""

    def __init__(self, path: str):
        self._path = path
        self.metadata = self._headers()
        self.version = self.metadata.get("Version") or ""

    def read_text(self, name: str) -> str | None:
        limit = MAX_RECORD if name == "RECORD" else MAX_META
        raw = read_bounded(os.path.join(self._path, name), limit)
        return raw.decode("utf-8", "replace") if raw is not None else None

    def locate_file(self, rel: str) -> str:
        return os.path.join(os.path.dirname(self._path), rel)

    def _headers(self) -> dict[str, str]:
        out: dict[str, str] = {}
        text = self.read_text("METADATA") or self.read_text("PKG-INFO") or ""
        for line in text.splitlines():
            if not line.strip():
                break
            key, sep, value = line.partition(":")
            if sep and not key.startswith((" ", "\t")) and key not in out:
                out[key] = value.strip()
        return out


def disk_dists(site_dirs: list[str]) -> list[DiskDist]:
    out = []
    for site in site_dirs:
        try:
            names = sorted(os.listdir(site))[:MAX_DISTS * 4]
        except OSError:
            continue
        for fn in names:
            if fn.endswith((".dist-info", ".egg-info")) and os.path.isdir(os.path.join(site, fn)):
                d = DiskDist(os.path.join(site, fn))
                if d.metadata.get("Name"):
                    out.append(d)
    return out[:MAX_DISTS]


def _pyvenv_cfg(prefix: str) -> dict[str, str]:
    raw = read_bounded(os.path.join(prefix, "pyvenv.cfg"), 65536)
    out: dict[str, str] = {}
    for line in (raw or b"").decode("utf-8", "replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
    return out


def env_site_dirs(prefix: str | None, site_packages: str | None) -> tuple[list[str], str | None]:
    """The environment's site directories (its own, then the base's when pyvenv.cfg includes them)
    and its Python version X.Y, from paths alone."""
    sites: list[str] = []
    ver = None
    if site_packages:
        m = re.search(r"/lib(?:64)?/python(\d+\.\d+)/(?:site|dist)-packages/?$", site_packages)
        ver = m.group(1) if m else None
        if os.path.isdir(site_packages):
            sites.append(site_packages.rstrip("/") or "/")
    if prefix and not sites:
        for lib in ("lib", "lib64"):
            try:
                names = sorted(os.listdir(os.path.join(prefix, lib)), reverse=True)
            except OSError:
                continue
            for n in names:
                m = re.fullmatch(r"python(\d+\.\d+)", n)
                if not m:
                    continue
                for kind in ("site-packages", "dist-packages"):
                    d = os.path.join(prefix, lib, n, kind)
                    if os.path.isdir(d) and os.path.realpath(d) not in {os.path.realpath(x) for x in sites}:
                        sites.append(d)
                        ver = ver or m.group(1)
    cfg = _pyvenv_cfg(prefix) if prefix else {}
    if cfg.get("include-system-site-packages", "").lower() == "true" and cfg.get("home") and ver:
        base = os.path.dirname(cfg["home"].rstrip("/"))
        for kind in ("site-packages", "dist-packages"):
            d = os.path.join(base, "lib", "python" + ver, kind)
            if os.path.isdir(d) and d not in sites:
                sites.append(d)
    return sites, ver


def probe_pyenv_at(prefix: str | None, site_packages: str | None = None) -> dict[str, Any] | None:
    """The environment at `prefix` (or holding `site_packages`) from its files alone: the same shape as
    probe_pyenv, with python.read_from = "disk". None when no site directory is there."""
    if not prefix and site_packages:
        m = re.match(r"^(.*?)/lib(?:64)?/python\d+\.\d+/(?:site|dist)-packages/?$", site_packages)
        prefix = (m.group(1) or "/") if m else None
    sites, ver = env_site_dirs(prefix, site_packages)
    if not sites:
        return None
    cfg = _pyvenv_cfg(prefix) if prefix else {}
    if not ver:
        m = re.match(r"(\d+\.\d+)", cfg.get("version_info") or cfg.get("version") or "")
        ver = m.group(1) if m else None
    exe = None
    for n in ([f"python{ver}"] if ver else []) + ["python3", "python"]:
        cand = os.path.join(prefix or "/", "bin", n)
        if os.path.lexists(cand):
            exe = cand
            break
    seen: dict[str, list[dict[str, str]]] = {}
    by_name: dict[str, DiskDist] = {}
    for d in disk_dists(sites):
        name = _norm(d.metadata.get("Name") or "")
        if not (name in _WANTED or name.startswith("nvidia-")):
            continue
        seen.setdefault(name, []).append({"version": d.version, "path": d._path})
        by_name.setdefault(name, d)
    packages = {n: v[0]["version"] for n, v in sorted(seen.items())}
    dups = {n: v for n, v in seen.items() if len({x["path"] for x in v}) > 1}
    full = cfg.get("version_info") or cfg.get("version") or ver
    return {
        "python": {
            "executable": exe or os.path.join(prefix or "/", "bin", "python3"),
            "version": full,
            "implementation": cfg.get("implementation"),
            "prefix": prefix,
            "base_prefix": os.path.dirname(cfg["home"].rstrip("/")) if cfg.get("home") else prefix,
            "virtualenv": bool(cfg),
            "conda": bool(prefix and os.path.isdir(os.path.join(prefix, "conda-meta"))),
            "site_packages": sites,
            "read_from": "disk",
        },
        "packages": packages,
        "duplicate_packages": dups,
        "vllm": vllm_facts(dist=by_name["vllm"], run_git=False) if "vllm" in by_name else None,
        "torch": torch_facts(by_name["torch"]) if "torch" in by_name else None,
    }
