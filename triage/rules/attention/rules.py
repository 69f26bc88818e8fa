"""The attention-backend rules: the selector's refusal (a custom check), the CUSTOM slot, and plain patterns."""

from __future__ import annotations

from triage.lazyre import lazy
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.attention.explain import (BACKENDS, DSA_ARCHES, blocker_of, cc_major, explain, flag_fix, sparse_evidence,
                                            infer_sparse, rejects_gpu, sparse_here)
from triage.rules.attention.parse import (NO_VALID_RE, OLD_INVALID_RE, SELECTED_RE, fields_nearby, join_wrapped,
                                          parse_config, parse_reasons, split_top)
from triage import versions
from triage.rules.base import Rule


def _diagnose(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for idx, ln in enumerate(scan.lines):
        t = ln.text
        if "attention backend" not in t and "Selected backend" not in t:
            continue
        if "No valid attention backend found" in t:
            text, used = join_wrapped(scan, idx)
            m = NO_VALID_RE.search(text)
            if m:
                fields, reasons_text = parse_config(m.group("rest"))
                rejected = parse_reasons(reasons_text)
                return _build(scan, env, "attention.no_valid_backend", fields, rejected, used, m.group("device"))
        m = SELECTED_RE.search(t)
        used = [ln]
        if m is None and "Selected backend" in t and "is not valid" in t:
            text, used = join_wrapped(scan, idx)
            m = SELECTED_RE.search(text)
        if m:
            reasons = [r.strip().strip("'\"") for r in split_top(m.group("reasons").strip()[1:-1])]
            fields = fields_nearby(scan, idx)
            return _build(scan, env, "attention.selected_backend_invalid", fields,
                          {m.group("backend"): reasons}, used, "cuda", selected=m.group("backend"))
        m = OLD_INVALID_RE.search(t)
        if m:
            fix = ("This old vLLM hard-codes its backends and prints no reasons: check VLLM_ATTENTION_BACKEND, "
                   "the dtype and head size against the GPU, or upgrade vLLM for a detailed reason list.")
            if m.group("v1"):
                engine = "the V1 engine" if m.group("v1") == "True" else "the V0 engine"
                kind = "MLA" if m.group("mla") == "True" else "standard (non-MLA)"
                fix = (f"VLLM_ATTENTION_BACKEND forces a backend this vLLM has no {kind} implementation of for "
                       f"{engine}: unset VLLM_ATTENTION_BACKEND to let vLLM choose, or set one of the backends its "
                       "documentation lists for this engine and model type (older names such as XFORMERS or "
                       "FLASHINFER_VLLM_V1 were removed or renamed).")
            return Diagnosis(
                category="attention_backend", signature="attention.invalid_backend_legacy",
                title="vLLM found no attention backend for this model on this device",
                confidence=0.8, evidence=[Evidence(ln.no, ln.shown)],
                facts={"device": m.group("device"), **({"use_v1": m.group("v1"), "use_mla": m.group("mla")}
                                                       if m.group("v1") else {})},
                fix=Fix(fix, "attention-backend"),
                first_line=ln.no)
    return _reasons_only(scan, env)


# The selector's reason list pasted without its preamble ("Reasons: {FLASH_ATTN: [head_size not supported],
# TRITON_ATTN: [sink setting not supported]}", or one "NAME: [reason]" per line): the reasons are the words of
# AttentionBackend.validate_configuration (v1/attention/backend.py, 0.11 .. 0.33). vLLM logs the same list at
# DEBUG when some backend still fits ("Some attention backends are not valid ..."): that note is no failure.
REASON_WORDS = (r"(?:head_size|dtype|kv_cache_dtype|block_size|compute capability|sink setting|attention sinks|sparse|"
                r"non-sparse|MLA|non-MLA|sliding window|R-SWA|per-head quant scales|non-causal attention|batch invariance|"
                r"KV connector|PCP|DCP|partial multimodal token full attention|attention type \S+) not supported")
REASONS_ONLY_RE = lazy(rf"(?:^|[{{\s,])(?:AttentionBackendEnum\.)?[A-Z][A-Z0-9_]+: \[[^\]]*{REASON_WORDS}",
                       needles=("not supported",))


def _reasons_only(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    short = scan.lines_total <= FRAGMENT_LINES
    used: list[Line] = []
    for ln in scan.lines:
        t = ln.text
        if "not supported" not in t or "Some attention backends are not valid" in t or ln.level in ("DEBUG", "INFO"):
            continue
        if ln.level not in ("ERROR", "CRITICAL") and not short:
            continue
        if REASONS_ONLY_RE.search(t):
            used.append(ln)
    if not used:
        return None
    body = " ".join(ln.text.strip() for ln in used)
    body = body.split("Reasons:", 1)[-1].strip().strip("'\"").rstrip(".")
    if not body.startswith("{"):
        body = "{" + ", ".join(ln.text.strip().strip("{},.") for ln in used) + "}"
    rejected = parse_reasons(body)
    if not rejected:
        return None
    d = _build(scan, env, "attention.no_valid_backend", {}, rejected, used, "cuda")
    d.confidence = 0.8  # the reasons without the selector's sentence: a paste of its message, most likely
    if "head_size" not in d.facts:
        names = ", ".join(f"{k} ({'; '.join(v)})" for k, v in list(rejected.items())[:4])
        d.title = f"No attention backend accepts this configuration: {names}"
    return d


def _build(scan: Scan, env: dict[str, Any], signature: str, fields: dict[str, Any],
           rejected: dict[str, list[str]], used: list[Line], device: str, selected: str | None = None) -> Diagnosis:
    merged_env = dict(scan.facts)
    merged_env.update(env)
    arch = merged_env.get("architecture")
    fields = dict(fields)
    infer_sparse(fields, rejected, arch)
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
    # A block size or KV-cache dtype the launch did not set was chosen by vLLM (its platform code forces the
    # block size per backend): say so, so that the user is not sent to undo a flag they never passed.
    args = scan.facts.get("launch_args")
    if isinstance(args, dict) and args:
        for key, flag in (("block_size", "--block-size"), ("kv_cache_dtype", "--kv-cache-dtype")):
            val = fields.get(key)
            if val not in (None, "auto") and key not in args and any(
                    f"does not take {'block size' if key == 'block_size' else 'KV-cache dtype'} {val}" in ln
                    for ln in explanation):
                explanation.append(f"{key} {val} was not set by this launch ({flag} is not among its non-default "
                                   "args): vLLM chose it for the backend it preferred")
                facts[f"{key}_chosen_by"] = "vllm"
    facts["would_work"] = would
    major = cc_major(merged_env)
    gpu = f" (compute capability {cc})" if cc else ""
    fix_sparse_tail = ("Upgrade to a vLLM with a sparse MLA backend for this GPU if one exists, or install triage's "
                       "bundled Triton backend (`triage apply sparse-mla`) and launch with --attention-backend CUSTOM.")
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
                   "run on this GPU. " + fix_sparse_tail)
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
        who, how = chosen_by(scan, selected)
        facts["chosen_by"] = who
        version = merged_env.get("vllm_version")
        explanation = [("Only the selected backend was tried: vLLM did not look for another one."
                        if ln.startswith("None of the listed backends is a sparse MLA backend") else ln)
                       for ln in explanation]
        reasons_said = ", ".join(rejected.get(selected) or [])
        # vLLM forces CUTLASS_MLA / FLASHINFER_MLA only on compute capability 10.x: its choice says which GPU
        gpu_major = major if major is not None else (10 if who == "vllm" and selected in ("CUTLASS_MLA", "FLASHINFER_MLA")
                                                     else None)
        better = _better_sparse(version, gpu_major) if sparse else None
        if better:
            facts["backend_for_this_gpu"] = better
        if who == "vllm":
            title = f"vLLM itself selected {selected}, which cannot run this configuration{gpu}"
            fix = (f"The launch names no attention backend ({how}): vLLM{' ' + str(version) if version else ''}'s own "
                   f"platform code chose {selected} and then rejected it ({reasons_said}). This is vLLM's choice, not a "
                   "flag of yours: name a backend that fits with --attention-backend"
                   + (f" {better}" if better else " (see the reasons below)")
                   + ", or use a vLLM release that does not force it (report it upstream).")
        else:
            by = how or "--attention-backend, -ac.backend or VLLM_ATTENTION_BACKEND"
            title = f"The selected attention backend {selected} cannot run this configuration{gpu}"
            fix = (f"{selected} was chosen explicitly ({by}) and rejects this model/GPU ({reasons_said}): drop the override "
                   "to let vLLM choose" + (f" (this vLLM has {better} for it)" if better else "")
                   + ", or pick a backend that fits.")
            if sparse and not better:
                fix += (" If vLLM's own choice then finds no sparse MLA backend for this GPU: "
                        + fix_sparse_tail[0].lower() + fix_sparse_tail[1:])
    return Diagnosis(
        category="attention_backend", signature=signature, title=title, confidence=0.95,
        evidence=[Evidence(ln.no, ln.shown) for ln in used[:6]], facts=facts,
        fix=Fix(fix.strip(), playbook), first_line=used[0].no, explanation=explanation,
    )


FORCED_RE = lazy(r"(?i)forc(?:e|ing)\w* (?:the )?(?P<b>[A-Z][A-Z0-9_]+)(?: attention)? backend|"
                 r"(?P<b2>[A-Z][A-Z0-9_]+) backend (?:is )?forced")
ENV_BACKEND_RE = lazy(r"VLLM_ATTENTION_BACKEND[=: '\"]+(?P<b>[A-Z][A-Z0-9_]+)")
FLAG_BACKEND_RE = lazy(r"(?:--attention-backend|-ac\.backend|--attention-config\.backend)[= ]['\"]?(?P<b>[A-Z][A-Z0-9_]+)")


def chosen_by(scan: Scan, backend: str) -> tuple[str | None, str]:
    """Who picked `backend`: 'user' (a flag or VLLM_ATTENTION_BACKEND in the log), 'vllm' (its platform code
    forced it, or the launch's non-default args name no backend), or None when the log does not say."""
    args = scan.facts.get("launch_args")
    if isinstance(args, dict):
        ab = args.get("attention_backend")
        ac = args.get("attention_config")
        if ab is None and isinstance(ac, dict):
            ab = ac.get("backend")
        elif ab is None and isinstance(ac, str) and "backend" in ac:
            ab = ac
        if ab is not None and backend in str(ab).upper():
            return "user", f"--attention-backend {backend} in the launch's non-default args"
    for ln in scan.lines:
        t = ln.text
        if "VLLM_ATTENTION_BACKEND" in t:
            m = ENV_BACKEND_RE.search(t)
            if m and m.group("b") == backend:
                return "user", f"VLLM_ATTENTION_BACKEND={backend}"
        if "backend" in t:
            m = FLAG_BACKEND_RE.search(t)
            if m and m.group("b") == backend:
                return "user", f"--attention-backend {backend} on the launch line"
            m = FORCED_RE.search(t)
            if m and (m.group("b") or m.group("b2")) == backend:
                return "vllm", f"vLLM logged that it forces {backend}"
    if isinstance(args, dict) and args:
        return "vllm", "the non-default args it logged list none"
    return None, ""


def _better_sparse(version: Any, major: int | None) -> str | None:
    """The sparse MLA backend this vLLM picks by itself on this GPU, when the table says it has one."""
    if major in (9, 10):
        return "FLASHMLA_SPARSE"
    since = BACKENDS["FLASHINFER_MLA_SPARSE_SM120"].get("since")
    v = str(version or "")
    if major == 12 and since and v and not v.startswith("0.1.dev"):
        try:
            if versions.ge(v, since):
                return "FLASHINFER_MLA_SPARSE_SM120"
        except (ValueError, TypeError):
            return None
    return None


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


def _kv_layout_facts(backend: str, scan: Scan) -> dict[str, Any]:
    """The sparse backend this GPU has turned away only the KV-cache dtype: the flag and the value it takes."""
    facts = sparse_evidence(scan, backend)
    facts.update(case="sparse_backend_rejects_config", sparse_backend_here=backend, blocker="kv_cache_dtype",
                 fix_flag="--kv-cache-dtype", fix_value=BACKENDS.get(backend, {}).get("kv_fix") or "fp8")
    return facts


def _feature_advice(m, line, scan) -> dict[str, Any]:
    """Cascade attention is not a backend anyone picks: vLLM turns it on for batches with a shared prefix."""
    if m.group("backend").lower().startswith("cascade"):
        return {"backend_words": "Cascade attention", "advice": ("vLLM applied cascade attention (used for batches that share a long prefix) to a model whose "
                           f"layers need {m.group('feature')}, which cascade attention lacks: a vLLM bug of this release. "
                           "Launch with --disable-cascade-attn (or upgrade vLLM, which skips cascade attention for "
                           "these models).")}
    return {"backend_words": f"The {m.group('backend')} attention backend", "advice": (f"The model needs a feature ({m.group('feature')}) this backend lacks: drop the "
                       "--attention-backend / VLLM_ATTENTION_BACKEND override (or pick a backend that has it, e.g. "
                       "TRITON_ATTN; FlashInfer sinks need its TRTLLM kernels on Blackwell), or use a vLLM version "
                       "where the default selection handles it. On GPUs older than Ampere vLLM falls back to "
                       "FlexAttention or xFormers, which lack sliding window and sinks: such models need an Ampere "
                       "or newer GPU there.")}


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
         patterns=[r"Unknown attention backend: '?(?P<backend>[\w.]+)'?", r"Invalid attention backend: '?(?P<backend>[\w.]+)'?",
                   # selector.py 0.6 .. 0.7
                   r"Invalid attention backend '(?P<backend>[\w.]+)'\. Available backends",
                   # AttentionBackendEnum[value.upper()] / _Backend[name] on a name this release does not have
                   # (config/attention.py, arg_utils.py 0.16+): a bare KeyError with the name
                   r"KeyError: '(?P<backend>(?:XFORMERS|FLASH_ATTN|FLASHINFER|FLASHMLA|TORCH_SDPA|TRITON_ATTN|TRITON_MLA|"
                   r"ROCM_FLASH|ROCM_ATTN|ROCM_AITER|CUTLASS_MLA|FLEX_ATTENTION|PALLAS|IPEX|TREE_ATTN|CPU_ATTN|"
                   r"NO_ATTENTION|BLOCK_SPARSE_FLASH_ATTN|DUAL_CHUNK_FLASH_ATTN|DIFFERENTIAL_FLASH_ATTN|OPENVINO|"
                   r"HPU_ATTN)(?:_[A-Z0-9]+)*)'",
                   # kern: the Enum's own refusal of a value (AttentionBackendEnum("x") / _Backend(x))
                   r"'(?P<backend>[\w.-]+)' is not a valid (?:_Backend|AttentionBackendEnum|_MHA_Backend|MLAPrefillBackendEnum)"],
         playbook="attention-backend", confidence=0.9),
    Rule(signature="attention.fa_version_unsupported", category="attention_backend",
         title="FlashAttention cannot run on this GPU ({version_words})",
         fix="This GPU (e.g. V100/T4, compute capability below 8.0) has no FlashAttention build, and this vLLM version "
             "still picked it: choose another backend (--attention-backend TRITON_ATTN, older: "
             "VLLM_ATTENTION_BACKEND=XFORMERS) or upgrade vLLM, whose selector skips FlashAttention there.",
         patterns=[r"Unsupported FA version: (?P<version>\w+)"],
         # get_flash_attn_version() returns None on GPUs no FlashAttention build supports
         facts=lambda m, line, scan: {"version_words": "no FlashAttention version supports it"
                                      if m.group("version") == "None" else f"FA version {m.group('version')}"},
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.head_size_unsupported", category="attention_backend",
         title="Head size {head_size} is not supported by the attention backend",
         fix="This backend's kernels do not take this head size: let vLLM pick another backend (remove "
             "--attention-backend / VLLM_ATTENTION_BACKEND) or use a backend that supports it (TRITON_ATTN, FLEX_ATTENTION).",
         patterns=[r"Head size (?P<head_size>\d+) is not supported by (?:\w+)", r"[Hh]ead size (?P<head_size>\d+) (?:is )?not supported"],
         playbook="attention-backend", confidence=0.85),
    Rule(signature="attention.backend_feature_unsupported", category="attention_backend",
         title="{backend_words} cannot run this model's {feature}",
         fix="{advice}",
         # raised from the backend's metadata builder or forward, after selection let it through: "<backend>
         # [backend] [currently] does not support <feature>[ yet]" (v1/attention/backends/*.py, 0.8 .. 0.33;
         # cascade attention's asserts in flash_attn.py)
         patterns=[r"(?P<backend>FlashInfer|FlashAttention|FLASHINFER|FLASH_ATTN|Triton|TRITON_ATTN|FlexAttention|"
                   r"FLEX_ATTENTION|Cascade attention|b12x|CPU_ATTN|FA[234]|[xX][fF]ormers|XFORMERS)"
                   # (a GPU family is no model feature: "xformers does not support Blackwell GPUs" is the GPU's
                   # generation against the library's build, read by the unsupported_gpu / kernel_library rules)
                   r"(?: backend)? (?:currently )?does not support "
                   r"(?!(?:the |this |your |these |NVIDIA )?(?:\w+ )?(?:(?:Blackwell|Hopper|Ada|Ampere|Turing|Volta|"
                   r"Pascal|RTX|GeForce)\b|sm_?\d|SM ?\d|GPUs?\b|compute capability))"
                   r"(?P<feature>attention sinks|sinks|sliding window|"
                   r"ALiBi|alibi(?: slopes)?|logits soft ?cap|block-?sparse|encoder|cross[- ]attention|kv sharing|"
                   r"quantized kv-cache|[\w -]{3,30}?)(?: yet)?(?:[,.;]| ?!+|$)"],
         facts=_feature_advice, playbook="attention-backend", confidence=0.85),
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
         facts=lambda m, line, scan: _kv_layout_facts(m.group("backend"), scan),
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
         facts=lambda m, line, scan: sparse_evidence(scan, also="the fp8_ds_mla KV cache, the sparse MLA (DSA) layout"),
         playbook="attention-sparse-mla", confidence=0.95),

]

