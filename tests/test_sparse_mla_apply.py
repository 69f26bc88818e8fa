"""`triage apply sparse-mla`: the wheel, the checks, and a real install into a throwaway venv and
its undo.

The venv gets torch and triton from the test's own environment through a .pth file (no network),
and a stand-in `vllm` distribution (sparse_mla_fake_vllm) installed from a locally written wheel.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from sparse_mla_fake_vllm import make_fake_vllm
from triage.actions import sparse_mla as action
from triage.commands import apply as apply_cmd
from triage.runner import LocalRunner, Result


class MemRecorder:
    """The recorder protocol (triage.transcript.Transcript implements it for real), in memory."""

    def __init__(self) -> None:
        self.commands: list[tuple[list[str], int, str]] = []
        self.changes: list[tuple[str, list[str] | None]] = []
        self.backups: list[str] = []

    def command(self, argv: list[str], result: Result, where: str) -> None:
        self.commands.append((list(argv), result.returncode, where))

    def backup(self, path: str, runner) -> str | None:
        self.backups.append(path)
        return None

    def change(self, description: str, undo_argv: list[str] | None) -> None:
        self.changes.append((description, undo_argv))

    def undo(self, runner) -> None:
        for _desc, argv in reversed(self.changes):
            assert argv and runner.run(argv, timeout=300).ok


def test_wheel_is_valid_and_reproducible(tmp_path):
    a = action.build_plugin_wheel(tmp_path / "a")
    b = action.build_plugin_wheel(tmp_path / "b")
    assert a.name == f"triage_sparse_mla-{action.package_version()}-py3-none-any.whl"
    assert a.read_bytes() == b.read_bytes()
    with zipfile.ZipFile(a) as zf:
        names = zf.namelist()
        assert "triage_sparse_mla/plugin.py" in names and "triage_sparse_mla/kernel.py" in names
        assert not any(n.startswith("triage/") for n in names), "the wheel holds the plugin package only"
        di = f"triage_sparse_mla-{action.package_version()}.dist-info"
        eps = zf.read(f"{di}/entry_points.txt").decode()
        assert "[vllm.general_plugins]\ntriage_sparse_mla = triage_sparse_mla.plugin:register" in eps
        assert "Name: triage-sparse-mla" in zf.read(f"{di}/METADATA").decode()
        for line in zf.read(f"{di}/RECORD").decode().splitlines():
            name, digest, size = line.split(",")
            if name.endswith("RECORD"):
                continue
            data = zf.read(name)
            expect = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert digest == f"sha256={expect}" and int(size) == len(data)


def facts(**kw):
    base = dict(python="3.11.9", executable="/x/bin/python", vllm="0.20.1", torch="2.9.0", triton="3.5.0",
                installed=None, pip=True, state_dir="/x/state")
    base.update(kw)
    return action.Facts(**base)


@pytest.mark.parametrize(
    "kw,expect",
    [
        ({}, None),
        ({"vllm": None}, "vLLM is not installed"),
        ({"vllm": "0.11.0"}, "older than 0.14"),
        ({"vllm": "0.41.0"}, "newer than the range"),
        ({"triton": None}, "triton missing"),
        ({"torch": None, "triton": None}, "torch and triton missing"),
        ({"pip": False}, "no pip"),
        ({"python": "3.9.18"}, "needs 3.10"),
    ],
)
def test_refusals(kw, expect):
    why = action.refusal(facts(**kw))
    assert (why is None) if expect is None else (expect in why)


def test_host_without_asyncssh(capsys, monkeypatch):
    monkeypatch.delitem(sys.modules, "triage.remote", raising=False)
    monkeypatch.setitem(sys.modules, "asyncssh", None)  # as where asyncssh is not installed
    assert apply_cmd.main(["sparse-mla", "--host", "gpu-a", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip() == ("triage apply: cannot reach gpu-a: SSH needs the asyncssh package "
                                               "(pip install asyncssh)")


def test_usage_errors(capsys):
    assert apply_cmd.main([]) == 2
    assert apply_cmd.main(["frobnicate"]) == 2
    assert apply_cmd.main(["sparse-mla", "--undo"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and all(line.startswith("triage apply: ") for line in err)


def test_refuses_env_without_vllm(capsys, monkeypatch):
    # The test's own interpreter has torch and triton but no vLLM: nothing is installed there...
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    rc = apply_cmd.main(["sparse-mla", "--python", sys.executable, "--yes"])
    assert rc == 2
    assert "refused: vLLM is not installed" in capsys.readouterr().err


def test_dry_run_without_vllm_shows_the_plan_and_why_not(capsys):
    # ...but the dry run still shows the plan, and says why it cannot run there yet.
    rc = apply_cmd.main(["sparse-mla", "--python", sys.executable, "--dry-run"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "pip install --no-deps --no-index" in out and "vLLM not installed" in out
    assert "not possible here yet: vLLM is not installed" in out and "None" not in out


# --------------------------------------------------------------------------- real venv


def _site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("apply-venv")
    venv = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    # torch and triton from the test environment, without a network
    here = [p for p in site.getsitepackages() if os.path.isdir(os.path.join(p, "torch"))]
    assert here, "torch must be importable in the test environment"
    (_site_packages(venv) / "zz_test_env.pth").write_text(here[0] + "\n")
    # the stand-in vLLM, installed by pip from a wheel written here
    src = root / "fake"
    make_fake_vllm(str(src), "0.20.1", dist_info=False)
    files = {str(p.relative_to(src)).replace(os.sep, "/"): p.read_bytes()
             for p in sorted(src.rglob("*.py"))}
    whl = action.write_wheel(root / "wheels", files, "vllm", "0.20.1")
    py = str(venv / "bin" / "python")
    subprocess.run([py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(whl)], check=True, timeout=120)
    return venv


def _env_state(py: str) -> dict:
    code = (
        "import json\nfrom importlib import metadata\n"
        "eps = [e.value for e in metadata.entry_points(group='vllm.general_plugins')]\n"
        "try:\n    v = metadata.version('triage-sparse-mla')\nexcept metadata.PackageNotFoundError:\n    v = None\n"
        "print(json.dumps({'eps': eps, 'version': v}))\n"
    )
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(out)


def test_apply_into_venv_and_undo(venv, capsys, monkeypatch):
    py = str(venv / "bin" / "python")
    assert _env_state(py) == {"eps": [], "version": None}
    runner = LocalRunner()

    # --dry-run: the plan, nothing changed
    assert apply_cmd.main(["sparse-mla", "--python", py, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "pip install --no-deps --no-index" in out and "dry run: nothing was changed" in out
    assert "undo: $ " + py + " -m pip uninstall -y triage-sparse-mla" in out
    assert _env_state(py)["version"] is None

    # no terminal and no --yes: refuse
    assert apply_cmd.main(["sparse-mla", "--python", py], stdin_isatty=lambda: False) == 2
    assert "stdin is not a terminal" in capsys.readouterr().err
    # asked and declined
    assert apply_cmd.main(["sparse-mla", "--python", py], confirm=lambda _p: False) == 0
    assert _env_state(py)["version"] is None

    rec = MemRecorder()
    rc = apply_cmd.main(["sparse-mla", "--python", py, "--yes"], runner=runner, recorder=rec)
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "add this flag to your vllm serve command: --attention-backend CUSTOM" in captured.out
    assert "DeepGEMM" in captured.out  # no GPU here: the indexer caveat is printed
    state = _env_state(py)
    assert state == {"eps": ["triage_sparse_mla.plugin:register"], "version": action.package_version()}
    assert rec.changes == [(f"installed triage-sparse-mla {action.package_version()} into {py}",
                            [py, "-m", "pip", "uninstall", "-y", "triage-sparse-mla"])]
    assert all(rc == 0 for _a, rc, _w in rec.commands) and len(rec.commands) == 5

    rec.undo(runner)
    assert _env_state(py) == {"eps": [], "version": None}


def test_apply_over_previous_version_and_undo_restores_it(venv, capsys, tmp_path):
    py = str(venv / "bin" / "python")
    src = action._package_dir()
    files = {f"triage_sparse_mla/{p.name}": p.read_bytes() for p in src.glob("*.py")}
    old = action.write_wheel(tmp_path, files, "triage-sparse-mla", "0.0.9",
                             entry_points={"vllm.general_plugins": {"triage_sparse_mla": "triage_sparse_mla.plugin:register"}})
    subprocess.run([py, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(old)], check=True, timeout=120)
    assert _env_state(py)["version"] == "0.0.9"

    rec = MemRecorder()
    env_home = tmp_path / "home"
    os.environ["TRIAGE_HOME"] = str(env_home)  # where the target keeps the saved wheel
    try:
        rc = apply_cmd.main(["sparse-mla", "--python", py, "--yes", "--no-selftest"], recorder=rec)
    finally:
        del os.environ["TRIAGE_HOME"]
    assert rc == 0, capsys.readouterr().err
    assert _env_state(py)["version"] == action.package_version()
    (_desc, undo_argv), = rec.changes
    assert undo_argv[:4] == [py, "-m", "pip", "install"] and undo_argv[-1].startswith(str(env_home))
    assert Path(undo_argv[-1]).name == "triage_sparse_mla-0.0.9-py3-none-any.whl"

    rec.undo(LocalRunner())
    assert _env_state(py) == {"eps": ["triage_sparse_mla.plugin:register"], "version": "0.0.9"}
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "triage-sparse-mla"], check=True, timeout=120)


def test_apply_and_undo_through_the_real_transcript(venv, capsys):
    """The command as a user runs it: recorded by triage.transcript, reverted by `triage apply --undo`."""
    from triage.transcript import last_transcript

    py = str(venv / "bin" / "python")
    assert apply_cmd.main(["sparse-mla", "--python", py, "--yes", "--no-selftest"]) == 0
    assert _env_state(py)["version"] == action.package_version()
    t = last_transcript()
    assert t is not None and any("installed triage-sparse-mla" in str(e) for e in t.entries())
    capsys.readouterr()
    assert apply_cmd.main(["--undo", "--yes"]) == 0
    assert _env_state(py) == {"eps": [], "version": None}


def test_flagship_playbook_installs_the_real_backend_and_undo_removes_it(venv, tmp_path, capsys):
    """The flagship playbook's bundled-backend branch, with the real installer (no stand-in): the playbook
    installs triage_sparse_mla into the venv that runs (a stand-in) vLLM, edits the launch script,
    and `triage undo` reverts both."""
    from tests.playbook_support import diagnosis, snapshot, upstream_unknown
    from triage.commands import undo as undo_cmd
    from triage.playbooks.actions import default_actions
    from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
    from triage.playbooks.load import load_library

    py = str(venv / "bin" / "python")
    script = tmp_path / "serve.sh"
    original = f"#!/bin/bash\n{venv}/bin/vllm serve /models/GLM-5 \\\n  --tensor-parallel-size 8\n"
    script.write_text(original)
    new_log = tmp_path / "new.log"
    new_log.write_text("INFO 01-01 00:00:00 [launcher.py:1] Application startup complete.\n")
    facts = snapshot("sm120-nightly")
    facts.update({"python_prefix": str(venv), "python": {"executable": py, "version": "3"},
                  "vllm_version": "0.20.1", "patched_files": []})
    pb = load_library(include_user=False).get("attention-sparse-mla")
    s = Session(pb, derive_facts(facts, diagnosis("attention_backend"), log_path="vllm.log"),
                runner=LocalRunner(), upstream=upstream_unknown, actions=default_actions(),
                diagnose=lambda _p: [])
    out = io.StringIO()
    answers = ["y", "file", str(script), "y", "log", str(new_log)]
    front = ConsoleFrontEnd(out, io.StringIO("".join(a + "\n" for a in answers)), interactive=True)
    outcome = front.run(s)
    assert outcome == "apply:sparse-mla", out.getvalue()
    assert _env_state(py)["eps"] == ["triage_sparse_mla.plugin:register"]
    assert "--attention-backend CUSTOM" in script.read_text()

    capsys.readouterr()
    assert undo_cmd.main(["--yes"]) == 0
    assert _env_state(py) == {"eps": [], "version": None}
    assert script.read_text() == original
