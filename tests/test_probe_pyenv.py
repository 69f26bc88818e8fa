"""The Python-environment probe, run in real venvs with hand-made dist-infos (no vllm or torch import)."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes import fake_pynvml
from tests.fakes.fake_env import make_dist, make_venv, vllm_env
from triage.probes import gather
from triage.probes.collect import build_facts, install_provenance, python_candidates, run_probe_script
from triage.probes.script import parse_output, probe_script
from triage.runner import LocalRunner


def run_script(python, *args, env=None):
    p = subprocess.run([str(python), "-", *args], input=probe_script(), capture_output=True, text=True,
                       env=env, timeout=60)
    raw = parse_output(p.stdout)
    assert raw is not None, p.stderr
    return raw


@pytest.fixture(scope="module")
def nightly_env(tmp_path_factory):
    root = tmp_path_factory.mktemp("env") / "ml-env"
    python, site = vllm_env(root)
    return python, site


def test_reads_versions_without_importing(nightly_env):
    python, site = nightly_env
    raw = run_script(python, "--sections", "pyenv")
    assert raw["errors"] == {}
    py = raw["pyenv"]
    assert py["python"]["executable"] == str(python) and py["python"]["virtualenv"] is True
    pk = py["packages"]
    assert pk["vllm"] == "0.16.0rc2.dev313+g662205d34" and pk["torch"] == "2.10.0+cu129"
    assert pk["flashinfer-python"] == "0.6.3" and pk["nvidia-nccl-cu12"] == "2.27.5"
    assert "requests" not in pk  # only the packages that matter
    assert py["torch"]["cuda"] == "12.9"
    v = py["vllm"]
    assert v["installer"] == "pip" and v["direct_url"] is None and v["compiled_extension"] is True
    assert v["files"]["checked"] == 6 and v["files"]["patched"] == []


def test_patched_files_detected(tmp_path):
    python, site = vllm_env(tmp_path / "env")
    (site / "vllm/platforms/cuda.py").write_text("# SM120 hack\n" + (site / "vllm/platforms/cuda.py").read_text())
    (site / "vllm/v1/engine/core.py").unlink()
    (site / "vllm/v1/attention/backends/mla/my_backend.py").write_text("x = 1\n")
    raw = run_script(python, "--sections", "pyenv")
    files = raw["pyenv"]["vllm"]["files"]
    assert files["patched"] == ["vllm/platforms/cuda.py"]
    assert files["missing"] == ["vllm/v1/engine/core.py"]
    assert files["added"] == ["vllm/v1/attention/backends/mla/my_backend.py"]
    facts, findings = build_facts(raw)
    assert facts["patched_files"] == ["vllm/platforms/cuda.py"]
    fids = {f["id"] for f in findings}
    assert {"vllm.patched", "vllm.missing_files"} <= fids


def test_provenance_nightly_index(nightly_env):
    python, _ = nightly_env
    facts, _ = build_facts(run_script(python, "--sections", "pyenv"))
    inst = facts["vllm_install"]
    assert inst["kind"] == "nightly" and inst["source"] == "nightly-index" and inst["installer"] == "pip"
    assert inst["decoded"]["commit"] == "662205d34" and inst["decoded"]["dev_commits"] == 313
    assert "installed with pip" in inst["description"]
    assert facts["torch_cuda_version"] == "12.9" and facts["vllm_version"] == "0.16.0rc2.dev313+g662205d34"


def test_provenance_wheel_urls_and_uv(tmp_path):
    url = "https://wheels.vllm.ai/662205d34f3bd1a2c0a9e7d1f6b5a4c3d2e1f0a9/vllm-0.16.0rc2.dev313-cp38-abi3-manylinux1_x86_64.whl"
    python, _ = vllm_env(tmp_path / "e", installer="uv", direct_url={"url": url, "archive_info": {}})
    inst = build_facts(run_script(python, "--sections", "pyenv"))[0]["vllm_install"]
    assert inst["source"] == "per-commit-wheel" and inst["installer"] == "uv"
    assert install_provenance({"version": "0.16.0rc2.dev313+g662205d34", "direct_url": {
        "url": "https://wheels.vllm.ai/nightly/vllm-0.16.0rc2.dev313-cp38-abi3-manylinux1_x86_64.whl",
        "archive_info": {}}})["source"] == "nightly-wheel"


def test_provenance_vcs(tmp_path):
    du = {"url": "https://github.com/vllm-project/vllm.git",
          "vcs_info": {"vcs": "git", "commit_id": "662205d34f3bd1a2c0a9e7d1f6b5a4c3d2e1f0a9", "requested_revision": "main"}}
    python, _ = vllm_env(tmp_path / "e", direct_url=du)
    inst = build_facts(run_script(python, "--sections", "pyenv"))[0]["vllm_install"]
    assert inst["source"] == "git" and "662205d34f3b" in inst["description"] and "main" in inst["description"]


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_editable_asks_git(tmp_path):
    src = tmp_path / "vllm-src"
    (src / "vllm/platforms").mkdir(parents=True)
    (src / "vllm/platforms/cuda.py").write_text("a = 1\n")
    (src / "vllm/__init__.py").write_text("")
    g = ["git", "-C", str(src), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(g + ["init", "-q"], check=True)
    subprocess.run(g + ["add", "."], check=True)
    subprocess.run(g + ["commit", "-qm", "base"], check=True)
    subprocess.run(g + ["tag", "v0.16.0rc1"], check=True)
    (src / "vllm/platforms/cuda.py").write_text("a = 2  # patched\n")
    (src / "vllm/new_backend.py").write_text("b = 1\n")
    python, site = make_venv(tmp_path / "env")
    make_dist(site, "vllm", "0.16.0rc2.dev0+g1234567.d20260301",
              {"__editable__.vllm-0.16.0.pth": str(src) + "\n"},
              direct_url={"url": src.as_uri(), "dir_info": {"editable": True}})
    facts, findings = build_facts(run_script(python, "--sections", "pyenv"))
    inst = facts["vllm_install"]
    assert inst["editable"] and inst["source"] == "editable"
    assert inst["git"]["modified"] == ["vllm/platforms/cuda.py"]
    assert inst["git"]["untracked"] == ["vllm/new_backend.py"]
    assert inst["git"]["describe"].startswith("v0.16.0rc1") and inst["git"]["describe"].endswith("-dirty")
    assert facts["patched_files"] == ["vllm/platforms/cuda.py"]
    assert "vllm.patched" in {f["id"] for f in findings}


def test_duplicates_and_legacy_pynvml(tmp_path):
    python, site = vllm_env(tmp_path / "e", extra={"pynvml": "11.4.1"})
    other = tmp_path / "user-site"
    make_dist(other, "torch", "2.9.0+cu128", {"torch/version.py": "cuda = '12.8'\n"})
    import os
    env = dict(os.environ, PYTHONPATH=str(other))
    facts, findings = build_facts(run_script(python, "--sections", "pyenv", env=env))
    fids = {f["id"] for f in findings}
    assert "python.duplicate_package" in fids and "python.legacy_pynvml" in fids
    assert facts["packages"]["torch"] == "2.9.0+cu128"  # PYTHONPATH comes first: that is what imports


def test_shadowing_legacy_pynvml_module_found_by_script(tmp_path):
    """A legacy pynvml dist that ships pynvml.py is named in the GPU section's findings."""
    python, site = make_venv(tmp_path / "e")
    src = Path(fake_pynvml.__file__).read_text()
    make_dist(site, "pynvml", "11.4.1", {"pynvml.py": src})
    import os
    env = dict(os.environ, FAKE_NVML_PROFILE="t4")
    raw = run_script(python, "--sections", "gpu", env=env)
    f = [x for x in raw["gpu"]["findings"] if x["id"] == "nvml.shadowed_pynvml"]
    assert f and "pynvml 11.4.1" in f[0]["title"]
    assert raw["gpu"]["gpus"][0]["name"] == "Tesla T4"


