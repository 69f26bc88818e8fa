"""What the headless report's start-up leaves out, and the help it still prints as argparse would."""

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from triage import cli

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("columns", [None, "77", "200", "0", "junk"])
def test_help_is_as_wide_as_argparse_would_make_it(monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli._Formatter("triage")._width == argparse.RawDescriptionHelpFormatter("triage")._width
    assert cli._parser().format_help() == _argparse_help()


def _argparse_help() -> str:
    p = cli._parser()
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    return p.format_help()


def test_the_headless_report_imports_no_shutil(tmp_path):
    """shutil brings bz2, lzma and fnmatch (~2 ms): argparse's formatter and interpreter.py no longer need it."""
    code = (
        "import sys, io, contextlib\n"
        "from triage.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main(['--log', {str(ROOT / 'triage/demo/glm5_sm120.log')!r}, '--json', '--offline', '--no-probe'])\n"
        "print(rc, [m for m in ('shutil', 'bz2', 'lzma') if m in sys.modules])\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT),
                       env={"PYTHONPATH": str(ROOT), "TRIAGE_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert r.stdout.strip() == "0 []", r.stdout + r.stderr
