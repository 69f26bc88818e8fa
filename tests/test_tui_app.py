"""Pilot tests of every view and flow of the TUI, fed with the bundled log and recorded data."""

from __future__ import annotations

import os
import sys

import pytest

from tui_helpers import (DEMO_LOG_REL, FIXTURES, ROOT, make_app, recorded_report, scripted_plan, settle)


@pytest.fixture(autouse=True)
def _in_root(monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TEXTUAL_ANIMATIONS", "none")


def _text(app, selector: str) -> str:
    from textual.widgets import Static

    return str(app.query_one(selector, Static).render())


async def test_diagnosis_view_shows_root_cause_evidence_and_search():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        body = _text(app, "#diag-text")
        assert "ROOT CAUSE" in body and "No sparse MLA attention backend" in body
        assert "confidence 95%" in body and "attention-sparse-mla" in body
        lv = app.query_one("#log")
        assert lv.evidence == [41] and lv.cursor_line_no == 41  # the log opens on the evidence
        assert len(lv.lines) == 98  # a small file: every line, with its number
        await pilot.press("g")
        assert lv.cursor_line_no == 1
        await pilot.press("e")
        assert lv.cursor_line_no == 41
        assert "evidence 1/1" in _text(app, "#log-title")
        # search: "/" opens a prompt; n / N move between matches
        await pilot.press("slash")
        await pilot.pause()
        for ch in "WorkerProc failed":
            await pilot.press("space" if ch == " " else ch)
        await pilot.press("enter")
        await pilot.pause()
        first = lv.cursor_line_no
        assert "WorkerProc failed" in lv.lines[lv.cursor][1]
        await pilot.press("n")
        assert lv.cursor_line_no != first and "WorkerProc failed" in lv.lines[lv.cursor][1]
        await pilot.press("N")
        assert lv.cursor_line_no == first
        assert "search: WorkerProc failed" in _text(app, "#log-title")
        # w shows whole lines (with vLLM's header) instead of the short form
        short = lv.text_of(lv.cursor)
        await pilot.press("w")
        assert len(lv.text_of(lv.cursor)) > len(short) and "multiproc_executor.py" in lv.text_of(lv.cursor)


async def test_other_findings_are_listed_and_shown():
    from triage.model import Diagnosis, Evidence, Fix

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        rep = recorded_report()
        rep.diagnoses.append(Diagnosis("distributed", "nccl.peer_died", "NCCL error after a peer died", 0.3,
                                       [Evidence(45, "x")], {}, Fix("look at the first failure")))
        app._show(rep)
        await pilot.pause()
        assert "Other findings" in _text(app, "#diag-text") and "NCCL error after a peer died" in _text(app, "#diag-text")
        await pilot.press("right_square_bracket")
        assert "ALSO FOUND (2 of 2)" in _text(app, "#diag-text")
        assert app.query_one("#log").evidence == [45] and app.query_one("#log").cursor_line_no == 45
        await pilot.press("left_square_bracket")
        assert "ROOT CAUSE" in _text(app, "#diag-text")


async def test_quick_stage_first_then_probes_and_upstream():
    """The log's diagnosis is on screen before the slow stage; the full stage fills Machine and Upstream."""
    import threading

    from triage.tui.app import TriageApp
    from triage.tui.intake import Options
    from tui_helpers import log_only

    gate = threading.Event()

    def full(_o, _s):
        gate.wait(10)
        return recorded_report()

    rec = recorded_report()
    app = TriageApp(Options(DEMO_LOG_REL, offline=False, probe=True), quick=lambda o, s: log_only(rec), full=full,
                    hosts=[])
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            await pilot.pause(0.02)
            if app.report is not None and "full" in app.busy:
                break
        assert "ROOT CAUSE" in _text(app, "#diag-text")
        assert "probing this machine and searching upstream" in _text(app, "#status")
        await pilot.press("2")
        assert "from the log only" in _text(app, "#machine-text")
        gate.set()
        await settle(pilot, app)
        assert "probed: gpu-a" in _text(app, "#machine-text")
        assert "⟳" not in _text(app, "#status")


async def test_machine_view_gpus_patched_files_and_findings():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        assert app.query_one("#views").current == "machine"
        text = _text(app, "#machine-text")
        assert "probed: gpu-a" in text
        assert "Patched by hand (2)" in text and "vllm/platforms/cuda.py" in text
        assert "driver 580.95.05" in text and "nightly" in text
        table = app.query_one("#gpus")
        assert table.row_count == 8 and table.display
        assert "12.0" in str(table.get_row_at(0))


async def test_machine_view_fleet_table_marks_differences():
    from triage.tui.intake import load_hosts

    hosts = load_hosts(str(FIXTURES / "fleet.json"))
    app = make_app(hosts=hosts)
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("2")
        table = app.query_one("#fleet")
        assert table.display and [str(c.label) for c in table.columns.values()][1:] == ["gpu-a", "gpu-b"]
        rows = {str(table.get_row_at(i)[0]).strip(): [str(c) for c in table.get_row_at(i)[1:]]
                for i in range(table.row_count)}
        assert rows["≠ driver"] == ["580.95.05", "575.57.08"]
        assert "≠ vLLM" in rows and "  GPU" in [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        title = _text(app, "#fleet-title")
        assert "2 hosts" in title and "gpu-c: host key of gpu-c is not known" in title


async def test_machine_add_host_probes_it_in_the_background():
    from triage.probes import HostProbe
    from triage.tui.intake import load_hosts

    calls = []

    def probe_host(host):
        calls.append(host)
        other = load_hosts(str(FIXTURES / "fleet.json"))[1]
        return HostProbe(host=host, ok=True, facts=other.facts)

    app = make_app(hosts=load_hosts(str(FIXTURES / "fleet.json"))[:1], probe_host=probe_host)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(pilot, app)
        await pilot.press("2", "a")
        await pilot.pause()
        for ch in "gpu-z":
            await pilot.press(ch)
        await pilot.press("enter")
        for _ in range(100):
            await pilot.pause(0.02)
            if len(app.hosts) == 2:
                break
        await pilot.pause()
        assert calls == ["gpu-z"]
        assert [h.host for h in app.hosts] == ["gpu-a", "gpu-z"]
        assert app.query_one("#fleet").display


async def test_upstream_view_ranks_hits_and_copies_a_url():
    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("3")
        text = _text(app, "#upgrade-text")
        assert "upgrading fixes this" in text.lower() and "0.26.0" in text
        assert "would overwrite: vllm/platforms/cuda.py" in text
        table = app.query_one("#hits")
        assert table.row_count == 8
        assert "same error, backend, GPU and model family" in _text(app, "#hit-detail")
        # the NVFP4 MoE issue (same GPU, other subsystem) is last
        last = app.query_one("#upstream").hits[-1]
        assert "other subsystem" in last.why
        for _ in range(4):
            await pilot.press("down")
        detail = _text(app, "#hit-detail")
        assert "#43477" in detail and "fixed by" in detail and "0.26.0" in detail
        await pilot.press("c")
        assert app.clipboard == "https://github.com/vllm-project/vllm/pull/43477"


async def test_fix_walk_confirm_stream_choice_input_outcome_and_undo(monkeypatch):
    from triage.tui import fixflow

    cmd = [sys.executable, "-c", "import sys; print('building wheel'); print('installed', file=sys.stderr)"]
    made = scripted_plan(monkeypatch, cmd)
    monkeypatch.setattr(fixflow, "undo_last", lambda: (True, ["removed the plugin"]))
    app = make_app()
    async with app.run_test(size=(100, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("4")
        assert "attention-sparse-mla" in _text(app, "#fix-head")
        fix = app.query_one("#fix")
        await pilot.press("enter")  # start
        await settle(pilot, app)
        assert fix.view.step_id == "what" and "enter" in _text(app, "#fix-keys")
        await pilot.press("enter")  # ack
        await settle(pilot, app)
        assert fix.view.needs == "choice" and app.query_one("#fix-choices").display
        await pilot.press("up", "enter")  # the first choice
        await settle(pilot, app)
        assert made["session"].answers[-1] == "upgrade"
        # the command is shown in full before it runs
        assert fix.view.needs == "confirm"
        steps = " ".join(str(w.render()) for w in app.query(".fix-step"))
        # the exact command, wrapped to the view at word boundaries
        assert " ".join(("$ " + fixflow.show_argv(cmd)).split()) in " ".join(steps.split())
        await pilot.press("y")
        await settle(pilot, app)
        out = app.query_one("#fix-output")
        assert out.display and "building wheel" in out.lines and "installed" in out.lines
        assert fix.view.needs == "input" and app.query_one("#fix-input").display
        for ch in "new.log":
            await pilot.press(ch)
        await pilot.press("enter")
        await settle(pilot, app)
        assert fix.finished and made["session"].answers[-1] == "new.log"
        outcome = " ".join(str(w.render()) for w in app.query(".fix-outcome"))
        assert "Result: install the bundled sparse MLA backend" in outcome and "apply:" not in outcome
        assert "--attention-backend CUSTOM" in outcome and "undo" in outcome
        answers = " ".join(str(w.render()) for w in app.query(".fix-answer"))
        assert "you: Upgrade vLLM to 0.26.0" in answers and "you: yes, run it" in answers
        await pilot.press("u")
        await settle(pilot, app)
        assert "removed the plugin" in " ".join(str(w.render()) for w in app.query(".fix-step"))


async def test_fix_skip_declines_the_command(monkeypatch):
    made = scripted_plan(monkeypatch, [sys.executable, "-c", "raise SystemExit('must not run')"])
    app = make_app()
    async with app.run_test(size=(100, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("4", "enter")
        await settle(pilot, app)
        await pilot.press("enter")
        await settle(pilot, app)
        await pilot.press("enter")  # default choice
        await settle(pilot, app)
        assert made["session"].answers[-1] == "bundled"  # enter takes the highlighted default
        await pilot.press("s")
        await settle(pilot, app)
        assert "declined" in " ".join(str(w.render()) for w in app.query(".fix-step"))
        assert not app.query_one("#fix-output").display  # nothing ran


async def test_fix_with_the_real_engine_dry_run_reaches_an_outcome(tmp_path):
    app = make_app()
    async with app.run_test(size=(100, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("4", "D")
        await settle(pilot, app)
        fix = app.query_one("#fix")
        for _ in range(30):
            if fix.finished:
                break
            await pilot.press("enter")
            await settle(pilot, app)
        assert fix.finished
        assert fix.plan.session.outcome
        assert "dry run" in _text(app, "#fix-head")


async def test_demo_fix_is_always_a_dry_run():
    """The demo's machine is a recording: enter (not D) must still run nothing here."""
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    app = TriageApp(Options(DEMO_LOG_REL, offline=True, probe=False, demo=True), hosts=[])
    async with app.run_test(size=(100, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("4", "enter")
        await settle(pilot, app)
        fix = app.query_one("#fix")
        assert fix.dry_run and "dry run" in _text(app, "#fix-head")


async def test_help_palette_and_quit():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        from triage.tui.dialogs import HelpScreen

        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "View: Upstream":
            await pilot.press("space" if ch == " " else ch)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.query_one("#views").current == "upstream"
        await pilot.press("ctrl+c")  # quits, as in nvitop, htop and lazygit (never a signal to vLLM)
        await pilot.pause()
        assert not app.is_running
    assert app.return_code == 0


async def test_every_view_by_key_at_80x24():
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        for key, view in (("2", "machine"), ("3", "upstream"), ("4", "fix"), ("1", "diagnosis")):
            await pilot.press(key)
            assert app.query_one("#views").current == view
            assert f"{key} " in _text(app, "#nav")


async def test_bare_triage_offers_found_logs(tmp_path):
    from triage.tui.app import TriageApp
    from triage.tui.findlogs import Candidate
    from triage.tui.intake import Options
    from tui_helpers import log_only

    log = tmp_path / "vllm.log"
    log.write_bytes((ROOT / DEMO_LOG_REL).read_bytes())
    found = [Candidate("container vllm-glm5", "vllm/vllm-openai:nightly · Exited (1)", 0, lambda: str(log))]
    rec = recorded_report()
    app = TriageApp(Options(None, offline=True, probe=False), quick=lambda o, s: log_only(rec),
                    finder=lambda: found, hosts=[])
    async with app.run_test(size=(80, 24)) as pilot:
        from triage.tui.dialogs import OpenLogScreen

        await pilot.pause(0.2)
        assert isinstance(app.screen, OpenLogScreen)
        await pilot.press("tab", "enter")
        await settle(pilot, app)
        assert app.opts.source == str(log)
        assert "ROOT CAUSE" in _text(app, "#diag-text")


async def test_live_pipe_updates_and_shows_when_the_input_ends():
    """A real pipe: findings appear while the writer is still writing; the end is shown."""
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    data = (ROOT / DEMO_LOG_REL).read_bytes()
    lines = data.splitlines(keepends=True)
    r, w = os.pipe()
    app = TriageApp(Options("-", offline=True, probe=False), pipe_fd=r, hosts=[])
    async with app.run_test(size=(80, 24)) as pilot:
        os.write(w, b"".join(lines[:20]))
        await pilot.pause(0.3)
        assert "vLLM still writing" in _text(app, "#status")
        os.write(w, b"".join(lines[20:60]))  # the error is on line 41
        for _ in range(100):
            await pilot.pause(0.05)
            if app.report is not None and app.report.diagnoses:
                break
        assert app.report.diagnoses and not app.report.input_complete
        assert "ROOT CAUSE" in _text(app, "#diag-text") and "vLLM still writing" in _text(app, "#status")
        os.write(w, b"".join(lines[60:]))
        os.close(w)
        await settle(pilot, app)
        assert "input ended" in _text(app, "#status") and "98 lines" in _text(app, "#status")
        assert app.report.input_complete
        assert app.query_one("#log").evidence == [41]


async def test_quitting_a_live_pipe_asks_again_and_ctrl_c_quits():
    """While vLLM writes, the first quit key says what quitting means; the second (q or ctrl+c) quits."""
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    lines = (ROOT / DEMO_LOG_REL).read_bytes().splitlines(keepends=True)
    r, w = os.pipe()
    app = TriageApp(Options("-", offline=True, probe=False), pipe_fd=r, hosts=[])
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            os.write(w, b"".join(lines[:20]))
            await pilot.pause(0.3)
            await pilot.press("q")
            await pilot.pause()
            assert app.is_running
            assert any("still writing" in str(n.message) for n in app._notifications)
            await pilot.press("ctrl+c")
            await pilot.pause()
            assert not app.is_running
    finally:
        os.close(w)
    assert app.return_code == 0


async def test_live_pipe_waits_for_the_cause_then_holds_every_line():
    """The wrapper lines arrive before the worker's traceback: no "root cause missing" while the input
    is open. Once it ends, the log view holds every line of the pipe and / finds any of them."""
    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    data = (ROOT / DEMO_LOG_REL).read_bytes()
    lines = data.splitlines(keepends=True)
    cascade = b"(EngineCore_DP0 pid=1) ERROR 11-30 10:00:00 [core.py:708] EngineCore failed to start.\n" \
              b"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n"
    r, w = os.pipe()
    app = TriageApp(Options("-", offline=True, probe=False), pipe_fd=r, hosts=[])
    async with app.run_test(size=(120, 36)) as pilot:
        os.write(w, b"".join(lines[:8]) + cascade)  # the banner, then the wrapper lines
        for _ in range(100):
            await pilot.pause(0.05)
            if app.report is not None and app.report.diagnoses:
                break
        text = _text(app, "#diag-text")
        assert "waiting for its cause" in text and "VLLM_LOGGING_LEVEL" not in text
        assert "error-like lines only" in _text(app, "#log-title")
        os.write(w, data)
        os.close(w)
        await settle(pilot, app)
        lv = app.query_one("#log")
        assert len(lv.lines) == app.report.lines == 8 + 2 + len(lines)
        assert "error-like lines only" not in _text(app, "#log-title")
        assert lv.search("model   /models/GLM-5-FP8", 1) is not None  # a banner line no rule selects


async def test_a_typo_in_the_log_picker_keeps_it_open_and_the_palette_opens_another_log(tmp_path):
    from triage.tui.dialogs import OpenLogScreen

    from triage.tui.app import TriageApp
    from triage.tui.intake import Options

    log = tmp_path / "other.log"
    log.write_bytes((ROOT / "tests" / "logs" / "kv_cache.insufficient_for_max_len.log").read_bytes())
    app = TriageApp(Options(DEMO_LOG_REL, offline=True, probe=False), hosts=[])
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+p")
        await pilot.pause()
        for ch in "Open another log":
            await pilot.press("space" if ch == " " else ch)
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, OpenLogScreen)
        for ch in str(tmp_path / "othr.log"):
            await pilot.press(ch)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert isinstance(app.screen, OpenLogScreen), "a typo must not close the dialog"
        assert "no such file" in app.screen.status_text
        inp = app.screen.query_one("#open-path")
        inp.value = str(log)
        await pilot.press("enter")
        await settle(pilot, app)
        assert not isinstance(app.screen, OpenLogScreen)
        assert app.opts.source == str(log)
        assert app.report is not None and app.report.diagnoses[0].category == "kv_cache_memory"


async def test_help_shows_every_key_at_120x36_without_scrolling():
    from triage.tui.dialogs import HelpScreen

    app = make_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await settle(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause(0.3)
        assert isinstance(app.screen, HelpScreen)
        box = app.screen.query_one("#help-box")
        assert box.max_scroll_y == 0, "the help is cut at 120x36"
        from triage.tui.dialogs import HELP

        assert "**w** whole / short lines" in " ".join(HELP.split()) and "ctrl+c" in HELP


async def test_preflight_screen_predicts_a_launch_before_it_runs(tmp_path):
    import json

    from triage.preflight.machine import Machine, given_gpus

    model = tmp_path / "llama"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 8192, "num_hidden_layers": 80,
        "num_attention_heads": 64, "num_key_value_heads": 8, "max_position_embeddings": 131072,
        "torch_dtype": "bfloat16"}))
    app = make_app()
    app.preflight_machine = lambda: Machine(gpus=given_gpus("NVIDIA H100 80GB HBM3", 4, "9.0", 80.0))
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        await pilot.press("P")
        await pilot.pause()
        box = app.screen.query_one("#preflight-input")
        box.value = f"vllm serve {model} --tensor-parallel-size 3"
        await pilot.press("enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        body = str(app.screen.query_one("#preflight-result").render())
        assert "WILL FAIL" in body and "divisible by tensor parallel size (3)" in body and "engine_config" in body
        box.value = f"vllm serve {model} --tensor-parallel-size 4 --max-model-len 32768"
        await pilot.press("enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert "No failure predicted" in str(app.screen.query_one("#preflight-result").render())
        box.value = "vllm serve"
        await pilot.press("enter")
        await app.screen.workers.wait_for_complete()
        await pilot.pause()
        assert "Cannot read that command" in str(app.screen.query_one("#preflight-result").render())
        await pilot.press("escape")
        await pilot.pause()
        assert not app.screen.query("#preflight-input")
        # the command palette offers it too
        assert any("Preflight" in c.title for c in app.get_system_commands(app.screen))


async def test_first_frame_holds_the_diagnosis_and_the_rest_comes_after_it():
    """As the launcher runs it: the log is read and diagnosed before the app starts, so the first frame
    drawn already shows the root cause; the other views and the probes/upstream stage come after it."""
    import threading

    from triage.tui.app import TriageApp
    from triage.tui.intake import Options, Reader
    from tui_helpers import log_only

    rec = recorded_report()
    gate = threading.Event()
    frames: list[dict] = []
    full_began_after: list[int] = []

    def full(_o, _s):
        full_began_after.append(len(frames))
        gate.wait(10)
        return recorded_report()

    opts = Options(DEMO_LOG_REL, offline=False, probe=True)
    reader = Reader(opts, None, lambda o, s: log_only(rec))
    for _ in range(500):
        if reader.result is not None:
            break
        threading.Event().wait(0.01)
    app = TriageApp(opts, quick=lambda o, s: log_only(rec), full=full, hosts=[], reader=reader)
    draw = app._display

    def display(screen, renderable):
        if not frames:
            frames.append({"text": _text(app, "#diag-text"), "views": app.views_mounted, "busy": dict(app.busy)})
        else:
            frames.append({})
        draw(screen, renderable)

    app._display = display
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(200):
            await pilot.pause(0.02)
            if app.views_mounted and full_began_after:
                break
        first = frames[0]
        assert "ROOT CAUSE" in first["text"] and "No sparse MLA attention backend" in first["text"]
        assert not first["views"] and "full" not in first["busy"]
        assert full_began_after and full_began_after[0] >= 1  # probes and upstream began after the first frame
        assert app.views_mounted
        await pilot.press("3")
        assert "searching upstream" in _text(app, "#upgrade-text") and "not assessed yet" in _text(app, "#upgrade-text")
        gate.set()
        await settle(pilot, app)
        assert "0.26.0" in _text(app, "#upgrade-text")  # upstream's answer, arrived later, is on screen
        await pilot.press("1")
        assert "ROOT CAUSE" in _text(app, "#diag-text")


async def test_a_view_hidden_when_the_report_changed_is_brought_up_to_date_when_shown():
    app = make_app(full=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        assert app.current_view == "diagnosis" and "machine" in app._stale  # not redrawn while hidden
        await pilot.press("2")
        assert "machine" not in app._stale and "Machine (" in _text(app, "#machine-text")


async def test_keys_line_follows_the_view_and_a_click_presses_its_key():
    app = make_app(full=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        keys = _text(app, "#keys")
        assert "Next evidence" in keys and "Search" in keys and "Quit" in keys and "Add host" not in keys
        assert "palette" in _text(app, "#palette-key")
        await pilot.press("2")
        await pilot.pause()
        keys = _text(app, "#keys")
        assert "Add host" in keys and "Probe again" in keys and "Next evidence" not in keys
        await pilot.press("1")
        await pilot.pause()
        # " e Next evidence  / Search ...": a click on "/" presses "/", which opens the search prompt
        at = _text(app, "#keys").index("/")
        await pilot.click("#keys", offset=(at, 0))
        await pilot.pause(0.1)
        assert type(app.screen).__name__ == "PromptScreen"


async def test_a_live_re_diagnosis_of_the_same_lines_keeps_the_log_view():
    """A live pipe is diagnosed again several times a second: when the lines held did not change, the
    log view keeps its list (no pass over thousands of lines) and only the evidence is marked anew."""
    from triage.tui.logview import LogView

    app = make_app(full=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot, app)
        lv = app.query_one(LogView)
        held, index = lv.lines, lv._index
        lv.set_lines(held, [45])
        assert lv.lines is held and lv._index is index and lv.evidence == [45] and lv.cursor_line_no == 41
        lv.set_lines(list(held), [41])
        assert lv._index is not index and lv.evidence == [41]


@pytest.fixture
def spare_core(monkeypatch):
    """The early child is forked only with two cores or more; these tests need it wherever they run."""
    from triage.tui import intake

    monkeypatch.setattr(intake, "_spare_core", lambda: True)


def test_no_early_child_on_one_core(monkeypatch):
    from triage.tui import intake
    from triage.tui.intake import EarlyReport, Options

    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0})
    assert not intake._spare_core()
    assert EarlyReport.start(Options(DEMO_LOG_REL), piped=False) is None
    monkeypatch.setattr(os, "sched_getaffinity", lambda _pid: {0, 1})
    assert intake._spare_core()


def _early(opts, data: bytes | None = None, close: bool = True):
    """An EarlyReport as the launcher starts it; a pipe's bytes are fed as the pump would."""
    from triage.tui.intake import EarlyReport

    early = EarlyReport.start(opts, piped=data is not None)
    assert early is not None
    if data is not None:
        early.feed(data)
        if close:
            early.end_of_input()
    return early


def test_early_report_is_the_quick_report_built_in_a_child(spare_core):
    from triage.logread import scan_path
    from triage.tui.intake import Options, quick_report

    opts = Options(DEMO_LOG_REL, offline=True, probe=False)
    want = quick_report(opts, scan_path(DEMO_LOG_REL))
    got = _early(opts).result()
    assert got is not None and [d.signature for d in got.diagnoses] == [d.signature for d in want.diagnoses]
    assert got.diagnoses[0].evidence[0].line == 41
    piped = _early(Options("-", offline=True, probe=False), (ROOT / DEMO_LOG_REL).read_bytes()).result()
    assert piped is not None and piped.source == "-" and piped.diagnoses[0].signature == want.diagnoses[0].signature


def test_early_report_leaves_big_and_unfinished_logs_to_the_app(monkeypatch, spare_core):
    from triage.tui import intake
    from triage.tui.intake import Options

    assert intake.EarlyReport.start(Options("/dev/zero"), piped=False) is None  # a device may never end
    monkeypatch.setattr(intake, "EARLY_LIMIT", 4096)
    early = _early(Options("-", offline=True, probe=False), (ROOT / DEMO_LOG_REL).read_bytes())
    assert early.result() is None  # past the limit the child is stopped: the app diagnoses it itself
    monkeypatch.setattr(intake, "EARLY_LIMIT", 8 << 20)
    monkeypatch.setattr(intake, "EARLY_WAIT_S", 1)
    still_writing = _early(Options("-", offline=True, probe=False), b"INFO starting\n", close=False)
    import time

    time.sleep(1.5)  # the writer did not close the pipe within EARLY_WAIT_S: the child gave up
    assert still_writing.result() is None


def test_the_reader_shows_the_early_report_and_keeps_its_own_scan(spare_core):
    """What the launcher wires: the pipe read by the app's reader (for the log view, the live updates and
    the full stage) while the child diagnoses the same bytes; the report shown is the child's."""
    import threading

    from triage.tui.intake import Options, Reader

    from triage.tui.intake import EarlyReport

    opts = Options("-", offline=True, probe=False)
    early = EarlyReport.start(opts, piped=True)
    r, w = os.pipe()
    calls = []

    def quick(o, s):
        calls.append(s)
        raise AssertionError("the early report should have been used")

    reader = Reader(opts, r, quick, early=early)
    os.write(w, (ROOT / DEMO_LOG_REL).read_bytes())
    os.close(w)
    done = threading.Event()
    got = []
    reader.when_done(lambda *res: (got.append(res), done.set()))
    assert done.wait(30)
    scan, report, error = got[0]
    assert error is None and not calls
    assert report.diagnoses[0].evidence[0].line == 41 and scan.lines_total == 98
