"""Reading vLLM's attention-selector messages: the config it tried and each backend's rejection reasons.

vLLM's CUDA platform validates every candidate backend and prints why each was rejected
(vllm/platforms/cuda.py, get_attn_backend_cls). Two message forms exist: the old
`with head_size: 576, dtype: torch.bfloat16, ...` (v0.11.1 to ~v0.13) and the newer
`with AttentionSelectorConfig(head_size=576, ...)` whose field list keeps growing, so the config
is parsed generically as key/value pairs. Reasons may contain commas and brackets
(`requires qk_nope_head_dim in [64, 128, 192], but got 256`).
"""

from __future__ import annotations

import re
from triage.lazyre import lazy
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan

NO_VALID_RE = lazy(r"No valid attention backend found for (?P<device>\w+) with\s*(?P<rest>.*)")
SOME_INVALID_RE = lazy(r"Some attention backends are not valid for (?P<device>\w+) with (?P<rest>.*)")
SELECTED_RE = lazy(
    r"Selected backend (?:AttentionBackendEnum\.|_Backend\.|Backend\.)?(?P<backend>[A-Z][A-Z0-9_]+)"
    r" is not valid for this configuration\. Reasons?: (?P<reasons>\[.*\])"
)
# selector.py / platforms/cuda.py 0.8 .. 0.13; cuda.py adds the engine and MLA flags when a forced backend
# (VLLM_ATTENTION_BACKEND) does not exist for them
OLD_INVALID_RE = lazy(r"Invalid attention backend for (?P<device>\w+)(?:, with use_v1: (?P<v1>\w+) use_mla: (?P<mla>\w+))?\s*$")
BACKEND_START_RE = lazy(r"(?:^|\{|, )([A-Z][A-Z0-9_]+): \[")

# Generic rejection reasons of AttentionBackend.validate_configuration, for re-joining reasons that
# contain ", " themselves (a piece that does not start a known reason continues the previous one).
GENERIC_REASONS = (
    "head_size not supported", "dtype not supported", "kv_cache_dtype not supported",
    "block_size not supported", "partial multimodal token full attention not supported",
    "MLA not supported", "non-MLA not supported", "sink setting not supported",
    "attention sinks not supported", "sparse not supported", "non-sparse not supported",
    "per-head quant scales not supported", "compute capability not supported", "attention type",
    "sliding window not supported", "non-causal attention not supported",
    "batch invariance not supported", "KV connector not supported", "ImportError",
)

# What each backend needs, from vLLM's generated docs/design/attention_backends.md and the
# backends' validate_configuration (see research/vllm-internals.md §1.4). cc: compute capability
# majors it accepts (None = any); sparse: True/False; dtypes; kv: the KV-cache dtypes it takes (sparse
# backends only, where the choice of --kv-cache-dtype decides); heads: head sizes (sparse backends).
#   FLASHMLA_SPARSE: vllm/v1/attention/backends/mla/flashmla_sparse.py (bf16 only; auto/bfloat16/fp8_ds_mla,
#     `fp8` an alias of fp8_ds_mla in newer releases; head 576).
#   FLASHINFER_MLA_SPARSE(_SM120): vllm/v1/attention/backends/mla/flashinfer_mla_sparse.py (SM120 variant:


def split_top(text: str, sep: str = ", ") -> list[str]:
    """Split on `sep` outside (), [] and {} and quotes."""
    out, depth, quote, start, i = [], 0, "", 0, 0
    n, k = len(text), len(sep)
    while i < n:
        c = text[i]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(0, depth - 1)
        elif depth == 0 and text.startswith(sep, i):
            out.append(text[start:i])
            i += k
            start = i
            continue
        i += 1
    out.append(text[start:])
    return [p for p in out if p != ""]


def _value(v: str) -> Any:
    v = v.strip()
    if v in ("True", "False"):
        return v == "True"
    if v == "None":
        return None
    if re.fullmatch(r"-?\d+", v):
        return int(v)
    return v


def parse_config(rest: str) -> tuple[dict[str, Any], str]:
    """Split '<config>. Reasons: {...}' into the config's fields and the reasons text."""
    cfg_text, _, reasons = rest.partition(". Reasons: ")
    if not _:
        cfg_text, _, reasons = rest.partition(" Reasons: ")
    cfg_text = cfg_text.strip()
    fields: dict[str, Any] = {}
    m = re.match(r"\w+\((?P<body>.*)\)\s*$", cfg_text)
    if m:  # AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, ...)
        for part in split_top(m.group("body")):
            k, eq, v = part.partition("=")
            if eq:
                fields[k.strip()] = _value(v)
    else:  # head_size: 576, dtype: torch.bfloat16, ...
        for part in split_top(cfg_text.rstrip(".")):
            k, colon, v = part.partition(": ")
            if colon:
                fields[k.strip()] = _value(v)
    if isinstance(fields.get("dtype"), str):
        fields["dtype"] = fields["dtype"].removeprefix("torch.")
    if isinstance(fields.get("attn_type"), str):
        fields["attn_type"] = fields["attn_type"].removeprefix("AttentionType.").lower()
    for key in ("head_size", "block_size"):
        fields.setdefault(key, None)
    return fields, reasons.strip()


