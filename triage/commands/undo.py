"""`triage undo [--yes] [--dry-run] [--list]`: revert the last applied playbook (or `triage apply`).

Restores the files it changed from their backups, deletes files it created, runs the recorded undo
commands, newest first, and says plainly what it cannot revert.
"""

from __future__ import annotations

import argparse
import sys

from triage.playbooks.engine import show_argv
from triage.playbooks.wording import outcome_words
from triage.sanitize import clean
from triage.transcript import Transcript, UndoBusy, last_transcript, scan_transcripts, undo

USAGE_ERROR = 2


def _describe(t: Transcript) -> list[str]:
    lines = []
    for e in t.entries():
        if e["type"] == "backup":
            if e["existed"]:
                lines.append(f"restore {e['path']} on {e['where']} from {e['backup']}")
            else:
                lines.append(f"delete {e['path']} on {e['where']} (it did not exist before)")
        elif e["type"] == "change":
            if e.get("undo_argv"):
                lines.append(f"undo '{e['description']}' by running: {show_argv(e['undo_argv'])}")
            else:
                lines.append(f"cannot revert: {e['description']}")
    return list(reversed(lines))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="triage undo", description="Revert the last change triage made.")
    parser.add_argument("--yes", action="store_true", help="do not ask before reverting")
    parser.add_argument("--dry-run", action="store_true", help="show what would be reverted")
    parser.add_argument("--list", action="store_true", help="list the recorded transcripts")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE_ERROR

    if args.list:
        good, bad = scan_transcripts()
        for each in good:
            result = outcome_words(each.meta.get("outcome")) if each.meta.get("outcome") else "not finished"
            print(clean(f"{each.root.name}  {each.meta.get('title')}  on {each.meta.get('where')}  "
                        f"result: {result}  [{each.state()}]"))
        for root, why in bad:
            print(clean(f"{root.name}  [unreadable: {why}; skipped]"))
        return 0

    t = last_transcript()
    if t is None:
        print("Nothing to undo: no recorded change that is not undone already.")
        return 0
    print(clean(f"Last change: {t.meta.get('title')} on {t.meta.get('where')}, {t.meta.get('started')} ({t.root})"))
    plan = _describe(t)
    for line in plan:
        print(clean(f"  {line}"))
    if t.unreadable_entries:
        print(f"  ({t.unreadable_entries} journal entries cannot be read: they will not be reverted)")
    if args.dry_run:
        return 0
    if not args.yes:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            print("triage undo: no terminal to confirm; use --yes to revert", file=sys.stderr)
            return USAGE_ERROR
        got = input("Revert it? [y/N] ")
        if got.strip().lower() not in ("y", "yes"):
            print("Nothing reverted.")
            return 0
    try:
        rep = undo(t)
    except (UndoBusy, RuntimeError) as exc:
        print(f"triage undo: {exc}", file=sys.stderr)
        return USAGE_ERROR
    for line in rep.reverted:
        print(clean(f"reverted: {line}"))
    for line in rep.failed:
        print(clean(f"FAILED: {line}"))
    for line in rep.cannot:
        print(clean(f"cannot revert (do it by hand if needed): {line}"))
    return 0 if rep.ok else 1
