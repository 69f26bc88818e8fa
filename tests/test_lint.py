"""ruff and mypy (both configured in pyproject.toml) find nothing: ruff in the tree, mypy in the core."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_ruff_is_clean():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr


def test_mypy_is_clean_on_the_core():
    # The files and the narrow exceptions (each with its reason) are in pyproject.toml's [tool.mypy].
    r = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=str(ROOT), capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
