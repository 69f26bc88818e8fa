"""Add what the probes know about the machine to diagnoses made from the log, without touching the rules.

A rule reads the log; an enricher reads the rule's facts plus the probed environment and adds facts
and explanation lines: "no sparse MLA backend exists for compute capability 12.0 in vLLM
0.16.0rc2.dev313 (nightly wheel, pip), and 2 of its files were patched by hand".

`env` is the report's `environment` (the keys of `triage probe --json` facts, every one may be missing);
the enrichers read it as one triage.environment.Environment.
"""

from __future__ import annotations

import re
from typing import Any, Callable

from triage.capabilities import load_capabilities, matches
from triage.environment import Environment
from triage import versions
from triage.model import Diagnosis
from triage_sparse_mla.support import indexer_note

# Backends that implement sparse (DSA) MLA in upstream vLLM releases before the SM12x one, and the
# compute capabilities they accept (vllm/v1/attention/backends/mla/*: supports_compute_capability).
SPARSE_MLA_BACKENDS = {
    "FLASHMLA_SPARSE": "9.x / 10.x",
    "FLASHINFER_MLA_SPARSE": "10.x",
    "FLASH_ATTN_MLA_SPARSE": "9.x",
}
SM12X_BACKEND = "FLASHINFER_MLA_SPARSE_SM120"


def _capability(backend: str) -> dict[str, Any] | None:
    """The capability-table entry (triage/upstream/capabilities.yaml) that names `backend`: the one place
    where the releases that have it are written down."""
    try:
        caps = load_capabilities()
    except (OSError, ValueError):
        return None
    return next((c for c in caps if backend in (c.get("backends") or [])), None)


def _release_of(version: Any) -> str | None:
    """A comparable release for `version`, or None for a tagless build (`0.1.dev20051+g487ecf187`: a
    PR image whose number says nothing about what it contains)."""
    v = str(version or "")
    if not v or re.match(r"^0\.1\.dev\d+", v):
        return None
    return v


def gpu_family(cc: tuple[int, int]) -> str:
    major, minor = cc
    if major == 12:
        return "SM12x"  # RTX 50xx / RTX PRO 6000 (12.0), DGX Spark GB10 (12.1)
    if major == 10:
        return "SM10x"  # B200 / GB200 (10.0), B300 (10.3)
    if major == 9:
        return "SM90"
    if major == 8:
        return "SM80" if minor == 0 else "SM8x"
    return f"SM{major}{minor}"


def _truthy(v: Any) -> bool:
    return v is True or str(v).strip().lower() in ("true", "1", "yes")


def _major_minor(v: Any) -> tuple[int, int] | None:
    """A CUDA version ("12.8", "13.0") to compare as major.minor."""
    p = versions.parse(v)
    if p is None:
        return None
    rel = p.release + (0,)
    return rel[0], rel[1]


def _env_cc(env: Environment) -> tuple[int, int] | None:
    cc = env.compute_capability
    return (cc.major, cc.minor) if cc else None


def _vllm_words(env: Environment) -> str:
    inst = env.vllm_install
    version = env.vllm_version
    if not version:
        return "the installed vLLM"
    how = []
    src = inst.get("source")
    if src:
        how.append({"nightly-index": "nightly wheel", "nightly-wheel": "nightly wheel",
                    "per-commit-wheel": "per-commit wheel", "index": "PyPI release", "editable": "editable install",
                    "git": "git install", "ngc": "NGC container", "local-build": "local build",
                    "local-dir": "local source tree", "archive": "wheel by URL",
                    "local-archive": "local wheel file"}.get(src, src))
    if inst.get("installer"):
        how.append(str(inst["installer"]))
    return f"vLLM {version}" + (f" ({', '.join(how)})" if how else "")


def _patched_line(env: Environment) -> str | None:
    patched = env.patched_files
    if not patched:
        return None
    return (f"{len(patched)} vLLM file(s) were patched by hand ({', '.join(patched[:4])}"
            f"{' ...' if len(patched) > 4 else ''}): an upgrade or reinstall overwrites them; "
            "keep a copy first with `triage probe --save-patches DIR`")


def _add_line(d: Diagnosis, line: str) -> None:
    if line not in d.explanation:
        d.explanation.append(line)