# xFormers (the default attention of older vLLM on pre-Ampere GPUs) has no kernel for these inputs.
RULES += [
    Rule(signature="attention.xformers_no_operator", category="attention_backend",
         title="xFormers has no attention kernel for these inputs on this GPU",
         fix="xFormers' memory_efficient_attention has no kernel for this GPU / dtype / head size: use --dtype "
             "half on pre-Ampere GPUs, pick another attention backend (VLLM_ATTENTION_BACKEND / "
             "--attention-backend), or install the xformers build that matches torch.",
         patterns=[r"No operator found for `memory_efficient_attention_(?:forward|backward)` with inputs",
                   # xformers <= 0.0.21 (vLLM 0.1-0.2): _ensure_op_supports_or_raise's ValueError
                   r"Operator `memory_efficient_attention\w*` does not support inputs"],
         playbook="attention-backend", confidence=0.85),
]

# The FlashAttention kernels' own checks (TORCH_CHECK in vllm-flash-attention's flash_api.cpp, the same
# strings in the flash-attn package): the backend was selected, then its kernel refused the head size or dtype.
# ("FlashAttention only supports Ampere GPUs or newer" is the GPU's age: gpu.compute_capability_too_low.)
FA_KERNEL_REFUSALS = [
    r"(?P<what>This flash attention build does not support [\w -]{3,60})",
    r"(?P<what>FlashAttention forward only supports head dimension at most \d+)",
    r"(?P<what>FlashAttention (?:on Ampere/Ada cards )?only supports? fp16(?:, bf16,? and fp8_e4m3| and bf16) data type)",
    r"(?P<what>If V headdim is different from Q/K dim, we only support)",
    r"(?P<what>Only Hopper supports different V headdim)",
]