def _starts_reason(piece: str) -> bool:
    p = piece.strip()
    if not p:
        return False
    if p.startswith(GENERIC_REASONS) or p.startswith("vllm.") or p[0].isupper() or p[0] in "'\"":
        return True
    return False


def split_reasons(body: str) -> list[str]:
    pieces = split_top(body)
    out: list[str] = []
    for p in pieces:
        if out and not _starts_reason(p):
            out[-1] = f"{out[-1]}, {p}"
        else:
            out.append(p.strip())
    return [r.strip().strip("'\"") for r in out if r.strip()]


def parse_reasons(text: str) -> dict[str, list[str]]:
    """'{A: [r1, r2], B: [r3]}.' -> {"A": ["r1", "r2"], "B": ["r3"]}"""
    text = text.strip().rstrip(".").strip()
    if text.startswith("{"):
        text = text[1:]
    if text.endswith("}"):
        text = text[:-1]
    starts = [(m.start(1), m.end(), m.group(1)) for m in BACKEND_START_RE.finditer(text)]
    # keep only starts at bracket depth 0 (a reason could quote "X: [" itself)
    valid = []
    for s, e, name in starts:
        prefix = text[:s]
        if prefix.count("[") - prefix.count("]") == 0:
            valid.append((s, e, name))
    out: dict[str, list[str]] = {}
    for i, (s, e, name) in enumerate(valid):
        end = valid[i + 1][0] if i + 1 < len(valid) else len(text)
        body = text[e:end].rstrip().rstrip(",").rstrip()
        if body.endswith("]"):
            body = body[:-1]
        out[name] = split_reasons(body)
    return out


NEW_RECORD_RE = lazy(r"\s*(?:Traceback|File \"|During handling|The above exception|[\w.]*(?:Error|Exception)\b:|"
                     r"(?:INFO|WARNING|ERROR|DEBUG)\b)")


def _complete(text: str) -> bool:
    """The selector's message has ended: its reasons' braces (or the selected backend's list) are closed."""
    if "{" in text:
        return text.count("{") <= text.count("}")
    if "Reason: [" in text or "Reasons: [" in text:
        return text.count("[") <= text.count("]")
    return False


def join_wrapped(scan: Scan, idx: int) -> tuple[str, list[Line]]:
    """The message may be wrapped over several lines: by the logger (each line with the log header), by a
    terminal (a row with no prefix, cut mid-word: joined as it is) or by hand in a paste (an indented row:
    joined with a space). Rows are joined until the reasons close, or a row starts something else."""
    first = scan.lines[idx]
    text = first.text
    used = [first]
    j = idx + 1
    while not _complete(text) and j < len(scan.lines) and len(used) < 40:
        nxt = scan.lines[j]
        if nxt.no != used[-1].no + 1:
            break
        if nxt.proc == first.proc and nxt.proc:
            if NEW_RECORD_RE.match(nxt.text):
                break
            text += nxt.text if text.endswith((" ", "[", "{")) else " " + nxt.text.strip()
            used.append(nxt)
        elif not nxt.proc and not nxt.level and nxt.text and len(nxt.text) == len(nxt.shown):
            if NEW_RECORD_RE.match(nxt.text):
                break
            if not text.endswith(nxt.text.strip()):  # the scanner may have joined it already
                if nxt.text[:1].isspace() or text.endswith((",", ".", ";", ":", ")", "]", "}")):
                    text = text.rstrip() + " " + nxt.text.strip()
                else:
                    text += nxt.text
            used.append(nxt)
        else:
            break
        j += 1
    return text, used


def fields_nearby(scan: Scan, idx: int) -> dict[str, Any]:
    """An explicit-backend rejection has no config; an earlier 'Some attention backends are not
    valid ... with <config>' line (same process) often has it."""
    for ln in reversed(scan.lines[:idx]):
        m = SOME_INVALID_RE.search(ln.text) or NO_VALID_RE.search(ln.text)
        if m:
            return parse_config(m.group("rest"))[0]
    return {}


