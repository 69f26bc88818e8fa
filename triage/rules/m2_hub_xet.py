"""Weights downloaded through Xet storage (hf_xet) failing mid-transfer.

Hub repositories stored with Xet are downloaded by huggingface_hub through the hf_xet package (xet_get ->
download_files). Its Rust client reports every failure as one RuntimeError, "Data processing error: CAS service
error : <cause>" (later hf_xet: "... File reconstruction error: <cause>"): the transfer service rate-limiting
(reqwest Status(429)), a body cut short (IncompleteBody, error decoding response body), retries exhausted
("ReqwestMiddleware Error: Request failed after 5 retries"), or the cache's file system refusing the sparse writes
hf_xet makes (Operation not permitted / not supported, os error 1 / 95). vLLM downloads at start-up, so the server
dies in load_model or in the config look-up. A full disk ("No space left on device") is the disk rule's, not this.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

_CAUSES = (
    (lazy(r"Status\(429\)|\b429\b|Too Many Requests"), "rate-limited (HTTP 429)",
     "The Xet transfer service rate-limited the download: set HF_TOKEN (authenticated limits are higher), download "
     "the weights once beforehand (`huggingface-cli download <repo>`) and start vLLM with HF_HUB_OFFLINE=1, and avoid "
     "many replicas downloading the same model at once."),
    (lazy(r"os error (?:1|95)\b|Operation not (?:permitted|supported)"), "the cache's file system refused hf_xet's writes",
     "hf_xet writes sparse/partial files that this file system (a network or object-store mount) refuses: point "
     "HF_HOME at a local disk, or set HF_HUB_DISABLE_XET=1 to use the plain HTTP download."),
)
_DEFAULT = ("the transfer failed",
            "The Xet download failed in transit (connection cut, retries exhausted): retry, upgrade hf_xet "
            "(`pip install -U hf_xet`), or set HF_HUB_DISABLE_XET=1 so huggingface_hub falls back to the plain HTTP "
            "download; behind a proxy, allow cas-bridge.xethub.hf.co and transfer.xethub.hf.co.")


def _facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    for rx, what, advice in _CAUSES:
        if rx.search(line.text):
            return {"what": what, "advice": advice}
    return {"what": _DEFAULT[0], "advice": _DEFAULT[1]}


def _check(scan: Scan, env: dict[str, Any]) -> Any:
    d = XET_DOWNLOAD_FAILED.match_lines(scan)
    if d is None or any("No space left on device" in e.text or "os error 28" in e.text for e in d.evidence):
        return None
    return d


XET_DOWNLOAD_FAILED: Rule = Rule(
    signature="model_loading.xet_download_failed", category="model_loading",
    title="Downloading the weights through Xet storage (hf_xet) failed: {what}",
    fix="{advice}", facts=_facts,
    patterns=[r"Data processing error: (?:CAS service error|File reconstruction error)",
              r"\bCAS service error\s*:"],
    playbook="model-loading", confidence=0.86,
    check=_check)

RULES = [XET_DOWNLOAD_FAILED]
