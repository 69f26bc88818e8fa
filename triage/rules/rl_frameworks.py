"""RL and fine-tuning stacks that run vLLM in their own way: Unsloth's vLLM subprocess and its ports of vLLM classes.

Unsloth (`fast_inference`, `SyntheticDataKit`) starts vLLM as a child process and waits for its readiness line on
stdout. When the child exits first, Unsloth prints "Stdout stream ended before readiness message detected." and
raises "RuntimeError: Unsloth: vllm_process failed to load!"; releases before 2025.8 do not show the child's
stderr, so that wrapper is all the log holds. The maintainers' answer in those threads is the vLLM release: the
child dies at import or engine start because the installed vLLM is newer than the unsloth_zoo patches
(unsloth#2676: pin vllm==0.8.5.post1 and reinstall unsloth/unsloth_zoo). When the child's own error is in the
log it outranks this rule (its confidence stays below any real vLLM error).

unsloth_zoo's `patch_vllm()` replaces vLLM's `WorkerLoRAManager` / `LRUCacheWorkerLoRAManager` with its own ports
(unsloth_zoo/vllm_lora_worker_manager.py). A newer vLLM calls methods those ports lack (vLLM >= 0.21:
`get_dummy_lora_warmup_rank` from the V1 LoRA model-runner mixin) and the run fails with an AttributeError on a
class name that looks like vLLM's own; the fix is an unsloth_zoo that carries the method (2026.6.6 and later).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# unsloth/dataprep/synthetic.py and unsloth_zoo's vllm_utils (both wordings since 2025.4; the timeout form
# "vllm_process failed to load! (timeout=N)" means the child is alive but slow, not this failure).
_DIED = r"Stdout stream ended before readiness message detected"
_RAISED = r"Unsloth: vllm_process failed to load!(?! \(timeout)"

# The vLLM classes unsloth_zoo replaces with its own ports (patch_vllm -> vllm_lora_worker_manager.py).
PORTED = ("WorkerLoRAManager", "LRUCacheWorkerLoRAManager")
_PORT_ATTR_RE = lazy(r"'(?P<cls>" + "|".join(PORTED) + r")' object has no attribute(?:\s+'(?P<attr>\w+)')?")
_ATTR_NAME_RE = lazy(r"^\s*'(?P<attr>\w+)'")
_UNSLOTH_RE = lazy(r"unsloth", re.IGNORECASE)


def _ported_class(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    lines = scan.lines
    if not any(_UNSLOTH_RE.search(ln.text) for ln in lines):
        return None  # vLLM's own manager missing an attribute is vLLM's code, not a port
    for i, ln in enumerate(lines):
        m = _PORT_ATTR_RE.search(ln.text)
        if not m:
            continue
        attr = m.group("attr")
        ev = [Evidence(ln.no, ln.shown)]
        if attr is None and i + 1 < len(lines):
            # a pasted message wrapped after "has no attribute" (a docstring, a narrow terminal)
            nxt = _ATTR_NAME_RE.match(lines[i + 1].text)
            if nxt and lines[i + 1].no == ln.no + 1:
                attr = nxt.group("attr")
                ev.append(Evidence(lines[i + 1].no, lines[i + 1].shown))
        if attr is None:
            continue
        cls = m.group("cls")
        return Diagnosis(
            category="install_mismatch", signature="downstream.unsloth_lora_port_stale",
            title=f"unsloth_zoo's port of vLLM's {cls} lacks {attr}(), which the installed vLLM calls",
            confidence=0.8, evidence=ev, facts={"class": cls, "attr": attr},
            explanation=[f"unsloth_zoo's patch_vllm() swaps vLLM's {cls} for its own copy; this vLLM release calls "
                         f"{cls}.{attr}(), which that copy predates, so unsloth_zoo is older than the vLLM installed"],
            fix=Fix("Upgrade unsloth and unsloth_zoo together so the port carries the method: `pip install --upgrade "
                    "--force-reinstall --no-deps unsloth unsloth_zoo`; or install the vLLM release the installed "
                    "unsloth_zoo supports.", "install-mismatch"),
            first_line=ln.no)
    return None


RULES = [
    Rule(signature="downstream.unsloth_vllm_process_died", category="install_mismatch",
         title="Unsloth's vLLM subprocess exited before it was ready (its own error is not in the log)",
         fix="Unsloth starts vLLM as a child process and it died during start-up. Run with "
             "`VLLM_LOGGING_LEVEL=DEBUG` (or upgrade Unsloth, which prints the child's stderr tail) to see why; most "
             "often the installed vLLM is newer than unsloth_zoo supports: install the pinned release "
             "(`pip install vllm==0.8.5.post1` for 2025.6-2025.7 Unsloth) and reinstall unsloth and unsloth_zoo.",
         patterns=[_DIED, _RAISED], playbook="install-mismatch", confidence=0.55),
    Rule(signature="downstream.unsloth_lora_port_stale", category="install_mismatch", title="", fix="",
         playbook="install-mismatch", check=_ported_class),
]
