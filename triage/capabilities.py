"""The capability table: which attention backends each vLLM release has, for which GPUs
(triage/upstream/capabilities.yaml, the one place it is edited). The diagnosis explains with it
(enrich) and upstream advises upgrades with it, so it sits below both.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from typing import Any

from triage.computecap import env_cc
from triage.lazyre import AUTO, lazy

CAPABILITIES = os.path.join(os.path.dirname(__file__), "upstream", "capabilities.yaml")


@lru_cache(maxsize=1)
def load_capabilities() -> list[dict[str, Any]]:
    """The table, from capabilities.yaml (the one place it is edited). Parsing YAML costs more than
    the rest of an offline report, so the parsed table is kept as JSON in the cache folder, keyed by
    the YAML file's size and modification time."""
    import json

    from triage.paths import cache_dir_str

    st = os.stat(CAPABILITIES)
    cached = os.path.join(cache_dir_str(), f"capabilities-{st.st_size}-{st.st_mtime_ns}.json")
    try:
        with open(cached, encoding="utf-8") as fh:
            caps = json.load(fh)
    except (OSError, ValueError):
        caps = None
    if not isinstance(caps, list):
        import yaml

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        with open(CAPABILITIES, encoding="utf-8") as fh:
            data = yaml.load(fh.read(), Loader=loader) or {}  # noqa: S506 (safe)
        caps = [c for c in (data.get("capabilities") or []) if isinstance(c, dict) and c.get("id")]
        try:
            os.makedirs(os.path.dirname(cached), exist_ok=True)
            tmp = os.path.splitext(cached)[0] + ".tmp"
            with open(tmp, "w", encoding="utf-8") as fh:
                fh.write(json.dumps(caps, default=str))
            os.replace(tmp, cached)
        except OSError:
            pass  # a read-only cache only costs the YAML parse next time
    return caps


# --- which table entries speak to a diagnosis ------------------------------------------------

def _cc_major(env: dict[str, Any], gpu_family: str | None) -> int | None:
    cc = env_cc(env)
    if cc:
        return cc.major
    if gpu_family and re.match(r"^\d+", gpu_family):
        return int(float(gpu_family))
    return None


def matches(entry: dict[str, Any], diag: Any, env: dict[str, Any], *, text: str = "",
            gpu_family: str | None = None) -> bool | None:
    """Whether a table entry speaks to this diagnosis: True/False, None when it would apply but the
    compute capability is unknown. `text` is the diagnosis' own text (title and evidence),
    `gpu_family` a family key ("12", "9", ...) known from elsewhere than the environment."""
    a = entry.get("applies") or {}
    facts = getattr(diag, "facts", {}) or {}
    if a.get("category") and a["category"] != getattr(diag, "category", None):
        return False
    if a.get("signature_prefix"):
        prefixes = a["signature_prefix"] if isinstance(a["signature_prefix"], list) else [a["signature_prefix"]]
        if not any(str(getattr(diag, "signature", "")).startswith(p) for p in prefixes):
            return False
    for k, want in (a.get("facts") or {}).items():
        have = facts.get(k)
        if isinstance(want, list):  # one of these values (null: the log did not say)
            if have not in want:
                return False
            continue
        if isinstance(have, str) and isinstance(want, bool):
            have = have.strip().lower() == "true"
        if have is None and isinstance(want, bool) and not want:
            have = False  # a missing use_sparse means a dense model
        if have != want:
            return False
    if a.get("kv_cache_dtype_prefix") and not str(facts.get("kv_cache_dtype") or "").startswith(a["kv_cache_dtype_prefix"]):
        return False
    if a.get("rejected_reason"):
        rx = lazy(a["rejected_reason"], re.I, needles=AUTO)  # compiled only if a reason can match
        rej = facts.get("rejected") or {}
        reasons = [r for rs in rej.values() for r in (rs if isinstance(rs, list) else [rs])] if isinstance(rej, dict) else []
        if not any(rx.search(str(r)) for r in reasons):
            return False
    if a.get("architecture"):
        arch = env.get("architecture") or facts.get("architecture") or ""
        if not lazy(a["architecture"], needles=AUTO).search(str(arch)):
            return False
    if a.get("text") and not lazy(a["text"], re.S, needles=AUTO).search(text):
        return False
    if a.get("cc_major"):
        major = _cc_major(env, gpu_family)
        if major is None:
            # The log can narrow it: a backend that accepted the GPU and refused only a flag
            # (facts.cc_majors, set by the attention rule) says which family it is.
            possible = set(facts.get("cc_majors") or [])
            if possible and not possible & set(a["cc_major"]):
                return False
            if possible and possible <= set(a["cc_major"]):
                return True
            return None
        if major not in a["cc_major"]:
            return False
    return True
