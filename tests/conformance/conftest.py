"""Fixtures for the checks against real vLLM wheels: one cached environment per release
(vllm_envs.py), the plugin installed by pip from the wheel `triage apply` builds, and the probe's
answer per release (run once per session)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

import vllm_envs  # noqa: E402

_PROBES: dict[str, dict] = {}


def pytest_collection_modifyitems(items):
    for item in items:
        if str(item.fspath).startswith(str(HERE)):
            item.add_marker(pytest.mark.conformance)


@pytest.fixture(scope="session")
def plugin_site(tmp_path_factory) -> Path:
    """triage_sparse_mla installed with pip (no deps, no index) from the wheel apply ships."""
    from triage.actions.sparse_mla import build_plugin_wheel

    tmp = tmp_path_factory.mktemp("plugin")
    wheel = build_plugin_wheel(tmp / "wheel")
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-deps",
                    "--no-index", "--target", str(site), str(wheel)], check=True, capture_output=True)
    return site


def release_env(version: str, *front: Path) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(p) for p in front] + [str(p) for p in vllm_envs.release_paths(version)]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["TRITON_INTERPRET"] = "1"
    env.pop("VLLM_PLUGINS", None)
    return env


@pytest.fixture(scope="session")
def probe(plugin_site):
    """probe(version) -> the probe's JSON for that release (plumbing included), run once."""

    def get(version: str) -> dict:
        if version not in _PROBES:
            env = release_env(version, plugin_site)
            proc = subprocess.run([sys.executable, str(HERE / "probe.py"), "--plumbing"], env=env,
                                  capture_output=True, text=True, timeout=1200, cwd=str(plugin_site))
            lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PROBE ")]
            assert lines, f"the probe printed nothing (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
            _PROBES[version] = json.loads(lines[-1][len("PROBE "):])
        return _PROBES[version]

    return get
