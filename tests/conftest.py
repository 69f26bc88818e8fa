import os
import sys
from pathlib import Path

import pytest

# The kernel tests run Triton's interpreter on the CPU; it must be chosen before anything imports
# triton. On a machine with an NVIDIA GPU the real compiler is used.
if not os.path.exists("/dev/nvidia0"):
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
if not SHARED.exists():  # CI lays shared/ beside the clone; a worktree may sit elsewhere
    SHARED = Path("/work/shared")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    """Never touch the developer's real config/state/cache, never the network."""
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "triage-home"))
    monkeypatch.setenv("TRIAGE_GITHUB_API", "http://127.0.0.1:9")  # closed port: no request leaves
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    monkeypatch.delenv("GH_TOKEN", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)


def run_triage(*args, input=None, env=None, timeout=120):
    import subprocess

    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    if env:
        e.update(env)
    return subprocess.run([sys.executable, "-m", "triage", *args], input=input, capture_output=True,
                          env=e, timeout=timeout, cwd=str(ROOT))
