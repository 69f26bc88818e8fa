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
    chat_template: bool | None = None  # None: no tokenizer files to tell
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


# ggml tensor types: (elements per block, bytes per block) (ggml/src/ggml.c type_traits).
GGML_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
              10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
              16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110),
              22: (256, 82), 23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
              29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17)}
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
MAX_GGUF_HEADER = 64 << 20  # metadata with a whole tokenizer runs to a few MB


class GGUFError(ValueError):
    """Not a GGUF file triage can read."""


@dataclass(slots=True)
class GGUFHeader:
    metadata: dict[str, Any]
    tensor_bytes: int
    tensors: int


def read_gguf_header(path: str) -> GGUFHeader:
    """The key-value metadata and the tensor table of a GGUF file (v2/v3), never its tensor data:
    the weights' size is the sum of each tensor's elements at its ggml type's block size."""
    with open(path, "rb") as fh:
        head = fh.read(MAX_GGUF_HEADER)
    if head[:4] != b"GGUF":
        raise GGUFError("not a GGUF file (no GGUF magic)")
    pos = 4

    def take(fmt: str):
        nonlocal pos
        size = struct.calcsize(fmt)
        if pos + size > len(head):
            raise GGUFError("the GGUF header ends early")
        (v,) = struct.unpack_from(fmt, head, pos)
        pos += size
        return v

    def string() -> str:
        nonlocal pos
        n = take("<Q")
        if n > 1 << 20 or pos + n > len(head):
            raise GGUFError("a GGUF string runs past the header")
        v = head[pos:pos + n].decode("utf-8", "replace")
        pos += n
        return v

    def value(vtype: int, depth: int = 0):
        if vtype in _SCALARS:
            return take(_SCALARS[vtype])
        if vtype == 8:
            return string()
        if vtype == 9 and depth == 0:
            etype, count = take("<I"), take("<Q")
            items = [value(etype, 1) for _ in range(count)]
            return items if count <= 64 else len(items)  # a vocabulary: its size is enough
        raise GGUFError(f"GGUF value type {vtype} is not readable")

    version = take("<I")
    if version not in (2, 3):
        raise GGUFError(f"GGUF version {version} is not readable")
    n_tensors, n_kv = take("<Q"), take("<Q")
    meta: dict[str, Any] = {}
    for _ in range(n_kv):
        key = string()
        meta[key] = value(take("<I"))
    total = 0
    for _ in range(n_tensors):
        string()
        dims = [take("<Q") for _ in range(take("<I"))]
        ttype = take("<I")
        take("<Q")  # offset
        if ttype not in GGML_TYPES:
            raise GGUFError(f"ggml tensor type {ttype} is unknown")
        per, size = GGML_TYPES[ttype]
        n = 1
        for d in dims:
            n *= d
        total += -(-n // per) * size
    return GGUFHeader(meta, total, n_tensors)


def gguf_config(meta: dict[str, Any]) -> dict[str, Any]:
    """The config.json keys preflight reads, from GGUF metadata (llama.cpp's {arch}.* keys)."""
    arch = str(meta.get("general.architecture") or "")

    def k(name: str):
        return meta.get(f"{arch}.{name}")

    heads = k("attention.head_count")
    cfg: dict[str, Any] = {"model_type": arch, "torch_dtype": "float16", "gguf": True}
    for key, val in (("num_hidden_layers", k("block_count")), ("hidden_size", k("embedding_length")),
                     ("num_attention_heads", heads), ("num_key_value_heads", k("attention.head_count_kv")),
                     ("max_position_embeddings", k("context_length")), ("head_dim", k("attention.key_length")),
                     ("kv_lora_rank", k("attention.kv_lora_rank")),
                     ("qk_rope_head_dim", k("rope.dimension_count") if k("attention.kv_lora_rank") else None)):
        if isinstance(val, int) and not isinstance(val, bool):
            cfg[key] = val
    return cfg


def gguf_architecture(path: str) -> str | None:
    """general.architecture from a GGUF header."""
    try:
        return read_gguf_header(path).metadata.get("general.architecture")
    except (OSError, GGUFError):
        return None


def chat_template_present(folder: str) -> bool | None:
    """tokenizer_config.json's chat_template or a chat_template.jinja/json beside it; None: no tokenizer here."""
    for fn in ("chat_template.jinja", "chat_template.json"):
        if os.path.isfile(os.path.join(folder, fn)):
            return True
    path = os.path.join(folder, "tokenizer_config.json")
    try:
        if os.path.getsize(path) > MAX_CONFIG * 16:
            return None
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return bool(isinstance(data, dict) and data.get("chat_template"))


def read_model(name: str) -> ModelFiles:
    m = ModelFiles(name)
    path = os.path.expanduser(name)
    if os.path.isfile(path) and path.endswith(".gguf"):
        m.where = path
        try:
            header = read_gguf_header(path)
        except (OSError, GGUFError) as exc:
            m.weight_bytes = os.path.getsize(path)
            m.problem = f"cannot read the GGUF header of {path}: {exc}"
            return m
        m.weight_bytes = header.tensor_bytes
        m.gguf_arch = header.metadata.get("general.architecture")
        m.config = gguf_config(header.metadata)
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
    m.chat_template = chat_template_present(folder)
    return m
