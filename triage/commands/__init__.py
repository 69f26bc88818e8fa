"""Subcommands: each module exposes main(argv) -> int; triage.cli dispatches to them."""
