"""Short pastes with no log level, no exception line and no line calling itself an error.

A ticket often quotes just the line that matters ("Memory cgroup out of memory: Killed process ...").
Its most failure-like line, when its words also name a subsystem, is a guess said as one (at most 0.35,
"likely"); a healthy or merely topical fragment, and any longer log, still reads as no failure (exit 3).
The real fragments of tests/logs/dev-frag go through the CLI.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_triage
from tests.dev_sets import check, load, params
from triage.diagnose import diagnose
from triage.logread import scan_text

DEV, EXPECTED = load("dev-frag")


def _diagnoses(text: str):
    ds, _ = diagnose(scan_text(text))
    return ds


# the kernel's OOM killer (mm/oom_kill.c): its summary line names no cause by itself
@pytest.mark.parametrize("text", [
    "[ 5123.112] oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),oom_memcg=/kubepods/pod1,task=python3,pid=4121\n",
])
def test_a_host_oom_kill_quoted_alone_is_a_likely_environment_failure(text):
    ds = _diagnoses(text)
    assert ds, "nothing diagnosed"
    d = ds[0]
    assert d.category == "environment" and d.confidence <= 0.35


# the cgroup OOM killer's kill line, and Kubernetes' pod status, each say the cause outright
@pytest.mark.parametrize("text", [
    "Memory cgroup out of memory: Killed process 4121 (python3) total-vm:82408858kB\n",
    "    Last State:     Terminated\n      Reason:       OOMKilled\n      Exit Code:    137\n",
])
def test_the_cgroup_oom_killer_is_the_hand_rules(text):
    d = _diagnoses(text)[0]
    assert d.signature == "environment.host_oom_killed"


def test_the_guess_says_it_is_one():
    d = _diagnoses("Worker VLLM::Worker_TP1 killed: the node ran out of memory\n")[0]
    assert d.signature == "generic.fragment_guess", d.signature
    assert "likely" in " ".join(d.explanation).lower() and "Likely" in d.title
    assert d.facts["category_decided"] is False and "killed" in d.facts["failure_words"]


def test_the_most_failure_like_line_is_chosen():
    text = ("Using the NCCL library from /usr/lib/libnccl.so.2\n"
            "NCCL version mismatch: the peer was not compatible, connection refused\n")
    d = _diagnoses(text)[0]
    assert d.category == "distributed" and d.first_line == 2


@pytest.mark.parametrize("text", [
    # healthy lines that name a subsystem but say nothing went wrong
    "Using FlashInfer for top-p & top-k sampling.\nLoading safetensors checkpoint shards: 100% 4/4\n",
    # failure words that name no subsystem
    "it is not working, it just crashed again\n",
    # a logger's WARNING line is how a healthy start-up reads, failure words or not
    "WARNING 06-03 04:30:27 [config.py:1] The tokenizer is not the fast one; falling back\n",
])
def test_a_healthy_or_topical_fragment_is_not_a_failure(text):
    assert not _diagnoses(text)


def test_a_longer_log_is_not_guessed_from():
    lines = [f"step {i} finished" for i in range(30)]
    lines.insert(10, "Memory cgroup out of memory: Killed process 4121 (python3)")
    assert not any(d.signature == "generic.fragment_guess" for d in _diagnoses("\n".join(lines) + "\n"))


def test_failure_words_are_words():
    from triage.exception_words import failure_words

    assert failure_words("Timed out waiting 1800000ms for recv operation") == ["timed out"]
    assert failure_words("the errorless, unkilled path") == []


def test_a_bus_error_is_shared_memory():
    ds = _diagnoses("(RayWorker pid=1) Fatal Python error: Bus error\n")
    assert ds and ds[0].category == "distributed"


def test_a_healthy_fragment_exits_3_through_the_cli(tmp_path):
    log = tmp_path / "ok.log"
    log.write_text("INFO 06-03 04:30:29 [api_server.py:1] Starting vLLM API server on http://0.0.0.0:8000\n"
                   "INFO:     Application startup complete.\n")
    r = run_triage("--log", str(log), "--json", "--offline", "--no-probe")
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["diagnoses"] == []


@pytest.mark.parametrize("name", params(EXPECTED, {}))
def test_real_fragments_through_the_cli(name):
    check(DEV, name, EXPECTED[name])
