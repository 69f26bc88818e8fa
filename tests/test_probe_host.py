"""Host facts: CUDA toolkits, /dev/shm, containers, OS, CUDA_VISIBLE_DEVICES mapping, and their findings."""

import json

from tests.fakes import fake_pynvml
from triage.probes.gpu import probe_gpus
from triage.probes.host import (container, cuda_toolkits, host_findings, kernel_module_version,
                                map_visible_devices, os_info, probe_host, shm)


def gpus(profile):
    fake_pynvml.configure(profile)
    return probe_gpus(fake_pynvml)["gpus"]


def test_visible_devices_indices_and_uuids():
    g = gpus("rtxpro6000x8")
    m = map_visible_devices("4,5", g)
    assert [(v["logical"], v["physical_index"]) for v in m["visible"]] == [(0, 4), (1, 5)]
    uuid = g[6]["uuid"]
    m = map_visible_devices(f"{uuid[:12]},3", g)  # an ambiguous prefix matches no GPU
    assert m["invalid"] == uuid[:12] and m["visible"] == []
    m = map_visible_devices(f"{uuid},3", g)
    assert [v["physical_index"] for v in m["visible"]] == [6, 3]


def test_visible_devices_stop_at_invalid_entry():
    g = gpus("h100x8")
    m = map_visible_devices("0,9,1", g)
    assert [v["physical_index"] for v in m["visible"]] == [0] and m["invalid"] == "9"
    f = host_findings({"gpus": g, "cuda_visible_devices": m})
    assert "host.cuda_visible_devices_invalid" in {x["id"] for x in f}


def test_visible_devices_empty_hides_all():
    g = gpus("t4")
    m = map_visible_devices("", g)
    assert m["visible"] == []
    assert "host.cuda_visible_devices_empty" in {x["id"] for x in host_findings({"gpus": g, "cuda_visible_devices": m})}
    assert map_visible_devices(None, g) is None


def test_visible_devices_mig():
    g = gpus("a100_mig")
    mig = g[0]["mig"]["devices"][1]["uuid"]
    m = map_visible_devices(mig, g)
    assert m["visible"][0]["physical_index"] == 0 and m["invalid"] is None


def test_cuda_toolkits(tmp_path, monkeypatch):
    new = tmp_path / "cuda-12.8"
    (new / "bin").mkdir(parents=True)
    (new / "version.json").write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.8.1"}}))
    old = tmp_path / "cuda-11.0"
    old.mkdir()
    (old / "version.txt").write_text("CUDA Version 11.0.228\n")
    link = tmp_path / "cuda"
    link.symlink_to(new)
    nvcc = new / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.8, V12.8.93'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(new / "bin"))
    tk = cuda_toolkits([str(link), str(old), str(new), str(tmp_path / "missing")])
    assert [(t["path"].rsplit("/", 1)[1], t["version"]) for t in tk["toolkits"]] == [
        ("cuda", "12.8.1"), ("cuda-11.0", "11.0.228"), ("cuda-12.8", "12.8.1")]
    assert tk["toolkits"][0]["link_to"] == str(new)
    assert tk["nvcc"] == {"path": str(nvcc), "version": "12.8.1"}  # from version.json, nvcc not started
    (new / "version.json").unlink()
    assert cuda_toolkits([])["nvcc"]["version"] == "12.8.93"


def test_no_toolkit_is_info(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    tk = cuda_toolkits([])
    assert tk == {"toolkits": [], "nvcc": None}
    f = host_findings({"cuda_toolkit": tk})
    assert [x["severity"] for x in f if x["id"] == "host.no_cuda_toolkit"] == ["info"]


def test_container_detection(tmp_path, monkeypatch):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("container", raising=False)
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/init.scope\n")
    assert container(str(tmp_path)) == {"in_container": False, "runtime": None}
    (tmp_path / "proc/1/cgroup").write_text("0::/kubepods/besteffort/pod1/abc\n")
    assert container(str(tmp_path))["runtime"] == "kubernetes"
    (tmp_path / ".dockerenv").write_text("")
    assert container(str(tmp_path))["runtime"] == "docker"
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert container(str(tmp_path))["runtime"] == "kubernetes"


def test_small_shm_in_container():
    f = host_findings({"shm": {"size_mib": 64, "free_mib": 64}, "container": {"in_container": True}})
    [x] = [x for x in f if x["id"] == "host.shm_small"]
    assert x["severity"] == "warning" and "--shm-size" in x["fix"]


def test_kernel_module_mismatch(tmp_path):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.133.20  Release Build  (dvs-builder@U16)\n"
        "GCC version:  gcc version 12.3.0\n")
    km = kernel_module_version(str(tmp_path))
    assert km == "570.133.20"
    f = host_findings({"kernel_module_version": km, "driver_version": "580.95.05"})
    assert "host.driver_module_mismatch" in {x["id"] for x in f}
    assert not host_findings({"kernel_module_version": km, "driver_version": "570.133.20",
                              "cuda_toolkit": {"toolkits": [{"path": "x"}]}})


def test_os_and_shm_real():
    o = os_info()
    assert o["kernel"] and o["arch"]
    s = shm()
    assert s is None or s["size_mib"] >= 0
    facts = probe_host([], environ={"CUDA_VISIBLE_DEVICES": "0"})
    assert facts["cuda_visible_devices"]["invalid"] == "0"
    json.dumps(facts)
