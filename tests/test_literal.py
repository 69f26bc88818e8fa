"""triage.logread.literal.literal_eval answers exactly as ast.literal_eval (it only spares the import)."""

import ast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage.logread.literal import literal_eval

# ast.literal_eval warns about odd escapes in the random texts; the answers are what is compared.
pytestmark = pytest.mark.filterwarnings("ignore::SyntaxWarning", "ignore::DeprecationWarning")


def _outcome(fn, text):
    try:
        return "ok", repr(fn(text))  # repr tells 1 from 1.0 from True, and -0.0 from 0.0
    except Exception as exc:  # noqa: BLE001 - the kind of failure must agree too
        return "error", type(exc).__name__


def _same(text):
    assert _outcome(literal_eval, text) == _outcome(ast.literal_eval, text), text


scalars = (st.none() | st.booleans() | st.integers(-10**30, 10**30)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
values = st.recursive(
    scalars,
    lambda inner: (st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
                   | st.dictionaries(st.text(max_size=6) | st.integers(-5, 5), inner, max_size=4)),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(values)
def test_reprs_of_values(v):
    _same(repr(v))


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet="{}[](),:'\" -+.eE0123456789_xjTrueFalsNonab\\\t\x00", max_size=24))
def test_any_text(text):
    _same(text)


def test_what_vllm_prints():
    for text in [
        "{'model_tag': '/models/GLM-5-FP8', 'port': 8000, 'trust_remote_code': True, 'gpu_memory_utilization': 0.92, "
        "'kv_cache_dtype': 'fp8', 'enable_expert_parallel': True, 'speculative_config': {'method': 'mtp', 'n': 1}}",
        "['a', \"b\", 1e-05, -3, -0.0, (1,), (), (2), None, False]", "{}", "[]", "()", "[1, 2, ]", "{'a': 1,}",
        "012", "00", "0.50", "1.", "1e5", "1_000", "1j", "0x1f", "-1", "- 1", "+1", "--1", ".5", "{1, 2}", "{'a'}",
        "'a' 'b'", "'tab\there'", "'esc\\n'", "u'x'", "b'x'", "[" * 300 + "]" * 300, "inf", "True.", "'a\x00b'",
        "{[1]: 2}", "{(1, [2]): 3}", "1" * 5000,
    ]:
        _same(text)
