"""Environment.from_facts: what several keys of the environment facts say about one thing, settled once."""

from __future__ import annotations

from triage.computecap import ComputeCapability
from triage.environment import Environment, Gpu


def test_from_probe_facts():
    env = Environment.from_facts({
        "gpus": [{"name": "NVIDIA RTX PRO 6000", "index": 0, "compute_capability": "12.0",
                  "processes": [{"pid": 7, "name": "python", "used_memory_mib": 900}, "junk"]}, "junk"],
        "driver_version": "580.65", "cuda_driver_version": "13.0", "torch_cuda_version": "12.8",
        "torch_arch_list": ["sm_90", "sm_120"], "python": {"executable": "/venv/bin/python"},
        "packages": {"vllm": "0.16.0rc2.dev313", "torch": "2.9.0"},
        "vllm_install": {"version": "0.16.0rc2.dev313", "source": "nightly-index", "patched_files": ["vllm/a.py"]},
    })
    assert env.gpus == (Gpu("NVIDIA RTX PRO 6000", 0, ComputeCapability(12, 0),
                            ({"pid": 7, "name": "python", "used_memory_mib": 900},)),)
    assert env.compute_capability == ComputeCapability(12, 0)  # from the GPUs: the facts name none of their own
    assert env.vllm_version == "0.16.0rc2.dev313"  # from the install when the facts have no vllm_version
    assert env.patched_files == ("vllm/a.py",)
    assert env.torch_arch_list == ("sm_90", "sm_120") and env.python_executable == "/venv/bin/python"


def test_patched_files_in_either_shape_and_nothing_known():
    env = Environment.from_facts({"patched_files": [{"path": "vllm/b.py", "sha256": "x"}, "vllm/c.py", 3]})
    assert env.patched_files == ("vllm/b.py", "vllm/c.py")
    empty = Environment.from_facts({})
    assert empty == Environment() and empty.compute_capability is None and empty.vllm_version is None
