"""Real virtual environments with hand-made dist-infos, for probing without installing vLLM or torch.

A dist-info written here is what pip or uv leave behind: METADATA, INSTALLER, RECORD with the urlsafe
base64 sha256 of every file (RECORD itself unhashed), and optionally PEP 610 direct_url.json.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from pathlib import Path

VLLM_FILES = {
    "vllm/__init__.py": "raise ImportError('the probe must not import vllm')\n",
    "vllm/version.py": "__version__ = '0.16.0rc2.dev313+g662205d34'\n",
    "vllm/platforms/__init__.py": "",
    "vllm/platforms/cuda.py": "def get_attn_backend_cls():\n    raise ValueError('No valid attention backend')\n",
    "vllm/v1/attention/backends/mla/flashmla_sparse.py": "def supports_compute_capability(c):\n"
                                                          "    return c.major in (9, 10)\n",
    "vllm/v1/engine/core.py": "class EngineCore:\n    pass\n",
}


def record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_venv(root: Path) -> tuple[Path, Path]:
    """A real venv (no pip: fast); returns (python, site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = next((root / "lib").glob("python3*/site-packages"))
    return python, site


def make_dist(site: Path, name: str, version: str, files: dict[str, str | bytes] | None = None, *,
              installer: str | None = "pip", direct_url: dict | None = None) -> Path:
    files = dict(files or {})
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    rows = []
    for rel, content in files.items():
        data = content.encode() if isinstance(content, str) else content
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        rows.append(f"{rel},{record_hash(data)},{len(data)}")
    meta = {"METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"}
    if installer:
        meta["INSTALLER"] = installer + "\n"
    if direct_url is not None:
        meta["direct_url.json"] = json.dumps(direct_url)
    for fn, text in meta.items():
        (dist_info / fn).write_text(text)
        rows.append(f"{dist_info.name}/{fn},{record_hash(text.encode())},{len(text.encode())}")
    rows.append(f"{dist_info.name}/RECORD,,")
    (dist_info / "RECORD").write_text("\n".join(rows) + "\n")
    return dist_info


def vllm_env(root: Path, *, vllm_version: str = "0.16.0rc2.dev313+g662205d34", torch_version: str = "2.10.0+cu129",
             torch_cuda: str | None = "12.9", installer: str = "pip", direct_url: dict | None = None,
             extra: dict[str, str] | None = None) -> tuple[Path, Path]:
    """A venv that looks like a vLLM install: vllm (with RECORD), torch (with torch/version.py) and friends."""
    python, site = make_venv(root)
    files = dict(VLLM_FILES)
    files["vllm/_C.abi3.so"] = b"\x7fELF fake"
    make_dist(site, "vllm", vllm_version, files, installer=installer, direct_url=direct_url)
    cuda = repr(torch_cuda) if torch_cuda else "None"
    make_dist(site, "torch", torch_version, {
        "torch/__init__.py": "raise ImportError('the probe must not import torch')\n",
        "torch/version.py": f"from typing import Optional\n__version__ = '{torch_version}'\n"
                            f"debug = False\ncuda: Optional[str] = {cuda}\ngit_version = 'c5d6ed3'\n"
                            f"hip: Optional[str] = None\n",
    })
    for name, ver in {"triton": "3.5.1", "flashinfer-python": "0.6.3", "transformers": "4.57.6",
                      "nvidia-nccl-cu12": "2.27.5", "nvidia-cuda-runtime-cu12": "12.9.79", "requests": "2.32.3",
                      **(extra or {})}.items():
        make_dist(site, name, ver, {f"{name.replace('-', '_')}/__init__.py": ""})
    return python, site
