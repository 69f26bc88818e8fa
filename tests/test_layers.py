"""The layers of triage, enforced: the import-linter contracts of pyproject.toml hold (and are seen to
break when a core module imports Textual), and every headless module imports without loading the
TUI, rich, the network or torch.

Headless means everything except the TUI (triage.tui), the SSH transport (triage.remote and the probes
that ride on it, triage.probes.over_ssh: asyncssh is
what it is for) and `python -m triage`. The plain-text report renders with rich, loaded inside
render() only: importing triage.report.text loads nothing heavy, and `--json` never renders.
"""

from __future__ import annotations

import pkgutil
import shutil
import subprocess
import sys

import pytest

import triage
from conftest import ROOT

HEAVY = ("textual", "rich", "httpx", "asyncssh", "torch", "triton")
NOT_HEADLESS = ("triage.__main__", "triage.remote", "triage.probes.over_ssh", "triage.tui")

LINT = ("import sys\nfrom importlinter.cli import lint_imports\n"
        "sys.exit(lint_imports(config_filename='pyproject.toml', no_cache=True, no_logo=True))\n")


def _lint(root) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT], cwd=str(root), capture_output=True, text=True,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}, timeout=300)


def headless_modules() -> list[str]:
    names = ["triage"] + [m.name for m in pkgutil.walk_packages(triage.__path__, "triage.")]
    return [n for n in names if not any(n == x or n.startswith(x + ".") for x in NOT_HEADLESS)]


def test_import_contracts_hold():
    r = _lint(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout


def test_contract_breaks_when_a_core_module_imports_textual(tmp_path):
    for name in ("triage", "triage_sparse_mla"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    core = tmp_path / "triage" / "diagnose.py"
    core.write_text(core.read_text(encoding="utf-8") + "\nfrom textual.app import App  # planted\n", encoding="utf-8")
    r = _lint(tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "The core and the headless report never import Textual BROKEN" in " ".join(r.stdout.split())
    assert "triage.diagnose -> textual (l." in r.stdout


@pytest.mark.parametrize("module", headless_modules())
def test_headless_module_imports_nothing_heavy(module):
    code = (f"import sys, importlib\nimportlib.import_module({module!r})\n"
            f"print([m for m in {HEAVY!r} if m in sys.modules])\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", f"importing {module} loads {r.stdout.strip()}"
