"""The literal guard of each rule pattern (checked before its regex is compiled or run) must never
hide a match: every line of every fixture that a pattern matches contains its guard."""

import re
from pathlib import Path

import pytest

from triage.logread.normalize import parse
from triage.rules import all_rules
from triage.rules.base import required_literal

LOGS = Path(__file__).parent / "logs"


@pytest.mark.parametrize("pattern,guard", [
    (r"The model's max seq len \((?P<n>\d+)\) is larger", "The model's max seq len ("),
    (r"a|b", None),
    (r"(?P<detail>Failed to infer device type)", "Failed to infer device type"),
    (r"(?P<x>a|b)cdefg", "cdefg"),
    (r"(?:abcd)?xy", None),
    (r"(?=abcd)xyz", None),
    (r"x(?P<y>abcdef|g)", None),
    (r"(?i)abcdef", None),
    (r"ab[cd]efgh", "efgh"),
    (r"abcde?fgh", "abcd"),
])
def test_required_literal(pattern, guard):
    assert required_literal(pattern) == guard


def test_guards_never_hide_a_match():
    texts = set()
    for p in LOGS.rglob("*.log"):
        for i, raw in enumerate(p.read_bytes().splitlines(), 1):
            texts.add(parse(i, raw).text)
    checked = 0
    for rule in all_rules():
        for pattern, guard in zip(rule.patterns, rule._guards):
            if guard is None:
                continue
            rx = re.compile(pattern)
            for t in texts:
                if rx.search(t):
                    checked += 1
                    assert guard in t, (rule.signature, pattern, guard, t)
    assert checked > 100
