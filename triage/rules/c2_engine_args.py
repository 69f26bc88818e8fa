"""Engine arguments vLLM removed, met where the log shows no argparse error of vLLM's own.

vLLM drops arguments between releases (`--task` in 0.13, `--enable-reasoning` in 0.10, the
`disable_log_requests` keyword in 0.10.1, `worker_use_ray` / `engine_use_ray` / `use_v2_block_manager`
with the V0 engine, `swap_space` in 0.18). A project that still passes one fails where it builds the engine:
Python raises `EngineArgs.__init__() got an unexpected keyword argument 'task'` (often relayed by a serving
stack's own log line, without a traceback), Ray Serve LLM checks `engine_kwargs` itself
(`ValueError: Unknown engine argument: task`), and a launcher that logs its `vllm serve` command before the
server exits may show nothing but the command. `config.unrecognized_argument` covers vLLM's argparse line;
these rules cover the other three shapes, and REMOVED says what replaced each argument.

CacheConfig.verify_with_parallel_config (0.2-0.17) refuses a swap space above 70 % of the host's memory; the
figure is --swap-space times --tensor-parallel-size, so a tensor-parallel size meant for another machine
shows up as "Too large swap space" (the 40 % warning, "Possibly too large swap space", is harmless).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# Argument (Python keyword; the CLI flag is the same with dashes) -> (release that removed it where the
# threads and release notes agree on one, what to do instead).
REMOVED: dict[str, tuple[str | None, str]] = {
    "task": ("0.13", "pooling models need runner='pooling' (`--runner pooling`), and `--convert embed|classify` "
                     "adapts a generative model; for generation drop it"),
    "enable_reasoning": ("0.10", "drop it: `--reasoning-parser <name>` alone turns the reasoning output on"),
    "disable_log_requests": ("0.10.1", "drop it: request logging is off by default (`--enable-log-requests` turns "
                                       "it on; `--no-enable-log-requests` keeps it off)"),
    "swap_space": ("0.18", "drop it: the V1 engine has no CPU swap space"),
    "worker_use_ray": (None, "use distributed_executor_backend='ray' (`--distributed-executor-backend ray`)"),
    "engine_use_ray": (None, "drop it: the engine no longer runs as a Ray actor "
                             "(`--distributed-executor-backend ray` puts the workers on Ray)"),
    "use_v2_block_manager": (None, "drop it: the v2 block manager is the only one"),
    "guided_decoding_backend": (None, "use structured_outputs_config={'backend': ...} "
                                      "(`--structured-outputs-config.backend`)"),
}
# The CLI flag's own removal, where argparse kept a deprecated flag longer than the Python keyword
# (--disable-log-requests was accepted with a warning until 0.12).
CLI_REMOVED_IN = {"task": "0.13", "enable_reasoning": "0.10", "disable_log_requests": "0.12", "swap_space": "0.18"}


def advice(arg: str, cli: bool = False) -> str:
    """What replaced a removed argument (the CLI flag when `cli`), or "" when it is not one vLLM is known to
    have removed."""
    key = arg.replace("-", "_").lstrip("_")
    known = REMOVED.get(key)
    if known is None:
        return ""
    removed_in = CLI_REMOVED_IN.get(key) if cli else known[0]
    name = "--" + key.replace("_", "-") if cli else f"'{key}'"
    when = f"in vLLM {removed_in}" if removed_in else "from vLLM"
    return f"{name} was removed {when}: {known[1]}."


# Python's message for the engine's own constructor; a serving stack relays it inside its own line
# ("Leave launch_builtin_model, error: [address=...] EngineArgs.__init__() got ...").
_KWARG = (r"\b(?P<callee>(?:Async)?EngineArgs|LLM)\.__init__\(\) got an unexpected keyword argument "
          r"'(?P<arg>\w+)'")


def _kwarg_facts(m: "re.Match[str]", line: Any, scan: Scan) -> dict[str, Any]:
    arg = m.group("arg")
    told = advice(arg)
    return {"advice": (told + " " if told else f"'{arg}' exists only in other vLLM releases. ") +
                      "The code that builds the engine was written for another vLLM: upgrade it to a release made for "
                      "the installed vLLM, or install the vLLM it pins (its requirements or `[vllm]` extra)."}


def _ray_facts(m: "re.Match[str]", line: Any, scan: Scan) -> dict[str, Any]:
    arg = m.group("arg")
    told = advice(arg)
    return {"advice": (told + " " if told else "") +
                      f"Ray Serve LLM checks engine_kwargs against the installed vLLM's engine arguments: remove or "
                      f"rename '{arg}' in the LLMConfig (`vllm serve --help` lists the current names)."}


# A launch command in the log: vLLM's CLI or module, or a launcher's record of the arguments it passes.
_COMMAND_RE = lazy(r"\bvllm(?:_v[\d.]+)? serve\b|vllm\.entrypoints\.openai\.api_server|"
                   r"(?:Run vLLM|Starting vLLM[\w ]*|Launching vLLM[\w ]*) with arguments:? \[?serve\b")
_FLAG_RE = lazy(r"(?<![\w-])--(?P<flag>" + "|".join(a.replace("_", "-") for a in CLI_REMOVED_IN) + r")(?![\w-])")
# vLLM printed what it parsed, or went on starting: the arguments were accepted.
_PARSED_RE = lazy(r"non-default args:|\bargs: Namespace\(|Resolved architecture|Starting vLLM API server|"
                  r"Application startup complete|Initializing a V\d LLM engine")
# The release a launcher names ("vllm v0.10.0", "/bin/vllm_v0.10.0", image "...-vllm0.13.0",
# "vllm/vllm-openai:v0.19.0", "vllm==0.14.1").
_RELEASE_RE = lazy(r"\bvllm(?:-openai)?[ _=:-]{0,2}v?(?P<v>\d+\.\d+(?:\.\d+)?)", re.IGNORECASE)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".")[:3])


def _installed(scan: Scan) -> str | None:
    v = scan.facts.get("vllm_version")
    if v and re.match(r"\d+\.\d+", str(v)):
        return str(v)
    for ln in scan.lines:
        m = _RELEASE_RE.search(ln.text)
        if m:
            return m.group("v")
    return None


def _removed_flag_in_command(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    """A launch command carrying a flag the installed release no longer has (the argparse error itself was
    not captured): only when the log names a release at or past the removal."""
    release = _installed(scan)
    if release is None or any(_PARSED_RE.search(ln.text) for ln in scan.lines):
        return None
    for ln in scan.lines:
        if not _COMMAND_RE.search(ln.text):
            continue
        m = _FLAG_RE.search(ln.text)
        if m is None:
            continue
        flag = m.group("flag")
        removed_in, todo = CLI_REMOVED_IN[flag.replace("-", "_")], REMOVED[flag.replace("-", "_")][1]
        if _version(release) < _version(removed_in):
            continue
        return Diagnosis(
            category="engine_config", signature="engine_args.removed_flag_in_command",
            title=f"The launch command passes --{flag}, which vLLM {release} no longer has",
            confidence=0.65, evidence=[Evidence(ln.no, ln.shown)],
            facts={"flag": f"--{flag}", "vllm_version": release, "removed_in": removed_in},
            explanation=[f"--{flag} was removed in vLLM {removed_in}, and the log names vLLM {release}: argparse "
                         "rejects the whole command before the server starts"],
            fix=Fix(f"Remove --{flag} from the launch arguments ({todo}), or run a vLLM older than {removed_in} "
                    "if the launcher's defaults need it.", "engine-config"),
            first_line=ln.no)
    return None


RULES = [
    Rule(signature="engine_args.kwarg_removed", category="install_mismatch",
         title="The code building the engine passes '{arg}', which {callee} of the installed vLLM does not take",
         fix="{advice}", patterns=[_KWARG], facts=_kwarg_facts, playbook="install-mismatch", confidence=0.72),
    Rule(signature="engine_args.ray_unknown_engine_argument", category="engine_config",
         title="Ray Serve LLM refuses engine_kwargs '{arg}': the installed vLLM has no such engine argument",
         fix="{advice}", patterns=[r"Unknown engine argument: (?P<arg>\w+)"], facts=_ray_facts,
         playbook="engine-config", confidence=0.85),
    Rule(signature="engine_args.removed_flag_in_command", category="engine_config", title="", fix="",
         playbook="engine-config", check=_removed_flag_in_command),
    Rule(signature="engine_args.swap_space_too_large", category="engine_config",
         title="--swap-space x --tensor-parallel-size ({used} GiB) exceeds 70% of the host's {total} GiB of memory",
         fix="The swap space is reserved per GPU of the tensor-parallel group: check that --tensor-parallel-size "
             "matches the GPUs of this machine (a config written for a bigger node is the usual cause), then lower "
             "--swap-space (e.g. `--swap-space 1`, or 0) until swap x TP stays under 70% of the host memory.",
         patterns=[r"(?<!Possibly )Too large swap space\. (?P<used>[\d.]+) GiB out of the (?P<total>[\d.]+) GiB total "
                   r"CPU memory"],
         playbook="engine-config", confidence=0.9),
    # vllm/envs.py (0.11+) warns about every VLLM_* variable it does not define: launchers and Kubernetes
    # services (VLLM_SVC_..._PORT) set many, and removed ones (VLLM_USE_V1) are ignored, not fatal.
    Rule(signature="harmless.unknown_vllm_env", category="", harmless=True,
         title="A VLLM_* environment variable this vLLM does not define is ignored (harmless)",
         fix="", patterns=[r"Unknown vLLM environment variable detected: VLLM_\w+"]),
]
