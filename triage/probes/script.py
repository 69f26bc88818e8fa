"""The self-contained probe script: gpu.py, host.py and pyenv.py in one text, run by another interpreter.

The target Python (one the user named, or a remote host's python3 on PATH) runs `python - [args]` with
this text on stdin; `--env-prefix P --env-site S` make it read the environment a log names from its
files instead of its own. The three modules are embedded as source strings and each executed in its own module
namespace, so the logic lives once (in those files, which triage also imports directly) and the script
needs nothing installed. It prints one line, MARKER + JSON of raw facts; triage decodes them.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

MARKER = "TRIAGE-PROBE-JSON:"
MODULES = ("gpu", "host", "pyenv")

_MAIN = r'''
import json, sys, types

def _load(name):
    mod = types.ModuleType("triage_probe_" + name)
    exec(compile(_SOURCES[name], "<triage-probe:%s>" % name, "exec"), mod.__dict__)
    return mod

def _main(argv):
    sections = ["gpu", "host", "pyenv"]
    deep, deep_timeout = False, 90.0
    env_prefix = env_site = None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--sections":
            sections = [s for s in argv[i + 1].split(",") if s]
            i += 1
        elif a == "--deep":
            deep = True
        elif a == "--deep-timeout":
            deep_timeout = float(argv[i + 1])
            i += 1
        elif a == "--env-prefix":
            env_prefix = argv[i + 1] or None
            i += 1
        elif a == "--env-site":
            env_site = argv[i + 1] or None
            i += 1
        i += 1
    out = {"probe": 1, "errors": {}}
    gpus = []
    for name in sections:
        try:
            mod = _load(name)
            if name == "gpu":
                out["gpu"] = mod.probe_gpus()
                gpus = out["gpu"].get("gpus") or []
            elif name == "host":
                out["host"] = mod.probe_host(gpus)
            elif name == "pyenv":
                # An environment a log names is read from its files, never run.
                at = mod.probe_pyenv_at(env_prefix, env_site) if (env_prefix or env_site) else None
                out["pyenv"] = at or mod.probe_pyenv(deep=deep, deep_timeout=deep_timeout)
                if (env_prefix or env_site) and at is None:
                    out["log_env_absent"] = env_site or env_prefix
        except BaseException as exc:  # one failing section never hides the others
            out["errors"][name] = "%s: %s" % (type(exc).__name__, exc)
    sys.stdout.write("\n" + MARKER + json.dumps(out, default=str) + "\n")
    sys.stdout.flush()

_main(sys.argv[1:])
'''


@lru_cache(maxsize=1)
def probe_script() -> str:
    here = Path(__file__).parent
    sources = {name: (here / f"{name}.py").read_text() for name in MODULES}
    return (
        "# triage probe script: generated from triage/probes/{gpu,host,pyenv}.py\n"
        f"MARKER = {MARKER!r}\n"
        f"_SOURCES = {sources!r}\n" + _MAIN
    )


def parse_output(stdout: str) -> dict | None:
    """The JSON the script printed after MARKER (anything else on stdout is ignored)."""
    import json

    for line in reversed(stdout.splitlines()):
        if line.startswith(MARKER):
            try:
                return json.loads(line[len(MARKER):])
            except ValueError:
                return None
    return None
