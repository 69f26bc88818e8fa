"""GPU probe against the fake NVML module (same errors and codes as nvidia-ml-py)."""

import json
import sys

import pytest

from tests.fakes import fake_pynvml as fake
from triage.probes import gpu as gpu_mod
from triage.probes.gpu import NA, Nvml, cuda_version_str, probe_gpus


def ids(facts):
    return [f["id"] for f in facts["findings"]]


def test_fake_error_classes_behave_like_nvidia_ml_py():
    exc = fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)
    assert type(exc) is fake.NVMLError_NotSupported and exc.value == 3
    assert isinstance(fake.NVMLError_LibRmVersionMismatch(), fake.NVMLError)
    assert fake.nvmlExceptionClass(9) is fake.NVMLError_DriverNotLoaded
    fake.configure("t4")
    with pytest.raises(fake.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()


def test_rtx_pro_6000_x8():
    fake.configure("rtxpro6000x8")
    f = probe_gpus(fake)
    assert len(f["gpus"]) == 8
    g = f["gpus"][0]
    assert g["name"] == "NVIDIA RTX PRO 6000 Blackwell Server Edition"
    assert g["compute_capability"] == "12.0"
    assert g["memory_total_mib"] == 97887 and g["memory_free_mib"] == 97887
    assert g["persistence_mode"] == "enabled"
    assert g["mig"] == {"mode": "not supported"}
    assert g["nvlink"] == "not supported" and g["fabric"] == "not supported"
    assert g["uuid"].startswith("GPU-") and g["pci_bus_id"] == "00000000:18:00.0"
    assert f["driver_version"] == "580.95.05" and f["cuda_driver_version"] == "13.0"
    assert len({x["uuid"] for x in f["gpus"]}) == 8
    assert ids(f) == []
    json.dumps(f)  # NA values serialise as their reason


def test_init_once_and_lazily():
    fake.configure("h100x8")
    n = Nvml(fake)
    assert fake.calls == []  # nothing at construction
    n.q("nvmlDeviceGetCount")
    n.q("nvmlSystemGetDriverVersion")
    assert [c for c in fake.calls if c[0] == "nvmlInitWithFlags"] == [("nvmlInitWithFlags", 0)]


def test_h100_nvlink_and_fabric():
    fake.configure("h100x8")
    f = probe_gpus(fake)
    g = f["gpus"][7]
    assert g["compute_capability"] == "9.0"
    assert g["nvlink"] == {"links": 18, "active": 18}
    assert g["fabric"] == {"state": "completed", "status": "ok"}
    assert g["mig"] == {"mode": "disabled"}
    assert f["cuda_driver_version"] == "12.4"


def test_fabric_not_started_is_an_error():
    fake.configure("h100x8_fabric_down")
    f = probe_gpus(fake)
    assert "gpu.fabric_incomplete" in ids(f)


def test_a100_ecc_errors():
    fake.configure("a100x4")
    f = probe_gpus(fake)
    assert f["gpus"][0]["compute_capability"] == "8.0"
    assert f["gpus"][3]["ecc"]["uncorrected_volatile"] == 2
    assert "gpu.ecc_uncorrected" in ids(f)


def test_t4_persistence_off():
    fake.configure("t4")
    f = probe_gpus(fake)
    assert f["gpus"][0]["compute_capability"] == "7.5"
    assert "gpu.persistence_off" in ids(f)


def test_gb10_unified_memory_not_supported():
    fake.configure("gb10")
    f = probe_gpus(fake)
    g = f["gpus"][0]
    assert g["compute_capability"] == "12.1"
    assert g["memory_total_mib"] == "not supported" and isinstance(g["memory_total_mib"], NA)
    assert g["ecc"] == {"mode": "not supported"}


def test_mig():
    fake.configure("a100_mig")
    f = probe_gpus(fake)
    mig = f["gpus"][0]["mig"]
    assert mig["mode"] == "enabled"
    assert [d["memory_total_mib"] for d in mig["devices"]] == [19968, 9856, 4864]
    assert all(d["uuid"].startswith("MIG-") for d in mig["devices"])
    assert "gpu.mig_enabled" in ids(f)


def test_processes_holding_memory():
    fake.configure("rtxpro6000x8_busy")
    f = probe_gpus(fake)
    assert f["gpus"][0]["processes"] == [{"pid": 48213, "name": "/root/ml-env/bin/python3", "used_memory_mib": 88104}]
    held = [x for x in f["findings"] if x["id"] == "gpu.memory_held"]
    assert held and "48213" in held[0]["title"]


def test_mixed_models():
    fake.configure("mixed")
    assert "gpu.mixed_models" in ids(probe_gpus(fake))


@pytest.mark.parametrize("profile,fid,severity", [
    ("nodriver", "nvml.library_not_found", "warning"),
    ("not_loaded", "nvml.driver_not_loaded", "error"),
    ("mismatch", "nvml.version_mismatch", "error"),
    ("no_permission", "nvml.no_permission", "error"),
])
def test_library_failures_are_findings(profile, fid, severity):
    fake.configure(profile)
    f = probe_gpus(fake)
    assert f["gpus"] == [] and f["driver_version"] is None
    [finding] = f["findings"]
    assert finding["id"] == fid and finding["severity"] == severity and finding["fix"]


def test_each_call_fails_alone():
    fake.configure("h100x8")

    class Flaky:
        def __getattr__(self, name):
            return getattr(fake, name)

        def nvmlDeviceGetPersistenceMode(self, h):
            raise fake.NVMLError(fake.NVML_ERROR_NO_PERMISSION)

        def nvmlDeviceGetUUID(self, h):
            raise fake.NVMLError(fake.NVML_ERROR_GPU_IS_LOST)

    f = probe_gpus(Flaky())
    g = f["gpus"][0]
    assert g["persistence_mode"] == "no permission"
    assert g["uuid"] == "GPU is lost"
    assert g["compute_capability"] == "9.0"  # the rest still read


def test_missing_function_in_old_bindings():
    fake.configure("t4")

    class Old:
        def __getattr__(self, name):
            if name in ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"):
                raise AttributeError(name)
            return getattr(fake, name)

    f = probe_gpus(Old())
    assert f["gpus"][0]["fabric"] == "not in these NVML bindings"


def test_shadowing_module_without_new_calls():
    fake.configure("t4")

    class Legacy:  # an old pynvml without nvmlDeviceGetCudaComputeCapability
        def __getattr__(self, name):
            if name == "nvmlDeviceGetCudaComputeCapability":
                raise AttributeError(name)
            return getattr(fake, name)

    f = probe_gpus(Legacy())
    assert "nvml.shadowed_pynvml" in ids(f)
    assert f["gpus"][0]["compute_capability"] == "not in these NVML bindings"


def test_imports_pynvml_lazily_via_sys_modules(monkeypatch):
    fake.configure("gb10")
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert probe_gpus()["gpus"][0]["name"] == "NVIDIA GB10"


def test_bindings_missing_falls_back_to_nvidia_smi(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import raises ImportError
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\nif [ -n \"$1\" ]; then\n"
                   "echo '0, NVIDIA RTX PRO 6000 Blackwell Server Edition, GPU-aa, 12.0, 97887, 512, 97375, "
                   "Enabled, [N/A], 00000000:18:00.0, 580.95.05'\n"
                   "else echo '| NVIDIA-SMI 580.95.05   Driver Version: 580.95.05   CUDA Version: 13.0 |'; fi\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    f = probe_gpus()
    assert f["nvml_source"] == "nvidia-smi"
    g = f["gpus"][0]
    assert (g["compute_capability"], g["memory_used_mib"], g["persistence_mode"]) == ("12.0", 512, "enabled")
    assert f["driver_version"] == "580.95.05" and f["cuda_driver_version"] == "13.0"
    assert "nvml.bindings_missing" in ids(f)


def test_no_bindings_no_smi(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    f = probe_gpus()
    assert f["gpus"] == [] and "nvml.library_not_found" in ids(f)


def test_cuda_version_str():
    assert cuda_version_str(12080) == "12.8"
    assert cuda_version_str(13000) == "13.0"
    assert cuda_version_str(NA("x")) == "x"


def test_module_has_no_triage_imports():
    # its source runs alone on remote hosts
    import re

    src = open(gpu_mod.__file__).read()
    assert not re.search(r"^\s*(import|from) triage", src, re.M)
