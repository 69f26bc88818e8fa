"""The capability table: which attention backends each vLLM release has, for which GPUs
(triage/upstream/capabilities.yaml, the one place it is edited). The diagnosis explains with it
(enrich) and upstream advises upgrades with it, so it sits below both.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

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
