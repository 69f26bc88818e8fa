"""`triage fix --log FILE [--playbook ID] [--dry-run] [--yes] [--host H] [--python P]`

Diagnoses the log, picks the playbook of the top diagnosis (its fix.playbook, else one for its
category) and walks it in the terminal. `--dry-run` shows every step and command without running
any; without `--yes` every change asks first; with no terminal to ask and no `--yes`, changes are
refused. `--from-report FILE` starts from a saved `triage --log ... --json` report instead of a log.

Exit status: 0 a fix was applied (or, with --dry-run, the plan was shown); 4 the playbook ended in a
step for a person (`manual:...`); 3 nothing to fix; 2 usage or input error.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from triage.demo import DEMO_LOG, DEMO_SNAPSHOT
from triage.model import Report
from triage.pipeline import build_report
from triage.playbooks.engine import (ConsoleFrontEnd, Session, default_upstream, derive_facts, is_routing, preview_argv,
                                     render_inline, show_argv, step_title)
from triage.playbooks.load import load_library

USAGE_ERROR = 2
NOTHING_TO_FIX = 3
NEEDS_A_PERSON = 4


def _fail(msg: str, code: int = USAGE_ERROR) -> int:
    print(f"triage fix: {msg}", file=sys.stderr)
    return code


def _report_from_json(path: str) -> tuple[list[dict[str, Any]], dict[str, Any], Report]:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    try:
        report = Report.from_json(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return [d.to_json() for d in report.diagnoses], dict(report.environment), report


def _diagnose(args: argparse.Namespace) -> tuple[list[dict[str, Any]], dict[str, Any], Report]:
    report = build_report(args.log, offline=args.offline, probe=not args.no_probe, host=args.host, python=args.python,
                          snapshot=args.snapshot)
    return [d.to_json() for d in report.diagnoses], dict(report.environment), report


def _runner(host: str | None):
    from triage.runner import LocalRunner

    if not host:
        return LocalRunner()
    from triage.transcript import default_runner_for

    return default_runner_for(host)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="triage fix", description="Walk the guided fix for a failed vLLM launch.")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--log", help="the failed vLLM log (a path, or - for stdin)")
    src.add_argument("--from-report", metavar="FILE", help="a saved `triage --log ... --json` report")
    src.add_argument("--demo", action="store_true",
                     help="the bundled example (GLM-5 on 8x RTX PRO 6000, recorded machine); use with --dry-run")
    parser.add_argument("--playbook", metavar="ID", help="walk this playbook instead of the one the diagnosis names")
    parser.add_argument("--dry-run", action="store_true", help="show every step and command; run nothing")
    parser.add_argument("--yes", action="store_true", help="confirm every change and take every default answer")
    parser.add_argument("--host", help="the machine vLLM runs on ([user@]host[:port] or an ssh alias)")
    parser.add_argument("--python", help="the Python that runs vLLM")
    parser.add_argument("--offline", action="store_true", help="no network (no upstream search)")
    parser.add_argument("--no-probe", action="store_true", help="do not probe the machine; use the log alone")
    parser.add_argument("--snapshot", metavar="FILE",
                        help="use a saved `triage probe --json` (e.g. from a ticket) instead of probing")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE_ERROR
    if args.demo:
        # The demo machine is recorded, not this one: never probe or change here.
        if not args.dry_run:
            return _fail("the demo's machine is a recording: walk it with --dry-run")
        args.log, args.snapshot, args.offline, args.no_probe = str(DEMO_LOG), str(DEMO_SNAPSHOT), True, True

    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    answers = sys.stdin
    if args.log == "-" and not args.dry_run and not args.yes:
        # The log comes on stdin; answers come from the terminal, if there is one.
        try:
            answers = open("/dev/tty", encoding="utf-8")
            interactive = sys.stdout.isatty()
        except OSError:
            interactive = False
    if not args.dry_run and not args.yes and not interactive:
        return _fail("no terminal to confirm changes: use --dry-run to see the plan, or --yes to apply it")

    lib = load_library()
    for e in lib.errors:
        print(f"triage fix: skipped invalid playbook: {e}", file=sys.stderr)
    if args.playbook and lib.get(args.playbook) is None:
        return _fail(f"no playbook {args.playbook!r} (see `triage playbooks list`)")

    report = None
    try:
        if args.from_report:
            diagnoses, env, report = _report_from_json(args.from_report)
        else:
            if args.log != "-" and os.path.isdir(args.log):
                return _fail(f"{args.log} is a directory, not a log")
            if args.log != "-" and not os.path.exists(args.log):
                return _fail(f"no such file: {args.log}")
            from triage.logread.check import input_problem

            problem = input_problem(args.log) if args.log != "-" else None
            if problem:
                return _fail(problem)
            diagnoses, env, report = _diagnose(args)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        return _fail(str(exc))

    diag = diagnoses[0] if diagnoses else None
    if args.playbook:
        pb = lib.get(args.playbook)
    elif diag is None:
        print("No failure found in the log: nothing to fix.")
        return NOTHING_TO_FIX
    else:
        facts0 = derive_facts(env, diag)
        named = (diag.get("fix") or {}).get("playbook")
        pb = lib.get(named) if named else None
        if pb is None:
            pb = lib.for_diagnosis(str(diag.get("category")), diag.get("signature"), facts0)
        if pb is None:
            print(f"No playbook for {diag.get('category')} ({diag.get('signature')}): {((diag.get('fix') or {}).get('summary')) or ''}")
            return NOTHING_TO_FIX

    if pb is None:  # --playbook names one that is checked above; this is for the type checker
        return _fail(f"no playbook {args.playbook!r}")
    try:
        runner = _runner(args.host)
    except RuntimeError as exc:
        return _fail(str(exc))
    log_path = args.log if args.log and args.log != "-" else (args.from_report or "-")
    facts = derive_facts(env, diag, python=args.python, log_path=log_path, host=args.host, dry_run=args.dry_run)
    session = Session(
        pb,
        facts,
        runner=runner,
        dry_run=args.dry_run,
        upstream=lambda f: default_upstream(f, report, offline=args.offline),
    )
    out = sys.stdout
    front = ConsoleFrontEnd(out, answers, yes=args.yes or args.dry_run, interactive=interactive)
    if diag is not None:
        front.para(str(diag.get("title") or diag.get("signature")), indent="")
    front.para(f"Guided fix: {pb.title}", indent="")
    front.para(f"(playbook {pb.id}" + ("; dry run: nothing is run or changed)" if args.dry_run else ")"), indent="")
    try:
        outcome = front.run(session)
    except KeyboardInterrupt:
        session.outcome = "manual:interrupted"
        session.finish()
        return _fail("interrupted; `triage undo` reverts what was changed so far", 130)
    except OSError as exc:  # a read-only or full HOME: the transcript for undo cannot be written
        where = getattr(exc, "filename", None) or "the state folder"
        return _fail(f"cannot record changes for undo in {where}: {exc.strerror or exc}; "
                     "stopped before running anything more", 2)
    if args.dry_run:
        rest = [s for sid, s in pb.steps.items() if sid not in session.visited and not is_routing(s)]
        if rest:
            out.write("\nOther steps of this playbook (on other branches):\n")
            said: set[tuple[str, str]] = set()
            for s in rest:
                title = render_inline(step_title(s), session.facts)
                cmd = show_argv(preview_argv(s.get("argv"), session.facts)) if s.get("argv") else ""
                if (title, cmd) in said:
                    continue
                said.add((title, cmd))
                out.write(f"  - {title}\n")
                if cmd:
                    out.write(f"      $ {cmd}\n")
        return 0
    return NEEDS_A_PERSON if (outcome or "manual:").startswith("manual:") else 0
