"""Attention backend selection: `No valid attention backend found`, `Selected backend ... is not valid`.

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
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

NO_VALID_RE = lazy(r"No valid attention backend found for (?P<device>\w+) with (?P<rest>.*)")
SOME_INVALID_RE = lazy(r"Some attention backends are not valid for (?P<device>\w+) with (?P<rest>.*)")
SELECTED_RE = lazy(
    r"Selected backend (?:AttentionBackendEnum\.|_Backend\.|Backend\.)?(?P<backend>[A-Z][A-Z0-9_]+)"
    r" is not valid for this configuration\. Reasons?: (?P<reasons>\[.*\])"
)
OLD_INVALID_RE = lazy(r"Invalid attention backend for (?P<device>\w+)\s*$")
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
# majors it accepts (None = any); sparse: True/False; dtypes; kv: KV-cache dtypes.
BACKENDS: dict[str, dict[str, Any]] = {
    "CUTLASS_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA_SPARSE": {"cc": [10], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHMLA": {"cc": [9, 10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)"},
    "FLASHMLA_SPARSE": {"cc": [9, 10], "sparse": True, "dtypes": ["bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)"},
    "FLASH_ATTN_MLA": {"cc": [9], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)"},
    "FLASH_ATTN_MLA_SPARSE": {"cc": [9], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)"},
    "TRITON_MLA": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "any CUDA GPU"},
    "FLASHINFER_MLA_SPARSE_SM120": {"cc": [12], "sparse": True, "dtypes": ["bfloat16"],
                                    "gpus": "RTX PRO 6000 / RTX 50xx / GB10 (SM12x), in vLLM releases after PR #43477"},
    "TRITON_MLA_SPARSE": {"cc": None, "sparse": True, "dtypes": ["float16", "bfloat16"],
                          "gpus": "any CUDA GPU (open PRs #38476/#47629 only, not in a release)"},
    "FLASH_ATTN": {"cc": [8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM80 and newer"},
    "FLASHINFER": {"cc": [7, 8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM75 to SM121"},
    "TRITON_ATTN": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any CUDA GPU"},
    "FLEX_ATTENTION": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any"},
}
DSA_ARCHES = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "DeepseekV4ForCausalLM")


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


def _join_wrapped(scan: Scan, idx: int) -> tuple[str, list[Line]]:
    """The message may be wrapped over several lines (each with the log header): join them until
    the reasons' braces close. A row with no prefix at all after a tagged line is the rest of a line
    a terminal cut (a paste narrower than the log): it is joined as it is, without a space."""
    first = scan.lines[idx]
    text = first.text
    used = [first]
    j = idx + 1
    while text.count("{") > text.count("}") and j < len(scan.lines) and len(used) < 40:
        nxt = scan.lines[j]
        if nxt.no == used[-1].no + 1:
            if nxt.proc == first.proc:
                text += nxt.text if text.endswith((" ", "[", "{")) else " " + nxt.text.strip()
                used.append(nxt)
            elif not nxt.proc and not nxt.level and nxt.text and len(nxt.text) == len(nxt.shown):
                if not text.endswith(nxt.text):  # the scanner may have joined it already
                    text += nxt.text
                used.append(nxt)
        j += 1
    return text, used


def _cc_major(env: dict[str, Any]) -> int | None:
    cc = env.get("compute_capability")
    try:
        return int(str(cc).split(".")[0]) if cc else None
    except ValueError:
        return None


def explain(fields: dict[str, Any], rejected: dict[str, list[str]], env: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Backend by backend: why it was rejected and what would make it acceptable."""
    lines: list[str] = []
    would: dict[str, str] = {}
    cc = env.get("compute_capability")
    sparse = fields.get("use_sparse") is True
    dtype = fields.get("dtype")
    kv = fields.get("kv_cache_dtype")
    for name, reasons in rejected.items():
        info = BACKENDS.get(name, {})
        needs: list[str] = []
        parts: list[str] = []
        for r in reasons:
            if r.startswith("sparse not supported"):
                parts.append("a dense MLA backend; this model uses DSA sparse attention")
                needs.append("never, for this model")
            elif r.startswith("non-sparse not supported"):
                parts.append("sparse-only; this model is dense")
                needs.append("never, for this model")
            elif r.startswith("compute capability not supported") or "only supported on" in r or "not supported on this device" in r:
                gpus = info.get("gpus")
                here = f" (this GPU: compute capability {cc})" if cc else ""
                parts.append(f"needs {gpus}{here}" if gpus else f"rejects this GPU's compute capability{here}")
                if gpus:
                    needs.append(f"on {gpus}")
            elif r.startswith("dtype not supported"):
                ok = info.get("dtypes")
                parts.append(f"does not take dtype {dtype}" + (f" (takes {', '.join(ok)})" if ok else ""))
                if ok:
                    needs.append(f"with --dtype {ok[-1]}")
            elif r.startswith("kv_cache_dtype not supported"):
                parts.append(f"does not take KV-cache dtype {kv}")
                needs.append("with another --kv-cache-dtype (or a vLLM version that accepts it)")
            elif r.startswith("head_size not supported"):
                parts.append(f"does not take head size {fields.get('head_size')}")
            elif r.startswith("block_size not supported"):
                parts.append(f"does not take block size {fields.get('block_size')}")
                needs.append("with another --block-size")
            elif "qk_nope_head_dim" in r:
                parts.append(r)
                needs.append("with a vLLM version whose kernel accepts this qk_nope_head_dim")
            elif "is not available" in r or r.startswith("ImportError"):
                parts.append(f"its kernel library is missing from this build ({r})")
                needs.append("with a vLLM build that includes it for this GPU")
            elif "index_topk" in r:
                parts.append("needs a DSA model (index_topk in the config)")
            else:
                parts.append(r)
        lines.append(f"{name}: " + "; ".join(dict.fromkeys(parts)))
        if needs:
            would[name] = "; ".join(dict.fromkeys(needs))
    if sparse and not any(BACKENDS.get(n, {}).get("sparse") for n in rejected):
        lines.append("None of the listed backends is a sparse MLA backend: this vLLM build has none that was tried.")
    # What is missing for this GPU (compute capability, version, install) is added by triage.enrich,
    # which knows the probed machine.
    return lines, would


