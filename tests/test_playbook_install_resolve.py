"""install-resolve: an installer that stopped (no build, conflicting pins, an option it does not know) walks
its own guided fix, not the compiled-extension one, and each fixture reaches the branch of its cause."""

from __future__ import annotations

import io

import pytest

from tests.playbook_support import NoRunRunner, diagnosis, fake_actions, snapshot, upstream_unknown
from triage.commands import fix
from triage.playbooks.engine import ConsoleFrontEnd, Session, derive_facts
from triage.playbooks.load import PLACEHOLDER_RE, load_library
from triage.playbooks.wording import leaks
from triage.rules import all_rules

LIB = load_library(include_user=False)
SIGNATURES = ["install.no_matching_distribution", "install.dependency_conflict", "install.installer_flag_unknown"]


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def test_the_installer_signatures_name_install_resolve():
    pb = LIB.get("install-resolve")
    assert pb is not None and LIB.errors == []
    rules = {r.signature: r for r in all_rules()}
    for sig in SIGNATURES:
        assert sig in pb.signatures
        assert rules[sig].playbook == "install-resolve", sig
        assert LIB.for_diagnosis("install_mismatch", sig, {}).id == "install-resolve"
    # the category's other failures keep the compiled-extension playbook
    assert LIB.for_diagnosis("install_mismatch", "install.undefined_symbol", {}).id == "install-mismatch"
    assert LIB.for_diagnosis("install_mismatch", None, {}).id == "install-mismatch"


