"""`triage probe`: JSON contract, readable table, fleet diff, --save-patches, usage errors."""

import json
import sys

import pytest

from tests.fakes import fake_pynvml
from tests.fakes.fake_env import vllm_env
from tests.fakes.ssh_lab import dead_port, host_env, lab, machines  # noqa: F401 (fixtures)
from triage.commands.probe import main, save_patches
from triage.probes.collect import HostProbe


@pytest.fixture
def patched_env(tmp_path):
    python, site = vllm_env(tmp_path / "ml-env")
    for rel in ("vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/flashmla_sparse.py"):
        (site / rel).write_text((site / rel).read_text() + "# local SM120 patch\n")
    return python, site


def run(capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_local_json_contract(capsys, monkeypatch, patched_env):
    python, _ = patched_env
    fake_pynvml.configure("rtxpro6000x8")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    code, out, err = run(capsys, ["--python", str(python), "--json"])
    assert code == 0, err
    data = json.loads(out)
    [h] = data["hosts"]
    assert set(h) == {"host", "ok", "error", "facts", "findings"} and h["ok"] is True and h["error"] is None
    f = h["facts"]
    for key in ("gpus", "driver_version", "cuda_driver_version", "python", "packages", "vllm_install", "os"):
        assert key in f
    assert set(f["python"]) >= {"executable", "version"} and f["python"]["executable"] == str(python)
    assert f["packages"]["vllm"] == "0.16.0rc2.dev313+g662205d34"
    assert len(f["patched_files"]) == 2
    for fd in h["findings"]:
        assert set(fd) == {"id", "severity", "title", "fix"} and fd["severity"] in ("info", "warning", "error")
    assert "diff" not in data


def test_local_table(capsys, monkeypatch, patched_env):
    python, _ = patched_env
    fake_pynvml.configure("rtxpro6000x8_busy")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    code, out, _ = run(capsys, ["--python", str(python)])
    assert code == 0
    assert "NVIDIA RTX PRO 6000 Blackwell Server Edition" in out and "12.0" in out
    assert "0.16.0rc2.dev313+g662205d34" in out and "vllm/platforms/cuda.py" in out
    assert "48213" in out and "fix:" in out
    assert "\x1b[" not in out  # no colour when not a terminal


def test_save_patches_local(capsys, monkeypatch, patched_env, tmp_path):
    python, site = patched_env
    monkeypatch.setitem(sys.modules, "pynvml", None)
    dest = tmp_path / "saved"
    code, out, _ = run(capsys, ["--python", str(python), "--save-patches", str(dest)])
    assert code == 0 and "Saved 2 patched file(s)" in out
    saved = dest / "vllm/platforms/cuda.py"
    assert saved.read_text() == (site / "vllm/platforms/cuda.py").read_text()
    manifest = json.loads((dest / "triage-patches.json").read_text())
    assert manifest["vllm_version"] == "0.16.0rc2.dev313+g662205d34"
    assert sorted(f["path"] for f in manifest["files"]) == [
        "vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/flashmla_sparse.py"]


def test_save_patches_refuses_paths_outside(tmp_path):
    root = tmp_path / "site"
    (root / "vllm").mkdir(parents=True)
    (root / "vllm/a.py").write_text("a")
    (tmp_path / "secret").write_text("s")
    p = HostProbe(host="h", ok=True, facts={"vllm_install": {"location": str(root), "patched_files": [
        "vllm/a.py", "../secret", "/etc/passwd"]}})
    written = save_patches([p], tmp_path / "out", remote=False)
    assert sorted(w.rsplit("/out/", 1)[1] for w in written) == ["triage-patches.json", "vllm/a.py"]


def test_fleet_json_and_table(capsys, lab, machines, tmp_path):  # noqa: F811
    a = lab.server(host_env(machines, "a", "rtxpro6000x8"))
    b = lab.server(host_env(machines, "b", "h100x8"))
    inv = tmp_path / "inventory.yml"
    inv.write_text(f"all:\n  hosts:\n    gpu-b:\n      ansible_host: 127.0.0.1\n      ansible_port: {b.port}\n"
                   f"    dead:\n      ansible_host: 127.0.0.1\n      ansible_port: {dead_port()}\n")
    lab.config(f"Host gpu-a\n  HostName 127.0.0.1\n  Port {a.port}\n")
    code, out, _ = run(capsys, ["--host", "gpu-a", "--hosts", str(inv), "--json", "--timeout", "60"])
    assert code == 4  # one host could not be probed
    data = json.loads(out)
    assert [h["ok"] for h in data["hosts"]] == [True, True, False]
    assert "connection refused" in data["hosts"][2]["error"]
    assert data["diff"]["driver"] == {"gpu-a": "580.95.05", f"127.0.0.1:{b.port}": "550.127.05"}

    dest = tmp_path / "patches"
    code, out, _ = run(capsys, ["--host", "gpu-a", "--host", f"127.0.0.1:{b.port}", "--save-patches", str(dest)])
    assert code == 0
    assert "fleet: what differs" in out and "580.95.05" in out and "550.127.05" in out
    assert (dest / "gpu-a/vllm/platforms/cuda.py").read_text().endswith("# allow SM120\n")
    assert not (dest / f"127.0.0.1_{b.port}").exists()  # nothing patched there


@pytest.mark.parametrize("argv,msg", [
    (["--host", "-oProxyCommand=touch x"], "bad host"),
    (["--hosts", "/nonexistent/inv"], "cannot read host inventory"),
    (["--timeout", "0"], "must be positive"),
    (["--nope"], "unrecognized arguments"),
])
def test_usage_errors(capsys, argv, msg):
    code, out, err = run(capsys, argv)
    assert code == 2 and out == "" and msg in err and len(err.strip().splitlines()) == 1