def _diagnose(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for idx, ln in enumerate(scan.lines):
        t = ln.text
        if "attention backend" not in t and "Selected backend" not in t:
            continue
        m = NO_VALID_RE.search(t)
        if m:
            text, used = _join_wrapped(scan, idx)
            m = NO_VALID_RE.search(text)
            assert m is not None
            fields, reasons_text = parse_config(m.group("rest"))
            rejected = parse_reasons(reasons_text)
            return _build(scan, env, "attention.no_valid_backend", fields, rejected, used, m.group("device"))
        m = SELECTED_RE.search(t)
        if m:
            reasons = [r.strip().strip("'\"") for r in split_top(m.group("reasons").strip()[1:-1])]
            fields = _fields_nearby(scan, idx)
            return _build(scan, env, "attention.selected_backend_invalid", fields,
                          {m.group("backend"): reasons}, [ln], "cuda", selected=m.group("backend"))
        m = OLD_INVALID_RE.search(t)
        if m:
            return Diagnosis(
                category="attention_backend", signature="attention.invalid_backend_legacy",
                title="vLLM found no attention backend for this model on this device",
                confidence=0.8, evidence=[Evidence(ln.no, ln.shown)], facts={"device": m.group("device")},
                fix=Fix("This old vLLM hard-codes its backends and prints no reasons: check VLLM_ATTENTION_BACKEND, "
                        "the dtype and head size against the GPU, or upgrade vLLM for a detailed reason list.",
                        "attention-backend"),
                first_line=ln.no)
    return None


def _fields_nearby(scan: Scan, idx: int) -> dict[str, Any]:
    """An explicit-backend rejection has no config; an earlier 'Some attention backends are not
    valid ... with <config>' line (same process) often has it."""
    for ln in reversed(scan.lines[:idx]):
        m = SOME_INVALID_RE.search(ln.text) or NO_VALID_RE.search(ln.text)
        if m:
            return parse_config(m.group("rest"))[0]
    return {}


def _build(scan: Scan, env: dict[str, Any], signature: str, fields: dict[str, Any],
           rejected: dict[str, list[str]], used: list[Line], device: str, selected: str | None = None) -> Diagnosis:
    facts: dict[str, Any] = dict(fields)
    facts["device"] = device
    facts["rejected"] = rejected
    if selected:
        facts["selected_backend"] = selected
    merged_env = dict(scan.facts)
    merged_env.update(env)
    cc = merged_env.get("compute_capability")
    if cc:
        facts["compute_capability"] = cc
    sparse = fields.get("use_sparse") is True
    mla = fields.get("use_mla") is True
    arch = merged_env.get("architecture")
    if arch in DSA_ARCHES or (sparse and mla):
        facts["model_uses_dsa"] = True
    explanation, would = explain(fields, rejected, merged_env)
    facts["would_work"] = would
    major = _cc_major(merged_env)
    gpu = f" (compute capability {cc})" if cc else ""
    if sparse:
        if major is not None and major not in (9, 10):
            facts["case"] = "sparse_mla_unsupported_gpu"
        title = f"No sparse MLA attention backend for this DSA model on this GPU{gpu}"
        fix = ("This model (DeepSeek-V3.2 / GLM-5 family) needs a sparse MLA backend; the ones in this vLLM "
               "accept only Hopper/Blackwell-datacenter GPUs. Upgrade to a vLLM with a sparse MLA backend for "
               "this GPU if one exists, or install triage's bundled Triton backend "
               "(`triage apply sparse-mla`) and launch with --attention-backend CUSTOM.")
        playbook = "attention-sparse-mla"
    elif mla:
        title = f"No MLA attention backend accepts this configuration{gpu}"
        fix = ("Every MLA backend rejected the configuration; the reasons below say which flag (dtype, "
               "--kv-cache-dtype, --block-size) or which GPU/vLLM version would change that.")
        playbook = "attention-backend"
    else:
        title = f"No attention backend accepts head size {fields.get('head_size')} / dtype {fields.get('dtype')}{gpu}"
        fix = ("Every attention backend rejected the configuration; the reasons below say which flag "
               "(dtype, --kv-cache-dtype, --block-size, --attention-backend) or GPU would change that.")
        playbook = "attention-backend"
    if selected:
        title = f"The selected attention backend {selected} cannot run this configuration{gpu}"
        fix = (f"{selected} was chosen explicitly (--attention-backend, -ac.backend or VLLM_ATTENTION_BACKEND) "
               "and rejects this model/GPU: drop the override to let vLLM choose, or pick a backend that fits. "
               + (fix if sparse else ""))
    return Diagnosis(
        category="attention_backend", signature=signature, title=title, confidence=0.95,
        evidence=[Evidence(ln.no, ln.shown) for ln in used[:6]], facts=facts,
        fix=Fix(fix.strip(), playbook), first_line=used[0].no, explanation=explanation,
    )


RULES = [
    Rule(signature="attention.no_valid_backend", category="attention_backend",
         title="No valid attention backend", fix="", check=_diagnose, confidence=0.95,
         playbook="attention-backend",
         emits=("attention.selected_backend_invalid", "attention.invalid_backend_legacy")),
    Rule(signature="attention.env_backend_deprecated", category="attention_backend",
         title="VLLM_ATTENTION_BACKEND is deprecated (ignored by newer vLLM)",
         fix="Pass the backend with --attention-backend NAME (or -ac.backend NAME); the environment variable "
             "is ignored by vLLM 0.26 and newer, so the override you think is active may not be.",
         patterns=[r"Using VLLM_ATTENTION_BACKEND environment variable is deprecated"],
         playbook="attention-backend", confidence=0.3, secondary=True),
    Rule(signature="attention.unknown_backend_name", category="attention_backend",
         title="Unknown attention backend name {backend}",
         fix="The name passed to --attention-backend / VLLM_ATTENTION_BACKEND is not a backend of this vLLM "
             "version: use one of the names the error lists (a plugin backend registers as CUSTOM).",
         patterns=[r"Unknown attention backend: '?(?P<backend>[\w.]+)'?", r"Invalid attention backend: '?(?P<backend>[\w.]+)'?",
                   r"Backend (?P<backend>CUSTOM) must be registered before use"],
         playbook="attention-backend", confidence=0.9),
    Rule(signature="attention.fa_version_unsupported", category="attention_backend",
         title="FlashAttention cannot run on this GPU (Unsupported FA version: {version})",
         fix="This GPU (e.g. V100/T4, compute capability below 8.0) has no FlashAttention build, and this vLLM version "
             "still picked it: choose another backend (--attention-backend TRITON_ATTN, older: "
             "VLLM_ATTENTION_BACKEND=XFORMERS) or upgrade vLLM, whose selector skips FlashAttention there.",
         patterns=[r"Unsupported FA version: (?P<version>\w+)"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.head_size_unsupported", category="attention_backend",
         title="Head size {head_size} is not supported by the attention backend",
         fix="This backend's kernels do not take this head size: let vLLM pick another backend (remove "
             "--attention-backend / VLLM_ATTENTION_BACKEND) or use a backend that supports it (TRITON_ATTN, FLEX_ATTENTION).",
         patterns=[r"Head size (?P<head_size>\d+) is not supported by (?:\w+)", r"[Hh]ead size (?P<head_size>\d+) (?:is )?not supported"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.backend_feature_unsupported", category="attention_backend",
         title="The {backend} attention backend cannot run this model's {feature}",
         fix="The model needs a feature ({feature}) this backend lacks: drop the --attention-backend / "
             "VLLM_ATTENTION_BACKEND override (or pick a backend that has it, e.g. TRITON_ATTN; FlashInfer sinks need "
             "its TRTLLM kernels on Blackwell), or use a vLLM version where the default selection handles it.",
         # raised from the backend's metadata builder, after selection let it through
         patterns=[r"(?P<backend>FlashInfer|FlashAttention|FLASHINFER|FLASH_ATTN|Triton|TRITON_ATTN|FlexAttention|FLEX_ATTENTION)"
                   r" backend (?:currently )?does not support (?P<feature>attention sinks|sinks|sliding window|alibi|"
                   r"logits soft ?cap|block-?sparse|encoder|cross[- ]attention|[\w -]{3,30}?)(?:[,.;]|$)"],
         playbook="attention-backend", confidence=0.85),
]
