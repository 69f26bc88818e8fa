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


def _one_step(step: str, extra: str = "") -> str:
    return "id: demo\ntitle: Demo\ncategories: [kv_cache_memory]\n" + extra + "steps:\n" + textwrap.indent(
        textwrap.dedent(step), "  ")


def test_argv_split_at_a_comma_is_refused():
    """YAML's flow list splits `--query-compute-apps=pid,process_name` at the comma: shown and run wrong."""
    errors = refused(_one_step("""\
        - id: smi
          kind: check
          title: GPU processes
          argv: [nvidia-smi, --query-compute-apps=pid,process_name,used_memory, --format=csv,noheader]
          on_pass: done:ok
          on_fail: manual:escalate
        """))
    assert any("bad.yaml:8" in e and "split at a comma" in e for e in errors), errors
    # Quoted, or one item a line, it is one argument and loads.
    pb = load_text(_one_step("""\
        - id: smi
          kind: check
          title: GPU processes
          argv: [nvidia-smi, '--query-compute-apps=pid,process_name', '--format=csv,noheader']
          on_pass: done:ok
          on_fail: manual:escalate
        """), "ok.yaml")
    assert pb.steps["smi"].get("argv")[1] == "--query-compute-apps=pid,process_name"


def test_a_placeholder_nothing_can_fill_is_refused():
    errors = refused(_one_step("""\
        - id: say
          kind: explain
          title: Say it
          text: "Its replacement: {replacement}."
          next: done:ok
        """, extra="facts: {replacement: text}\n"))
    assert any("never be filled" in e and "replacement" in e for e in errors), errors


def test_a_title_that_is_the_step_id_is_refused():
    errors = refused(_one_step("""\
        - id: ask-file-len
          kind: explain
          title: ask file len
          text: hello
          next: done:ok
        """))
    assert any("internal id" in e for e in errors), errors


def test_a_signature_no_rule_emits_is_refused_with_the_close_one():
    errors = refused(_one_step("""\
        - id: which
          kind: check
          expect: "signature == 'kv_cache.max_seq_len_exceeds'"
          on_pass: done:ok
          on_fail: manual:escalate
        """))
    assert any("no rule emits" in e and "kv_cache.max_len_exceeds_capacity" in e for e in errors), errors


def test_a_one_line_text_needs_words_for_a_missing_fact():
    errors = refused(_one_step("""\
        - id: pick
          kind: ask
          question: Which?
          choices:
            - {key: a, label: "--max-model-len {kv_capacity_tokens}", goto: done:a}
            - {key: b, label: "--max-model-len {kv_capacity_tokens|a shorter one}", goto: done:b}
            - {key: c, label: "--max-model-len {kv_capacity_tokens}", goto: done:c, when: "kv_capacity_tokens is known"}
        """, extra="facts: {kv_capacity_tokens: number}\n"))
    assert len([e for e in errors if "one-line text" in e]) == 1, errors


def test_one_yaml_parse_per_playbook(monkeypatch):
    import yaml

    calls = []
    real = yaml.SafeLoader.get_single_node
    monkeypatch.setattr(yaml.SafeLoader, "get_single_node", lambda self: calls.append(1) or real(self))
    monkeypatch.setattr(yaml, "safe_load", lambda *a, **k: (_ for _ in ()).throw(AssertionError("parsed twice")))
    monkeypatch.setattr(yaml, "compose", lambda *a, **k: (_ for _ in ()).throw(AssertionError("parsed twice")))
    load_text(GOOD, "good.yaml")
    assert calls == [1]
