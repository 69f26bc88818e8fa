"""The flagship playbook for real, against a throwaway venv holding a (fake, tiny) vLLM with a
hand-patched file: the bundled-backend branch (installer stand-in, a real edit of the launch script
with its backup, a real `triage undo`), and the upgrade branch (real save-patches, a real pip
upgrade from a local wheelhouse)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.playbook_support import FakeSparseMlaModule, diagnosis, fake_actions, snapshot, upstream_fixes, upstream_unknown
from triage.commands import undo as undo_cmd
from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
from triage.playbooks.load import load_library
from triage.runner import LocalRunner
from triage.transcript import last_transcript

OLD = "0.16.0rc2.dev313+g662205d34"
PATCHED = "# hand patch: allow SM120\nSUPPORTED = (9, 10, 12)\n"


def make_wheel(folder: Path, version: str) -> Path:
    files = {
        "vllm/__init__.py": f"__version__ = {version!r}\n",
        "vllm/platforms/__init__.py": "",
        "vllm/platforms/cuda.py": "SUPPORTED = (9, 10)\n",
        f"vllm-{version}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n",
        f"vllm-{version}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{name},sha256={digest},{len(text.encode())}")
    record.append(f"vllm-{version}.dist-info/RECORD,,")
    files[f"vllm-{version}.dist-info/RECORD"] = "\n".join(record) + "\n"
    path = folder / f"vllm-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory):
    d = tmp_path_factory.mktemp("wheelhouse")
    make_wheel(d, "0.17.0")
    return d


@pytest.fixture()
def env(request, tmp_path, monkeypatch, wheelhouse):
    """A venv with the old vLLM; with pip only where the test upgrades (pip makes the venv slow)."""
    with_pip = getattr(request, "param", False)
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(wheelhouse))
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    venv = tmp_path / "ml-env"
    subprocess.run([sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    old = make_wheel(tmp_path, OLD)
    if with_pip:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(old)], check=True, timeout=120)
    else:
        with zipfile.ZipFile(old) as zf:  # what an installer does with a pure-Python wheel
            zf.extractall(site)
    (Path(site) / "vllm" / "platforms" / "cuda.py").write_text(PATCHED)
    facts = snapshot("sm120-nightly")
    facts.update({"python_prefix": str(venv), "python": {"executable": str(py), "version": "3"},
                  "vllm_version": OLD, "patched_files": ["vllm/platforms/cuda.py"]})
    script = tmp_path / "serve.sh"
    script.write_text(f"#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7\n{venv}/bin/vllm serve /models/GLM-5 \\\n  --tensor-parallel-size 8\n")
    return {"py": py, "site": Path(site), "facts": facts, "script": script, "tmp": tmp_path}


def fake_diagnose(path):
    text = Path(path).read_text()
    if "No valid attention backend" in text:
        return [{"category": "attention_backend", "signature": "attention.no_valid_backend", "title": "No valid attention backend"}]
    return []


def run_flagship(env, upstream, answers, module=None):
    pb = load_library(include_user=False).get("attention-sparse-mla")
    facts = derive_facts(env["facts"], diagnosis("attention_backend"), log_path="vllm.log")
    s = Session(pb, facts, runner=LocalRunner(), upstream=upstream, actions=fake_actions(module),
                sparse_probe=lambda: {"available": True}, diagnose=fake_diagnose)
    out = io.StringIO()
    front = ConsoleFrontEnd(out, io.StringIO("".join(a + "\n" for a in answers)), interactive=True)
    outcome = front.run(s)
    return outcome, s, out.getvalue()


def test_bundled_backend_branch_then_undo(env, capsys):
    original = env["script"].read_text()
    new_log = env["tmp"] / "new.log"
    new_log.write_text("INFO 01-01 00:00:00 [launcher.py:1] Application startup complete.\n")
    module = FakeSparseMlaModule()
    answers = ["y", "file", str(env["script"]), "y", "log", str(new_log)]
    outcome, s, text = run_flagship(env, upstream_unknown, answers, module)
    assert outcome == "apply:sparse-mla", text
    assert module.calls == 1
    edited = env["script"].read_text()
    assert "vllm serve --attention-backend CUSTOM /models/GLM-5" in edited
    assert "+" in text and "--attention-backend CUSTOM" in text  # the diff was shown before the edit
    marker = env["site"] / "triage_sparse_mla_fake.pth"
    assert marker.exists()
    t = last_transcript()
    assert t is not None and t.meta["outcome"] == "apply:sparse-mla"
    backups = [e for e in t.entries() if e["type"] == "backup" and e["path"] == str(env["script"])]
    assert backups and Path(backups[0]["backup"]).read_text() == original

    assert undo_cmd.main(["--yes"]) == 0
    out = capsys.readouterr().out
    assert env["script"].read_text() == original
    assert not marker.exists(), out
    assert "reverted: restored" in out


def test_bundled_backend_verification_sees_the_same_failure(env):
    bad_log = env["tmp"] / "bad.log"
    bad_log.write_text("ValueError: No valid attention backend found for cuda with ...\n")
    answers = ["y", "hand", "log", str(bad_log)]
    outcome, s, text = run_flagship(env, upstream_unknown, answers)
    assert outcome == "manual:escalate"
    assert s.visited[-2:] == ["verify-failed", "still-no-backend"]
    assert "`--attention-backend CUSTOM`" in text


@pytest.mark.parametrize("env", [True], indirect=True, ids=["with-pip"])
def test_upgrade_branch_saves_patches_and_upgrades(env, capsys):
    answers = ["upgrade", "y", "y", "skip"]
    outcome, s, text = run_flagship(env, upstream_fixes("0.17.0"), answers)
    assert outcome == "upgrade:vllm", text
    version = subprocess.run([str(env["py"]), "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "0.17.0"
    saved_dir = Path(s.facts["saved_patches_dir"])
    assert (saved_dir / "vllm" / "platforms" / "cuda.py").read_text() == PATCHED
    manifest = json.loads((saved_dir / "MANIFEST.json").read_text())
    assert manifest["vllm_version"] == OLD and manifest["files"][0]["path"].endswith("vllm/platforms/cuda.py")
    # The upgrade overwrote the patch; the saved copy is what keeps it.
    assert (env["site"] / "vllm" / "platforms" / "cuda.py").read_text() != PATCHED
    assert "-m pip install vllm==0.17.0" in text
    # A nightly build cannot be put back by version: undo says so instead of pretending.
    assert undo_cmd.main(["--yes"]) == 0
    out = capsys.readouterr().out
    assert "cannot revert" in out and OLD in out