FA_KERNEL_ADVICE = ("FlashAttention was chosen but its kernel does not take this model's head size or dtype (a head "
             "dimension that is not a multiple of 32 or above 256, different Q/K and V head sizes, or fp32): use "
             "another attention backend (--attention-backend TRITON_ATTN or FLEX_ATTENTION; older vLLM: "
             "VLLM_ATTENTION_BACKEND=XFORMERS or VLLM_USE_V1=0), run in float16/bfloat16, or upgrade vLLM, whose "
             "selector checks the head size before picking FlashAttention.")

RULES += [
    Rule(signature="attention.flash_attn_kernel_refused", category="attention_backend",
         title="The FlashAttention kernel cannot run this model's attention ({what})",
         fix="{advice}",
         patterns=FA_KERNEL_REFUSALS, playbook="attention-backend", confidence=0.85,
         facts=lambda m, line, scan: {"advice": FA_KERNEL_ADVICE}),
]


# --- an attention backend named in a refusal, in whatever module or words ----------------------------
# Backends refuse a model or a feature in many places and wordings across releases (their own impls, the
# selector, model code, the V0 model runner, a connector): "XFormers does not support attention logits soft
# capping.", "Torch SDPA backend is only used for the CPU device.", "Qwen2-VL does not support
# _Backend.FLASHINFER backend now.", "Please use Flashinfer backend for models with logits_soft_cap",
# "FlashInfer backend on SM90 currently crashes with sliding-window attention layers", "Only FlashAttention
# backend is supported for now". What they share: a backend's name next to a refusal. The selector's INFO
# notes ("Cannot use FlashAttention-2 backend for Volta and Turing GPUs.", "Using XFormers backend.") say the
# same in passing and are harmless when start-up goes on: only exceptions, ERROR lines and a short paste's
# bare lines count.
BACKEND_NAME = (r"(?:(?:_Backend|AttentionBackendEnum|_MHA_Backend|AttentionBackend)\.([A-Z][A-Z0-9_]+)|"
                r"(FlashAttention(?:-?[234])?|Flash[ -]Attention|FlashInfer|Flashinfer|flashinfer|XFormers|"
                r"xFormers|xformers|FlexAttention|Torch SDPA|TorchSDPA|ROCm ?Flash ?Attention|Triton attention|"
                # kern: MLA and vendor kernels' backends as messages spell them (FA3, FlashMLA, TRTLLM, AITER's)
                r"FlashMLA(?:[ _-]?[Ss]parse)?|Flash ?MLA|Triton ?MLA|CUTLASS[ _]?MLA|Cutlass ?MLA|FlashInfer[ _-]?MLA|"
                r"Flash ?Attention ?[234]|FlashAttention[ -]?[234]|\bFA[234]\b|TRTLLM(?:[ _-]?(?:FMHA|attention|gen|MLA))?|"
                r"trtllm-gen|(?:AITER|Aiter)[ _](?:MLA|FA|MHA|[Aa]ttention)|(?:ROCm )?[Ff]lash[ -]?[Aa]ttention|"
                r"PagedAttention|[Pp]aged [Aa]ttention|"
                r"(?:FLASH_ATTN|FLASHINFER|FLASHMLA|FLASH_MLA|TRITON_ATTN|TRITON_MLA|CUTLASS_MLA|FLEX_ATTENTION|"
                r"XFORMERS|TORCH_SDPA|ROCM_FLASH|ROCM_ATTN|ROCM_AITER|PALLAS|CPU_ATTN|TREE_ATTN)(?:_[A-Z0-9]+)*)|"
                # a backend not named ("... not supported by this backend"): counted only with attention words
                r"(?:this|the (?:selected|current|chosen)) attention(?= backend)|(?:this|the (?:selected|current|chosen))(?= backend))")
