"""An install command from a newer guide than the installer: uv (clap) and pip (optparse) stop at the first option
they do not know, and that is the failure, not what the command was meant to install."""

from __future__ import annotations

import pytest

from triage.diagnose import diagnose
from triage.logread import scan_text


def _top(text: str):
    ds, _ = diagnose(scan_text(text))
    return ds[0] if ds else None


@pytest.mark.parametrize("text,flag", [
    ("error: unexpected argument '--torch-backend' found\n\n  tip: a similar argument exists: '--no-cache'\n\n"
     "Usage: uv pip install --no-cache <PACKAGE|--requirements <REQUIREMENTS>|--editable <EDITABLE>>\n", "--torch-backend"),
    ("(setup pid=1293) error: unexpected argument '--torch-backend' found\n", "--torch-backend"),
    ("\nUsage:   \n  pip install [options] <requirement specifier> [package-index-options] ...\n\n"
     "no such option: --torch-backend\n", "--torch-backend"),
    ("ERROR: no such option: --group\n", "--group"),
])
def test_an_option_the_installer_does_not_know(text, flag):
    d = _top(text)
    assert d.signature == "install.installer_flag_unknown" and d.category == "install_mismatch"
    assert d.facts["flag"] == flag and flag in d.title


def test_vllms_own_unknown_argument_is_not_the_installers():
    d = _top("vllm: error: unrecognized arguments: --torch-backend auto\n")
    assert d is None or d.signature != "install.installer_flag_unknown"
