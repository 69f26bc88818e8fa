"""`triage apply sparse-mla [--python PATH] [--host H] [--dry-run] [--yes]` and `triage apply --undo`."""

from __future__ import annotations

import argparse
import sys
import tempfile
from typing import Any, Callable

from triage.actions import sparse_mla as action
from triage.runner import LocalRunner, Runner
from triage.transcript import Transcript, default_runner_for, undo_last

FIXES = ("sparse-mla",)


def _err(msg: str) -> int:
    print(f"triage apply: {msg}", file=sys.stderr)
    return 2


def _new_transcript(where: str) -> Transcript:
    return Transcript.start("apply sparse-mla: install the triage_sparse_mla vLLM plugin", where, id="sparse-mla")


def _ask(prompt: str) -> bool:
    try:
        return input(prompt).strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _undo() -> int:
    report = undo_last()
    if report.transcript is None:
        print("nothing to undo")
        return 0
    for line in report.reverted:
        print(f"reverted: {line}")
    for line in report.cannot:
        print(f"cannot undo automatically: {line}")
    for line in report.failed:
        print(line, file=sys.stderr)
    return 0 if report.ok else 1


def main(
    argv: list[str],
    *,
    runner: Runner | None = None,
    recorder: Any = None,
    confirm: Callable[[str], bool] | None = None,
    stdin_isatty: Callable[[], bool] | None = None,
) -> int:
    parser = argparse.ArgumentParser(
        prog="triage apply",
        description="Apply a fix to the machine running vLLM, showing every command first and recording it for undo.",
    )
    parser.add_argument("fix", nargs="?", help="the fix to apply: " + ", ".join(FIXES))
    parser.add_argument("--python", default="python3", help="the Python interpreter that runs vLLM (default: python3)")
    parser.add_argument("--host", help="apply on this SSH host instead of this machine")
    parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
    parser.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    parser.add_argument("--undo", action="store_true", help="undo the last applied change")
    parser.add_argument("--no-selftest", action="store_true", help="skip the GPU kernel self-test after installing")
    parser.add_argument("--heads", type=int, default=128,
                        help="attention heads per GPU the check builds the impl with (default 128, DeepSeek-V3.2/GLM-5)")
    parser.add_argument("--index-topk", type=int, default=2048, help="the model's index_topk (default 2048)")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else 2

    if args.undo:
        if args.fix:
            return _err("--undo takes no fix name: it undoes the last applied change")
        return _undo()
    if args.fix is None:
        return _err("name the fix to apply: " + ", ".join(FIXES))
    if args.fix not in FIXES:
        return _err(f"unknown fix {args.fix!r}; known: {', '.join(FIXES)}")

    if runner is None:
        try:
            runner = default_runner_for(args.host) if args.host else LocalRunner()
        except RuntimeError as exc:
            return _err(str(exc))
    if isinstance(runner, LocalRunner):
        from triage.interpreter import refuse_reason

        why = refuse_reason(args.python)
        if why:
            return _err(why)
    blocked = None
    try:
        if args.dry_run:
            # The plan is shown even where it would be refused (no vLLM yet, say), with the reason.
            facts = action.check_target(runner, args.python)
            blocked = action.refusal(facts)
        else:
            facts = action.checked(runner, args.python)
    except action.ApplyError as exc:
        return _err(f"refused: {exc}")

    with tempfile.TemporaryDirectory(prefix="triage-wheel-") as tmp:
        wheel = action.build_plugin_wheel(tmp)
        if args.heads < 1 or args.index_topk < 1:
            return _err("--heads and --index-topk must be positive")
        plan = action.make_plan(runner, args.python, facts, wheel, selftest=not args.no_selftest,
                                dims=action.ModelDims(heads=args.heads, topk=args.index_topk))
        print(f"triage apply sparse-mla on {runner.where}:")
        for line in action.show_plan(plan):
            print(line)
        if args.dry_run:
            if blocked:
                print(f"not possible here yet: {blocked}")
            print("dry run: nothing was changed")
            return 0
        if not args.yes:
            isatty = stdin_isatty or sys.stdin.isatty
            if confirm is None and not isatty():
                return _err("refusing to change anything without confirmation: stdin is not a terminal (pass --yes)")
            if not (confirm or _ask)("Run these commands? [y/N] "):
                print("nothing was changed")
                return 0
        if recorder is None:
            recorder = _new_transcript(runner.where)
        outcome = action.execute(plan, runner, recorder)
        finish = getattr(recorder, "finish", None)
        if callable(finish):
            finish("ok" if outcome.ok else "failed")
        stream = sys.stdout if outcome.ok else sys.stderr
        for line in outcome.lines:
            print(line, file=stream)
        return 0 if outcome.ok else 1
