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

from triage.computecap import parse_cc
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
# majors it accepts (None = any); sparse: True/False; dtypes; kv: the KV-cache dtypes it takes (sparse
# backends only, where the choice of --kv-cache-dtype decides); heads: head sizes (sparse backends).
#   FLASHMLA_SPARSE: vllm/v1/attention/backends/mla/flashmla_sparse.py (bf16 only; auto/bfloat16/fp8_ds_mla,
#     `fp8` an alias of fp8_ds_mla in newer releases; head 576).
#   FLASHINFER_MLA_SPARSE(_SM120): vllm/v1/attention/backends/mla/flashinfer_mla_sparse.py (SM120 variant:
#     bf16 only; auto/fp8/fp8_e4m3/fp8_ds_mla, rewritten to the packed fp8_ds_mla cache; needs FlashInfer's
#     sparse MLA decode API and index_topk == 2048; head 512 only in releases after GLM-5.3 support).
BACKENDS: dict[str, dict[str, Any]] = {
    "CUTLASS_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA": {"cc": [10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)"},
    "FLASHINFER_MLA_SPARSE": {"cc": [10], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "B200/GB200 (SM100)",
                              "kv": ["auto", "float16", "bfloat16", "fp8", "fp8_e4m3"], "heads": [576]},
    "FLASHMLA": {"cc": [9, 10], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)"},
    "FLASHMLA_SPARSE": {"cc": [9, 10], "sparse": True, "dtypes": ["bfloat16"], "gpus": "H100/H200 (SM90) or B200 (SM100)",
                        "kv": ["auto", "bfloat16", "fp8_ds_mla", "fp8"], "heads": [576]},
    "FLASH_ATTN_MLA": {"cc": [9], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)"},
    "FLASH_ATTN_MLA_SPARSE": {"cc": [9], "sparse": True, "dtypes": ["float16", "bfloat16"], "gpus": "H100/H200 (SM90)",
                              "kv": ["auto", "float16", "bfloat16"]},
    "TRITON_MLA": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "any CUDA GPU"},
    "FLASHINFER_MLA_SPARSE_SM120": {"cc": [12], "sparse": True, "dtypes": ["bfloat16"],
                                    "gpus": "RTX PRO 6000 / RTX 50xx / GB10 (SM12x), in vLLM releases after PR #43477",
                                    "kv": ["auto", "fp8", "fp8_e4m3", "fp8_ds_mla"], "heads": [576],
                                    # its impl raises unless the cache is fp8_ds_mla; only newer releases
                                    # rewrite auto/fp8 to it (vllm PR #47527), so name it outright
                                    "kv_fix": "fp8_ds_mla"},
    "TRITON_MLA_SPARSE": {"cc": None, "sparse": True, "dtypes": ["float16", "bfloat16"],
                          "gpus": "any CUDA GPU (open PRs #38476/#47629 only, not in a release)",
                          "kv": ["auto", "float16", "bfloat16"], "heads": [576]},
    "FLASH_ATTN": {"cc": [8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM80 and newer"},
    "FLASHINFER": {"cc": [7, 8, 9, 10, 12], "sparse": False, "dtypes": ["float16", "bfloat16"], "gpus": "SM75 to SM121"},
    "TRITON_ATTN": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any CUDA GPU"},
    "FLEX_ATTENTION": {"cc": None, "sparse": False, "dtypes": ["float16", "bfloat16", "float32"], "gpus": "any"},
}
# A backend was turned away for the GPU itself (not for a flag): these reasons say so.
GPU_REJECTIONS = ("compute capability not supported", "only supported on", "not supported on this device")
# DSA (sparse-attention) architectures: DeepSeek-V3.2, GLM-5/5.1/5.2, GLM-5.3-Flash (NoPE), DeepSeek-V4/V4.1.
DSA_ARCHES = ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "Glm5NextForConditionalGeneration",
              "DeepseekV4ForCausalLM", "DeepseekV41ForCausalLM")


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
    cc = parse_cc(env.get("compute_capability"))
    return cc.major if cc else None


def rejects_gpu(reasons: list[str]) -> bool:
    """The backend turned this GPU away (as opposed to a flag or a missing library)."""
    return any(any(g in r for g in GPU_REJECTIONS) for r in reasons)


def kv_suggestion(name: str, kv: Any) -> str | None:
    """The --kv-cache-dtype value a sparse backend takes instead of `kv`: its own cache format where it has
    only one (SM120: fp8_ds_mla), else `auto` (a cache in the model dtype; FLASHMLA_SPARSE also stores
    `fp8` as fp8_ds_mla, but `auto` is the choice reported to start: vllm-project/recipes#565)."""
    info = BACKENDS.get(name, {})
    ok = info.get("kv")
    if not ok or kv in ok:
        return None
    return info.get("kv_fix", "auto")


def explain(fields: dict[str, Any], rejected: dict[str, list[str]], env: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Backend by backend: why it was rejected and what would make it acceptable."""
    lines: list[str] = []
    would: dict[str, str] = {}
    cc = env.get("compute_capability")
    sparse = fields.get("use_sparse") is True
    dtype = fields.get("dtype")
    kv = fields.get("kv_cache_dtype")
    head = fields.get("head_size")
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
            elif any(g in r for g in GPU_REJECTIONS):
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
            elif r.startswith("kv_cache_dtype not supported") or "does not support fp8_ds_mla" in r:
                ok = info.get("kv")
                parts.append(f"does not take KV-cache dtype {kv}" + (f" (takes {', '.join(ok)})" if ok else ""))
                alt = kv_suggestion(name, kv)
                needs.append(f"with --kv-cache-dtype {alt}" if alt else
                             "with another --kv-cache-dtype (or a vLLM version that accepts it)")
            elif r.startswith("head_size not supported"):
                heads = info.get("heads")
                nope = (" (head size 512 = 512-wide latent with no RoPE part: a NoPE model such as GLM-5.3-Flash,"
                        " qk_rope_head_dim 0)") if head == 512 else ""
                parts.append(f"does not take head size {head}" + (f" (takes {', '.join(map(str, heads))})" if heads else "")
                             + nope)
                if sparse and head == 512:
                    needs.append("with a vLLM whose sparse backend takes NoPE head size 512")
            elif r.startswith("block_size not supported"):
                parts.append(f"does not take block size {fields.get('block_size')}")
                needs.append("with another --block-size (sparse MLA backends use 64)" if sparse else "with another --block-size")
            elif "sparse MLA decode API" in r:
                # vllm/utils/flashinfer.py has_flashinfer_sparse_mla_sm120(): FlashInfer importable, with
                # trtllm_batch_decode_sparse_mla_dsv4 and the TRT-LLM MLA decode; has_flashinfer() is also
                # false when neither flashinfer-cubin nor nvcc+ninja is there for its JIT.
                parts.append("its FlashInfer has no SM120 sparse MLA decode API: FlashInfer is missing, too old, or "
                             "disabled (no flashinfer-cubin and no nvcc/ninja for its JIT)")
                needs.append("with a FlashInfer that has the SM120 sparse MLA decode (and flashinfer-cubin, or nvcc+ninja)")
            elif "index_topk=" in r or "index_topk 2048" in r:
                m = re.search(r"got (\d+)", r)
                parts.append("its kernel handles index_topk 2048 only" + (f"; this model has {m.group(1)}" if m else ""))
                needs.append("never, for this model's index_topk")
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


def sparse_here(rejected: dict[str, list[str]]) -> dict[str, list[str]]:
    """Sparse backends that accept this GPU but turned this configuration away, with their reasons."""
    return {n: rs for n, rs in rejected.items()
            if BACKENDS.get(n, {}).get("sparse") and rs and not rejects_gpu(rs)
            and not any(r.startswith("sparse not supported") for r in rs)}


def blocker_of(reasons: list[str]) -> str:
    """What kind of thing a GPU-compatible sparse backend refused: flag | library | head_size | model."""
    if any("sparse MLA decode API" in r or "is not available" in r or r.startswith("ImportError") for r in reasons):
        return "library"
    if any(r.startswith("head_size not supported") for r in reasons):
        return "head_size"
    if any("index_topk" in r or "qk_nope_head_dim" in r for r in reasons):
        return "model"
    return "flag"


def flag_fix(name: str, reasons: list[str], fields: dict[str, Any]) -> tuple[str, str] | None:
    """The one launch flag that makes `name` accept this configuration, when one does."""
    info = BACKENDS.get(name, {})
    other = [r for r in reasons if not (r.startswith("dtype not supported") or r.startswith("kv_cache_dtype not supported")
                                        or "does not support fp8_ds_mla" in r)]
    if other:
        return None  # a library, a head size or the model itself: no flag helps
    if any(r.startswith("dtype not supported") for r in reasons):
        if any(r.startswith("kv_cache_dtype not supported") for r in reasons):
            return None  # two flags; the explanation names both
        return "--dtype", (info.get("dtypes") or ["bfloat16"])[-1]
    alt = kv_suggestion(name, fields.get("kv_cache_dtype"))
    return ("--kv-cache-dtype", alt) if alt else None


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


def _infer_sparse(fields: dict[str, Any], rejected: dict[str, list[str]], arch: Any) -> None:
    """An explicit-backend rejection carries no config: the reasons and the architecture still say
    whether the model is sparse (a sparse backend is told `non-sparse not supported` by a dense model)."""
    if "use_sparse" in fields:
        return
    reasons = [r for rs in rejected.values() for r in rs]
    if any(r.startswith("non-sparse not supported") for r in reasons):
        fields["use_sparse"] = False
    elif arch in DSA_ARCHES or any(r.startswith("sparse not supported") for r in reasons) or (
            any(BACKENDS.get(n, {}).get("sparse") for n in rejected)):
        fields["use_sparse"] = True
        fields.setdefault("use_mla", True)


def _build(scan: Scan, env: dict[str, Any], signature: str, fields: dict[str, Any],
           rejected: dict[str, list[str]], used: list[Line], device: str, selected: str | None = None) -> Diagnosis:
    merged_env = dict(scan.facts)
    merged_env.update(env)
    arch = merged_env.get("architecture")
    fields = dict(fields)
    _infer_sparse(fields, rejected, arch)
    facts: dict[str, Any] = dict(fields)
    facts["device"] = device
    facts["rejected"] = rejected
    if selected:
        facts["selected_backend"] = selected
    cc = merged_env.get("compute_capability")
    if cc:
        facts["compute_capability"] = cc
    sparse = fields.get("use_sparse") is True
    mla = fields.get("use_mla") is True
    if arch in DSA_ARCHES or (sparse and mla):
        facts["model_uses_dsa"] = True
    explanation, would = explain(fields, rejected, merged_env)
    facts["would_work"] = would
    major = _cc_major(merged_env)
    gpu = f" (compute capability {cc})" if cc else ""
    if sparse:
        playbook = "attention-sparse-mla"
        here = sparse_here(rejected) if not selected else {}
        if here:
            # A sparse backend for this GPU exists in this vLLM and said no to a flag, a library or the
            # model's shape: neither an upgrade nor a plugin is the first answer.
            name, reasons = next(iter(here.items()))
            facts["case"] = "sparse_backend_rejects_config"
            facts["sparse_backend_here"] = name
            if BACKENDS.get(name, {}).get("cc"):
                facts["cc_majors"] = list(BACKENDS[name]["cc"])  # the GPU passed this backend's check
            blockers = "; ".join(reasons)
            fix_flag = flag_fix(name, reasons, fields)
            facts["blocker"] = blocker_of(reasons)
            if fix_flag:
                facts["fix_flag"], facts["fix_value"] = fix_flag
            title = f"{name} can run this DSA model on this GPU{gpu} but rejects its configuration ({blockers})"
            if fix_flag:
                fix = (f"{name} is this GPU's sparse MLA backend and turns away only the flag: relaunch with "
                       f"`{fix_flag[0]} {fix_flag[1]}`. No upgrade or plugin is needed.")
            elif any("sparse MLA decode API" in r for r in reasons):
                fix = (f"{name} needs FlashInfer's SM120 sparse MLA decode: install the FlashInfer version this vLLM "
                       "pins, with flashinfer-cubin (or nvcc and ninja on PATH for its JIT), in vLLM's environment.")
            elif any(r.startswith("head_size not supported") for r in reasons) and fields.get("head_size") == 512:
                fix = (f"This vLLM's {name} takes the 576-wide DeepSeek layout only; this NoPE model (head size 512, "
                       "GLM-5.3-Flash) needs a vLLM whose sparse backend takes 512, or triage's bundled Triton backend "
                       "(`triage apply sparse-mla`, which takes 512) with --attention-backend CUSTOM.")
            else:
                fix = f"{name} runs on this GPU but not with this model or build: see the reasons below."
        else:
            if major is not None and major not in (9, 10):
                facts["case"] = "sparse_mla_unsupported_gpu"
            elif major is None and rejected and all(rejects_gpu(rs) or any(r.startswith("sparse not supported") for r in rs)
                                                    for rs in rejected.values()):
                facts["case"] = "sparse_mla_unsupported_gpu"
            title = f"No sparse MLA attention backend for this DSA model on this GPU{gpu}"
            fix = ("This model (DeepSeek-V3.2 / GLM-5 family) needs a sparse MLA backend; the ones this vLLM tried do not "
                   "run on this GPU. Upgrade to a vLLM with a sparse MLA backend for this GPU if one exists, or install "
                   "triage's bundled Triton backend (`triage apply sparse-mla`) and launch with --attention-backend CUSTOM.")
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


# --- `--attention-backend CUSTOM` with nothing registered in that slot ---------------------------------
# vllm/v1/attention/backends/registry.py AttentionBackendEnum.get_path(); plugins are loaded by
# vllm/plugins/__init__.py load_plugins_by_group(), which logs (at DEBUG for vllm.general_plugins)
# "Available plugins for group ...", "- NAME -> VALUE", and "Loading plugin NAME" only when VLLM_PLUGINS
# is set; a plugin that raises on import is logged as "Failed to load plugin NAME".
CUSTOM_UNREGISTERED_RE = lazy(r"Backend (?P<backend>CUSTOM) must be registered before use")
PLUGIN_AVAILABLE_RE = lazy(r"^- (?P<name>[\w.-]+) -> (?P<value>\S+)")
PLUGIN_LOADING_RE = lazy(r"Loading plugin (?P<name>[\w.-]+)")
PLUGIN_FAILED_RE = lazy(r"Failed to load plugin (?P<name>[\w.-]+)")
PLUGIN_NAME = "triage_sparse_mla"


def _custom_unregistered(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    hit = None
    for ln in scan.lines:
        if "must be registered" in ln.text and CUSTOM_UNREGISTERED_RE.search(ln.text):
            hit = ln
            break
    if hit is None:
        return None
    available: dict[str, str] = {}
    loading: set[str] = set()
    failed: set[str] = set()
    for ln in scan.lines:
        t = ln.text
        if "plugin" not in t and " -> " not in t:
            continue
        m = PLUGIN_AVAILABLE_RE.search(t.strip())
        if m and ":" in m.group("value"):
            available[m.group("name")] = m.group("value")
        m = PLUGIN_LOADING_RE.search(t)
        if m:
            loading.add(m.group("name"))
        m = PLUGIN_FAILED_RE.search(t)
        if m:
            failed.add(m.group("name"))
    merged = dict(scan.facts)
    merged.update(env)
    facts: dict[str, Any] = {"backend": "CUSTOM", "plugins_available": sorted(available)}
    arch = merged.get("architecture")
    if arch in DSA_ARCHES:
        facts.update({"use_sparse": True, "use_mla": True, "model_uses_dsa": True})
    explanation: list[str] = []
    ours = [n for n in available if n == PLUGIN_NAME or available[n].startswith(PLUGIN_NAME + ".")]
    if failed & (set(ours) | {PLUGIN_NAME}):
        facts["plugin_state"] = "failed_to_load"
        title = "The CUSTOM attention backend's plugin failed to load"
        fix = (f"vLLM found the {PLUGIN_NAME} plugin but importing it failed (see 'Failed to load plugin' above): "
               "fix that error (often a torch/triton missing from vLLM's environment), or reinstall it with "
               "`triage apply sparse-mla`.")
    elif ours and loading and not (set(ours) & loading):
        # "Loading plugin X" is only printed when VLLM_PLUGINS is set: ours was discovered and skipped.
        facts["plugin_state"] = "filtered_by_vllm_plugins"
        facts["plugins_loaded"] = sorted(loading)
        title = "VLLM_PLUGINS leaves out the plugin that registers the CUSTOM attention backend"
        fix = (f"VLLM_PLUGINS is set and lists only {', '.join(sorted(loading))}: vLLM skips {ours[0]}, so nothing "
               f"registers CUSTOM. Add {ours[0]} to VLLM_PLUGINS (comma-separated) or unset it.")
    else:
        facts["plugin_state"] = "not_registered"
        title = "--attention-backend CUSTOM, but no plugin registered a CUSTOM backend"
        fix = ("CUSTOM is an empty slot that a vLLM plugin fills: the plugin (for the bundled sparse MLA backend, "
               f"the {PLUGIN_NAME} package) is not installed in vLLM's own environment, or VLLM_PLUGINS excludes it. "
               "Install it with `triage apply sparse-mla` (it checks VLLM_PLUGINS), or drop --attention-backend CUSTOM.")
        if not available:
            explanation.append("The log does not list vLLM's plugins (they are logged at DEBUG): rerun with "
                               "VLLM_LOGGING_LEVEL=DEBUG to see which plugins vLLM found and loaded.")
    if merged.get("vllm_version"):
        from triage_sparse_mla.support import vllm_supported

        ok, why = vllm_supported(str(merged["vllm_version"]))
        if not ok:
            explanation.append(why)
    return Diagnosis(
        category="attention_backend", signature="attention.custom_backend_unregistered", title=title,
        confidence=0.95, evidence=[Evidence(hit.no, hit.shown)], facts=facts,
        fix=Fix(fix, "attention-sparse-mla" if facts.get("use_sparse") else "attention-backend"),
        first_line=hit.no, explanation=explanation,
    )


RULES = [
    Rule(signature="attention.no_valid_backend", category="attention_backend",
         title="No valid attention backend", fix="", check=_diagnose, confidence=0.95,
         playbook="attention-backend",
         emits=("attention.selected_backend_invalid", "attention.invalid_backend_legacy")),
    Rule(signature="attention.custom_backend_unregistered", category="attention_backend",
         title="The CUSTOM attention backend is not registered", fix="", check=_custom_unregistered, confidence=0.95,
         playbook="attention-sparse-mla"),
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
         patterns=[r"Unknown attention backend: '?(?P<backend>[\w.]+)'?", r"Invalid attention backend: '?(?P<backend>[\w.]+)'?"],
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
    # Sparse MLA backends that only take a packed KV layout (vllm/v1/attention/backends/mla/
    # flashinfer_mla_sparse_sm120.py; the B12X path): a bf16 KV cache reaches them when the model's
    # KV dtype was forced (--kv-cache-dtype bfloat16) or not canonicalised by this vLLM.
    Rule(signature="attention.sparse_kv_layout_required", category="attention_backend",
         title="{backend} needs the packed fp8_ds_mla KV cache; this launch gave it kv_cache_dtype {kv_cache_dtype}",
         fix="Launch with --kv-cache-dtype fp8 (vLLM stores it as fp8_ds_mla for this backend) or drop the "
             "--kv-cache-dtype override. If the model needs a bf16 KV cache (NoPE models such as GLM-5.3-Flash, "
             "whose rows have no 64-wide RoPE part), this backend cannot serve it: triage's bundled backend "
             "takes bf16 KV (`triage apply sparse-mla`, then --attention-backend CUSTOM).",
         patterns=[r"(?P<backend>FLASHINFER_MLA_SPARSE_SM120|B12X sparse MLA) requires the packed fp8_ds_mla "
                   r"(?:or nvfp4 )?KV cache(?: layout)?; got kv_cache_dtype='?(?P<kv_cache_dtype>[\w]+)'?"],
         playbook="attention-sparse-mla", confidence=0.95),
    # csrc/cache_kernels.cu, concat_and_cache_mla: the fp8_ds_mla row is 512 fp8 latents, 4 scales
    # and a 64-wide RoPE part; a NoPE model (qk_rope_head_dim=0, head size 512) has no RoPE part.
    Rule(signature="attention.fp8_ds_mla_shape", category="attention_backend",
         title="The fp8_ds_mla KV cache cannot hold this model's MLA rows ({what})",
         fix="fp8_ds_mla is DeepSeek-V3.2's 656-byte row (512 latents + 64 RoPE values); NoPE models such as "
             "GLM-5.3-Flash do not have that shape. Drop --kv-cache-dtype fp8 so the KV cache stays bf16 (on "
             "H100/H200 FLASHMLA_SPARSE takes it). On SM12x the only upstream sparse backend "
             "(FLASHINFER_MLA_SPARSE_SM120) insists on fp8_ds_mla: use triage's bundled backend, which takes "
             "head size 512 with a bf16 KV cache (`triage apply sparse-mla`, then --attention-backend CUSTOM).",
         patterns=[r"(?P<what>pe_dim must be 64 for fp8_ds_mla)", r"(?P<what>kv_lora_rank must be 512 for fp8_ds_mla)",
                   r"(?P<what>kv_cache\.size\(2\) must be 656 bytes for fp8_ds_mla)"],
         playbook="attention-sparse-mla", confidence=0.95),

]
