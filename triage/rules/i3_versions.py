"""Libraries around vLLM whose releases do not fit each other, said by the library that notices it.

- Hugging Face `kernels` 0.15+ requires a version or a revision on every `LayerRepository`
  (kernels/layer/layer.py: "Either a revision or a version must be specified."); transformers releases
  before the fix build their hub-kernel table (transformers/integrations/hub_kernels.py) without one, so
  `import transformers` fails, and with it vLLM, TRL, sglang... at start-up. transformers declares the
  kernels range it fits only in an extra, so a plain `pip install kernels` (or another package's extra)
  pulls a newer one.
- vLLM-Omni follows vLLM's major.minor releases and warns at import when they differ
  (vllm_omni/version.py, warn_if_misaligned_vllm_version: "vLLM and vLLM-Omni appear to have mismatched
  major/minor versions"); the import error that follows (a vLLM module vLLM-Omni imports was moved or
  renamed) is that mismatch. The warning alone, on a server that came up, is not a failure.
- A library vLLM loads (lm-format-enforcer, outlines, peft, a platform plugin...) imports a transformers name
  the installed transformers removed or does not have yet (transformers 4.49 removed LogitsWarper): the
  traceback's importing frame is that library's file, not vLLM's and not a model's remote code, so the
  release that does not fit is the library's (or transformers' for it), not vLLM's transformers range.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule
from triage.rules.install import STARTED_RE

KERNELS_VERSION_REQUIRED: Rule = Rule(
    signature="install.kernels_version_required", category="install_mismatch",
    title="The installed `kernels` package is newer than this transformers accepts (a version or revision is "
          "now required)",
    fix="kernels 0.15 and later require a version or a revision on each hub kernel, which the installed "
        "transformers does not pass, so importing transformers (and vLLM with it) fails. Install the kernels "
        "range your transformers declares (`pip install 'kernels<0.15'`; `pip show transformers` and its "
        "`kernels` extra give the exact range), or upgrade transformers to a release that passes a version "
        "(within the range your vLLM pins); if nothing here uses hub kernels, `pip uninstall kernels` also works.",
    # (", not both." is the other check of the same constructor: both given, a caller's own code)
    patterns=[r"Either a revision or a version must be specified(?!, not both)"],
    playbook="install-mismatch", confidence=0.9)

# the warning's head, or (its head wrapped or cut away by the paste) the rows naming the two versions
OMNI_WARNING_RE = lazy(r"vLLM and vLLM-Omni appear to have|have mismatched major/minor versions|"
                       r"-->\s*vLLM-Omni version ")
OMNI_VERSION_RE = lazy(r"-->\s*(?P<who>vLLM-Omni|vLLM) version (?P<ver>\S+)")
# what follows the warning when the mismatch broke the start: a traceback, an import or attribute error
FAILED_RE = lazy(r"Traceback \(most recent call last\)|(?:ModuleNotFound|Import|Attribute|Type)Error\b")
VERSION_ROWS = 4  # the warning's own rows that name the two versions


def _omni_misaligned(scan: Scan) -> Diagnosis | None:
    warn = next((ln for ln in scan.lines if OMNI_WARNING_RE.search(ln.text)), None)
    if warn is None:
        return None
    later = [ln for ln in scan.lines if ln.no > warn.no]
    if any(STARTED_RE.search(ln.text) for ln in later):
        return None  # it came up: the warning is only a warning
    failed = next((ln for ln in later if FAILED_RE.search(ln.text)), None)
    if failed is None:
        return None
    versions = {m.group("who"): m.group("ver") for ln in [warn, *later] if ln.no <= warn.no + VERSION_ROWS
                for m in [OMNI_VERSION_RE.search(ln.text)] if m}
    omni, vllm = versions.get("vLLM-Omni", "?"), versions.get("vLLM", "?")
    detail = f"vLLM-Omni {omni} with vLLM {vllm}" if versions else "vLLM-Omni and vLLM of different releases"
    return Diagnosis(
        category="install_mismatch", signature="install.omni_vllm_misaligned",
        title=f"vLLM-Omni and vLLM come from different releases ({detail}); the import that follows fails",
        confidence=0.9, evidence=[Evidence(warn.no, warn.shown), Evidence(failed.no, failed.shown)],
        facts={"omni_version": omni, "vllm_version": vllm, "detail": detail},
        fix=Fix("vLLM-Omni is built for one vLLM major.minor release and imports vLLM modules that move between "
                "releases: install the matching pair in one environment, e.g. `pip install vllm==X.Y.*` for "
                "vLLM-Omni X.Y (or the vLLM-Omni release of your vLLM), and do not let a later `pip install -U "
                "vllm` move vLLM alone; the vllm/vllm-omni image ships a matching pair.", "install-mismatch"),
        first_line=warn.no)


OMNI_VLLM_MISALIGNED: Rule = Rule(
    signature="install.omni_vllm_misaligned", category="install_mismatch",
    title="vLLM-Omni and vLLM come from different releases", fix="",
    playbook="install-mismatch", confidence=0.9, check=lambda scan, env: _omni_misaligned(scan))


TRANSFORMERS_API_RE = lazy(r"cannot import name '(?P<name>\w+)' from 'transformers(?:\.[\w.]+)?'|"
                           r"module 'transformers(?:\.[\w.]+)?' has no attribute '(?P<attr>\w+)'")
SITE_PACKAGE_RE = lazy(r"(?:site|dist)-packages/(?P<pkg>[A-Za-z_]\w*)/")
# a frame that only passes the import on (transformers' lazy modules), and importers that are not a library of
# their own: vLLM itself (its transformers range: model_support), a model's remote code
PASSING = ("transformers",)
NOT_A_LIBRARY = ("vllm", "transformers_modules")
PIP_NAMES = {"lmformatenforcer": "lm-format-enforcer", "sklearn": "scikit-learn", "outlines_core": "outlines-core"}


FRAME_RE = lazy(r'File "(?P<file>[^"]+)", line \d+')
FRAME_ROWS = 4  # the importing frame's row and its source row stand right above the error


def library_importing_transformers(scan: Scan) -> tuple[Any, str, str] | None:
    """(the error's line, the library, the transformers name) when a third-party library's own file failed to
    import a transformers name; None otherwise (vLLM's or a model's import, or no frame to tell)."""
    lines = scan.lines
    for i, ln in enumerate(lines):
        m = TRANSFORMERS_API_RE.search(ln.text)
        if m is None or ln.level in ("INFO", "WARNING", "DEBUG"):
            continue
        # the innermost frame of its traceback, else the frame row printed right above it
        frames = next((e.frames for e in scan.exceptions if e.line.no == ln.no and e.frames), None)
        if frames:
            path = frames[-1].file
        else:
            frame = next((fm for p in reversed(lines[max(0, i - FRAME_ROWS):i])
                          for fm in [FRAME_RE.search(p.text)] if fm), None)
            if frame is None:
                continue
            path = frame.group("file")
        path = path.replace("\\", "/")
        pm = SITE_PACKAGE_RE.search(path)
        if pm is None or pm.group("pkg") in PASSING or pm.group("pkg") in NOT_A_LIBRARY:
            continue  # the user's own script, vLLM, a model's remote code, or a frame that only passes it on
        return ln, pm.group("pkg"), m.group("name") or m.group("attr")
    return None


def _library_transformers(scan: Scan) -> Diagnosis | None:
    got = library_importing_transformers(scan)
    if got is None:
        return None
    ln, pkg, name = got
    pip_name = PIP_NAMES.get(pkg, pkg.replace("_", "-"))
    return Diagnosis(
        category="install_mismatch", signature="install.library_transformers_mismatch",
        title=f"{pip_name} does not fit the installed transformers (it imports {name}, which this transformers "
              "does not have)",
        confidence=0.9, evidence=[Evidence(ln.no, ln.shown)],
        facts={"package": pip_name, "name": name},
        fix=Fix(f"{pip_name} was written for another transformers release than the one installed (transformers "
                "removes and renames names between releases, e.g. LogitsWarper in 4.49): upgrade it to a release made "
                f"for this transformers (`pip install -U {pip_name}`), or install a transformers version that both "
                f"{pip_name} and your vLLM accept (`pip show vllm` lists vLLM's range).", "install-mismatch"),
        first_line=ln.no)


LIBRARY_TRANSFORMERS_MISMATCH: Rule = Rule(
    signature="install.library_transformers_mismatch", category="install_mismatch",
    title="A library around vLLM does not fit the installed transformers", fix="",
    playbook="install-mismatch", confidence=0.9, check=lambda scan, env: _library_transformers(scan))

RULES = [KERNELS_VERSION_REQUIRED, OMNI_VLLM_MISALIGNED, LIBRARY_TRANSFORMERS_MISMATCH]
