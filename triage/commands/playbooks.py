"""`triage playbooks list [--json] | show ID | validate [PATH ...]`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from triage.playbooks.engine import show_argv
from triage.playbooks.load import PlaybookInvalid, bundled_dir, load_file, load_library, user_dir

USAGE_ERROR = 2


def _list(args: argparse.Namespace) -> int:
    lib = load_library()
    for e in lib.errors:
        print(f"triage playbooks: skipped invalid playbook: {e}", file=sys.stderr)
    books = sorted(lib.playbooks.values(), key=lambda p: p.id)
    if args.json:
        print(json.dumps([p.to_json() for p in books], indent=2))
        return 0
    width = max((len(p.id) for p in books), default=2)
    for p in books:
        origin = "" if p.origin == "bundled" else f"  [{p.origin}]"
        print(f"{p.id:<{width}}  {p.title}{origin}")
        print(f"{'':<{width}}  categories: {', '.join(p.categories)}; outcomes: {', '.join(p.outcomes)}")
    return 0


def _show(args: argparse.Namespace) -> int:
    lib = load_library()
    pb = lib.get(args.id)
    if pb is None:
        print(f"triage playbooks: no playbook {args.id!r} (see `triage playbooks list`)", file=sys.stderr)
        return USAGE_ERROR
    print(f"{pb.id}: {pb.title}")
    print(f"  file: {pb.source}")
    print(f"  categories: {', '.join(pb.categories)}")
    if pb.signatures:
        print(f"  signatures: {', '.join(pb.signatures)}")
    if pb.when is not None:
        print(f"  applies when: {pb.when.source}")
    if pb.summary:
        print(f"  {pb.summary}")
    print(f"  outcomes: {', '.join(pb.outcomes)}")
    for step in pb.steps.values():
        print(f"\n  [{step.id}] {step.kind}: {step.title}")
        for key in ("text", "question"):
            for line in str(step.get(key) or "").rstrip().splitlines():
                print(f"      {line}")
        if step.get("argv"):
            print(f"      $ {show_argv([str(a) for a in step.get('argv')])}")
        if step.get("expect"):
            print(f"      expect: {step.get('expect')}")
        if step.get("probe"):
            print(f"      probe: {step.get('probe')}")
        if step.get("action"):
            extra = ", ".join(f"{k}={v}" for k, v in (step.get("with") or {}).items())
            print(f"      action: {step.get('action')}" + (f" ({extra})" if extra else ""))
        for ch in step.get("choices") or []:
            cond = f"  [when {ch['when']}]" if "when" in ch else ""
            print(f"      - {ch['key']}: {ch['label']} -> {ch['goto']}{cond}")
        for field, target in step.targets():
            if not field.startswith("choices"):
                print(f"      {field} -> {target}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    files: list[Path] = []
    if args.paths:
        for raw in args.paths:
            p = Path(raw)
            if p.is_dir():
                files.extend(sorted(list(p.glob("*.yaml")) + list(p.glob("*.yml"))))
            elif p.exists():
                files.append(p)
            else:
                print(f"triage playbooks: no such file: {raw}", file=sys.stderr)
                return USAGE_ERROR
    else:
        for d in (bundled_dir(), user_dir()):
            if d.is_dir():
                files.extend(sorted(list(d.glob("*.yaml")) + list(d.glob("*.yml"))))
    bad = 0
    ids: dict[str, Path] = {}
    for f in files:
        try:
            pb = load_file(f)
        except PlaybookInvalid as exc:
            bad += 1
            for e in exc.errors:
                print(str(e))
            continue
        if pb.id in ids and ids[pb.id].parent == f.parent:
            bad += 1
            print(f"{f}:1: id {pb.id!r} is already used by {ids[pb.id]}")
            continue
        ids[pb.id] = f
        print(f"ok: {f} ({pb.id})")
    if not files:
        print("no playbooks found")
    print(f"{len(files) - bad} valid, {bad} invalid")
    return 0 if bad == 0 else USAGE_ERROR


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="triage playbooks", description="The guided fixes triage knows.")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_list = sub.add_parser("list", help="list the bundled and user playbooks")
    p_list.add_argument("--json", action="store_true", help='a JSON list of {"id", "title", "categories", "outcomes"}')
    p_show = sub.add_parser("show", help="show a playbook's steps")
    p_show.add_argument("id")
    p_val = sub.add_parser("validate", help="check playbooks (the bundled and user ones when no path is given)")
    p_val.add_argument("paths", nargs="*", metavar="PATH")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE_ERROR
    return {"list": _list, "show": _show, "validate": _validate}[args.cmd](args)
