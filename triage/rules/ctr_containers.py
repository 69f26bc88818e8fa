"""vLLM in containers and clusters: what the pod's environment, not vLLM's arguments, gets wrong (a Service's
port variable, an unwritable HF cache, CDI device names, image pulls, probes, evictions, SageMaker's health check;
each section below says what the platform does).

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

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

_GETENV_PORT = lazy(r"os\.getenv\(['\"](?P<var>[A-Z][A-Z0-9_]*_PORT)['\"]")


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


# ---- CDI: the GPUs named by a Container Device Interface spec -----------------------------------------------
# podman (`--device nvidia.com/gpu=all`), docker 25+ and containerd resolve the device name against the CDI specs in
# /etc/cdi and /var/run/cdi, which `nvidia-ctk cdi generate` writes. No spec (or one unreadable, or in a directory
# the runtime does not read) leaves the name unresolvable; a spec written before a driver update or a device change
# points at files that are gone.
RULES += [
    Rule(signature="environment.cdi_unresolved", category="environment",
         title="The container runtime cannot resolve the CDI device {device}",
         fix="Generate the NVIDIA CDI spec on the host and start the container again: "
             "`sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`, then `nvidia-ctk cdi list` must show "
             "{device}. Regenerate it after every driver update (a stale spec names files that no longer exist); "
             "rootless podman also needs the spec readable (`chmod a+r`), and a runtime reading another directory "
             "needs it there (e.g. `podman --cdi-spec-dir=/run/cdi`).",
         patterns=[r"unresolvable CDI devices? (?P<device>[\w.-]+/[\w.-]+=[\w-]+(?:[.,][\w-]+)*)",
                   r"failed to stat CDI host device \"(?P<device>[^\"]+)\""],
         playbook="environment", confidence=0.9),
]


# ---- Kubernetes probes restarting the container -------------------------------------------------------------
# The kubelet kills a container whose liveness (or startup) probe fails failureThreshold times in a row
# ("Container <name> failed liveness probe, will be restarted"). vLLM answers /health only once the model is
# loaded and warmed up (download, weights, torch.compile, CUDA graphs: minutes), so a probe tuned for a web app
# restarts it before it ever serves. The same events follow a vLLM that crashed, so the rule ranks below any
# failure the container's own log states.
RULES += [
    Rule(signature="environment.probe_restart", category="environment",
         title="Kubernetes restarted the container: its {probe} probe failed before vLLM answered /health",
         fix="vLLM needs minutes (download, weights, compile, CUDA graphs) before /health answers: give the pod a "
             "startupProbe on /health whose failureThreshold x periodSeconds exceeds the load time (e.g. "
             "failureThreshold: 60, periodSeconds: 10 is 10 minutes) and start the liveness probe after it, or raise "
             "initialDelaySeconds. If the container's own log (`kubectl logs --previous <pod>`) shows an error "
             "before the restart, that error is the cause.",
         patterns=[r"failed (?P<probe>liveness|startup) probe, will be restarted",
                   r"(?P<probe>Liveness|Startup) probe failed: (?:Get \"[^\"]*/health\"|HTTP probe failed)"],
         facts=lambda m, line, scan: {"probe": m.group("probe").lower()},
         playbook="environment", confidence=0.75, secondary=True),
]


# ---- the image never ran: the pull failed ----------------------------------------------------------------------
# vllm/vllm-openai is 10-20 GB unpacked: a node or docker root with too little disk fails while extracting a layer;
# a tag that does not exist (the image is tagged v0.10.1, not 0.10.1) or a private registry without credentials
# fails at resolve. The kubelet reports `Failed to pull image "<ref>": <reason>`; docker its daemon's message.
_PULL_REASONS = [
    (lazy(r"no space left on device", re.I), "the disk ran out while unpacking the image",
     "free or grow the disk that holds the images (docker's data-root, /var/lib/containerd on the node): "
     "`docker system prune -a` removes unused images; on Kubernetes give the node more ephemeral storage"),
    (lazy(r"not found|manifest unknown|NotFound", re.I), "no such image or tag",
     "check the reference: vLLM's images are tagged with a leading v (`vllm/vllm-openai:v0.10.1`) or `latest`, "
     "and ROCm builds live in another repository"),
    (lazy(r"unauthorized|denied|authentication required|401|403", re.I), "the registry refused the credentials",
     "log in to the registry (`docker login`), or give the pod an imagePullSecret for a private registry"),
]


def _pull_facts(m: "re.Match[str]", line, scan: Scan) -> dict[str, Any]:
    gd = m.groupdict()
    image = gd.get("image") or "the image"
    text = line.text
    for rx, why, hint in _PULL_REASONS:
        if rx.search(text):
            return {"image": image, "why": why, "hint": hint}
    return {"image": image, "why": "the registry could not be reached or refused the pull",
            "hint": "check that the node reaches the registry (proxy, firewall, DNS) and that the reference is right"}


RULES += [
    Rule(signature="environment.image_pull_failed", category="environment",
         title="The container image {image} could not be pulled ({why})",
         fix="vLLM never started: {hint}.",
         patterns=[r"Failed to pull image \"(?P<image>[^\"]+)\"",
                   r"manifest for (?P<image>\S+) not found",
                   r"pull access denied for (?P<image>[^,\s]+)",
                   r"failed to register layer:.{0,300}no space left on device(?P<image>)",
                   r"write /var/lib/(?:docker|containerd)/\S+: no space left on device(?P<image>)"],
         facts=_pull_facts, playbook="environment", confidence=0.9),
]


# ---- the kubelet evicting the pod ---------------------------------------------------------------------------------
# A model downloaded into the container's writable layer (the HF cache under HOME with no volume there) counts
# against the node's ephemeral storage; past the pod's limit or the node's threshold the kubelet evicts the pod.
RULES += [
    Rule(signature="environment.pod_evicted", category="environment",
         title="Kubernetes evicted the pod ({resource} ran out)",
         fix="The pod used more {resource} than its limit or the node had left. A model downloaded into the "
             "container's own filesystem counts as ephemeral storage: mount a PersistentVolume (or a hostPath) for "
             "the HF cache and point HF_HOME at it, or raise the pod's ephemeral-storage request/limit; for memory, "
             "raise the memory limit.",
         patterns=[r"The node was low on resource: (?P<resource>[\w-]+)",
                   r"Pod (?P<resource>ephemeral local storage) usage exceeds the total limit of containers",
                   r"Container \S+ exceeded its (?P<resource>local ephemeral storage) limit"],
         playbook="environment", confidence=0.85),
]


# ---- SageMaker's health check ------------------------------------------------------------------------------------
# A SageMaker endpoint sends GET /ping to port 8080 and fails the deployment when the container does not answer
# within container_startup_health_check_timeout. vLLM serves /ping, but the vllm-openai image listens on 8000 unless
# told otherwise, and a large model outlasts the default timeout; a vLLM that crashed fails the check too, so the
# container's own failure (the CloudWatch log) ranks first.
RULES += [
    Rule(signature="environment.sagemaker_ping_failed", category="environment",
         title="SageMaker's /ping health check failed for production variant {variant}",
         fix="SageMaker calls GET /ping on port 8080: start vLLM with --port 8080 (or use an image whose SageMaker "
             "entrypoint does), and give large models time with container_startup_health_check_timeout (up to 3600 s) "
             "and model_data_download_timeout. If the endpoint's CloudWatch log shows vLLM failing, that failure is "
             "the cause.",
         patterns=[r"The primary container for production variant (?P<variant>\S+) did not pass the ping health check"],
         playbook="environment", confidence=0.7, secondary=True),
]
