"""Host inventories (one a line, Ansible INI lines, Ansible YAML) and the fleet diff."""

import pytest

from triage.probes.collect import HostProbe
from triage.probes.fleet import fleet_diff, read_inventory


def test_plain_lines(tmp_path):
    p = tmp_path / "hosts"
    p.write_text("# GPU nodes\ngpu-a\nroot@10.0.0.7:2222  # the odd one\n\ngpu-a\n[::1]:2200\n")
    assert read_inventory(p) == ["gpu-a", "root@10.0.0.7:2222", "[::1]:2200"]


def test_ansible_ini(tmp_path):
    p = tmp_path / "inventory.ini"
    p.write_text("[gpu]\nnode1 ansible_host=10.0.0.11 ansible_user=ubuntu\nnode2 ansible_host=10.0.0.12 "
                 "ansible_port=2222\n\n[gpu:vars]\nansible_python_interpreter=/usr/bin/python3\n\n[cpu]\nlogin\n")
    assert read_inventory(p) == ["ubuntu@10.0.0.11", "10.0.0.12:2222", "login"]


def test_ansible_yaml(tmp_path):
    p = tmp_path / "inventory.yml"
    p.write_text("""
all:
  children:
    h100:
      hosts:
        node1:
          ansible_host: 10.0.0.11
          ansible_user: root
        node2:
    blackwell:
      hosts:
        rtx1: {ansible_host: "fe80::1", ansible_port: 2222}
  hosts:
    head:
""")
    assert read_inventory(p) == ["head", "root@10.0.0.11", "node2", "[fe80::1]:2222"]


@pytest.mark.parametrize("text,msg", [("", "no hosts"), ("all:\n  hosts: [\n", "not valid YAML")])
def test_bad_inventories(tmp_path, text, msg):
    p = tmp_path / "inv"
    p.write_text(text)
    with pytest.raises(ValueError, match=msg):
        read_inventory(p)
    with pytest.raises(ValueError, match="cannot read"):
        read_inventory(tmp_path / "nope")


def probe(host, **facts):
    base = {"gpus": [{"index": 0}], "gpu_summary": "8x NVIDIA H100 80GB HBM3", "driver_version": "550.127.05",
            "cuda_driver_version": "12.4", "vllm_version": "0.15.1", "torch_version": "2.9.1+cu128",
            "packages": {"nvidia-nccl-cu12": "2.27.5"}, "python": {"version": "3.12.3"},
            "vllm_install": {"source": "index"}, "patched_files": []}
    base.update(facts)
    return HostProbe(host=host, ok=True, facts=base)


def test_fleet_diff_only_what_differs():
    ps = [probe("a"), probe("b", driver_version="535.216.01", packages={"nvidia-nccl-cu12": "2.21.5"}),
          probe("c", patched_files=["vllm/platforms/cuda.py"]), HostProbe(host="d", ok=False, error="down")]
    d = fleet_diff(ps)
    assert set(d) == {"driver", "NCCL", "patched vLLM files"}
    assert d["driver"] == {"a": "550.127.05", "b": "535.216.01", "c": "550.127.05"}
    assert d["patched vLLM files"]["c"] == "vllm/platforms/cuda.py" and d["patched vLLM files"]["a"] == "none"
    assert fleet_diff([probe("a"), probe("b")]) == {}
    assert fleet_diff([probe("a")]) == {}