# ------------------------------------------------------------------ enrichers
def _attention(d: Diagnosis, env: Environment) -> None:
    cc = _env_cc(env)
    if cc:
        d.facts.setdefault("compute_capability", f"{cc[0]}.{cc[1]}")
        d.facts["gpu_family"] = gpu_family(cc)
    vw = _vllm_words(env)
    version = env.vllm_version
    if version:
        d.facts.setdefault("vllm_version", version)
    got = d.facts.get("rejected")
    rejected: dict[str, Any] = got if isinstance(got, dict) else {}
    sparse = _truthy(d.facts.get("use_sparse"))
    mla = _truthy(d.facts.get("use_mla"))
    selected = d.facts.get("selected_backend")
    cc_s = f"{cc[0]}.{cc[1]}" if cc else ""
    if cc and sparse and d.signature.startswith("attention.") and d.signature != "attention.custom_backend_unregistered":
        if d.facts.get("case") == "sparse_backend_rejects_config":
            name = str(d.facts.get("sparse_backend_here"))
            reasons = ", ".join(map(str, rejected.get(name) or []))
            _add_line(d, f"{vw} has {name}, a sparse MLA backend that runs on compute capability {cc_s}; it "
                         f"rejected this launch ({reasons}), so the fix is in the launch or the install, not an "
                         "upgrade or a plugin")
            if any("sparse MLA decode API" in str(r) for r in rejected.get(name) or []):
                pk = env.packages
                fi = ", ".join(f"{k} {pk[k]}" for k in ("flashinfer-python", "flashinfer-cubin", "flashinfer-jit-cache")
                               if k in pk) or "no FlashInfer package"
                _add_line(d, f"Installed here: {fi}. vLLM turns FlashInfer off when neither flashinfer-cubin nor "
                             "nvcc and ninja are there (look for 'FlashInfer kernels are disabled' in the log)")
        elif cc[0] == 12:
            cap = _capability(SM12X_BACKEND)
            since = str(cap.get("since")) if cap and cap.get("since") else None
            release = _release_of(version)
            has_it = SM12X_BACKEND in rejected or bool(since and release and _ge(release, since))
            if has_it and selected and selected != SM12X_BACKEND and d.facts.get("chosen_by") == "vllm":
                _add_line(d, f"{vw} has {SM12X_BACKEND} for compute capability {cc_s}, but its own platform code "
                             f"selected {selected}: name {SM12X_BACKEND} with --attention-backend")
            elif has_it and selected and selected != SM12X_BACKEND:
                _add_line(d, f"{vw} has {SM12X_BACKEND} for compute capability {cc_s}, but --attention-backend "
                             f"{selected} overrides it: drop the override (or name {SM12X_BACKEND})")
            elif SM12X_BACKEND in rejected:
                reasons = ", ".join(map(str, rejected[SM12X_BACKEND]))
                _add_line(d, f"{vw} has an SM12x sparse MLA backend but rejected it on this machine "
                             f"({SM12X_BACKEND}: {reasons})")
            elif has_it:
                _add_line(d, f"{vw} has {SM12X_BACKEND} (since {since}), but this launch did not try it")
            else:
                needs = ", ".join(f"{b} needs {c}" for b, c in SPARSE_MLA_BACKENDS.items())
                newer = (f"; the first release with {SM12X_BACKEND} is {since}" if since else "")
                _add_line(d, f"No sparse MLA attention backend exists for compute capability {cc_s} (SM12x) in {vw}: "
                             f"{needs}{newer}. The model's DSA sparse attention cannot run here until a vLLM with an "
                             "SM12x sparse MLA backend is installed, or a sparse MLA Triton backend is added as a plugin")
                d.facts["missing_backend"] = "sparse MLA for SM12x"
        elif cc[0] not in (9, 10):
            _add_line(d, f"No vLLM release has a sparse MLA backend for compute capability {cc_s} "
                         f"({gpu_family(cc)}): FLASHMLA_SPARSE / FLASHINFER_MLA_SPARSE / FLASH_ATTN_MLA_SPARSE need "
                         "9.x or 10.x and TRITON_MLA_SPARSE exists only in open pull requests (#38476, #47629). "
                         "triage's bundled Triton backend (`triage apply sparse-mla`) is the way to run it")
            d.facts["missing_backend"] = f"sparse MLA for {gpu_family(cc)}"
        if d.facts.get("case") != "sparse_backend_rejects_config" and cc[0] not in (9, 10):
            note = indexer_note(cc)
            if note:
                _add_line(d, note)
    elif cc and cc[0] == 12 and mla and not sparse:
        _add_line(d, f"On compute capability {cc_s} only TRITON_MLA runs dense MLA in {vw}; "
                     "the FlashInfer, CUTLASS and FlashMLA MLA backends need 9.x or 10.x")
    line = _patched_line(env)
    if line:
        d.facts["patched_files"] = list(env.patched_files)
        _add_line(d, line)


