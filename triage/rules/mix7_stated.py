"""A release gap the report states in its own words: "<name> only exists in vLLM 0.23.0+".

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


RULES = [
    Rule(signature="install.release_gap_stated", category="install_mismatch",
         title="The report says what the code needs exists only in {package} {version}+ (the installed "
               "release is older)",
         fix="The failing code was written against {package} {version} or newer while an older {package} is "
             "installed: install {package} >= {version}, or the release of the plugin or connector built for the "
             "installed {package} (check `pip show vllm lmcache vllm-ascend vllm-omni transformers`).",
         check=_check, confidence=STATED_CONFIDENCE, stated=True),
]
