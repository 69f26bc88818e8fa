"""`triage apply sparse-mla` into a real venv that holds a real vLLM release: the install is
verified through vLLM itself (triage_sparse_mla.vllm_check in the target interpreter), a failed
check undoes it at once, and a release outside the proven range is refused before anything changes.

The venv is a GPU machine as far as vLLM can tell: a .pth hook replaces the compiled extension
modules whose import fails here and answers the device query with compute capability 12.0 (the
probe's pretend_gpu_machine); torch, triton and pip come from the suite's environment.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_envs
from triage.actions import sparse_mla as action
from triage.commands import apply as apply_cmd
from triage.runner import LocalRunner, Result

HERE = Path(__file__).resolve().parent
NEWEST = "0.33.0"
TOO_OLD = "0.15.1"


class MemRecorder:
    def __init__(self) -> None:
        self.commands: list[tuple[list[str], int]] = []
        self.changes: list[tuple[str, list[str] | None]] = []
        self.notes: list[str] = []

    def command(self, argv: list[str], result: Result, where: str) -> None:
        self.commands.append((list(argv), result.returncode))

    def backup(self, path: str, runner) -> str | None:
        return None

    def change(self, description: str, undo_argv: list[str] | None) -> None:
        self.changes.append((description, undo_argv))

    def note(self, text: str) -> None:
        self.notes.append(text)


def make_venv(root: Path, version: str) -> str:
    venv = root / f"venv-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = next((venv / "lib").glob("python3*/site-packages"))
    lines = [str(p) for p in vllm_envs.release_paths(version)] + [vllm_envs.outer_site_packages(), str(HERE)]
    lines.append("import probe; probe.pretend_gpu_machine(lazy=True)")
    (site / "zz_triage_test_env.pth").write_text("\n".join(lines) + "\n")
    return str(venv / "bin" / "python")


def env_state(py: str) -> dict:
    # vLLM declares general plugins of its own (LoRA resolvers): only the others count here
    code = ("import json\nfrom importlib import metadata\n"
            "eps = sorted(e.value for e in metadata.entry_points(group='vllm.general_plugins') if not e.value.startswith('vllm.'))\n"
            "try:\n    v = metadata.version('triage-sparse-mla')\nexcept metadata.PackageNotFoundError:\n    v = None\n"
            "print(json.dumps({'eps': eps, 'version': v}))\n")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


def pip_install(py: str, wheel: Path) -> None:
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--disable-pip-version-check",
                    str(wheel)], check=True, timeout=300, capture_output=True)


@pytest.fixture(scope="module")
def newest_py(tmp_path_factory) -> str:
    return make_venv(tmp_path_factory.mktemp("apply"), NEWEST)


def test_apply_verifies_through_vllm_and_undo_removes_it(newest_py, capsys):
    py = newest_py
    assert env_state(py) == {"eps": [], "version": None}
    assert apply_cmd.main(["sparse-mla", "--python", py, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert f"$ {py} -m triage_sparse_mla.vllm_check --heads 128 --topk 2048" in out
    assert env_state(py)["version"] is None

    rec = MemRecorder()
    rc = apply_cmd.main(["sparse-mla", "--python", py, "--yes", "--heads", "16"], runner=LocalRunner(), recorder=rec)
    captured = capsys.readouterr()
    assert rc == 0, captured.err + captured.out
    assert f"vLLM {NEWEST} loaded it, selected it and built it" in captured.out
    assert "add this flag to your vllm serve command: --attention-backend CUSTOM" in captured.out
    assert "kernel self-test skipped: no CUDA device" in captured.out
    assert env_state(py) == {"eps": ["triage_sparse_mla.plugin:register"], "version": action.package_version()}
    (desc, undo_argv), = rec.changes
    assert undo_argv == [py, "-m", "pip", "uninstall", "-y", "triage-sparse-mla"]
    check_cmd = [a for a, _rc in rec.commands if a[1:3] == ["-m", "triage_sparse_mla.vllm_check"]]
    assert check_cmd and check_cmd[0][3:] == ["--heads", "16", "--topk", "2048"]
    assert LocalRunner().run(undo_argv, timeout=300).ok
    assert env_state(py) == {"eps": [], "version": None}


def _other_plugin_wheel(tmp: Path) -> Path:
    """Another vLLM plugin that takes the CUSTOM attention slot first (a real conflict)."""
    code = (b"def register():\n"
            b"    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend\n"
            b"    register_backend(AttentionBackendEnum.CUSTOM, 'other_attn.Backend')\n")
    return action.write_wheel(tmp, {"other_attn/__init__.py": code}, "other-attn", "1.0",
                              entry_points={"vllm.general_plugins": {"aaa_other_attn": "other_attn:register"}})


def test_failed_check_undoes_the_install_and_restores_the_previous_version(newest_py, tmp_path, capsys, monkeypatch):
    py = newest_py
    src = action._package_dir()
    files = {f"triage_sparse_mla/{p.name}": p.read_bytes() for p in src.glob("*.py")}
    old = action.write_wheel(tmp_path, files, "triage-sparse-mla", "0.0.9",
                             entry_points={"vllm.general_plugins": {"triage_sparse_mla": action.ENTRY_VALUE}})
    pip_install(py, old)
    pip_install(py, _other_plugin_wheel(tmp_path))
    before = env_state(py)
    assert before["version"] == "0.0.9"
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))  # where the target keeps the saved wheel

    rec = MemRecorder()
    rc = apply_cmd.main(["sparse-mla", "--python", py, "--yes", "--no-selftest", "--heads", "16"],
                        runner=LocalRunner(), recorder=rec)
    err = capsys.readouterr().err
    assert rc == 1
    first = err.strip().splitlines()[0]
    assert first.startswith("check failed: loader: ") or first.startswith("check failed: registry: "), err
    assert "other_attn.Backend" in err or "already holds" in err, err
    assert "the install was undone: reinstalled triage-sparse-mla 0.0.9" in err
    assert env_state(py) == before
    assert rec.notes and "undone" in rec.notes[0]
    subprocess.run([py, "-m", "pip", "uninstall", "-y", "-q", "triage-sparse-mla", "other-attn"], check=True,
                   timeout=300, capture_output=True)
    assert env_state(py) == {"eps": [], "version": None}


def test_release_outside_the_range_is_refused_before_anything_changes(tmp_path, capsys):
    py = make_venv(tmp_path, TOO_OLD)
    rec = MemRecorder()
    rc = apply_cmd.main(["sparse-mla", "--python", py, "--yes"], runner=LocalRunner(), recorder=rec)
    err = capsys.readouterr().err
    assert rc == 2
    assert f"refused: vLLM {TOO_OLD} is older than 0.16" in err
    assert rec.commands == [] and rec.changes == []
    assert env_state(py) == {"eps": [], "version": None}


def test_flagship_playbook_installs_into_real_vllm_and_undo_removes_it(newest_py, tmp_path, capsys):
    """The flagship's bundled branch end to end with the real installer and a real vLLM: the
    playbook installs triage_sparse_mla (verified through vLLM), edits the launch script, and
    `triage undo` reverts both."""
    from tests.playbook_support import diagnosis, snapshot, upstream_unknown
    from triage.commands import undo as undo_cmd
    from triage.playbooks.actions import default_actions
    from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
    from triage.playbooks.load import load_library

    py = newest_py
    venv = Path(py).parent.parent
    script = tmp_path / "serve.sh"
    original = f"#!/bin/bash\n{venv}/bin/vllm serve /models/GLM-5 \\\n  --tensor-parallel-size 8\n"
    script.write_text(original)
    new_log = tmp_path / "new.log"
    new_log.write_text("INFO 01-01 00:00:00 [launcher.py:1] Application startup complete.\n")
    facts = snapshot("sm120-nightly")
    facts.update({"python_prefix": str(venv), "python": {"executable": py, "version": "3"},
                  "vllm_version": NEWEST, "patched_files": []})
    pb = load_library(include_user=False).get("attention-sparse-mla")
    s = Session(pb, derive_facts(facts, diagnosis("attention_backend"), log_path="vllm.log"),
                runner=LocalRunner(), upstream=upstream_unknown, actions=default_actions(),
                diagnose=lambda _p: [])
    out = io.StringIO()
    answers = ["y", "file", str(script), "y", "log", str(new_log)]
    front = ConsoleFrontEnd(out, io.StringIO("".join(a + "\n" for a in answers)), interactive=True)
    outcome = front.run(s)
    assert outcome == "apply:sparse-mla", out.getvalue()
    assert env_state(py)["eps"] == ["triage_sparse_mla.plugin:register"]
    assert "--attention-backend CUSTOM" in script.read_text()

    capsys.readouterr()
    assert undo_cmd.main(["--yes"]) == 0
    assert env_state(py) == {"eps": [], "version": None}
    assert script.read_text() == original
