"""Cascade wrappers: lines that say *that* something failed, never *why*.

vLLM's start-up failure travels worker -> EngineCore -> API server, each adding a line of its own
(`WorkerProc failed to start`, `Engine core initialization failed. See root cause above`). They are
recognised so that they never outrank the error that caused them, and so that the generic fallback
does not mistake them for a cause.
"""

from __future__ import annotations

from triage.lazyre import lazy

from triage.rules.base import Rule

WRAPPER_PATTERNS = [
    r"WorkerProc failed to start",
    r"WorkerProc initialization failed due to an exception in a background process",
    r"Engine core initialization failed\. See root cause above",
    r"EngineCore failed to start",
    r"Engine process failed to start",
    r"See (?:stack trace|root cause) (?:for root cause|above)",
    r"Error executing method '?\w+'?\. This might cause deadlock in distributed execution",
    r"Exception in worker \w+ while processing method",
    r"Worker proc \S+ died unexpectedly",
    r"Parent process exited, terminating worker",
    r"Failed core proc\(s\)",
    r"Worker failed with error",
    r"API server process .{0,40} exited",
    r"One of the worker processes died",
    r"EngineDeadError",
    r"Process EngineCore_\w+:",
    r"Waiting for \d+ worker\(s\) to terminate",
    r"WorkerProc hit an exception",
    r"EngineCore encountered a fatal error",
    r"EngineCore hit an exception",
    r"AsyncLLM output_handler failed",
    r"Error in (?:preprocessing prompt inputs|chat completion stream generator|completion stream generator)",
    r"MQLLMEngine is already dead",
    # frameworks that run vLLM (verl, OpenRLHF, ... under Hydra) say only that their job failed
    r"Error executing job with overrides",
    r"Set the environment variable HYDRA_FULL_ERROR=1",
]
WRAPPER_RE = lazy("|".join(f"(?:{p})" for p in WRAPPER_PATTERNS))


def is_wrapper(text: str) -> bool:
    return WRAPPER_RE.search(text) is not None


RULES = [
    Rule(signature="wrapper.startup_cascade", category="", wrapper=True,
         title="vLLM start-up failed (wrapper line)", fix="", patterns=WRAPPER_PATTERNS),
]
