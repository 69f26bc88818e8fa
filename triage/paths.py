"""Where triage keeps its files (XDG on Linux; overridable for tests with TRIAGE_HOME)."""

from __future__ import annotations

import os
from pathlib import Path


def _base(xdg_var: str, default: str, sub: str) -> Path:
    home = os.environ.get("TRIAGE_HOME")
    if home:
        return Path(home) / sub
    root = os.environ.get(xdg_var) or str(Path.home() / default)
    return Path(root) / "triage"


def config_dir() -> Path:
    """User playbooks live in config_dir()/playbooks."""
    return _base("XDG_CONFIG_HOME", ".config", "config")


def state_dir() -> Path:
    """Transcripts of applied changes and their backups (for `triage undo`)."""
    return _base("XDG_STATE_HOME", ".local/state", "state")


def cache_dir() -> Path:
    """The upstream search cache."""
    return _base("XDG_CACHE_HOME", ".cache", "cache")
