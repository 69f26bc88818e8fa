"""The one-way flow of a diagnosis: input -> facts (log + probes) -> diagnoses -> upstream.

Front ends (the headless report, `triage fix`, `triage report`, the TUI) all call build_report;
each later stage is optional and degrades to "not known" rather than failing the report.
"""

from __future__ import annotations

from typing import Any

from triage import upstream
from triage.computecap import parse_cc
from triage.diagnose import diagnose
from triage.enrich import enrich
from triage.logread import Scan, scan_source
from triage.logread.source import InputError, open_source
from triage.model import Diagnosis, Report
from triage.regexlit import save_derived
from triage.sanitize import clean_object
from triage.interpreter import runnable_python
from triage.versions import decode_vllm_version


PYENV_KEYS = ("python", "packages", "vllm_install", "patched_files", "vllm_version", "torch_version",
              "torch_cuda_version")


def environment_from_log(scan: Scan) -> dict[str, Any]:
    env = dict(scan.facts)
    v = env.get("vllm_version")
    if isinstance(v, str):
        try:
            env["vllm_install"] = decode_vllm_version(v)
        except (ValueError, TypeError):
            pass
    return env


def mark_repeats(diagnoses: list[Diagnosis], scan: Scan) -> None:
    """A failure whose line came back again and again (a restart loop, every worker, all day) says how often:
    facts.repeated = {count, first_line, last_line}."""
    for d in diagnoses:
        for e in d.evidence:
            span = scan.repeated(e.line)
            if span:
                d.facts["repeated"] = {"count": span[0], "first_line": e.line, "last_line": span[1]}
                break


def merge_probe(env: dict[str, Any], facts: dict[str, Any], host: str) -> None:
    """Probe facts describe the machine now; the log's describe it when vLLM ran. Where both speak,
    the probe wins and the log's value is kept under environment["from_log"] if it differs."""
    from_log: dict[str, Any] = {}
    for key, value in facts.items():
        if value in (None, [], {}):
            continue
        if key in env and env[key] != value and key not in ("packages",):
            from_log[key] = env[key]
        if key == "packages" and isinstance(env.get("packages"), dict):
            merged = dict(env["packages"])
            merged.update(value)
            env["packages"] = merged
        else:
            env[key] = value
    gpus = env.get("gpus") or []
    found = {str(g.get("compute_capability")): cc for g in gpus if (cc := parse_cc(g.get("compute_capability")))}
    ccs = sorted(found, key=found.__getitem__)
    if ccs:
        env["compute_capability"] = ccs[0] if len(ccs) == 1 else env.get("compute_capability", ccs[0])
        env["gpu_family"] = f"SM{found[ccs[0]].major}x"
    pk = env.get("packages") or {}
    if pk.get("vllm"):
        env["vllm_version"] = pk["vllm"]
    if pk.get("torch"):
        env["torch_version"] = pk["torch"]
    if from_log:
        env["from_log"] = from_log
    env["probed_host"] = host


def build_report(source: str, *, offline: bool = False, probe: bool = True, host: str | None = None,
                 python: str | None = None, snapshot: str | None = None, fd: int | None = None,
                 scan: Scan | None = None) -> Report:
    """Read `source` ("-" for stdin, or a path) and diagnose it. Raises InputError for bad input."""
    if scan is None:
        scan = scan_source(open_source(source, fd))
    env = environment_from_log(scan)
    warnings = list(scan.warnings)
    probe_findings: list[dict[str, Any]] = []
    if snapshot or probe:
        from triage import probes  # only when probing: probes load their own modules

        hp = None
        if snapshot:
            try:
                hp = probes.load_snapshot(snapshot)
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise InputError(f"{snapshot}: not a usable probe snapshot ({exc})") from None
        else:
            try:
                hp = probes.gather(host=host, python=python, python_prefix=env.get("python_prefix"),
                                   site_packages=env.get("site_packages"))
            except Exception as exc:  # a probe must never sink the diagnosis
                warnings.append(f"probe failed: {type(exc).__name__}: {exc}")
        if hp is not None:
            if hp.ok:
                facts = dict(hp.facts)
                if any(f.get("id") == "python.log_env_absent" for f in hp.findings):
                    # The Python probed is not the one the log ran in: its packages say nothing
                    # about that vLLM. Keep the machine's facts only.
                    for key in PYENV_KEYS:
                        facts.pop(key, None)
                merge_probe(env, facts, hp.host)
            else:
                warnings.append(f"probe of {hp.host} failed: {hp.error}")
            probe_findings = list(hp.findings)
    diagnoses, notes = diagnose(scan, env)
    mark_repeats(diagnoses, scan)
    enrich(diagnoses, env)
    if probe_findings:
        env["findings"] = probe_findings
    report = Report(source=scan.source, bytes=scan.bytes, lines=scan.lines_total, diagnoses=diagnoses,
                    environment=env, notes=notes, warnings=warnings, input_complete=scan.complete,
                    input_truncated=scan.truncated)
    if diagnoses:
        try:
            runner = None
            if host and not offline:
                from triage.remote import SSHRunner  # asyncssh: only for a remote host

                runner = SSHRunner(host)  # versions come from the remote installer
            py = runnable_python(env, python)
            upstream.lookup(report, offline=offline, python=py, runner=runner)
        except Exception as exc:
            report.warnings.append(f"upstream search failed: {type(exc).__name__}: {exc}")
    save_derived()  # the literals of patterns first met after the rules loaded (triage.regexlit)
    return clean_object(report)  # log, snapshot, host and GitHub text, before any writer or screen