BACKEND_NAME_RE = lazy(BACKEND_NAME)
# the registry's names (_Backend / AttentionBackendEnum members, 0.6 .. 0.33): a backend by name, never a library
REGISTRY_NAME = (r"(?:FLASH_ATTN|FLASHINFER|FLASHMLA|FLASH_MLA|TRITON_ATTN|TRITON_MLA|CUTLASS_MLA|FLEX_ATTENTION|XFORMERS|"
                 r"TORCH_SDPA|ROCM_FLASH|ROCM_ATTN|ROCM_AITER|PALLAS|CPU_ATTN|TREE_ATTN)(?:_[A-Z0-9]+)*")
REFUSAL = (r"(?:does not support|doesn't support|do not support|(?:is|are) not (?:yet )?supported|not supported (?:by|with|in|for)|"
           r"(?:is|are) not implemented|not implemented for|(?:is|are) only (?:used|supported|available) (?:for|on|with)|"
           r"(?:is|are) unsupported|currently crashes|Please use|please use|must be used|is required for)")
BACKEND_REFUSAL_RE = lazy(rf"(?:{BACKEND_NAME}(?: backend)?\W{{0,3}}(?:\w+\W+){{0,4}}?{REFUSAL}|"
                          rf"{REFUSAL}\W+(?:\w+\W+){{0,5}}?(?:the )?{BACKEND_NAME}(?: attention)? backend|"
                          rf"(?:is|are) only supported (?:by|with|on|in) (?:the )?{BACKEND_NAME}|"
                          rf"Only {BACKEND_NAME} backend is supported|"
                          rf"(?:not implemented|not supported|unsupported) (?:for|by|with|in) (?:the )?{BACKEND_NAME}|"
                          rf"(?:{BACKEND_NAME}(?: attention)? backend|{REGISTRY_NAME}) (?:currently |only )?requires? "
                          rf"(?!GPUs with sm|CUDA >=|sm\d))",
                          needles=("support", "implemented", "only", "crashes", "lease use", "must be used",
                                   "required for", "Only", "require"))
