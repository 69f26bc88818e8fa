"""tests/logs/dev-gen: real pastes from public threads that no specific rule was written for (bare
asserts, cut tracebacks, quoted HTTP bodies, INFO lines before a cut failure), through the CLI.

A known miss is said with its reason; it must stay a miss until a general mechanism names it (an
xfail that starts passing fails the run, so the list stays honest).
"""

from __future__ import annotations


import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-gen")
KNOWN_MISSES: dict[str, str] = {
    "compressed-weight-scale-keyerror.log": "a weight_scale tensor vLLM built no parameter for reads as a plain weight mismatch",
    "bnb-merged-keyerror-oneline.log": "a plain weight name: nothing in the line says the checkpoint is quantized",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_gen_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name], min_confidence=0.5)


def test_every_dev_gen_log_has_a_thread_and_a_root_cause():
    for name, e in EXPECTED.items():
        assert (DEV / name).is_file(), name
        assert e["source"].startswith("https://github.com/") and len(e["root_cause"]) > 30, name
