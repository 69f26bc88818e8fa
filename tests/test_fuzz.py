"""Arbitrary bytes never raise: the intake and every rule survive anything a log can contain."""

from hypothesis import given, settings, strategies as st

from triage.diagnose import diagnose
from triage.logread import scan_text

FRAGMENTS = [
    b"Traceback (most recent call last):\n", b'  File "/x/lib/python3.12/site-packages/vllm/a.py", line 1, in f\n',
    b"ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=",
    b"Reasons: {A: [b, c], ", b"(Worker_TP0 pid=1) ", b"ERROR 01-01 00:00:00 [x.py:1] ", b"\x1b[1;36m", b"\r\n",
    b"\x00", b"\xff\xfe", b"non-default args: {'model': ", b"The above exception was the direct cause",
    b"out of resource: shared memory, Required: 1, Hardware limit: ", b"GPU 0: NVIDIA ", b"[pip3] torch==",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=200), st.sampled_from(FRAGMENTS)), max_size=40))
def test_arbitrary_bytes_never_raise(parts):
    data = b"".join(parts)
    scan = scan_text(data)
    diagnoses, notes = diagnose(scan)
    assert not scan.warnings or all("rule" not in w for w in scan.warnings)
    for d in diagnoses:
        d.to_json()