# What other rules own or what is not a refusal of the backend: the GPU's generation, a missing package,
# the selector's fallback notes, CUDA-graph modes, the sampler's fallback.
BACKEND_REFUSAL_NOT = lazy(r"or newer|compute capability|Ampere GPUs|GPUs with sm|No module named|not installed|"
                           r"package is not found|pip install|Cannot use|[Ff]alling back|fall back|CUDAGraphMode|"
                           r"No valid attention backend|Selected backend|is not valid|sampler|top-p|top-k|"
                           # FlashInfer's and others' MoE / GEMM kernels share the backend's name
                           r"MoE|[Mm]oe|[Ee]xperts|GEMM|gemm",
                           needles=("newer", "capability", "Ampere", "sm", "module", "installed", "found", "pip",
                                    "Cannot", "alling back", "fall back", "CUDAGraphMode", "valid", "Selected",
                                    "sampler", "top-", "MoE", "oe", "xperts", "GEMM", "gemm"))
ATTENTION_WORDS_RE = lazy(r"[Aa]ttention|[Ss]liding.window|\bsinks?\b|soft.?cap|head.?size|alibi|ALiBi|encoder|cross.attention",
                          needles=("ttention", "liding", "sink", "cap", "head", "alibi", "ALiBi", "encoder"))
