"""triage.regexlit: the literals a match needs. A rule whose clauses a line does not satisfy is skipped
without compiling its regex, so the clauses must hold for every line a pattern matches."""

import re
from pathlib import Path

import pytest

from triage.logread.normalize import parse
from triage.regexlit import best_clause, required_clauses, required_literal
from triage.rules import all_rules

LOGS = Path(__file__).parent / "logs"


@pytest.mark.parametrize("pattern,clauses", [
    (r"(?P<k>NVFP4|MXFP4) not supported", [("NVFP4", "MXFP4"), (" not supported",)]),
    (r"abc|de", []),  # a branch that needs less than three characters: nothing known
    (r"abcd|(?:xyz|uvw)q", [("abcd", "xyz", "uvw")]),
    (r"(?:abcd)?xyz", [("xyz",)]),
    (r"(?=abcd)xyz", [("xyz",)]),
    (r"(?i)abcdef", []),
    (r"ab[cd]efgh", [("efgh",)]),
    (r"abcde?fgh", [("abcd",), ("fgh",)]),
    (r"\x41BCD", [("BCD",)]),  # \x41 is one character, not the text "41"
    (r"\u2580abcd", [("abcd",)]),
    (r"(a)\1xyz", [("xyz",)]),
    (r"triton\.compiler", [("triton.compiler",)]),
])
def test_required_clauses(pattern, clauses):
    assert required_clauses(pattern) == clauses


def test_best_clause_prefers_long_literals():
    assert best_clause([("ab", "cdefgh"), ("xyzw",)]) == ("xyzw",)
    assert best_clause([]) is None


def test_required_literal_skips_hex_escapes():
    assert required_literal(r"\x1b\[31mERROR") == "[31mERROR"  # not "1b[31mERROR"


def test_clauses_never_hide_a_match():
    texts = set()
    for p in LOGS.rglob("*.log"):
        for i, raw in enumerate(p.read_bytes().splitlines(), 1):
            texts.add(parse(i, raw).text)
    checked = 0
    for rule in all_rules():
        for pattern, clauses in zip(rule.patterns, rule._clauses):
            assert [tuple(c) for c in required_clauses(pattern)] == list(clauses)  # the remembered table agrees
            if not clauses:
                continue
            rx = re.compile(pattern)
            for t in texts:
                if rx.search(t):
                    checked += 1
                    for clause in clauses:
                        assert any(x in t for x in clause), (rule.signature, pattern, clause, t)
    assert checked > 100
