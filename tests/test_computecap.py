"""The one parser of compute capabilities, on the forms probes and logs write."""

from __future__ import annotations

import pytest

from triage.computecap import ComputeCapability, env_cc, parse_cc


@pytest.mark.parametrize("value, want", [
    ("12.0", (12, 0)), ("12.1", (12, 1)), (" 9.0", (9, 0)), ("12", (12, 0)), ("(12, 0)", (12, 0)),
    (12.0, (12, 0)), ((10, 3), (10, 3)), ("8.6 ", (8, 6)),
])
def test_forms(value, want):
    assert parse_cc(value) == ComputeCapability(*want)


@pytest.mark.parametrize("value", [None, "", "n/a", "NA: no GPU", True, [1, 2, 3], "sm_120"])
def test_not_a_capability(value):
    assert parse_cc(value) is None


def test_order_and_text():
    assert parse_cc("9.0") < parse_cc("10.0") < parse_cc("12.0") < parse_cc("12.1")
    assert str(parse_cc("12")) == "12.0"


def test_environment_falls_back_to_the_gpus():
    assert env_cc({"compute_capability": "12.0", "gpus": [{"compute_capability": "9.0"}]}) == ComputeCapability(12, 0)
    assert env_cc({"gpus": [{"name": "x"}, {"compute_capability": "9.0"}]}) == ComputeCapability(9, 0)
    assert env_cc({"gpus": "junk"}) is None and env_cc({}) is None
