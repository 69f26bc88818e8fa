"""A hostile or misconfigured SSH host: a real asyncssh server on loopback."""

from __future__ import annotations

import time

from tests.fakes.ssh_lab import host_env, lab, machines  # noqa: F401 (pytest fixtures)
from tests.hostile.test_no_execution import plant
from triage.probes.over_ssh import probe_hosts
from triage.remote import SSHRunner


def _flooding_python(tmp_path, size_mb: int):
    bindir = tmp_path / "flood-bin"
    bindir.mkdir()
    for name in ("python3", "python"):
        p = bindir / name
        p.write_text(f"#!/bin/sh\nhead -c {size_mb * 1024 * 1024} /dev/zero | tr '\\0' A\n")
        p.chmod(0o755)
    return bindir


def test_a_50mb_line_is_cut_and_the_timeout_holds(lab, tmp_path):
    import os

    bindir = _flooding_python(tmp_path, 50)
    srv = lab.server({"PATH": f"{bindir}:{os.environ['PATH']}"})
    t0 = time.monotonic()
    [probe] = probe_hosts([f"127.0.0.1:{srv.port}"], timeout=20)
    assert time.monotonic() - t0 < 40
    assert not probe.ok and len(probe.error) < 2100
    r = SSHRunner(f"127.0.0.1:{srv.port}")
    try:
        res = r.run(["python3"], timeout=20)
    finally:
        r.close()
    assert len(res.stdout) <= (8 << 20) + (1 << 20) and "output cut at 8 MB" in res.stderr


def test_remote_probe_reads_the_logs_environment_without_running_it(lab, machines, tmp_path):
    prefix, marker, _log = plant(tmp_path)
    srv = lab.server(host_env(machines, "a", "t4"))
    [probe] = probe_hosts([f"127.0.0.1:{srv.port}"], python_prefix=str(prefix),
                          site_packages=f"{prefix}/lib/python3.12/site-packages", timeout=60)
    assert probe.ok, probe.error
    assert probe.facts["python"]["read_from"] == "disk" and probe.facts["vllm_version"] == "0.11.2"
    assert not marker.exists()
    assert all(str(prefix) + "/bin" not in c.split(" -")[0] for c in srv.commands)


def test_unknown_key_under_a_custom_user_known_hosts_file_is_refused(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"))  # its key goes to the default ~/.ssh/known_hosts
    (lab.home / ".ssh" / "other_known_hosts").write_text("")
    lab.config(f"Host custom\n  HostName 127.0.0.1\n  Port {srv.port}\n"
               "  UserKnownHostsFile ~/.ssh/other_known_hosts\n")
    [probe] = probe_hosts(["custom"], timeout=30)
    assert not probe.ok and "is not known" in probe.error and srv.commands == []
    assert f"`ssh -p {srv.port} 127.0.0.1`" not in probe.error  # the alias is what the user typed
    assert "`ssh custom`" in probe.error
    # The same key in the custom file is accepted, as ssh would.
    (lab.home / ".ssh" / "other_known_hosts").write_text(srv.known_hosts_line())
    [probe] = probe_hosts(["custom"], timeout=60)
    assert probe.ok, probe.error


def test_host_key_hint_is_a_valid_ssh_command(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"), trusted=False)
    [probe] = probe_hosts([f"tester@127.0.0.1:{srv.port}"], timeout=30)
    assert not probe.ok and f"`ssh -p {srv.port} tester@127.0.0.1`" in probe.error


def test_global_known_hosts_file_from_the_config(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"), trusted=False)
    (lab.home / "global_kh").write_text(srv.known_hosts_line())
    (lab.home / ".ssh" / "empty_kh").write_text("")
    lab.config(f"Host g\n  HostName 127.0.0.1\n  Port {srv.port}\n  UserKnownHostsFile ~/.ssh/empty_kh\n"
               f"  GlobalKnownHostsFile {lab.home / 'global_kh'}\n")
    [probe] = probe_hosts(["g"], timeout=60)
    assert probe.ok, probe.error