def test_driver_older_than_torch_cuda():
    raw = {"gpu": {"gpus": [], "driver_version": "550.127.05", "cuda_driver_version": "12.4", "findings": []},
           "pyenv": {"python": {"executable": "/x/bin/python"}, "packages": {"torch": "2.10.0+cu129"},
                     "vllm": None, "torch": {"version": "2.10.0+cu129", "cuda": None}}}
    facts, findings = build_facts(raw)
    assert facts["torch_cuda_version"] == "12.9"  # from the +cu129 suffix when version.py is unreadable
    f = [x for x in findings if x["id"] == "cuda.driver_too_old"]
    assert f and f[0]["severity"] == "error" and "12.4" in f[0]["title"]


def test_arch_list_missing_blackwell():
    raw = {"gpu": {"gpus": [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                             "compute_capability": "12.0"}], "findings": []},
           "pyenv": {"python": {"executable": "p"}, "packages": {}, "vllm": None,
                     "torch": {"version": "2.5.1+cu124", "cuda": "12.4"},
                     "torch_deep": {"arch_list": ["sm_80", "sm_86", "sm_90"], "cuda": "12.4"}}}
    facts, findings = build_facts(raw)
    assert facts["torch_arch_list"] == ["sm_80", "sm_86", "sm_90"]
    assert "torch.arch_missing" in {f["id"] for f in findings}
    raw["pyenv"]["torch_deep"]["arch_list"] = ["sm_90", "sm_100", "sm_120"]
    assert "torch.arch_missing" not in {f["id"] for f in build_facts(raw)[1]}


