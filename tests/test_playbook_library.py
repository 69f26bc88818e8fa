"""The bundled playbooks: all valid, every category served, listed by the commands and the README."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from triage.commands import playbooks as cmd
from triage.model import CATEGORIES
from triage.playbooks.load import bundled_dir, load_file, load_library

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = sorted((ROOT / "playbooks").glob("*.yaml"))


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def test_bundled_dir_is_the_source_checkout():
    assert bundled_dir() == ROOT / "playbooks"
    assert len(BUNDLED) >= 18


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_every_bundled_playbook_validates(path):
    pb = load_file(path)
    assert pb.id == path.stem, "a playbook's file is named after its id"
    assert pb.outcomes, "every playbook ends in named outcomes"
    assert all(re.fullmatch(r"[a-z][a-z0-9_-]*:\S+", o) for o in pb.outcomes)


def test_every_category_has_a_playbook():
    lib = load_library(include_user=False)
    assert lib.errors == []
    served = {c for p in lib.playbooks.values() for c in p.categories}
    assert set(CATEGORIES) <= served, f"no playbook for {sorted(set(CATEGORIES) - served)}"


def test_flagship_has_both_endings():
    pb = load_library(include_user=False).get("attention-sparse-mla")
    assert {"apply:sparse-mla", "upgrade:vllm", "manual:escalate"} <= set(pb.outcomes)
    assert "attention.no_valid_backend" in pb.signatures


def test_list_json_shape(capsys):
    assert cmd.main(["list", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {d["id"] for d in data} == {p.stem for p in BUNDLED}
    for d in data:
        assert set(d) == {"id", "title", "categories", "outcomes"}
        assert d["outcomes"] and d["categories"]


def test_show_and_unknown_id(capsys):
    assert cmd.main(["show", "attention-sparse-mla"]) == 0
    out = capsys.readouterr().out
    assert "[install-backend] apply" in out and "apply:sparse-mla" in out
    assert cmd.main(["show", "no-such-playbook"]) == 2
    assert "no playbook" in capsys.readouterr().err


def test_validate_all_bundled(capsys):
    assert cmd.main(["validate"]) == 0
    assert f"{len(BUNDLED)} valid, 0 invalid" in capsys.readouterr().out


def test_user_playbook_replaces_bundled_and_invalid_user_one_is_reported(tmp_path, capsys):
    user = tmp_path / "home" / "config" / "playbooks"
    user.mkdir(parents=True)
    (user / "gpu-oom.yaml").write_text(
        "id: gpu-oom\ntitle: Our own OOM runbook\ncategories: [gpu_oom]\nsteps:\n"
        "  - id: page\n    kind: explain\n    text: Page the on-call.\n    next: manual:page-oncall\n"
    )
    (user / "broken.yaml").write_text("id: broken\ntitle: x\ncategories: [gpu_oom]\nsteps:\n  - id: a\n    kind: dance\n")
    lib = load_library()
    assert lib.get("gpu-oom").title == "Our own OOM runbook"
    assert lib.get("gpu-oom").origin == "user"
    assert any("broken.yaml:6" in str(e) and "unknown kind 'dance'" in str(e) for e in lib.errors)
    assert cmd.main(["validate"]) == 2
    out = capsys.readouterr().out
    assert "broken.yaml:6" in out


def test_readme_lists_every_playbook():
    """README.md's playbook table names every bundled playbook."""
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8") if readme.exists() else ""
    missing = [p.stem for p in BUNDLED if f"`{p.stem}`" not in text]
    assert not missing, (
        f"README.md must list every bundled playbook id in backticks. Missing: {missing}"
    )
