"""On-disk JSON cache of upstream answers, with a time-to-live.

One file per key under triage.paths.cache_dir()/upstream. A fresh entry saves a request; a
stale one is still returned (marked with its age) when the network is down, the search is
rate-limited or --offline is set. Files are written atomically; a corrupt file is a miss.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the headless report imports no pathlib (start-up)
    from pathlib import Path

from triage.paths import cache_dir_str

DEFAULT_TTL = 6 * 3600.0


@dataclass(slots=True)
class Entry:
    value: Any
    fetched_at: float
    fresh: bool

    @property
    def age(self) -> float:
        return max(0.0, time.time() - self.fetched_at)


def _sha256(data: bytes):  # -> hash object
    """hashlib.sha256 from the interpreter's own implementation when it has one: hashlib loads
    OpenSSL first, which costs more start-up than the offline lookup it serves (same digest)."""
    try:
        from _sha2 import sha256  # Python 3.12+
    except ImportError:
        try:
            from _sha256 import sha256  # type: ignore[no-redef]  # Python 3.10, 3.11
        except ImportError:
            from hashlib import sha256  # type: ignore[no-redef]
    return sha256(data)


def human_age(seconds: float) -> str:
    s = int(seconds)
    if s < 90:
        return f"{s}s"
    if s < 90 * 60:
        return f"{s // 60}m"
    if s < 36 * 3600:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


class Cache:
    def __init__(self, root: Path | str | None = None, ttl: float = DEFAULT_TTL):
        # A str inside: the offline report reads the cache without importing pathlib (start-up).
        self._dir = os.fspath(root) if root is not None else os.path.join(cache_dir_str(), "upstream")
        self.ttl = ttl

    @property
    def root(self) -> Path:
        from pathlib import Path

        return Path(self._dir)

    @staticmethod
    def key(*parts: str) -> str:
        norm = "\x1f".join(" ".join(p.split()) for p in parts)
        return _sha256(norm.encode()).hexdigest()[:32]

    def _path(self, key: str) -> str:
        return os.path.join(self._dir, f"{key}.json")

    def get(self, key: str, *, ttl: float | None = None) -> Entry | None:
        try:
            with open(self._path(key), encoding="utf-8") as fh:
                data = json.load(fh)
            fetched_at = float(data["fetched_at"])
            value = data["value"]
        except (OSError, ValueError, KeyError, TypeError):
            return None
        limit = self.ttl if ttl is None else ttl
        return Entry(value, fetched_at, (time.time() - fetched_at) <= limit)

    def put(self, key: str, value: Any, *, label: str = "") -> None:
        import tempfile

        try:
            os.makedirs(self._dir, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self._dir, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"label": label, "fetched_at": time.time(), "value": value}, fh)
            os.replace(tmp, self._path(key))
        except OSError:
            # A read-only home or a full disk must not break a diagnosis; it only loses caching.
            pass
