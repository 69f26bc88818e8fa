from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from triage.playbooks.conditions import Condition, ConditionError, evaluate
from triage.versions import Version, compare_versions

ENV = {
    "compute_capability": "12.0",
    "cc_major": 12,
    "use_sparse": True,
    "use_mla": "True",
    "dtype": "torch.bfloat16",
    "vllm_version": "0.16.0rc2.dev313+g662205d34",
    "packages": {"torch": "2.9.0+cu129", "flashinfer-python": "0.5.2", "flashinfer-cubin": "0.5.1"},
    "vllm_install": {"kind": "nightly"},
    "shm_bytes": 67108864,
}


@pytest.mark.parametrize(
    "a,b,sign",
    [
        ("0.16.0rc2.dev313+g662205d34", "0.16.0rc2", -1),
        ("0.16.0rc2", "0.16.0", -1),
        ("0.16.0", "0.16.0.post1", -1),
        ("0.16.0.dev5", "0.16.0rc1", -1),
        ("0.11.1rc6.dev16+g933cdea44.cu129", "0.11.0", 1),
        ("12.0", "12", 0),
        ("12.1", "12.0", 1),
        ("9.0", "12.0", -1),
        ("0.13.0+faa43dbf.nv26.01", "0.13.0", 1),
        ("v1.2", "1.2.0", 0),
        ("2.9.0+cu129", "2.9", 1),
    ],
)
def test_version_order(a, b, sign):
    assert compare_versions(a, b) == sign


@pytest.mark.parametrize(
    "cond,want",
    [
        ("compute_capability >= 12.0 and use_sparse", True),
        ("compute_capability > 9.0", True),
        ("cc_major in [9, 10]", False),
        ("not (cc_major in [9, 10])", True),
        ("cc_major not in [9, 10]", True),
        ("vllm_version < 0.16.0", True),
        ("vllm_version >= 0.14.0", True),
        ("packages.torch >= 2.9", True),
        ("packages.flashinfer-python != packages.flashinfer-cubin", True),
        ("vllm_install.kind in ['nightly', 'dev']", True),
        ("use_mla", True),
        ("dtype == 'torch.bfloat16'", True),
        ("'bfloat16' in dtype", True),
        ("shm_bytes < 1073741824", True),
        ("head_size == 576", None),
        ("head_size == 576 and use_sparse", None),
        ("head_size == 576 and cc_major == 9", False),
        ("head_size == 576 or use_sparse", True),
        ("head_size is known", False),
        ("head_size is not known", True),
        ("not head_size", None),
    ],
)
def test_three_valued_evaluation(cond, want):
    assert evaluate(cond, ENV) is want


def test_facts_and_unknown_fact_check():
    c = Condition("compute_capability >= 8.0 and packages.vllm < 0.5.1")
    assert c.facts() == ["compute_capability", "packages.vllm"]
    c.check_facts()
    with pytest.raises(ConditionError, match="unknown fact 'float16'"):
        Condition("dtype == float16").check_facts()
    Condition("my_fact == 1").check_facts({"my_fact": "number"})


@pytest.mark.parametrize("bad", ["", "a ==", "(a", "a == == b", "a $ b", "[1, 2", "a is"])
def test_parse_errors(bad):
    with pytest.raises(ConditionError):
        Condition(bad)


@given(st.text(max_size=40))
def test_arbitrary_text_never_raises_anything_but_condition_error(src):
    try:
        Condition(src).evaluate(ENV)
    except ConditionError:
        pass


@given(st.lists(st.integers(0, 30), min_size=1, max_size=4), st.lists(st.integers(0, 30), min_size=1, max_size=4))
def test_release_order_matches_tuples(a, b):
    va, vb = Version.parse(".".join(map(str, a))), Version.parse(".".join(map(str, b)))

    def trim(t):
        t = list(t)
        while len(t) > 1 and t[-1] == 0:
            t.pop()
        return tuple(t)

    assert (va < vb) == (trim(a) < trim(b))


def test_placeholder_default_text_for_unknown_facts():
    from triage.playbooks.engine import render_text

    assert render_text("on {gpu_name|this GPU}.", {}) == "on this GPU."
    # A sentence whose fact is missing (no default) is left out, and the fact is noted, never "unknown".
    missing: list = []
    got = render_text("Runs on {gpu_name|this GPU}. It has compute capability {compute_capability}.", {}, missing)
    assert got == "Runs on this GPU." and missing == ["compute_capability"]
    assert render_text("on {gpu_name|this GPU}", {"gpu_name": "RTX PRO 6000"}) == "on RTX PRO 6000"
