"""vLLM in containers and clusters: what the pod's environment, not vLLM's arguments, gets wrong.

Kubernetes injects `<SERVICE>_PORT=tcp://<ip>:<port>` (docker-link style service variables) into every pod of a
namespace, one per Service. A Service named `vllm` therefore sets VLLM_PORT, which vLLM reads as the base of its
internal ports (vllm/envs.py): since 0.9 `get_vllm_port` raises "VLLM_PORT '<v>' appears to be a URI. This may be
caused by a Kubernetes service discovery issue" (and "... must be a valid integer" for other junk); before, the
lambda `int(os.getenv('VLLM_PORT', '0'))` raised a bare "invalid literal for int() with base 10: 'tcp://...'".
Aphrodite's fork raises the same for APHRODITE_PORT.

transformers (utils/hub.py) and diffusers warn "There was a problem when trying to write in your cache folder (<dir>)"
when they cannot create the HF cache: under OpenShift's arbitrary UID with HOME=/ (the vllm-openai image's HOME), a
read-only root filesystem or a root-owned mount. It is only a warning; it names the cause when the start-up then
fails (often in a traceback cut before its message).
"""

from __future__ import annotations

import re
from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

_GETENV_PORT = re.compile(r"os\.getenv\(['\"](?P<var>[A-Z][A-Z0-9_]*_PORT)['\"]")


def _port_env_facts(m: "re.Match[str]", line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    var = gd.get("var")
    if not var:  # the old int() wording names no variable: the frame line above it does
        var = next((g.group("var") for ln in scan.lines for g in [_GETENV_PORT.search(ln.text)] if g), "VLLM_PORT")
    value = gd.get("value") or ""
    uri = "://" in value
    return {"var": var, "value": value,
            "why": "a Service's address injected by Kubernetes" if uri else "not a port number",
            "service": var[:-len("_PORT")].lower().replace("_", "-")}


RULES = [
    Rule(signature="environment.service_env_port", category="environment",
         title="{var} is '{value}' ({why}), and vLLM reads {var} as its own port",
         fix="Kubernetes sets <SERVICE>_PORT=tcp://<ip>:<port> in every pod for each Service in the namespace, so a "
             "Service named `{service}` overrides {var}. Rename the Service (e.g. `{service}-server`), or set "
             "`enableServiceLinks: false` in the pod spec, or set {var} explicitly to a free port number in the "
             "container's env.",
         patterns=[r"(?P<var>[A-Z][A-Z0-9_]*_PORT) '(?P<value>[^']*)' appears to be a URI",
                   r"(?P<var>[A-Z][A-Z0-9_]*_PORT) '(?P<value>[^']*)' must be a valid integer",
                   r"invalid literal for int\(\) with base 10: '(?P<value>tcp://[^']*)'"],
         facts=_port_env_facts, playbook="environment", confidence=0.95),
]


CACHE_WARNING = Rule(
    signature="environment.hf_cache_not_writable", category="environment",
    title="The Hugging Face cache folder {path} is not writable by the container's user",
    fix="The process cannot create {path} (OpenShift's arbitrary UID with HOME=/, a read-only root filesystem or a "
        "root-owned mount): point the caches at a writable volume, e.g. mount an emptyDir at /data and set "
        "`HOME=/data HF_HOME=/data/huggingface`, or run the container as the volume's owner.",
    patterns=[r"There was a problem when trying to write in your cache folder \((?P<path>[^)]*)\)"],
    playbook="environment", confidence=0.7)


def _cache_not_writable(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    # the warning alone is no failure (a model given by local path never needs the cache)
    # (a traceback's head counts too: prose after a pasted, cut traceback leaves it neither raised nor cut)
    failed = scan.exceptions or scan.cut_tracebacks or any(
        ln.level in ("ERROR", "CRITICAL") or "Traceback (most recent call last)" in ln.text for ln in scan.lines)
    return CACHE_WARNING.match_lines(scan) if failed else None


CACHE_WARNING.check = _cache_not_writable
RULES += [CACHE_WARNING]
