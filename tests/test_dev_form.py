"""tests/logs/dev-form: real pastes in the forms people use (docker-desktop, CI-viewer and Ray Serve prefixes,
messages as Python tuples or inside HTTP bodies and prose, markdown fences, elided or cut tracebacks, reflowed
lines, Windows paths), each through the CLI with the category its thread established.

A known miss is said with its reason; it must stay a miss until a general mechanism names it (an xfail that
starts passing fails the run, so the list stays honest).
"""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-form")
KNOWN_MISSES: dict[str, str] = {
    # Ray's own text lists three possible causes (the OOM killer, `ray stop --force`, a crash) and nothing else in
    # the paste picks one; the thread found host memory from outside the log
    "ray-actor-died-host-oom-leak.log": "a Ray actor that died of SIGKILL names no cause of its own",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_form_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])


def test_every_dev_form_log_has_a_thread_and_a_root_cause():
    for name, e in EXPECTED.items():
        assert (DEV / name).is_file(), name
        assert e["source"].startswith("https://github.com/") and len(e["root_cause"]) > 30, name