# A backend's implementation called with an argument it does not take: the model (or a plugin) needs a feature
# this release's backend lacks ("FlashAttentionImpl.__init__() got an unexpected keyword argument 'sinks'").
IMPL_ARG_RE = lazy(r"(?P<impl>\w*(?:Attention|Attn|Infer|MLA|SDPA|Xformers|XFormers|Triton)\w*Impl)\.__init__\(\) got an "
                   r"unexpected keyword argument '(?P<arg>\w+)'", needles=("Impl.__init__() got an unexpected keyword",))
# A feature that needs something of whatever backend runs it: context parallelism needs backends that return the
# softmax LSE (v1/worker/cp_utils.py, 0.2x ..), and a backend's metadata builder (every V1 backend has one, the
# per-model sparse MLA backends too) failing its own invariant is that backend's failure, whatever module holds it.
BACKEND_REQUIREMENT_RE = lazy(r"(?:Context Parallelism \((?:DCP|PCP)\)|\b(?:DCP|PCP)) requires attention (?:backend|impl|"
                              r"implementation)s?|(?P<builder>\w+MetadataBuilder)\b(?:\.\w+)?",
                              needles=("requires attention", "MetadataBuilder"))
# An exception quoted beside the backend's metadata step (prose that names the function, not the module):
# the builders' build / build_for_cudagraph_capture and their _compute_* / _build_* *metadata helpers.
METADATA_STEP_RE = lazy(r"\w*Error\b.{0,300}?\b(?P<step>_?(?:compute|build)_\w*metadata\w*|build_for_cudagraph_capture|"
                        r"build_for_drafting)\b|\b(?P<step2>_?(?:compute|build)_\w*metadata\w*|build_for_cudagraph_capture)\b"
                        r".{0,200}?\w*Error\b", needles=("metadata", "build_for_"))
