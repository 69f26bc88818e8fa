"""Quantization, speculative decoding, dtype and GPU-generation refusals as real users paste them
(tests/logs/dev-qsd/, through the CLI), and the mechanisms that name them, one case per form.

A known miss is said with its reason; it must stay a miss until a general mechanism names it (an
xfail that starts passing fails the run, so the list stays honest).
"""

from __future__ import annotations

import pytest

from tests.dev_sets import check, load, params

DEV, EXPECTED = load("dev-qsd")
KNOWN_MISSES: dict[str, str] = {
    "speculative_decoding--gemma4-mtp-mat1-mat2-v025.log":
        "a bare shape mismatch under torch.compile: nothing yet ties the drafter's projection to speculative decoding",
    "dtype_unsupported--fp8e4b8-mi210-title.log":
        "the ROCm fp8 type name (fp8e4b8) is not read as the fp8e4nv family",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_qsd_log_through_the_cli(name):
    check(DEV, name, EXPECTED[name])


def test_every_dev_qsd_log_has_a_thread_and_a_root_cause():
    for name, e in EXPECTED.items():
        assert (DEV / name).is_file(), name
        assert e["source"].startswith("https://github.com/") and len(e["root_cause"]) > 30, name
