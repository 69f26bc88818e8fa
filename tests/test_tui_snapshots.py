"""Snapshot tests (pytest-textual-snapshot) of every view at 80x24 and 120x36, on recorded data.

Deterministic: the bundled log, the recorded report (tests/fixtures/tui), a scripted playbook walk,
no clock, no cursor blink, no animations. Review changes with the HTML report, then
`pytest tests/test_tui_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

import sys

import pytest

from tui_helpers import ROOT, make_app, scripted_plan, settle

SIZES = {"80x24": (80, 24), "120x36": (120, 36)}


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")
    from textual.widgets import Input

    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)  # no blinking cursor


def _before(*keys: str):
    async def run_before(pilot):
        app = pilot.app
        await settle(pilot, app)
        for k in keys:
            await pilot.press(k)
            await settle(pilot, app)

    return run_before


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("view,keys", [
    ("diagnosis", ()),
    ("machine", ("2",)),
    ("upstream", ("3", "down", "down", "down", "down")),
    ("help", ("question_mark",)),
])
def test_views(snap_compare, view, keys, size):
    assert snap_compare(make_app(), run_before=_before(*keys), terminal_size=SIZES[size])


@pytest.mark.parametrize("size", SIZES)
def test_fix_view_shows_the_command_before_it_runs(snap_compare, monkeypatch, size):
    scripted_plan(monkeypatch, [sys.executable and "python3", "-m", "triage_sparse_mla.install", "--python",
                                "/root/ml-env/bin/python"])
    assert snap_compare(make_app(), run_before=_before("4", "enter", "enter", "enter"), terminal_size=SIZES[size])
