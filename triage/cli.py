"""The `triage` command.

`triage --log FILE|-` diagnoses a log (TUI on a terminal, plain report otherwise, JSON with --json);
`triage <subcommand> ...` dispatches to triage.commands.<module>.main. Imports stay lazy: the
headless report path must start fast and never load textual, httpx, asyncssh or torch.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from triage import __version__
from triage.demo import DEMO_LOG, DEMO_SNAPSHOT

SUBCOMMANDS = {
    "probe": "triage.commands.probe",
    "preflight": "triage.commands.preflight",
    "playbooks": "triage.commands.playbooks",
    "fix": "triage.commands.fix",
    "undo": "triage.commands.undo",
    "apply": "triage.commands.apply",
    "report": "triage.commands.bugreport",
}
# One line each for `triage --help`.
SUBCOMMAND_HELP = {
    "probe": "what this machine (or an SSH host, or a fleet) has: GPUs, driver, CUDA, the Python env of vLLM",
    "preflight": "will this `vllm serve` command fail here, and why? (before any weights are loaded)",
    "fix": "walk the guided fix for a log's diagnosis (--dry-run shows every step first)",
    "undo": "revert the last applied fix (or --list what was applied)",
    "playbooks": "list, show or validate the guided fixes (yours in ~/.config/triage/playbooks)",
    "apply": "apply one built-in change by name (apply sparse-mla --dry-run shows the plan)",
    "report": "write a redacted upstream bug report in vLLM's issue template",
}
EPILOG = """subcommands (triage <subcommand> --help):
{subcommands}

exit status:
  0  a failure was diagnosed
  3  the log was read and shows no failure
  2  bad usage or unreadable input (one line on stderr)
  1  an internal error (a bug: please report it)
"""


class OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line and exit status 2 (argparse prints the whole usage block)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's formatter, its width found as shutil.get_terminal_size finds it: argparse makes one per
    add_argument, and importing shutil (with bz2, lzma, fnmatch) costs the report's start-up ~2 ms."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, _columns() - 2 if width is None else width)


def _columns() -> int:
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def _parser() -> argparse.ArgumentParser:
    subs = "\n".join(f"  {name:<10} {SUBCOMMAND_HELP.get(name, '')}".rstrip() for name in SUBCOMMANDS)
    p = OneLineParser(
        prog="triage",
        description="Diagnose a failed vLLM launch: root cause, evidence, machine facts, upstream, guided fix.",
        epilog=EPILOG.format(subcommands=subs),
        formatter_class=_Formatter,
    )
    p.add_argument("--log", metavar="PATH", help="the vLLM log to diagnose ('-' for standard input; .gz is fine)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="print the report as JSON (spec: triage.report/1)")
    out.add_argument("--report", action="store_true", help="print the plain-text report (no TUI)")
    p.add_argument("--offline", action="store_true", help="no network access at all (no upstream search)")
    p.add_argument("--no-probe", action="store_true", help="diagnose from the log alone; do not probe this machine")
    p.add_argument("--host", metavar="[USER@]HOST[:PORT]", help="probe this SSH host instead (where vLLM ran)")
    p.add_argument("--python", metavar="PATH", help="the Python interpreter that runs vLLM")
    p.add_argument("--snapshot", metavar="FILE", help="use a saved `triage probe --json` instead of probing")
    p.add_argument("--demo", action="store_true", help="run on the bundled example (GLM-5 on 8x RTX PRO 6000)")
    p.add_argument("--mouse", action="store_true", help="enable mouse support in the TUI")
    p.add_argument("--version", action="version", version=f"triage {__version__}")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] in SUBCOMMANDS:
            import importlib

            mod = importlib.import_module(SUBCOMMANDS[argv[0]])
            return int(mod.main(argv[1:]) or 0)
        if argv and not argv[0].startswith("-"):
            return _not_a_command(argv[0])
        return _diagnose(argv)
    except KeyboardInterrupt:
        print("triage: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`triage ... | head`): not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0
    except Exception as exc:  # pragma: no cover - the last line of defence
        return _internal(exc)


def _not_a_command(word: str) -> int:
    import difflib

    close = difflib.get_close_matches(word, list(SUBCOMMANDS), n=1, cutoff=0.5)
    hint = f"did you mean `triage {close[0]}`?" if close else "to diagnose a log: triage --log PATH"
    print(f"triage: '{word}' is not a command; {hint} (see triage --help)", file=sys.stderr)
    return 2


def _internal(exc: BaseException) -> int:
    from triage.model import EXIT_INTERNAL

    if os.environ.get("TRIAGE_DEBUG"):
        raise exc
    print(f"triage: internal error: {type(exc).__name__}: {exc} (set TRIAGE_DEBUG=1 for the traceback; "
          "please report it)", file=sys.stderr)
    return EXIT_INTERNAL


def _diagnose(argv: list[str]) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    snapshot = args.snapshot
    offline = args.offline
    probe = not args.no_probe
    source = args.log
    if args.demo:
        if source:
            parser.error("--demo and --log cannot be combined")
        source = str(DEMO_LOG)
        probe = False
        offline = True
        if snapshot is None and os.path.exists(DEMO_SNAPSHOT):
            snapshot = str(DEMO_SNAPSHOT)
    interactive = not (args.json or args.report)
    if interactive:
        from triage.tui import launcher  # loads Textual only when it runs the TUI

        code = launcher.run(args, source=source, snapshot=snapshot, offline=offline, probe=probe)
        if code is not None:
            return int(code)
    # A headless run is short and its garbage is almost all freed by reference counting: the cyclic
    # collector's default pace (every 700 new containers, ~20 times in a run) costs ~2% of it.
    import gc

    gc.set_threshold(50_000, 20, 20)
    from triage.logread.source import InputError
    from triage.model import EXIT_USAGE

    if not source:
        print("triage: no log given: use --log PATH (or --log - to read a pipe), or --demo", file=sys.stderr)
        return EXIT_USAGE
    from triage.logread.check import CUT_SHORT, cut_short, input_problem

    problem = input_problem(source) if source != "-" and os.path.isfile(source) else None
    if problem:
        print(f"triage: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        from triage.pipeline import build_report

        report = build_report(source, offline=offline, probe=probe, host=args.host, python=args.python,
                              snapshot=snapshot)
    except InputError as exc:
        print(f"triage: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if not report.diagnoses and source != "-" and cut_short(source):
        report.warnings.append(CUT_SHORT)
    if args.demo:
        from triage.demo import with_recorded_upstream

        with_recorded_upstream(report)
    if args.json:
        import json

        sys.stdout.write(json.dumps(report.to_json(), ensure_ascii=False, indent=2) + "\n")
    else:
        from triage.report.text import render

        render(report, log_name=args.log or source, fix_hint="triage fix --demo --dry-run" if args.demo else None)
    sys.stdout.flush()
    return report.exit_code