# the metadata builders of hybrid models' state layers (Mamba1/2, GDN, short conv, linear attention, KDA): not an
# attention backend a launch picks
STATE_BUILDER_RE = lazy(r"Mamba|GDN|ShortConv|LinearAttention|Linear|KDA|Lightning")
IMPL_NAMED_RE = lazy(r"but (?P<impl>\w+(?:Impl|Backend)) does not", needles=("does not",))
FRAGMENT_LINES = 40  # an input this short is a paste, whose bare lines may be the message


def _backend_refused(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    raised = {e.line.no for e in scan.exceptions}
    short = scan.lines_total <= FRAGMENT_LINES
    for ln in scan.lines:
        t = ln.text
        if ln.no not in raised and ln.level not in ("ERROR", "CRITICAL") and not (short and not ln.level):
            continue
        if t.startswith((" ", "\t", "File ")):  # source lines of a traceback's frames
            continue
        m = IMPL_ARG_RE.search(t) if "Impl.__init__()" in t else None
        if m is not None:
            return Diagnosis(
                category="attention_backend", signature="attention.backend_refused",
                title=f"The attention backend {m.group('impl')} does not take '{m.group('arg')}' in this vLLM",
                confidence=0.7, evidence=[Evidence(ln.no, ln.shown)],
                facts={"backend": m.group("impl"), "argument": m.group("arg"), "message": t.strip()[:300]},
                fix=Fix(f"The model code passes '{m.group('arg')}' to the attention backend's implementation, which this "
                        "release's backend does not have (a model or plugin newer than the installed vLLM, or a backend "
                        "without the feature): use the vLLM release the model or plugin is made for, or the backend "
                        "that has the feature (--attention-backend).", "attention-backend"),
                first_line=ln.no)
        r = BACKEND_REQUIREMENT_RE.search(t) if ("requires attention" in t or "MetadataBuilder" in t) else None
        if r is not None and r.group("builder") and STATE_BUILDER_RE.search(r.group("builder")):
            r = None  # a Mamba / linear-attention state builder: no --attention-backend choice (rules/hyb_mamba.py)
        step = METADATA_STEP_RE.search(t) if r is None and "Error" in t and ("metadata" in t or "build_for_" in t) else None
        if r is not None or step is not None:
            named = IMPL_NAMED_RE.search(t)
            backend = (named.group("impl") if named else r.group("builder") if r is not None and r.group("builder")
                       else "selected")
            if step is not None:
                where = step.group("step") or step.group("step2")
                return Diagnosis(
                    category="attention_backend", signature="attention.backend_refused",
                    title=f"The attention backend failed while building its metadata ({where})",
                    confidence=0.65, evidence=[Evidence(ln.no, ln.shown)],
                    facts={"backend": backend, "step": where, "message": t.strip()[:300]},
                    fix=Fix("The attention backend's metadata step failed for this batch or configuration (buffers sized "
                            "for fewer sequences than a feature such as chunked local attention creates, a shape the "
                            "backend does not expect): a bug of that backend in this release. Pick another backend "
                            "with --attention-backend, or upgrade vLLM to a release with the fix.", "attention-backend"),
                    first_line=ln.no)
            return Diagnosis(
                category="attention_backend", signature="attention.backend_refused",
                title=f"The {backend} attention backend cannot do what this launch asks",
                confidence=0.7, evidence=[Evidence(ln.no, ln.shown)],
                facts={"backend": backend, "message": t.strip()[:300]},
                fix=Fix("The attention backend in use lacks what this launch needs (context parallelism needs a backend "
                        "that returns the softmax LSE; a per-model or sparse backend forced on a GPU it was not built "
                        "for does not set itself up). Pick another backend with --attention-backend, unset a forced "
                        "one, or turn the feature off (e.g. --decode-context-parallel-size 1).", "attention-backend"),
                first_line=ln.no)
        # the exclusions first: they are cheap, the refusal pattern is the costliest to compile of all the rules
        if BACKEND_REFUSAL_NOT.search(t):
            continue
        m = BACKEND_REFUSAL_RE.search(t)
        if m is None:
            continue
        n = BACKEND_NAME_RE.search(m.group(0))
        backend = (n.group(1) or n.group(2)) if n and (n.group(1) or n.group(2)) else "selected"
        if backend == "selected" and not ATTENTION_WORDS_RE.search(t):
            continue  # "this backend" of a MoE kernel, a quantization method, a sampler
        return Diagnosis(
            category="attention_backend", signature="attention.backend_refused",
            title=f"The {backend} attention backend refuses this model or setting",
            confidence=0.7, evidence=[Evidence(ln.no, ln.shown)],
            facts={"backend": backend, "message": t.strip()[:300]},
            fix=Fix(f"The attention backend in use ({backend}) does not implement what this model or launch asks "
                    "for (a feature such as soft-capping, sliding window, sinks or encoder attention, a device, a "
                    "dtype). Pick a backend that has it (--attention-backend, older vLLM: VLLM_ATTENTION_BACKEND; "
                    "unset a forced one to let vLLM choose), or upgrade vLLM, whose backends and selector cover "
                    "more; the message says which one it wants when it names one.", "attention-backend"),
            first_line=ln.no)
    return None


RULES += [
    Rule(signature="attention.backend_refused", category="attention_backend",
         title="An attention backend refuses this model or setting", fix="", check=_backend_refused,
         confidence=0.7, playbook="attention-backend"),
]