def _ge(a: str, b: str) -> bool:
    return versions.ge(a, b)


def _deepgemm(d: Diagnosis, env: Environment) -> None:
    """The DSA indexer needs DeepGEMM: what that means on this GPU (the attention backend does not cover it)."""
    if d.signature != "kernels.deepgemm_missing" or not _truthy(d.facts.get("dsa_indexer")):
        return
    cc = _env_cc(env)
    if not cc:
        return
    d.facts.setdefault("compute_capability", f"{cc[0]}.{cc[1]}")
    d.facts["gpu_family"] = gpu_family(cc)
    cc_s = f"{cc[0]}.{cc[1]}"
    if cc[0] in (9, 10):
        _add_line(d, f"DeepGEMM has the indexer kernels for compute capability {cc_s}: install the deep_gemm this "
                     f"vLLM expects ({_vllm_words(env)}) in the same environment")
    elif cc[0] == 12:
        _add_line(d, f"On compute capability {cc_s} the indexer needs a DeepGEMM with SM120 kernels "
                     "(deepseek-ai/DeepGEMM#324), which vLLM's own SM12x sparse path (PR #43477) relies on; a sparse "
                     "attention backend or plugin does not replace the indexer")
    else:
        _add_line(d, f"No vLLM release has an indexer without DeepGEMM for compute capability {cc_s}: a Triton "
                     "indexer exists only in open pull requests (#38476, #47629). Solving the attention backend (a "
                     "plugin, triage_sparse_mla) does not get this model past the indexer on this GPU")
    d.facts["indexer_blocked"] = cc[0] not in (9, 10, 12)


def _regression(d: Diagnosis, env: Environment) -> None:
    """A failure that starts in a release (a capability-table entry with broken_in) is vLLM's regression, not
    the user's configuration: say so first, with the release to pin and the one that fixes it."""
    version = _release_of(env.vllm_version)
    if not version:
        return
    try:
        caps = [c for c in load_capabilities() if c.get("broken_in")]
    except (OSError, ValueError):
        return
    if not caps:
        return
    text = "\n".join([d.title, *(e.text for e in d.evidence)])
    for c in caps:
        # a regression is claimed on evidence only: an unknown compute capability (None) is not a match
        if matches(c, d, dict(env.facts), text=text) is not True:
            continue
        if not _ge(version, str(c["broken_in"])) or (c.get("since") and _ge(version, str(c["since"]))):
            continue
        prs = ", ".join(f"{p.get('repo', 'vllm-project/vllm')}#{p['number']}" for p in c.get("prs") or []
                        if isinstance(p, dict) and p.get("number"))
        pin = f"pin vLLM {c['works_in']}" if c.get("works_in") else None
        up = f"upgrade to {c['since']}" if c.get("since") else (f"the fix: {prs}" if prs else None)
        way = " or ".join(x for x in (pin, up) if x)
        line = (f"This is a regression of vLLM {c['broken_in']} ({c.get('title', c['id'])}), not a configuration "
                f"error: {way}." if way else f"This is a regression of vLLM {c['broken_in']}: {c.get('title', c['id'])}.")
        d.facts["regression"] = {"id": c["id"], "broken_in": c["broken_in"], "works_in": c.get("works_in"),
                                 "fixed_in": c.get("since")}
        if line not in d.explanation:
            d.explanation.insert(0, line)
        if way and not d.fix.summary.startswith("This is a regression"):
            d.fix.summary = f"This is a regression of vLLM {c['broken_in']}: {way}. " + d.fix.summary
        return


