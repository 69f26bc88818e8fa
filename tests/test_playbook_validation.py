"""A wrong playbook is refused with its file, its line and what is wrong."""

from __future__ import annotations

import textwrap

import pytest

from triage.commands import playbooks as cmd
from triage.playbooks.load import PlaybookInvalid, load_file, load_text

GOOD = """\
id: demo
title: Demo
categories: [gpu_oom]
steps:
  - id: first
    kind: explain
    text: hello
    next: second
  - id: second
    kind: check
    expect: "compute_capability >= 8.0"
    on_pass: done:ok
    on_fail: manual:escalate
"""


def refused(text: str) -> list[str]:
    with pytest.raises(PlaybookInvalid) as exc:
        load_text(textwrap.dedent(text), "bad.yaml")
    return [str(e) for e in exc.value.errors]


def test_good_one_loads():
    pb = load_text(GOOD, "good.yaml")
    assert pb.outcomes == ["done:ok", "manual:escalate"]
    assert pb.start == "first"


CASES = {
    "unknown step kind": (GOOD.replace("kind: explain", "kind: dance"), 6, "unknown kind 'dance'"),
    "branch to a missing step": (GOOD.replace("next: second", "next: third"), 8, "missing step 'third'"),
    "missing step field": (GOOD.replace("    text: hello\n", ""), 5, "missing field 'text'"),
    "missing top field": (GOOD.replace("title: Demo\n", ""), 1, "missing field 'title'"),
    "condition on an unknown fact": (GOOD.replace("compute_capability >= 8.0", "gpu_colour == 'green'"), 11,
                                     "unknown fact 'gpu_colour'"),
    "unparsable condition": (GOOD.replace("compute_capability >= 8.0", "compute_capability >="), 11, "expected a fact"),
    "unknown category": (GOOD.replace("[gpu_oom]", "[gpu_oops]"), 3, "unknown category 'gpu_oops'"),
    "bad outcome": (GOOD.replace("done:ok", "done: ok"), 12, None),
    "placeholder on an unknown fact": (GOOD.replace("text: hello", "text: hello {gpu_colour}"), 7,
                                       "unknown fact 'gpu_colour'"),
    "unknown field": (GOOD.replace("    text: hello\n", "    text: hello\n    colour: red\n"), 8, "unknown field 'colour'"),
    "shell string instead of argv": (
        GOOD.replace("    expect: \"compute_capability >= 8.0\"\n", "    argv: \"nvidia-smi -L\"\n"), 11, "never one shell string"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_bad_playbook_refused_with_file_and_line(name):
    text, line, words = CASES[name]
    errors = refused(text)
    assert any(e.startswith(f"bad.yaml:{line}: ") for e in errors), errors
    if words:
        assert any(words in e for e in errors), errors


def test_cycle_with_no_exit():
    errors = refused(
        """\
        id: loop
        title: Loop
        categories: [gpu_oom]
        steps:
          - id: a
            kind: explain
            text: a
            next: b
          - id: b
            kind: ask
            question: again?
            choices:
              - {key: again, label: Again, goto: a}
              - {key: other, label: Other, goto: c}
          - id: c
            kind: explain
            text: c
            next: b
        """
    )
    assert any(e.startswith("bad.yaml:5: ") and "cycle with no exit" in e for e in errors), errors


def test_cycle_with_an_exit_is_fine():
    load_text(
        textwrap.dedent(
            """\
            id: retry
            title: Retry
            categories: [gpu_oom]
            steps:
              - id: a
                kind: verify
                on_pass: done:ok
                on_fail: b
              - id: b
                kind: ask
                question: again?
                choices:
                  - {key: again, label: Again, goto: a}
                  - {key: stop, label: Stop, goto: manual:escalate}
            """
        ),
        "ok.yaml",
    )


def test_yaml_syntax_error_has_a_line():
    errors = refused("id: x\ntitle: [unclosed\ncategories: [gpu_oom]\n")
    assert errors[0].startswith("bad.yaml:") and "not valid YAML" in errors[0]
    assert errors[0].split(":")[1].isdigit()


def test_unknown_action_and_probe_and_bad_default():
    errors = refused(
        """\
        id: acts
        title: Acts
        categories: [gpu_oom]
        steps:
          - id: a
            kind: apply
            action: reboot-the-world
            on_success: done:ok
            on_failure: manual:escalate
          - id: b
            kind: check
            probe: horoscope
            on_pass: done:ok
            on_fail: manual:escalate
          - id: c
            kind: ask
            question: which?
            default: z
            choices:
              - {key: x, label: X, goto: done:x}
        """
    )
    assert any(e.startswith("bad.yaml:7: ") and "unknown action" in e for e in errors), errors
    assert any(e.startswith("bad.yaml:12: ") and "unknown probe" in e for e in errors), errors
    assert any(e.startswith("bad.yaml:18: ") and "default 'z'" in e for e in errors), errors


def test_validate_command_paths(tmp_path, capsys):
    good = tmp_path / "good.yaml"
    good.write_text(GOOD)
    bad = tmp_path / "bad.yaml"
    bad.write_text(GOOD.replace("next: second", "next: nowhere"))
    assert cmd.main(["validate", str(good)]) == 0
    assert cmd.main(["validate", str(good), str(bad)]) == 2
    out = capsys.readouterr().out
    assert f"{bad}:8: step 'first': next goes to missing step 'nowhere'" in out
    assert cmd.main(["validate", str(tmp_path / "missing.yaml")]) == 2
    with pytest.raises(PlaybookInvalid):
        load_file(tmp_path / "missing.yaml")
