"""`triage` with no log: the vLLM logs it offers (containers through the Runner, common files)."""

from __future__ import annotations

import os
import time

from triage.runner import Result
from triage.tui import findlogs


class FakeDocker:
    """Answers `docker ps` and `docker logs` as the real CLI does (argv lists only)."""

    where = "this machine"

    def __init__(self):
        self.calls = []

    def run(self, argv, *, timeout=60.0, input=None, env=None):
        self.calls.append(list(argv))
        if argv[:2] == ["docker", "ps"]:
            return Result(list(argv), 0, "abc123\tvllm/vllm-openai:nightly\tglm5\tExited (1) 2 minutes ago\n"
                                         "def456\tpostgres:16\tdb\tUp 3 days\n", "")
        if argv[:2] == ["docker", "logs"]:
            out = ("2026-02-14T10:11:35.000000001Z INFO 02-14 10:11:35 [api_server.py:1] vLLM API server version 0.16.0\n"
                   "2026-02-14T10:11:37.000000001Z INFO 02-14 10:11:37 [core.py:1] shutting down\n")
            err = ("2026-02-14T10:11:36.000000001Z Traceback (most recent call last):\n"
                   "2026-02-14T10:11:36.000000002Z ValueError: No valid attention backend found\n")
            return Result(list(argv), 0, out, err)
        return Result(list(argv), 127, "", "not found")


def test_containers_first_then_files_newest_first(tmp_path, monkeypatch):
    old = tmp_path / "vllm-old.log"
    new = tmp_path / "vllm-new.log"
    old.write_text("a\n")
    new.write_text("b\n")
    os.utime(old, (time.time() - 100, time.time() - 100))
    (tmp_path / "other.log").write_text("c\n")
    docker = FakeDocker()
    found = findlogs.find(docker, [str(tmp_path)])
    assert [c.label for c in found] == ["container glm5", str(new), str(old)]
    assert docker.calls[0][:3] == ["docker", "ps", "-a"]
    path = found[0].fetch()
    text = open(path).read().splitlines()
    # stdout and stderr put back in time order
    assert [ln.split(" ", 1)[1][:10] for ln in text] == ["INFO 02-14", "Traceback ", "ValueError", "INFO 02-14"]
    assert docker.calls[-1] == ["docker", "logs", "--timestamps", "--tail", str(findlogs.TAIL), "abc123"]


def test_no_docker_is_not_an_error(tmp_path):
    class NoDocker:
        where = "this machine"

        def run(self, argv, **kw):
            return Result(list(argv), -1, "", "docker: No such file or directory")

    assert findlogs.find(NoDocker(), [str(tmp_path)]) == []