def _cuda_driver(d: Diagnosis, env: Environment) -> None:
    for key, value in (("driver_version", env.driver_version), ("cuda_driver_version", env.cuda_driver_version),
                       ("torch_cuda_version", env.torch_cuda_version)):
        if value is not None:
            d.facts.setdefault(key, value)
    drv, tcu = _major_minor(env.cuda_driver_version), _major_minor(env.torch_cuda_version)
    if drv and tcu:
        too_old = tcu > drv
        d.facts["driver_too_old_for_torch"] = too_old
        if too_old:
            _add_line(d, f"The NVIDIA driver {env.driver_version} supports CUDA up to "
                         f"{env.cuda_driver_version}, but torch was built for CUDA {env.torch_cuda_version}: "
                         "CUDA initialisation fails until the driver is upgraded or torch matches it (forward "
                         "compatibility bridges this only on data-center GPUs)")
        else:
            _add_line(d, f"The driver's CUDA {env.cuda_driver_version} is new enough for torch's CUDA "
                         f"{env.torch_cuda_version}: look for compat libraries (cuda-compat, LD_LIBRARY_PATH) "
                         "shadowing the driver, or a container built for a newer CUDA")


def _arch(d: Diagnosis, env: Environment) -> None:
    cc = _env_cc(env)
    if cc:
        d.facts.setdefault("compute_capability", f"{cc[0]}.{cc[1]}")
        d.facts["gpu_family"] = gpu_family(cc)
    if env.torch_arch_list:
        d.facts.setdefault("torch_arch_list", list(env.torch_arch_list))
        sm = f"sm_{cc[0]}{cc[1]}" if cc else None
        if sm and sm not in env.torch_arch_list:
            _add_line(d, f"torch {env.torch_version or ''} was compiled for {' '.join(env.torch_arch_list)}, "
                         f"not {sm}")


def _memory(d: Diagnosis, env: Environment) -> None:
    held = []
    for g in env.gpus:
        for p in g.processes:
            held.append({"gpu": g.index, "pid": p.get("pid"), "name": p.get("name"),
                         "used_memory_mib": p.get("used_memory_mib")})
    if held:
        d.facts["gpu_processes"] = held
        _add_line(d, "Other processes hold GPU memory right now: " + "; ".join(
            f"GPU {h['gpu']}: pid {h['pid']} ({h['name']}) {h['used_memory_mib']} MiB" for h in held[:6])
            + ". A leftover vLLM worker from an earlier run leaves less memory for the KV cache")


def _install(d: Diagnosis, env: Environment) -> None:
    pk = env.packages
    for name in ("vllm", "torch", "triton", "flashinfer-python", "flash-attn", "xformers", "deep-gemm",
                 "transformers"):
        if name in pk:
            d.facts.setdefault("installed", {})[name] = pk[name]
    line = _patched_line(env)
    if line:
        _add_line(d, line)


ENRICHERS: list[tuple[Callable[[Diagnosis], bool], Callable[[Diagnosis, Environment], None]]] = [
    (lambda d: d.category == "attention_backend" or d.signature.startswith("attention."), _attention),
    (lambda d: d.category == "cuda_driver" or d.signature.startswith("cuda_driver."), _cuda_driver),
    (lambda d: d.category in ("unsupported_gpu", "dtype_unsupported", "quantization"), _arch),
    (lambda d: d.category in ("kv_cache_memory", "gpu_oom"), _memory),
    (lambda d: d.category in ("install_mismatch", "kernel_library", "model_support"), _install),
    (lambda d: d.signature == "kernels.deepgemm_missing", _deepgemm),
    (lambda d: True, _regression),
]


def enrich(diagnoses: list[Diagnosis], env: dict[str, Any]) -> None:
    """Add probe facts and explanation lines to each diagnosis in place."""
    if not env:
        return
    machine = Environment.from_facts(env)
    for d in diagnoses:
        if d.signature.startswith("generic."):
            # No rule recognised it: its category is a guess, and area-specific lines would pose as a diagnosis.
            continue
        for applies, fn in ENRICHERS:
            if applies(d):
                fn(d, machine)
