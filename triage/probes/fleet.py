"""Fleets: read a host inventory, and show what differs between hosts (version drift breaks multi-node runs)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable, Iterable

from triage.probes.collect import HostProbe

# What is compared between hosts, in display order: (label, how to read it from facts).
_PKG = lambda name: (lambda f: (f.get("packages") or {}).get(name))  # noqa: E731
DIFF_KEYS: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
    ("GPU", lambda f: f.get("gpu_summary") or ("no GPU" if f.get("gpus") == [] else None)),
    ("compute capability", lambda f: ", ".join(f.get("compute_capabilities") or []) or None),
    ("driver", lambda f: f.get("driver_version")),
    ("CUDA (driver)", lambda f: f.get("cuda_driver_version")),
    ("vLLM", lambda f: f.get("vllm_version")),
    ("vLLM install", lambda f: (f.get("vllm_install") or {}).get("source")),
    ("patched vLLM files", lambda f: ", ".join(sorted(f.get("patched_files") or [])) or (
        "none" if f.get("vllm_install") else None)),
    ("torch", lambda f: f.get("torch_version")),
    ("CUDA (torch)", lambda f: f.get("torch_cuda_version")),
    ("triton", _PKG("triton")),
    ("flashinfer", _PKG("flashinfer-python")),
    ("flash-attn", _PKG("flash-attn")),
    ("deep-gemm", _PKG("deep-gemm")),
    ("transformers", _PKG("transformers")),
    ("NCCL", lambda f: (f.get("packages") or {}).get("nvidia-nccl-cu12") or (f.get("packages") or {}).get(
        "nvidia-nccl-cu13")),
    ("Python", lambda f: (f.get("python") or {}).get("version")),
    ("OS", lambda f: (f.get("os") or {}).get("name")),
    ("kernel", lambda f: (f.get("os") or {}).get("kernel")),
]


def fleet_diff(probes: Iterable[HostProbe]) -> dict[str, dict[str, Any]]:
    """{label: {host: value}} for every compared fact whose value is not the same on all reachable hosts."""
    ok = [p for p in probes if p.ok]
    out: dict[str, dict[str, Any]] = {}
    if len(ok) < 2:
        return out
    for label, get in DIFF_KEYS:
        values = {p.host: _safe(get, p.facts) for p in ok}
        if len({repr(v) for v in values.values()}) > 1:
            out[label] = values
    return out


def _safe(get: Callable[[dict[str, Any]], Any], facts: dict[str, Any]) -> Any:
    try:
        return get(facts)
    except (AttributeError, TypeError):
        return None


def read_inventory(path: str | Path) -> list[str]:
    """Hosts from a file: one `[user@]host[:port]` a line (Ansible INI lines and [groups] accepted), or an
    Ansible YAML inventory (all/children/hosts with ansible_host, ansible_port, ansible_user).
    ValueError with a one-line reason when the file cannot be used."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read host inventory {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"host inventory {path} is not text") from None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("#")), "")
    if first.endswith(":") or first.startswith("---") or re.match(r"^[\w.-]+:\s*$", first):
        hosts = _yaml_hosts(text, path)
    else:
        hosts = _ini_hosts(text)
    seen: list[str] = []
    for h in hosts:
        if h not in seen:
            seen.append(h)
    if not seen:
        raise ValueError(f"no hosts in {path}")
    return seen


def _target(name: str, vars: dict[str, Any] | None) -> str:
    vars = vars or {}
    host = str(vars.get("ansible_host") or vars.get("ansible_ssh_host") or name)
    user = vars.get("ansible_user") or vars.get("ansible_ssh_user")
    port = vars.get("ansible_port") or vars.get("ansible_ssh_port")
    if port and ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return (f"{user}@" if user else "") + host + (f":{port}" if port else "")


def _yaml_hosts(text: str, path: str | Path) -> list[str]:
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"host inventory {path} is not valid YAML: {str(exc).splitlines()[0]}") from None
    out: list[str] = []

    def walk(group: Any) -> None:
        if not isinstance(group, dict):
            return
        hosts = group.get("hosts")
        if isinstance(hosts, dict):
            for name, vars in hosts.items():
                out.append(_target(str(name), vars if isinstance(vars, dict) else None))
        elif isinstance(hosts, list):
            out.extend(str(h) for h in hosts)
        children = group.get("children")
        if isinstance(children, dict):
            for child in children.values():
                walk(child)

    if isinstance(data, dict):
        if "hosts" in data or "children" in data:
            walk(data)
        else:
            for group in data.values():
                walk(group)
    elif isinstance(data, list):
        out.extend(str(h) for h in data)
    return out


def _ini_hosts(text: str) -> list[str]:
    out: list[str] = []
    section_is_vars = False
    for line in text.splitlines():
        line = re.split(r"\s[#;]|^[#;]", line, maxsplit=1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]") and not re.match(r"^\[[0-9a-fA-F:]+\](:\d+)?$", line):
            section_is_vars = line.endswith(":vars]") or line.endswith(":children]")
            continue
        if section_is_vars:
            continue
        parts = line.split()
        vars = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
        out.append(_target(parts[0], vars) if vars else parts[0])
    return out
