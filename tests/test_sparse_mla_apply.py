"""`triage apply sparse-mla`: the wheel, the refusals and the command line. Installing into a real
venv with a real vLLM release is in tests/conformance/test_apply_real.py."""

from __future__ import annotations

import base64
import hashlib
import sys
import zipfile

import pytest

from triage.actions import sparse_mla as action
from triage.commands import apply as apply_cmd
from triage.runner import Result


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
        ({"vllm": "0.11.0"}, "older than 0.16"),
        ({"vllm": "0.15.1"}, "older than 0.16"),
        ({"vllm": "0.16.0rc2.dev313+g662205d34"}, None),  # the flagship operator's nightly
        ({"vllm": "0.33.0"}, None),
        ({"vllm": "0.34.0"}, "newer than the releases"),
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


# Installing into a real venv with a real vLLM, the checks through vLLM, the automatic undo and
# the flagship playbook's install: tests/conformance/test_apply_real.py.