def test_deep_runs_torch_in_a_subprocess(tmp_path):
    python, site = vllm_env(tmp_path / "e")
    # a torch that imports: a tiny stand-in module with the attributes the deep probe reads
    (site / "torch/__init__.py").write_text(
        "__version__ = '2.10.0+cu129'\n"
        "class version: cuda = '12.9'\n"
        "class _Cudnn:\n    @staticmethod\n    def is_available(): return False\n"
        "class backends: cudnn = _Cudnn\n"
        "class cuda:\n    @staticmethod\n    def get_arch_list(): return ['sm_90', 'sm_100', 'sm_120']\n"
        "    @staticmethod\n    def is_available(): return False\n"
        "class _C: _GLIBCXX_USE_CXX11_ABI = True\n")
    raw = run_script(python, "--sections", "pyenv", "--deep")
    assert raw["pyenv"]["torch_deep"]["arch_list"] == ["sm_90", "sm_100", "sm_120"]
    (site / "torch/__init__.py").write_text("import time\ntime.sleep(30)\n")
    raw = run_script(python, "--sections", "pyenv", "--deep", "--deep-timeout", "1")
    assert "timed out" in raw["pyenv"]["torch_deep"]["error"]


def test_python_candidates():
    """Only the interpreter the user named, ours, or a remote PATH's: never one a log names."""
    assert python_candidates("/opt/py") == ["/opt/py"]
    assert python_candidates() == [sys.executable]
    assert python_candidates(remote=True) == ["python3", "python"]


def test_gather_uses_the_logs_python(nightly_env, monkeypatch):
    python, site = nightly_env
    fake_pynvml.configure("rtxpro6000x8")
    monkeypatch.setitem(sys.modules, "pynvml", fake_pynvml)
    prefix = str(python.parent.parent)
    probe = gather(site_packages=str(site))
    assert probe.ok and probe.facts["python"]["executable"] == str(python.parent / site.parent.name)
    assert probe.facts["compute_capability"] == "12.0"
    assert probe.facts["gpu_summary"] == "8x NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert probe.facts["vllm_install"]["kind"] == "nightly"
    probe = gather(python_prefix=prefix)
    assert probe.facts["python"]["prefix"] == prefix
    json.dumps(probe.to_json())


def test_gather_log_env_absent(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    probe = gather(site_packages="/nonexistent/ml-env/lib/python3.12/site-packages")
    assert probe.facts["python"]["executable"] == sys.executable
    assert probe.findings[0]["id"] == "python.log_env_absent"


def test_gather_bad_python(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    probe = gather(python="/nonexistent/bin/python")
    assert probe.ok and probe.findings[0]["id"] == "python.probe_failed"
    assert "/nonexistent/bin/python" in probe.findings[0]["title"]


def test_run_probe_script_tries_next_python(nightly_env):
    python, _ = nightly_env
    raw, used, err = run_probe_script(LocalRunner(), ["/nonexistent/python3", str(python)], sections="pyenv",
                                      deep=False, timeout=60)
    assert err is None and used == str(python) and raw["pyenv"]["packages"]["vllm"]