# fixture -> (the step title its cause leads to, the outcome's words, what the walk must quote from the log)
FIXTURES = {
    "install.no_matching_distribution.log": (
        "This Python is outside the range the release supports", "install into a Python version the release supports",
        ["vllm==0.11.0", "- 0.9.2 needs Python <3.13,>=3.9", "uv venv --python 3.12 --seed ~/.venvs/vllm"]),
    "install.dependency_conflict.log": (
        "Let vLLM choose torch, in a fresh environment", "install vLLM into a fresh virtual environment",
        ["trl 0.12.0 requires transformers<4.47", "xformers 0.0.30 requires torch==2.7.0", "Python 3.10",
         "uv pip install vllm --torch-backend=auto"]),
    "install.dependency_conflict--uv-no-solution.log": (
        "Let vLLM choose torch, in a fresh environment", "install vLLM into a fresh virtual environment",
        ["Because vllm==0.10.1 depends on torch==2.7.1 and you require torch==2.6.0", "Python 3.12.3"]),
    "install.installer_flag_unknown.log": (
        "Upgrade uv, then run the same command again", "upgrade the installer and run the same command again",
        ["--torch-backend", "uv self update"]),
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fix_dry_run_on_each_fixture_walks_its_branch_and_reads_clean(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert fix.main(["--log", f"tests/logs/{name}", "--dry-run", "--offline", "--no-probe"]) == 0
    out = capsys.readouterr().out
    title, outcome, quoted = FIXTURES[name]
    walked = out.split("\nOther steps of this playbook")[0]  # what the walk said, not the list of other branches
    assert "Guided fix: pip or uv could not install the requested packages" in out
    assert "(playbook install-resolve;" in out
    assert f"] {title}\n" in walked
    assert f"Result: {outcome}" in walked
    flat = " ".join(walked.split())
    for words in quoted:
        assert words in flat, words
    assert not leaks(out), leaks(out)
    assert not PLACEHOLDER_RE.search(out.replace("{ }", ""))
    assert "compiled extension" not in out and "C++ symbols" not in out


def walk(case, snap="no-probe", facts_extra=None):
    facts = derive_facts(snapshot(snap), diagnosis(case), log_path="vllm.log", dry_run=True)
    facts.update(facts_extra or {})
    s = Session(LIB.get("install-resolve"), facts, runner=NoRunRunner(), dry_run=True, upstream=upstream_unknown,
                actions=fake_actions())
    out = io.StringIO()
    outcome = ConsoleFrontEnd(out, io.StringIO(), yes=True, interactive=False).run(s)
    return outcome, s.visited, out.getvalue()


@pytest.mark.parametrize("case,step,outcome,words", [
    ("install_resolve_python", "python-range", "manual:python-in-range", "The log shows Python 3.13.1."),
    ("install_resolve_macos", "linux-only", "manual:linux", "this machine runs Darwin"),
    ("install_resolve_arm", "arch-builds", "manual:other-arch", "This machine's CPU is aarch64."),
    ("install_resolve_wheel", "wheel-tags", "manual:matching-wheel", "python -m pip debug --verbose"),
    ("install_resolve_variant", "variant-index", "manual:variant-index",
     "python -m pip install vllm --extra-index-url https://download.pytorch.org/whl/cu128"),
    ("install_resolve_release", "pick-release", "manual:pick-release", "python -m pip index versions vllm"),
    ("install_resolve_torch", "torch-pin", "manual:fresh-venv", "python -m pip install -c constraints.txt"),
    ("install_resolve_pins", "other-pins", "manual:fresh-venv", "python -m pip check"),
    ("install_resolve_uv", "upgrade-uv", "manual:upgrade-installer", "uv self update"),
    ("install_resolve_pip_backend", "use-uv", "manual:use-uv", "pip has no `--torch-backend`"),
    ("install_resolve_pip", "upgrade-pip", "manual:upgrade-installer", "python -m pip install -U pip"),
    ("install_mismatch", "other", "manual:other-playbook", "--playbook install-mismatch"),
])
def test_each_cause_reaches_its_branch(case, step, outcome, words):
    got, visited, text = walk(case)
    assert (got, visited[-1]) == (outcome, step), visited
    assert words in " ".join(text.split())
    assert not leaks(text), leaks(text)


def test_the_probed_python_is_shown_beside_the_logs():
    _o, _v, text = walk("install_resolve_python", snap="h100-release")
    flat = " ".join(text.split())
    assert "The log shows Python 3.13.1." in flat and "The interpreter here is Python 3.12.3." in flat
    assert "Not in the log: the Python version" not in flat
    _o, _v, text = walk("install_resolve_python", snap="no-probe", facts_extra={"log_python": None})
    assert "Not in the log: the Python version (`python --version` shows it)." in " ".join(text.split())


def test_a_requirement_from_the_log_never_reaches_a_command_line():
    hostile = "vllm==1;touch /tmp/pwned #"
    for case in ("install_resolve_release", "install_resolve_variant", "install_resolve_wheel"):
        _o, _v, text = walk(case, facts_extra={"req": hostile + ("+cu118.whl" if case != "install_resolve_release" else "")})
        assert hostile in " ".join(text.split()), case  # said, in prose
        commands = [ln.strip() for ln in text.splitlines() if ln.strip().startswith(("$", "uv ", "python", "source"))]
        assert commands and not any("pwned" in c for c in commands), commands


def test_the_rules_read_what_decides_the_branch():
    from triage.logread import scan_source
    from triage.logread.source import open_source
    from triage.diagnose import diagnose

    def top(name):
        return diagnose(scan_source(open_source(f"tests/logs/{name}")))[0][0]

    d = top("install.no_matching_distribution.log")
    assert d.facts["req"] == "vllm==0.11.0" and d.facts["python_refused"] is True
    assert d.facts["python_ranges"] == ["0.2.0 needs Python >=3.8", "0.9.2 needs Python <3.13,>=3.9"]
    d = top("install.dependency_conflict--uv-no-solution.log")
    assert d.facts["log_python"] == "3.12.3" and d.facts["torch_pinned"] is True
    assert d.facts["conflicts"] == ["Because vllm==0.10.1 depends on torch==2.7.1 and you require torch==2.6.0"]
    d = top("install.installer_flag_unknown.log")
    assert (d.facts["flag"], d.facts["installer"]) == ("--torch-backend", "uv")


def test_torch_version_pin_walks_what_pip_said_and_offers_the_pinned_torch(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    assert fix.main(["--log", "tests/logs/install.torch_version_pin.log", "--dry-run", "--offline", "--no-probe"]) == 0
    out = capsys.readouterr().out
    walked = " ".join(out.split("\nOther steps of this playbook")[0].split())
    assert "(playbook install-mismatch;" in out
    assert "pip installed torch 2.9.0 while this vLLM requires torch 2.8.0" in walked
    assert "$ python3 -m pip install torch==2.8.0" in walked and "Result: install torch" in walked
    assert "C++ symbols do not resolve" not in walked and "2) No" in out
    assert not leaks(out), leaks(out)


@pytest.mark.parametrize("name,step", [
    ("install.undefined_symbol.log", "What does not match"),
    ("install.numpy_abi.log", "What does not fit, and what pip knows"),
    ("install.glibc_too_old.log", "What does not fit, and what pip knows"),
    ("downstream.vllm_api_mismatch.log", "What does not fit, and what pip knows"),
    ("install.vllm_c_missing.log", "A source folder named vllm in the way?"),
])
def test_install_mismatch_says_c_plus_plus_symbols_only_for_a_compiled_part(name, step, capsys):
    assert fix.main(["--log", f"tests/logs/{name}", "--dry-run", "--offline", "--no-probe"]) == 0
    walked = capsys.readouterr().out.split("\nOther steps of this playbook")[0]
    assert "(playbook install-mismatch;" in walked and f"] {step}\n" in walked
    if step != "What does not match":
        assert "C++ symbols" not in walked and "] What does not match\n" not in walked

