"""Preflight for another machine over SSH: its GPUs and vLLM from the same probe `triage probe --host`
runs, and the model's small files (config, tokenizer config, weight index) copied into a temporary
folder. Nothing is installed or run there but the probe script and `cat`/`find` on the model's path,
each an argument list quoted by the SSH runner (never a shell line built from the command)."""

from __future__ import annotations

import os
import posixpath
import tempfile
from typing import Any

from triage.lazyre import lazy
from triage.preflight.machine import Machine
from triage.preflight.model import MAX_CONFIG, ModelFiles, read_model

# What read_model needs from a model folder; the weights themselves are only sized.
MODEL_FILES = ("config.json", "tokenizer_config.json", "chat_template.jinja", "chat_template.json",
               "model.safetensors.index.json")
REPO_ID_RE = lazy(r"[\w.-]+/[\w.-]+")


class RemoteProblem(Exception):
    """The host could not be probed: the one-line reason."""


def machine_from_facts(facts: dict[str, Any], where: str) -> Machine:
    """A Machine from a probe's facts (a `triage probe --json` snapshot, or a live probe)."""
    pk = facts.get("packages")
    pk = pk if isinstance(pk, dict) else {}
    m = Machine(gpus=[g for g in facts.get("gpus") or [] if isinstance(g, dict) and "error" not in g],
                packages={str(k).lower(): str(v) for k, v in pk.items()}, where=where)
    cuda = facts.get("cuda_driver_version")
    m.cuda_driver_version = cuda if isinstance(cuda, str) else None
    shm, box = facts.get("shm"), facts.get("container")
    if isinstance(shm, dict) and isinstance(shm.get("size_mib"), int):
        m.shm_bytes = shm["size_mib"] << 20
    if isinstance(box, dict) and isinstance(box.get("in_container"), bool):
        m.in_container = box["in_container"]
    return m


def probe_machine(host: str, python: str | None, timeout: float = 120.0) -> Machine:
    from triage.probes import gather

    probe = gather(host=host, python=python, timeout=timeout)
    if not probe.ok:
        raise RemoteProblem(probe.error or f"{host}: the probe failed")
    return machine_from_facts(probe.facts, host)


def _model_dir(runner: Any, name: str) -> str | None:
    """The model's folder on the host: an absolute path as given, else a repo id's newest snapshot
    in the host's Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or ~/.cache/huggingface/hub)."""
    if name.startswith("/"):
        return posixpath.normpath(name)
    if not REPO_ID_RE.fullmatch(name):
        return None
    # The repo id is a positional argument of the script ($1), never part of its text.
    script = ('for r in "${HF_HUB_CACHE:-}" "${HF_HOME:+$HF_HOME/hub}" "$HOME/.cache/huggingface/hub"; do '
              '[ -n "$r" ] || continue; d="$r/models--$1/snapshots"; '
              'n=$(ls -1t "$d" 2>/dev/null | head -n 1); '
              '[ -n "$n" ] && [ -f "$d/$n/config.json" ] && { printf "%s\\n" "$d/$n"; exit 0; }; done; exit 1')
    res = runner.run(["sh", "-c", script, "sh", name.replace("/", "--")], timeout=30)
    out = res.stdout.strip() if res.ok else ""
    return out if out.startswith("/") and "\n" not in out else None


def fetch_model(host: str, name: str) -> ModelFiles:
    """The model's metadata files from the host, read as a local folder; the weights are sized there."""
    from triage.remote import SSHRunner

    runner = SSHRunner(host)
    try:
        folder = _model_dir(runner, name)
        if folder is None:
            m = ModelFiles(name)
            m.problem = (f"{name} is neither an absolute folder on {host} nor in its Hugging Face cache; "
                         "preflight reads models from disk only")
            return m
        with tempfile.TemporaryDirectory(prefix="triage-preflight-") as tmp:
            for fn in MODEL_FILES:
                res = runner.run(["head", "-c", str(MAX_CONFIG * 16 + 1), "--", posixpath.join(folder, fn)],
                                 timeout=60)
                if res.ok and len(res.stdout) <= MAX_CONFIG * 16:
                    with open(os.path.join(tmp, fn), "w", encoding="utf-8") as fh:
                        fh.write(res.stdout)
            m = read_model(tmp)
            m.name = name
            if m.problem:
                m.problem = m.problem.replace(tmp, f"{host}:{folder}")
            if m.weight_bytes is None:
                m.weight_bytes = _remote_weight_bytes(runner, folder)
            m.where = f"{host}:{folder}"
            return m
    finally:
        runner.close()


def _remote_weight_bytes(runner: Any, folder: str) -> int | None:
    # -L: a Hugging Face snapshot holds symlinks into blobs/; their targets are the weights
    res = runner.run(["find", "-L", folder, "-maxdepth", "1", "(", "-name", "*.safetensors", "-o", "-name", "*.bin",
                      ")", "-printf", "%s\\n"], timeout=60)
    sizes = [int(x) for x in res.stdout.split() if x.isdigit()] if res.ok else []
    return sum(sizes) or None
