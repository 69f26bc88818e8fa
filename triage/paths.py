"""Where triage keeps its files (XDG on Linux; overridable for tests with TRIAGE_HOME)."""

from __future__ import annotations

import os

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the headless report imports no pathlib (start-up)
    from pathlib import Path


def _home() -> str:
    """Path.home(), as a str."""
    home = os.path.expanduser("~")
    if home[:1] == "~":
        raise RuntimeError("Could not determine home directory.")
    return home


def _base_str(xdg_var: str, default: str, sub: str) -> str:
    home = os.environ.get("TRIAGE_HOME")
    if home:
        return os.path.join(home, sub)
    root = os.environ.get(xdg_var) or os.path.join(_home(), default)
    return os.path.join(root, "triage")


def _base(xdg_var: str, default: str, sub: str) -> Path:
    from pathlib import Path

    return Path(_base_str(xdg_var, default, sub))


def config_dir() -> Path:
    """User playbooks live in config_dir()/playbooks."""
    return _base("XDG_CONFIG_HOME", ".config", "config")


def state_dir() -> Path:
    """Transcripts of applied changes and their backups (for `triage undo`)."""
    return _base("XDG_STATE_HOME", ".local/state", "state")


def cache_dir() -> Path:
    """The upstream search cache."""
    return _base("XDG_CACHE_HOME", ".cache", "cache")


def cache_dir_str() -> str:
    """cache_dir() as a str, for the headless report's path: importing pathlib costs start-up time."""
    return _base_str("XDG_CACHE_HOME", ".cache", "cache")
