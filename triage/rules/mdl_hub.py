"""Fetching a model from the Hugging Face Hub: what huggingface_hub refuses before a byte of the model arrives.

Worded as huggingface_hub words them (file_download.py, utils/_http.py, 0.20 .. 0.34): a download accelerator the
environment asks for but does not have, and the Hub's rate limit.
"""

from __future__ import annotations

import re
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.rules.base import Rule

HUB_HOSTS = r"(?:huggingface\.co|hf\.co|hf-mirror\.com)"


def _tool_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    text = line.text
    if "hf_xet" in text or "Xet" in text:
        return {"tool": "hf_xet",
                "advice": "The repository stores its files with Xet, and this huggingface_hub downloads them only "
                          "through the hf_xet package, which is not installed: `pip install hf_xet` (or "
                          "`pip install -U \"huggingface_hub[hf_xet]\"`) in vLLM's environment, or download the model "
                          "elsewhere and pass its local folder as --model."}
    if "An error occurred while downloading" in text:
        return {"tool": "hf_transfer",
                "advice": "hf_transfer itself failed mid-download (it reports no cause): unset "
                          "HF_HUB_ENABLE_HF_TRANSFER (or set it to 0) so huggingface_hub downloads with its own "
                          "client and says what went wrong (network, disk, permissions), then retry."}
    return {"tool": "hf_transfer",
            "advice": "HF_HUB_ENABLE_HF_TRANSFER=1 is set (images and shell profiles often set it) but the hf_transfer "
                      "package is not installed where vLLM runs: `pip install hf_transfer`, or unset "
                      "HF_HUB_ENABLE_HF_TRANSFER to use the regular download."}


RULES = [
    Rule(signature="model_loading.hub_download_tool", category="model_loading",
         title="The model download needs {tool}, which is missing or failed",
         fix="{advice}", facts=_tool_facts,
         patterns=[r"Fast download using 'hf_transfer' is enabled",
                   r"An error occurred while downloading using `hf_transfer`",
                   r"To use optimized download using Xet storage, you need to install the hf_xet package"],
         playbook="model-loading", confidence=0.9),
    # utils/_http.py hf_raise_for_status re-raises requests' HTTPError as HfHubHTTPError with the same first line
    Rule(signature="model_loading.hub_rate_limited", category="model_loading",
         title="The Hugging Face Hub refused the requests: rate limited (429 Too Many Requests)",
         fix="The Hub limits requests per IP (anonymous) or per account; vLLM asks the Hub about the model (config, "
             "file list, revision) even when the files are already cached. Set HF_TOKEN for higher limits, and when "
             "the model is in the cache run with HF_HUB_OFFLINE=1 (or pass the local snapshot folder as --model) so "
             "no request is made; many workers starting at once (Ray, RL rollouts) multiply the requests.",
         patterns=[r"429 Client Error: Too Many Requests for url: https?://" + HUB_HOSTS,
                   r"HfHubHTTPError: 429 Client Error",
                   r"\b429\b.{0,40}Too Many Requests.{0,120}" + HUB_HOSTS],
         playbook="model-loading", confidence=0.88),
]
