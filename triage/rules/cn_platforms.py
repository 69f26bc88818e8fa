"""Platforms and hubs of the Chinese ecosystem: vllm-ascend's early NPU attention and ModelScope downloads.

- vllm-ascend 0.7.x (V0 engine) had no NPU attention path for a prefill that reuses cached blocks or comes in
  chunks: vllm_ascend/attention.py raises "Prefix cache and chunked prefill are currently not supported." (and
  "... when using quanzation." in its quantized path). The server starts; the first request that hits a cached
  prefix (with --enable-prefix-caching, or an RL trainer that turns it on) kills the engine.
- ModelScope checks every downloaded file's sha256 (modelscope/hub/file_download.py, file_integrity_validation):
  "File <path> integrity check failed, expected sha256 signature is <a>, actual is <b>, the download may be
  incomplete, please try again." (older: "File <path> integrity check failed, the download may be incomplete,
  please try again."), raised as modelscope.hub.errors.FileIntegrityError. With VLLM_USE_MODELSCOPE=True and
  tensor parallelism, older vLLMs let every worker download into the same temp directory at once. Newer ModelScope
  releases only log the failed check and fetch the file again, so a server that came up afterwards did not die of it.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.install import unless_started_after

ASCEND_PREFIX_CHUNKED = Rule(
    signature="config.ascend_prefix_chunked_unsupported", category="engine_config",
    title="This vllm-ascend release cannot run a prefill that reuses cached blocks or comes in chunks",
    fix="Launch without prefix caching and chunked prefill (drop --enable-prefix-caching / pass "
        "--no-enable-prefix-caching, do not pass --enable-chunked-prefill; a trainer such as TRL's GRPO may turn "
        "prefix caching on in its vLLM settings), or upgrade to a vllm-ascend release whose V1 engine supports them.",
    patterns=[r"Prefix cache and chunked prefill are currently not supported"],
    playbook="engine-config", confidence=0.9)

TP_RE = lazy(r"tensor[-_]parallel[-_]size[= ]+(?P<tp>\d+)|tensor_parallel_size=(?P<tp2>\d+)")


def _download_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    joined = scan.joined_text()
    tp = next((int(x.group("tp") or x.group("tp2")) for x in TP_RE.finditer(joined)), 1)
    concurrent = tp > 1 or "VllmWorkerProcess" in joined or "VllmWorker" in joined
    return {"workers": " (several vLLM workers downloaded it at once)" if concurrent else ""}


def _download_corrupt(scan: Scan) -> Diagnosis | None:
    # (a logged check that ModelScope recovered from: the server came up after it)
    return unless_started_after(MODELSCOPE_INTEGRITY, scan)


MODELSCOPE_INTEGRITY = Rule(
    signature="model_loading.modelscope_download_corrupt", category="model_loading",
    title="A file downloaded from ModelScope failed its checksum{workers}",
    fix="Download the model once before serving (`modelscope download --model <org/name> --local_dir <dir>`, it "
        "re-fetches what is incomplete) and pass that directory to vLLM instead of the hub id. With "
        "VLLM_USE_MODELSCOPE=True and --tensor-parallel-size > 1, older vLLMs let every worker download the same "
        "files into ModelScope's temp directory at once.",
    patterns=[r"File (?P<file>\S+) integrity check failed, (?:expected sha256 signature is|the download may be)",
              r"FileIntegrityError: File (?P<file>\S+) integrity check failed"],
    facts=_download_facts, check=lambda scan, env: _download_corrupt(scan), playbook="model-loading",
    confidence=0.9)

RULES = [ASCEND_PREFIX_CHUNKED, MODELSCOPE_INTEGRITY]
