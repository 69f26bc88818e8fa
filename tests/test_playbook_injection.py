"""Values from logs reach commands and files as inert text: never spliced into shell code."""

from __future__ import annotations

import subprocess
import textwrap

import pytest

from triage.playbooks.actions import ActionContext, SetFlag
from triage.playbooks.engine import Session, derive_facts
from triage.playbooks.load import load_text
from triage.runner import LocalRunner
from triage.transcript import Transcript


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def hostile(tmp_path):
    pwned = tmp_path / "pwned"
    return pwned, f"/models/x$(touch {pwned});`touch {pwned}`; touch {pwned} #'\"", 


PRINTF = textwrap.dedent(
    """\
    id: echo-model
    title: Echo the model
    categories: [model_loading]
    steps:
      - id: show
        kind: run
        argv: [printf, "%s|%s", "{model}", "--served-model-name={model}"]
        on_success: done:ok
        on_failure: manual:escalate
    """
)


def test_model_name_reaches_the_command_as_one_inert_argument(tmp_path):
    pwned, model = hostile(tmp_path)
    pb = load_text(PRINTF, "echo.yaml")
    s = Session(pb, derive_facts({"model": model}), runner=LocalRunner())
    view = s.start()
    assert view.needs == "confirm" and view.argv == ["printf", "%s|%s", model, f"--served-model-name={model}"]
    view = s.advance(True)
    assert view.result.status == "success"
    assert view.result.stdout == f"{model}|--served-model-name={model}"
    assert not pwned.exists(), "a value from the log was executed"
    s.advance()
    assert s.outcome == "done:ok"


def test_hostile_value_written_into_a_launch_script_stays_inert(tmp_path):
    pwned, model = hostile(tmp_path)
    script = tmp_path / "serve.sh"
    script.write_text("#!/bin/bash\nvllm serve /models/GLM-5 --tensor-parallel-size 8\n")
    t = Transcript.start("inject", LocalRunner.where)
    ctx = ActionContext(LocalRunner(), t, {}, "python3")
    got = SetFlag().apply({"file": str(script), "flag": "--served-model-name", "value": model}, ctx)
    assert got.ok, got.message
    # Run the edited script with `vllm` as a function that prints its arguments one a line.
    res = subprocess.run(["bash", "-c", 'vllm() { printf "%s\\n" "$@"; }; source "$1"', "bash", str(script)],
                         capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    args = res.stdout.splitlines()
    assert args[args.index("--served-model-name") + 1] == model
    assert not pwned.exists()


def test_a_flag_that_is_not_a_flag_is_refused(tmp_path):
    script = tmp_path / "serve.sh"
    script.write_text("vllm serve m\n")
    ctx = ActionContext(LocalRunner(), Transcript.start("x", LocalRunner.where), {}, "python3")
    preview = SetFlag().preview({"file": str(script), "flag": "--x; rm -rf /", "value": "1"}, ctx)
    assert preview.problem and "not a vLLM flag" in preview.problem
