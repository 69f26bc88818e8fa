"""The model a launch names, from disk only: a local folder, the Hugging Face cache, or a GGUF file."""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

MAX_CONFIG = 4 << 20  # a config.json is a few KB; a bigger one is not read


@dataclass(slots=True)
class ModelFiles:
    name: str
    where: str | None = None  # the folder (or GGUF file) read
    config: dict[str, Any] = field(default_factory=dict)
    weight_bytes: int | None = None
    gguf_arch: str | None = None
    problem: str | None = None  # why it could not be read


def _hf_roots() -> list[str]:
    roots = []
    for var in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if os.environ.get(var):
            roots.append(os.environ[var])
    if os.environ.get("HF_HOME"):
        roots.append(os.path.join(os.environ["HF_HOME"], "hub"))
    roots.append(os.path.join(os.path.expanduser("~"), ".cache", "huggingface", "hub"))
    return roots


def _snapshot(repo_id: str) -> str | None:
    """The newest snapshot folder of a repo in the Hugging Face cache layout."""
    folder = "models--" + repo_id.replace("/", "--")
    for root in _hf_roots():
        snaps = os.path.join(root, folder, "snapshots")
        try:
            revs = [os.path.join(snaps, r) for r in os.listdir(snaps)]
        except OSError:
            continue
        revs = [r for r in revs if os.path.isfile(os.path.join(r, "config.json"))]
        if revs:
            return max(revs, key=os.path.getmtime)
    return None


def _weights(folder: str) -> int | None:
    index = os.path.join(folder, "model.safetensors.index.json")
    try:
        with open(index, encoding="utf-8") as fh:
            total = json.load(fh).get("metadata", {}).get("total_size")
        if isinstance(total, int) and total > 0:
            return total
    except (OSError, ValueError, AttributeError):
        pass
    sizes = []
    try:
        for fn in os.listdir(folder):
            if fn.endswith((".safetensors", ".bin", ".pt")) and not fn.startswith("training_args"):
                try:
                    sizes.append(os.stat(os.path.join(folder, fn)).st_size)  # follows the cache's symlinks
                except OSError:
                    continue
    except OSError:
        return None
    return sum(sizes) or None


def gguf_architecture(path: str) -> str | None:
    """general.architecture from a GGUF header (the first string key of the file, in practice)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(1 << 16)
    except OSError:
        return None
    if head[:4] != b"GGUF" or len(head) < 24:
        return None
    pos = 24  # magic, version (u32), tensor count (u64), key-value count (u64)
    for _ in range(64):
        if pos + 8 > len(head):
            return None
        (klen,) = struct.unpack_from("<Q", head, pos)
        key = head[pos + 8:pos + 8 + klen].decode("utf-8", "replace")
        pos += 8 + klen
        (vtype,) = struct.unpack_from("<I", head, pos)
        pos += 4
        if vtype != 8:  # only strings are read; the first other type ends the walk
            return None
        (vlen,) = struct.unpack_from("<Q", head, pos)
        value = head[pos + 8:pos + 8 + vlen].decode("utf-8", "replace")
        pos += 8 + vlen
        if key == "general.architecture":
            return value
    return None


def read_model(name: str) -> ModelFiles:
    m = ModelFiles(name)
    path = os.path.expanduser(name)
    if os.path.isfile(path) and path.endswith(".gguf"):
        m.where = path
        m.weight_bytes = os.path.getsize(path)
        m.gguf_arch = gguf_architecture(path)
        return m
    folder = path if os.path.isdir(path) else (_snapshot(name) if name.count("/") == 1 else None)
    if folder is None:
        m.problem = (f"{name} is neither a local folder nor in the Hugging Face cache here; preflight reads "
                     "models from disk only")
        return m
    m.where = folder
    cfg = os.path.join(folder, "config.json")
    try:
        if os.path.getsize(cfg) > MAX_CONFIG:
            raise ValueError("config.json is too big to be one")
        with open(cfg, encoding="utf-8") as fh:
            data = json.load(fh)
        if not isinstance(data, dict):
            raise ValueError("config.json is not an object")
        m.config = data
    except (OSError, ValueError) as exc:
        m.problem = f"cannot read {cfg}: {exc}"
    m.weight_bytes = _weights(folder)
    return m
