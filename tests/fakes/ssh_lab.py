"""Fixtures for remote-probe tests: real SSH servers on loopback standing for hosts, a client HOME.

Import them into a test module: `from tests.fakes.ssh_lab import lab, machines, host_env, dead_port`.
"""

import shutil
import socket

import pytest

from tests.fakes import fake_pynvml
from tests.fakes.fake_env import vllm_env
from tests.fakes.ssh_server import LoopThread, SSHServer, client_home


@pytest.fixture(scope="module")
def machines(tmp_path_factory):
    """Two different Python environments and a directory holding the fake NVML as `pynvml`."""
    root = tmp_path_factory.mktemp("machines")
    nvml = root / "nvml"
    nvml.mkdir()
    shutil.copy(fake_pynvml.__file__, nvml / "pynvml.py")
    py_a, site_a = vllm_env(root / "env-a")
    cuda = site_a / "vllm/platforms/cuda.py"
    cuda.write_text(cuda.read_text() + "# allow SM120\n")
    py_b, _ = vllm_env(root / "env-b", vllm_version="0.15.1", torch_version="2.9.1+cu128", torch_cuda="12.8")
    return {"nvml": nvml, "a": py_a, "b": py_b}


def host_env(machines, which, profile):
    import os
    return {"PATH": f"{machines[which].parent}:{os.environ['PATH']}", "PYTHONPATH": str(machines["nvml"]),
            "FAKE_NVML_PROFILE": profile}


@pytest.fixture
def lab(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    auth = client_home(home)
    loop = LoopThread()
    servers = []

    class Lab:
        def __init__(self):
            self.home, self.auth, self.loop = home, auth, loop

        def server(self, env=None, *, trusted=True, authorized=None, delay=0.0):
            s = SSHServer(loop, authorized_keys=authorized or auth, env=env, delay=delay)
            servers.append(s)
            if trusted:
                with open(home / ".ssh/known_hosts", "a") as f:
                    f.write(s.known_hosts_line())
            return s

        def config(self, text):
            (home / ".ssh/config").write_text(text)

    yield Lab()
    for s in servers:
        s.close()
    loop.stop()


def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
