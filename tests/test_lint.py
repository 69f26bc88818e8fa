"""ruff (configured in pyproject.toml) finds nothing in the tree."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_ruff_is_clean():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], cwd=str(ROOT),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
