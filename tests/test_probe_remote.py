"""Remote probes over a real SSH server on loopback (asyncssh in-process, commands run in a shell)."""

import shlex
import time

import asyncssh
import pytest

from tests.fakes.ssh_lab import dead_port, host_env, lab, machines  # noqa: F401 (fixtures)
from triage.probes import gather
from triage.probes.fleet import fleet_diff
from triage.probes.over_ssh import probe_hosts
from triage.remote import SSHRunner, parse_target


def test_probe_over_ssh_config_alias(lab, machines):
    srv = lab.server(host_env(machines, "a", "rtxpro6000x8"))
    lab.config(f"Host gpu-a\n  HostName 127.0.0.1\n  Port {srv.port}\n  User tester\n")
    probe = gather(host="gpu-a", timeout=60)
    assert probe.ok, probe.error
    f = probe.facts
    assert probe.host == "gpu-a"
    assert len(f["gpus"]) == 8 and f["compute_capability"] == "12.0"
    assert f["driver_version"] == "580.95.05" and f["cuda_driver_version"] == "13.0"
    assert f["python"]["executable"] == str(machines["a"].parent / "python3")
    assert f["vllm_install"]["kind"] == "nightly" and f["patched_files"] == ["vllm/platforms/cuda.py"]
    assert "vllm.patched" in {x["id"] for x in probe.findings}
    # the command went through the remote shell quoted, the script on stdin
    assert srv.commands[0] == shlex.join(["python3", "-", "--sections", "gpu,host,pyenv"])


def test_unknown_host_key_is_refused(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"), trusted=False)
    lab.config(f"Host gpu-x\n  HostName 127.0.0.1\n  Port {srv.port}\n")
    probe = gather(host="gpu-x", timeout=20)
    assert not probe.ok
    assert "host key of gpu-x" in probe.error and "is not known" in probe.error
    assert srv.commands == []


def test_changed_host_key_is_refused(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"), trusted=False)
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    (lab.home / ".ssh/known_hosts").write_text(f"[127.0.0.1]:{srv.port} {other}")
    probe = gather(host=f"tester@127.0.0.1:{srv.port}", timeout=20)
    assert not probe.ok and "has CHANGED" in probe.error and srv.commands == []


def test_config_cannot_turn_checking_off(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"), trusted=False)
    lab.config(f"Host lax\n  HostName 127.0.0.1\n  Port {srv.port}\n  UserKnownHostsFile none\n"
               "  StrictHostKeyChecking no\n")
    probe = gather(host="lax", timeout=20)
    assert not probe.ok and "is not known" in probe.error


def test_auth_failure_says_so(lab, machines, tmp_path):
    other = tmp_path / "other_keys"
    other.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_public_key())
    srv = lab.server(host_env(machines, "a", "t4"), authorized=other)
    probe = gather(host=f"tester@127.0.0.1:{srv.port}", timeout=20)
    assert not probe.ok and "authentication" in probe.error


def test_runner_quotes_arguments_and_passes_env(lab, tmp_path):
    srv = lab.server()
    r = SSHRunner(f"tester@127.0.0.1:{srv.port}")
    try:
        marker = tmp_path / "pwned"
        evil = f"$(touch {marker}); `touch {marker}` ; rm -rf /nonexistent"
        res = r.run(["printf", "%s|%s", evil, "it's"], timeout=20)
        assert res.ok and res.stdout == evil + "|it's"
        assert not marker.exists()
        res = r.run(["sh", "-c", 'printf %s "$TRIAGE_X"'], env={"TRIAGE_X": "a b;c"}, timeout=20)
        assert res.stdout == "a b;c"
        res = r.run(["sh", "-c", "exit 7"], timeout=20)
        assert res.returncode == 7 and not res.ok
        res = r.run(["cat"], input="through stdin\n", timeout=20)
        assert res.stdout == "through stdin\n"
    finally:
        r.close()


def test_fleet_with_a_dead_host_and_drift(lab, machines):
    a = lab.server(host_env(machines, "a", "rtxpro6000x8"))
    b = lab.server(host_env(machines, "b", "h100x8"))
    c = lab.server(host_env(machines, "a", "rtxpro6000x8"))
    dead = dead_port()
    specs = [f"tester@127.0.0.1:{a.port}", f"127.0.0.1:{dead}", f"tester@127.0.0.1:{b.port}",
             f"tester@127.0.0.1:{c.port}"]
    probes = probe_hosts(specs, timeout=60, concurrency=4)
    assert [p.host for p in probes] == specs
    assert [p.ok for p in probes] == [True, False, True, True]
    assert "connection refused" in probes[1].error
    diff = fleet_diff(probes)
    assert diff["driver"][specs[0]] == "580.95.05" and diff["driver"][specs[2]] == "550.127.05"
    assert diff["vLLM"][specs[2]] == "0.15.1"
    assert diff["torch"][specs[0]] == "2.10.0+cu129"
    assert "8x NVIDIA H100 80GB HBM3" == diff["GPU"][specs[2]]
    assert diff["patched vLLM files"][specs[3]] == "vllm/platforms/cuda.py"
    assert diff["patched vLLM files"][specs[2]] == "none"
    assert specs[1] not in diff["driver"]  # dead hosts are not part of the comparison
    assert "Python" not in diff  # the same everywhere


def test_slow_host_times_out_without_blocking_others(lab, machines):
    fast = lab.server(host_env(machines, "a", "t4"))
    slow = lab.server(host_env(machines, "a", "t4"), delay=30)
    t0 = time.monotonic()
    probes = probe_hosts([f"127.0.0.1:{slow.port}", f"127.0.0.1:{fast.port}"], timeout=3)
    assert time.monotonic() - t0 < 15
    assert not probes[0].ok and "3s" in probes[0].error
    assert probes[1].ok


def test_no_python_on_host(lab, tmp_path):
    empty = tmp_path / "emptybin"
    empty.mkdir()
    srv = lab.server({"PATH": str(empty)})
    probe = gather(host=f"127.0.0.1:{srv.port}", timeout=20)
    assert not probe.ok and "python" in probe.error.lower()


def test_explicit_python_remote(lab, machines):
    srv = lab.server(host_env(machines, "b", "a100x4"))
    probe = gather(host=f"127.0.0.1:{srv.port}", python=str(machines["a"]), timeout=60)
    assert probe.ok and probe.facts["vllm_version"] == "0.16.0rc2.dev313+g662205d34"
    assert probe.facts["compute_capability"] == "8.0"


@pytest.mark.parametrize("spec,host,user,port", [
    ("gpu-a", "gpu-a", None, None),
    ("root@10.0.0.7:2222", "10.0.0.7", "root", 2222),
    ("[::1]:2200", "::1", None, 2200),
    ("admin@::1", "::1", "admin", None),
])
def test_parse_target(spec, host, user, port):
    t = parse_target(spec)
    assert (t.host, t.user, t.port) == (host, user, port)


@pytest.mark.parametrize("bad", ["", "-oProxyCommand=x", "host:99999", "a b", "user@", "h;id", "[::1"])
def test_parse_target_rejects(bad):
    with pytest.raises(ValueError):
        parse_target(bad)
