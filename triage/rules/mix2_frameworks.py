"""Releases that do not fit, said by the tools around vLLM rather than by a traceback through vLLM.

A trainer, evaluation harness or serving stack names the mismatch itself when it checks the installed vLLM
("vllm version 0.11.0 not supported. Currently supported versions are ..."), a CLI older than the
instructions rejects the subcommand by name (argparse: "argument command: invalid choice: 'vllm-serve'"),
and an engine argument the installed vLLM does not take fails where the caller builds EngineArgs / LLM
(a TypeError on `__init__`, with the calling line just above it in the paste).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# verl (<= 0.2): f"vllm version {v} not supported. Currently supported versions are ..."; OpenRLHF / TRL / others:
# "... only supports vLLM >= 0.4.1", "requires vllm>=0.10.2", "Unsupported vLLM version".
_UNSUPPORTED = [
    r"[Vv][Ll][Ll][Mm] version (?P<version>\d[\w.+-]*) (?:is )?not supported",
    r"Unsupported [Vv][Ll][Ll][Mm] version:? ?(?P<version>\d[\w.+-]*)?",
    r"(?:only supports|requires|needs) [Vv][Ll][Ll][Mm] ?(?:version )?(?P<wanted>(?:>=|==|<=|~=|>|<) ?\d[\w.+-]*)",
]


def _version_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    got = m.groupdict().get("version")
    wanted = m.groupdict().get("wanted")
    return {"detail": f"vLLM {got}" if got else (f"wants vLLM {wanted}" if wanted else "the installed vLLM")}


# A CLI's positional subcommand: vLLM's own (`dest="subparser"`), TRL's (`dest="command"`), others print the
# choices in braces. An unknown option VALUE (--dtype, --quantization) is config.invalid_choice's.
_SUBCOMMAND = (r"(?P<prog>[\w.-]+(?: CLI)?): error: argument (?:command|subcommand|subparser|cmd|\{[\w,-]+\}): "
               r"invalid choice: '(?P<cmd>[\w.-]+)'")

# The caller's line building vLLM's engine (printed just above the TypeError in a traceback or a paste).
_ENGINE_CALL_RE = lazy(r"\b(?:Async)?(?:EngineArgs|LLMEngine|LLM|AsyncLLM)\b(?:\.from_engine_args)?\(|"
                       r"\bSamplingParams\(")
_KWARG_RE = lazy(r"(?<![\w.])(?:__init__|__new__)\(\) got an unexpected keyword argument '(?P<arg>\w+)'")
CONTEXT_LINES = 3  # lines above the TypeError where the calling source line stands
# (a qualified callee, "EngineArgs.__init__()", is downstream.vllm_api_mismatch's: it names the class itself)


def _engine_kwarg(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    lines = scan.lines
    for i, ln in enumerate(lines):
        m = _KWARG_RE.search(ln.text)
        if not m:
            continue
        above = [p for p in lines[max(0, i - CONTEXT_LINES):i] if p.no >= ln.no - CONTEXT_LINES]
        call = next((p for p in reversed(above) if _ENGINE_CALL_RE.search(p.text)), None)
        if call is None and above and _ENGINE_CALL_RE.search("".join(p.text.strip() for p in above)):
            call = above[-1]  # the call's line wrapped over several rows (a terminal's width)
        if call is None:
            continue
        arg = m.group("arg")
        return Diagnosis(
            category="install_mismatch", signature="downstream.engine_kwarg_unknown",
            title=f"The installed vLLM does not take the engine argument '{arg}' its caller passes",
            confidence=0.8, evidence=[Evidence(call.no, call.shown), Evidence(ln.no, ln.shown)],
            facts={"arg": arg, "call": call.text.strip()[:160]},
            explanation=[f"the line building vLLM's engine ({call.text.strip()[:80]}) passes '{arg}', and the "
                         "installed vLLM's constructor has no such parameter: the calling code was written for "
                         "another vLLM release (the argument is newer, or was removed)"],
            fix=Fix(f"Install the vLLM release the calling project supports (its requirements or `[vllm]` extra): "
                    f"'{arg}' exists only in other vLLM releases. Upgrading vLLM fixes an argument it added later; "
                    "pinning the project's listed vLLM fixes one it removed.", "install-mismatch"),
            first_line=ln.no)
    return None


RULES = [
    Rule(signature="downstream.vllm_version_refused", category="install_mismatch",
         title="The project driving vLLM does not support the installed vLLM ({detail})",
         fix="The trainer / harness checks vLLM's version and refuses this one: install the vLLM version it lists "
             "(its requirements or `[vllm]` extra), or upgrade the project to a release made for this vLLM.",
         patterns=_UNSUPPORTED, facts=_version_facts, playbook="install-mismatch", confidence=0.8),
    Rule(signature="downstream.cli_subcommand_missing", category="install_mismatch",
         title="{prog} has no '{cmd}' command: the installed release is older than the instructions",
         fix="The command exists only in a newer release of the tool: upgrade it (`pip install -U <package>`, for "
             "`trl vllm-serve` TRL >= 0.16, for `vllm serve` vLLM >= 0.5), then run the command again.",
         patterns=[_SUBCOMMAND], playbook="install-mismatch", confidence=0.9),
    Rule(signature="downstream.engine_kwarg_unknown", category="install_mismatch", title="", fix="",
         playbook="install-mismatch", check=_engine_kwarg),
]
