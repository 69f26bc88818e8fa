"""What the report states in its own words about the install: a release gap ("<name> only exists in vLLM
0.23.0+"), or two distributions writing the same files (a "self-inconsistent" package, a "file collision").

When a plugin or connector that runs inside vLLM (LMCache's vLLM connectors, vllm-omni, vllm-ascend, a fork) is
out of step with the installed vLLM, the thread often keeps the reporter's diagnosis rather than the traceback:
"it imports `KVCacheSpecKind` from `vllm.v1.kv_cache_interface`, which only exists in **vLLM 0.23.0+**". The words
are the reporter's, so the rule is `stated` (dropped when a rule reading the log's own lines finds an
install_mismatch), ranks below any sure rule, and reads only prose lines (oom_stated's reading: no logger's line,
no code or traceback row). A line that rules the gap out ("is not ...", "no longer") is no statement of it.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.oom_stated import NOT_STATED_RE, STATED_CONFIDENCE, _prose

# the packages whose releases a vLLM stack pins against each other
_PKG = (r"vLLM|vllm(?:[-_](?:ascend|omni))?|LMCache|lmcache|transformers|torch|PyTorch|FlashInfer|flashinfer"
        r"|triton|CANN|torch[-_]npu")
RELEASE_ONLY_RE = lazy(
    r"\b(?:only\s+(?:exists?|available|present|defined|ships?|shipped)|exists?\s+only|(?:is|are)\s+only\s+in)"
    r"\s+(?:in|since|from|as\s+of|with)\s+[`*_]*(?P<pkg>" + _PKG + r")[`*_]*\s*(?:v|==|>=)?\s*"
    r"(?P<ver>\d+\.\d+(?:\.\d+)?(?:rc\d+|\.post\d+)?)(?P<plus>\+|\s+(?:and\s+(?:later|newer|above)|or\s+(?:later|newer)))?",
    re.I)


def _check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "only" not in joined.lower():
        return None
    for ln in scan.lines:
        text = _prose(ln)
        if not text or "only" not in text.lower():
            continue
        m = RELEASE_ONLY_RE.search(text)
        if m is None or NOT_STATED_RE.search(text):
            continue
        pkg = m.group("pkg")
        facts = {"package": "vLLM" if pkg.lower() == "vllm" else pkg, "version": m.group("ver"),
                 "stated_by": "the report's own words"}
        return RULES[0].diagnosis(scan, [(ln, m)], facts=facts, confidence=STATED_CONFIDENCE)
    return None


# two distributions that ship the same module files leave whichever pip wrote last: a package whose files come
# from different releases ("nvidia-cutlass-dsl" and its "-libs" wheel both shipping cute/core.py in vLLM 0.22's
# CUDA 13 image, ai-dynamo/dynamo#11775), so an import inside the package fails
COLLISION_RE = lazy(
    r"\bfile[\s-]+collisions?\b"
    # "a self-inconsistent install of X", "a self-inconsistent nvidia_cutlass_dsl" (a distribution's name: it has
    # a "-" or "_"; "a self-inconsistent bucket count" is no package)
    r"|\bself[\s-]+inconsistent\s+(?:(?:install(?:ation)?|environment|package|wheel|dist(?:ribution)?)\b"
    r"(?:\s+of\s+[`*_]*(?P<pkg>[\w.-]+))?|[`*_]*(?P<pkg2>[A-Za-z][\w.]*[-_][\w.-]*\w))"
    r"|\b(?P<pkg3>[A-Za-z][\w.]*[-_][\w.-]*\w)[`*_]*\s+(?:is|was)\s+(?:left\s+)?self[\s-]+inconsistent\b"
    # "two wheels (a and b) that both ship the same file"
    r"|\b(?:two|both|multiple|several)\s+(?:wheels|dists|distributions|packages)(?:\s*\([^)]{0,100}\))?\s+"
    r"(?:that\s+)?(?:both\s+)?"
    r"(?:ship|claim|install|own|provide|contain|write)\b[^.]{0,60}\bsame\s+(?:file|module|path)", re.I)


def _check_collision(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    low = scan.joined_text().lower()
    if "collision" not in low and "inconsistent" not in low and "same" not in low:
        return None
    for ln in scan.lines:
        text = _prose(ln)
        if not text:
            continue
        m = COLLISION_RE.search(text)
        if m is None or NOT_STATED_RE.search(text):
            continue
        pkg = m.group("pkg") or m.group("pkg2") or m.group("pkg3") or "the package"
        return RULES[1].diagnosis(scan, [(ln, m)], facts={"package": pkg, "stated_by": "the report's own words"},
                                  confidence=STATED_CONFIDENCE)
    return None


RULES = [
    Rule(signature="install.release_gap_stated", category="install_mismatch",
         title="The report says what the code needs exists only in {package} {version}+ (the installed "
               "release is older)",
         fix="The failing code was written against {package} {version} or newer while an older {package} is "
             "installed: install {package} >= {version}, or the release of the plugin or connector built for the "
             "installed {package} (check `pip show vllm lmcache vllm-ascend vllm-omni transformers`).",
         check=_check, playbook="install-mismatch", confidence=STATED_CONFIDENCE, stated=True),
    Rule(signature="install.file_collision_stated", category="install_mismatch",
         title="The report says two installed distributions ship the same files ({package} is left "
               "self-inconsistent)",
         fix="Two wheels installed the same module files, so {package} holds files from different releases and "
             "its own imports fail. Reinstall one consistent set (`pip uninstall` both distributions, then "
             "install the one release your vLLM pins, e.g. `pip install --force-reinstall nvidia-cutlass-dsl==<pin>`), "
             "or use an image where the packaging is fixed (vLLM 0.26+ for nvidia-cutlass-dsl). "
             "`pip show -f <dist>` lists which distribution claims a file.",
         check=_check_collision, playbook="install-mismatch", confidence=STATED_CONFIDENCE, stated=True),
]
