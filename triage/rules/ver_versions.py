"""Failures that come from moving vLLM, or a library it runs with, to another release.

- transformers 5.15 turned Gemma 4's head_dim / num_key_value_heads into per-layer attributes: reading them on the
  whole-model config raises AmbiguousGlobalPerLayerAttributeError ("'head_dim' is a per-layer attribute and may
  vary across layers. Access it via the individual layer configs instead ..."), a RuntimeError that
  getattr(config, "head_dim", default) does not absorb. vLLM before 0.28 (vllm-project/vllm#49797) reads them
  globally while building ModelConfig, so a transformers upgrade alone breaks the start-up.
- vLLM's attention layer calls the implementation's forward with keywords added over releases (output_scale for the
  fused output quantisation, 0.9; output_block_scale for NVFP4 outputs, 0.10.2): a backend or kernel patch written
  for an older vLLM (an out-of-tree plugin, a library replacing FlashAttentionImpl.forward) fails with
  "forward() got an unexpected keyword argument 'output_block_scale'". The class-named forms are read by
  attention.impl_interface_mismatch; this reads the keyword, which names the layer's call whatever the function.
- The V1 engine (default since 0.8) runs the engine core in another process and pickles the config and the objects
  handed to it; a class or function defined inside another function (a library patching vLLM at run time, a
  locally defined logits processor) cannot cross: "Can't get local object 'patch_x.<locals>.BitsAndBytesConfig'".
- vLLM imports each model class in a subprocess (registry._run_in_subprocess) and reports "Model architectures
  [...] failed to be inspected" when that subprocess exits non-zero: when it died of a signal (a native library
  segfaulting at import or at interpreter exit, e.g. nixl-cu12 1.0.1) the model is not the problem.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import MAX_EVIDENCE, Rule

INSPECTION_FAILED = ("failed to be inspected", "Error in inspecting model architecture", "Error raised in subprocess")
# the child died of a signal: subprocess's CalledProcessError ("died with <Signals.SIGSEGV: 11>"), the shell's and
# faulthandler's reports, or the signal's name in a person's account of it
SIGNAL_DEATH_RE = lazy(r"died with <Signals\.(?P<signal>SIG[A-Z]+)|Fatal Python error: (?P<fatal>Segmentation fault|"
                       r"Aborted|Bus error)|\b(?P<shell>Segmentation fault|Bus error)\b(?: \(core dumped\))?|"
                       r"\b(?P<named>SIGSEGV|SIGBUS|SIGABRT)",
                       needles=("died with <Signals.", "Fatal Python error", "Segmentation fault", "Bus error",
                                "SIGSEGV", "SIGBUS", "SIGABRT"))
ARCH_RE = lazy(r"Model architectures \[?'?(?P<arch>\w+)", needles=("Model architectures",))


def _inspection_killed(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    inspect = [ln for ln in scan.lines if any(m in ln.text for m in INSPECTION_FAILED)]
    if not inspect:
        return None
    killed = [(ln, m) for ln in scan.lines if (m := SIGNAL_DEATH_RE.search(ln.text))]
    if not killed:
        return None
    ln, m = killed[0]
    signal = m.group("signal") or m.group("fatal") or m.group("shell") or m.group("named")
    arch = next((a.group("arch") for x in inspect if (a := ARCH_RE.search(x.text))), "the model")
    shown = {x.no: x.shown for x in (ln, *inspect[:2])}
    evidence = [Evidence(no, shown[no]) for no in sorted(shown)][:MAX_EVIDENCE]
    return Diagnosis(
        category="install_mismatch", signature="install.inspection_subprocess_killed",
        title=f"vLLM's model-inspection subprocess was killed by a native crash ({signal}), so {arch} "
              "is reported as failed to be inspected",
        confidence=0.75, evidence=evidence, facts={"signal": signal, "arch": arch},
        fix=Fix("The architecture is not the problem: a native library loaded in the subprocess that imports the model "
                "class crashed (often at interpreter exit). Find it with `python -X faulthandler -c \"import "
                "vllm.model_executor.models.registry\"`, then pin the package you upgraded last to its previous "
                "release (a known case: `pip install nixl==1.0.0 nixl-cu12==1.0.0`) or reinstall the set vLLM's "
                "release pins (torch, flashinfer, nixl).", "install-mismatch"),
        first_line=ln.no)


PER_LAYER_ATTR_RE = lazy(r"'(?P<attr>\w+)' is a per-layer attribute")


def _per_layer_attr(line: Line, scan: Scan) -> dict[str, Any]:
    """The attribute when the exception's name and its message sit on separate lines (a wrapped paste)."""
    for ln in scan.lines:
        if line.no < ln.no <= line.no + 3 and (m := PER_LAYER_ATTR_RE.search(ln.text)) is not None:
            return {"attr": m.group("attr")}
    return {"attr": "an attribute"}


RULES = [
    Rule(signature="model_support.transformers_per_layer_attribute", category="model_support",
         title="This vLLM reads {attr} on the whole model config, which the installed transformers makes per-layer",
         fix="transformers 5.15+ stores {attr} per layer for heterogeneous models (Gemma 4) and raises when it is read "
             "globally; vLLM before 0.28 does that while building ModelConfig. Pin the transformers this vLLM was "
             "released with (`pip install 'transformers==5.14.1'`) or upgrade vLLM to 0.28 or newer.",
         patterns=[r"AmbiguousGlobalPerLayerAttributeError(?::\s*'(?P<attr>\w+)' is a per-layer attribute)?",
                   r"'(?P<attr>\w+)' is a per-layer attribute and may vary across layers"],
         facts=lambda m, line, scan: {} if m.groupdict().get("attr") else _per_layer_attr(line, scan),
         playbook="model-support", confidence=0.85),
    Rule(signature="attention.impl_forward_kwarg_unknown", category="attention_backend",
         title="The attention implementation's forward does not take '{kw}', which this vLLM's attention layer passes",
         fix="vLLM's attention layer calls the backend's forward with {kw} (added in a later release than the backend "
             "or kernel patch was written for): an out-of-tree attention backend or a library that replaces the "
             "implementation's forward is out of step with this vLLM. Install the plugin release built for this vLLM, "
             "or the vLLM release the plugin supports, or stop patching the backend.",
         patterns=[r"unexpected keyword argument '(?P<kw>output_block_scale|output_scale)'",
                   r"keyword argument `(?P<kw>output_block_scale|output_scale)`"],
         playbook="attention-backend", confidence=0.7),
    Rule(signature="install.engine_pickle_local_object", category="install_mismatch",
         title="A locally defined object cannot be pickled into vLLM's engine process ({obj})",
         fix="The V1 engine runs in a separate process and pickles what it is given; {obj} is defined inside a "
             "function (typically a library patching vLLM at run time), so it cannot cross. Upgrade that library to a "
             "release that supports this vLLM's engine, or pin the vLLM it supports; as a stopgap run the engine in "
             "the same process with VLLM_ENABLE_V1_MULTIPROCESSING=0 (VLLM_USE_V1=0 on 0.8-0.10), set before vllm "
             "is imported.",
         patterns=[r"Can't (?:get|pickle) local object [`'<]?(?P<obj>[\w.]*<locals>[\w.]*)"],
         playbook="install-mismatch", confidence=0.6),
    Rule(signature="install.inspection_subprocess_killed", category="install_mismatch",
         title="vLLM's model-inspection subprocess was killed by a native crash",
         fix="A native library crashed in the model-inspection subprocess.",
         check=_inspection_killed, playbook="install-mismatch", confidence=0.75),
]
