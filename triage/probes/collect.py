"""Turn the raw probe output into the facts and findings of one host (the triage side of the probe).

The probe script (triage.probes.script) returns raw facts; here they are merged into the public
`facts` shape of `triage probe --json`, version strings decoded (triage.versions), the install
provenance named, and the findings that need several facts at once added (driver vs torch's CUDA,
patched files, duplicate packages, legacy pynvml in vLLM's environment).
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any

from triage.computecap import parse_cc
from triage.lazyre import lazy
from triage.runner import LocalRunner, Runner
from triage.versions import cuda_from_tag, decode_vllm_version


@dataclass
class HostProbe:
    host: str
    ok: bool
    error: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[dict[str, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        # Facts and errors come from other machines, snapshots and NVML: no terminal control in them.
        from triage.sanitize import clean_tree

        self.host, self.error = clean_tree(self.host), clean_tree(self.error)
        if isinstance(self.error, str) and len(self.error) > 2000:
            self.error = self.error[:2000] + " ..."
        self.facts, self.findings = clean_tree(self.facts), clean_tree(self.findings)

    def to_json(self) -> dict[str, Any]:
        return {"host": self.host, "ok": self.ok, "error": self.error, "facts": self.facts,
                "findings": self.findings}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "HostProbe":
        return cls(host=str(d.get("host") or "?"), ok=bool(d.get("ok")), error=d.get("error"),
                   facts=dict(d.get("facts") or {}), findings=list(d.get("findings") or []))


def _finding(fid: str, severity: str, title: str, fix: str) -> dict[str, str]:
    return {"id": fid, "severity": severity, "title": title, "fix": fix}


# ------------------------------------------------------------------ which python
def python_candidates(python: str | None = None, *, remote: bool = False) -> list[str]:
    """Interpreters that may run the probe script, best first: the one the user named, else ours here
    or python3/python on a remote PATH. An interpreter a log names is never among them: that
    environment is read from its files (pyenv.probe_pyenv_at)."""
    if python:
        return [python]
    return ["python3", "python"] if remote else [sys.executable]


def log_env_args(python_prefix: str | None, site_packages: str | None) -> list[str]:
    """Probe-script options that make it read the log's environment from disk."""
    out: list[str] = []
    if python_prefix:
        out += ["--env-prefix", python_prefix]
    if site_packages:
        out += ["--env-site", site_packages]
    return out


# ------------------------------------------------------------------ provenance
_HEX40 = lazy(r"/([0-9a-f]{40})/")


def install_provenance(v: dict[str, Any] | None) -> dict[str, Any] | None:
    """How vLLM got there: decoded version + PEP 610 direct_url.json + INSTALLER."""
    if not v:
        return None
    decoded = decode_vllm_version(v.get("version") or "")
    du = v.get("direct_url") or {}
    installer = v.get("installer")
    url = du.get("url") if isinstance(du, dict) else None
    git = v.get("git")
    if (du.get("dir_info") or {}).get("editable"):
        source = "editable"
        where = (git or {}).get("source") or url
        desc = f"editable install from {where}"
        if git and git.get("git"):
            desc += f" (git {git.get('describe') or git.get('commit', '')[:12]})"
    elif du.get("vcs_info"):
        vcs = du["vcs_info"]
        source = "git"
        desc = f"installed from {vcs.get('vcs', 'git')} {url} at {str(vcs.get('commit_id', ''))[:12]}"
        if vcs.get("requested_revision"):
            desc += f" (asked for {vcs['requested_revision']})"
    elif du.get("archive_info") is not None or (url and url.endswith((".whl", ".tar.gz", ".zip"))):
        if url and "wheels.vllm.ai" in url:
            m = _HEX40.search(url)
            if m:
                source, desc = "per-commit-wheel", f"per-commit wheel for {m.group(1)[:12]} from wheels.vllm.ai"
            else:
                source, desc = "nightly-wheel", "nightly wheel from wheels.vllm.ai"
        elif url and url.startswith("file://"):
            source, desc = "local-archive", f"local file {url[7:]}"
        else:
            source, desc = "archive", f"wheel or sdist from {url}"
    elif du.get("dir_info") is not None:
        source, desc = "local-dir", f"built from the source tree {url}"
    elif decoded["kind"] == "ngc":
        source, desc = "ngc", f"NVIDIA NGC container {decoded['ngc_release']}"
    elif decoded["kind"] == "nightly":
        source, desc = "nightly-index", ("nightly wheel from a package index "
                                         "(--extra-index-url https://wheels.vllm.ai/nightly or a per-commit index)")
    elif decoded["kind"] in ("release", "rc"):
        source, desc = "index", "from PyPI (or a mirror)"
        if decoded.get("cuda"):
            desc = f"release wheel for CUDA {decoded['cuda']} (GitHub release or wheels.vllm.ai)"
    else:
        source, desc = "local-build", "built locally"
    if installer:
        desc += f", installed with {installer}"
    files = v.get("files") or {}
    patched = list(files.get("patched") or [])
    if git and git.get("git"):
        patched = list(git.get("modified") or [])
    return {
        "version": v.get("version"),
        "kind": decoded["kind"],
        "decoded": decoded,
        "source": source,
        "installer": installer,
        "description": f"vLLM {v.get('version')}: {decoded['summary']}; {desc}",
        "editable": source == "editable",
        "direct_url": du or None,
        "location": v.get("location"),
        "dist_info": v.get("dist_info"),
        "files_checked": files.get("checked", 0),
        "patched_files": patched,
        "missing_files": list(files.get("missing") or []),
        "added_files": list(files.get("added") or []) + list((git or {}).get("untracked") or []),
        "git": git,
        "compiled_extension": v.get("compiled_extension"),
    }


# ------------------------------------------------------------------ merge
def _version_tuple(s: Any) -> tuple[int, ...] | None:
    if not isinstance(s, str):
        return None
    m = re.match(r"^(\d+)\.(\d+)", s)
    return (int(m.group(1)), int(m.group(2))) if m else None


def build_facts(raw: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, str]]]:
    """Public facts + findings from the script's raw sections (any of them may be absent)."""
    gpu = raw.get("gpu") or {}
    host = raw.get("host") or {}
    py = raw.get("pyenv") or {}
    findings: list[dict[str, str]] = list(gpu.get("findings") or [])
    gpus = list(gpu.get("gpus") or [])
    facts: dict[str, Any] = {
        "gpus": gpus,
        "driver_version": gpu.get("driver_version"),
        "cuda_driver_version": gpu.get("cuda_driver_version"),
        "nvml_source": gpu.get("nvml_source"),
    }
    found = {g["compute_capability"]: cc for g in gpus if (cc := parse_cc(g.get("compute_capability")))}
    ccs = sorted(found, key=found.__getitem__)
    if ccs:
        facts["compute_capability"] = ccs[0] if len(ccs) == 1 else None
        facts["compute_capabilities"] = ccs
    names: dict[str, int] = {}
    for g in gpus:
        names[str(g.get("name"))] = names.get(str(g.get("name")), 0) + 1
    if names:
        facts["gpu_summary"] = ", ".join(f"{n}x {name}" for name, n in names.items())
    for key in ("os", "container", "shm", "cuda_toolkit", "kernel_module_version", "cuda_visible_devices",
                "cuda_device_order"):
        if key in host:
            facts[key] = host[key]
    if py:
        facts["python"] = py.get("python") or {}
        facts["packages"] = py.get("packages") or {}
        if py.get("duplicate_packages"):
            facts["duplicate_packages"] = py["duplicate_packages"]
        prov = install_provenance(py.get("vllm"))
        facts["vllm_install"] = prov
        if prov:
            facts["vllm_version"] = prov["version"]
            facts["patched_files"] = prov["patched_files"]
        torch = py.get("torch") or {}
        if torch:
            facts["torch_version"] = torch.get("version")
            cuda = torch.get("cuda")
            if not cuda and "+cu" in str(torch.get("version")):
                cuda = cuda_from_tag(str(torch["version"]).split("+", 1)[1].split(".")[0])
            facts["torch_cuda_version"] = cuda
            if torch.get("hip"):
                facts["torch_hip_version"] = torch["hip"]
        deep = py.get("torch_deep")
        if deep:
            facts["torch_deep"] = deep
            if deep.get("arch_list") is not None:
                facts["torch_arch_list"] = deep["arch_list"]
    else:
        facts.setdefault("python", None)
        facts.setdefault("packages", {})
        facts.setdefault("vllm_install", None)
    if "os" not in facts:
        facts["os"] = None
    for name, err in (raw.get("errors") or {}).items():
        findings.append(_finding(f"probe.{name}_failed", "warning", f"The {name} probe failed: {err}",
                                 "Report this as a triage bug with the message above"))
    findings += host_side_findings(facts)
    findings += env_findings(facts)
    return facts, findings


def host_side_findings(facts: dict[str, Any]) -> list[dict[str, str]]:
    from triage.probes.host import host_findings

    return host_findings(facts)


def env_findings(facts: dict[str, Any]) -> list[dict[str, str]]:
    """Findings across the GPU and Python facts."""
    out: list[dict[str, str]] = []
    py = facts.get("python")
    packages = facts.get("packages") or {}
    prov = facts.get("vllm_install")
    if py and not prov:
        out.append(_finding("vllm.not_installed", "warning",
                            f"vLLM is not installed in {py.get('executable')}",
                            "Point triage at the Python that runs vLLM: triage probe --python /path/to/env/bin/python"))
    if prov:
        patched = prov.get("patched_files") or []
        if patched:
            out.append(_finding("vllm.patched", "warning",
                                f"{len(patched)} vLLM file(s) differ from what was installed (hand patches): "
                                + ", ".join(patched[:6]) + (" ..." if len(patched) > 6 else ""),
                                "Keep a copy before upgrading or reinstalling: triage probe --save-patches DIR"))
        if prov.get("missing_files"):
            out.append(_finding("vllm.missing_files", "error",
                                f"{len(prov['missing_files'])} vLLM file(s) listed in its RECORD are missing: "
                                + ", ".join(prov["missing_files"][:4]),
                                "Reinstall the same version: pip install --force-reinstall --no-deps vllm=="
                                + str(prov.get("version"))))
    for name, copies in (facts.get("duplicate_packages") or {}).items():
        out.append(_finding("python.duplicate_package", "warning",
                            f"{name} is installed {len(copies)} times ("
                            + ", ".join(f"{c.get('version')} in {c.get('path')}" for c in copies)
                            + "): Python imports the first one",
                            f"pip uninstall {name} until one copy is left, then reinstall the version you need"))
    legacy = packages.get("pynvml")
    if legacy and (_version_tuple(legacy) or (99, 0))[0] < 12:
        out.append(_finding("python.legacy_pynvml", "warning",
                            f"The Python that runs vLLM has the legacy pynvml {legacy}, which shadows nvidia-ml-py",
                            "pip uninstall -y pynvml && pip install --force-reinstall nvidia-ml-py"))
    drv = _version_tuple(facts.get("cuda_driver_version"))
    tcu = _version_tuple(facts.get("torch_cuda_version"))
    if drv and tcu and tcu > drv:
        out.append(_finding("cuda.driver_too_old", "error",
                            f"torch was built for CUDA {facts['torch_cuda_version']} but the driver "
                            f"{facts.get('driver_version')} supports CUDA up to {facts['cuda_driver_version']} "
                            "(CUDA init fails: Error 803 / 'driver too old')",
                            "Upgrade the NVIDIA driver, or install a torch built for CUDA "
                            f"{facts['cuda_driver_version']} or older (and the vLLM wheel that matches it)"))
    arch = facts.get("torch_arch_list")
    if arch:
        for cc in facts.get("compute_capabilities") or []:
            if not _arch_runs(arch, cc):
                out.append(_finding("torch.arch_missing", "error",
                                    f"torch has no kernels for compute capability {cc} (built for {' '.join(arch)})",
                                    "Install a torch build that includes sm_" + cc.replace(".", "")
                                    + " (a newer CUDA wheel, e.g. cu128 or later for Blackwell)"))
    return out


def _arch_runs(arch_list: list[str], cc: str) -> bool:
    """sm_XY runs on exactly XY (same major, minor >= for binary compatibility); compute_XY PTX JITs upward."""
    parsed = parse_cc(cc)
    if not parsed:
        return True
    t = (parsed.major, parsed.minor)
    for a in arch_list:
        m = re.match(r"^(sm|compute)_(\d+)(\d)[a-z]?$", a)
        if not m:
            continue
        v = (int(m.group(2)), int(m.group(3)))
        if m.group(1) == "sm" and v[0] == t[0] and v[1] <= t[1]:
            return True
        if m.group(1) == "compute" and v <= t:
            return True
    return False


# ------------------------------------------------------------------ running it
def interpret_result(res: Any, py: str, where: str, timeout: float) -> tuple[dict[str, Any] | None, str | None, bool]:
    """What one run of the probe script gave: (raw facts, error, whether to try the next interpreter)."""
    from triage.probes.script import parse_output

    raw = parse_output(res.stdout)
    if raw is not None:
        return raw, None, False
    if res.timed_out:
        return None, f"the probe timed out after {timeout:g}s on {where}", False
    tail = (res.stderr or res.stdout)[-4096:].strip().splitlines()
    last = tail[-1] if tail else f"exit {res.returncode}"
    err = f"{py}: " + (last if len(last) <= 300 else last[:300] + " ...")
    cut = "output cut at" in res.stderr[-200:]
    missing = not cut and (res.returncode in (-1, 126, 127) or "No such file" in res.stderr
                           or "not found" in res.stderr)
    if missing:
        return None, f"no usable Python on {where} ({err})", True
    return None, f"the probe failed with {err}", False


def run_probe_script(runner: Runner, pythons: list[str], *, sections: str, deep: bool, timeout: float,
                     extra: list[str] | None = None) -> tuple[dict[str, Any] | None, str | None, str | None]:
    """Run the script with the first interpreter that exists: (raw, python used, error)."""
    from triage.probes.script import probe_script

    err = None
    for py in pythons:
        argv = [py, "-", "--sections", sections] + (["--deep"] if deep else []) + list(extra or [])
        res = runner.run(argv, timeout=timeout, input=probe_script())
        raw, err, try_next = interpret_result(res, py, runner.where, timeout)
        if raw is not None:
            return raw, py, None
        if not try_next:
            return None, py, err
    return None, None, err or f"no Python found on {runner.where}"


def probe_with_runner(runner: Runner, *, python: str | None = None, python_prefix: str | None = None,
                      site_packages: str | None = None, deep: bool = False, timeout: float = 120.0) -> HostProbe:
    """Probe the machine behind `runner` with the probe script (the interpreter the user named, else
    python3 there); the log's environment, when named, is read from its files."""
    extra = [] if python else log_env_args(python_prefix, site_packages)
    raw, _used, err = run_probe_script(runner, python_candidates(python, remote=True), sections="gpu,host,pyenv",
                                       deep=deep, timeout=timeout, extra=extra)
    if raw is None:
        return HostProbe(host=runner.where, ok=False, error=err)
    return probe_from_raw(runner.where, raw)


def probe_from_raw(host: str, raw: dict[str, Any]) -> HostProbe:
    facts, findings = build_facts(raw)
    if raw.get("log_env_absent"):
        findings.insert(0, _log_env_absent(str(raw["log_env_absent"]), "the default python3"))
    return HostProbe(host=host, ok=True, facts=facts, findings=findings)


def _log_env_absent(where: str, probed: str) -> dict[str, str]:
    return _finding("python.log_env_absent", "warning",
                    f"The log's vLLM ran from {where}, which is not on this machine; probed {probed} instead",
                    "Run triage where vLLM ran (triage --log ... --host HOST), or pass --python")


def gather(*, host: str | None = None, python: str | None = None, python_prefix: str | None = None,
           site_packages: str | None = None, deep: bool = False, timeout: float = 120.0,
           runner: Runner | None = None) -> HostProbe:
    """Probe one machine: this one (host None), `host` over SSH, or the one behind `runner`.
    Never raises for machine trouble."""
    kw = dict(python=python, python_prefix=python_prefix, site_packages=site_packages, deep=deep, timeout=timeout)
    if host is not None:
        from triage.probes.over_ssh import probe_host_sync

        return probe_host_sync(host, **kw)  # type: ignore[arg-type]
    if runner is not None:
        return probe_with_runner(runner, **kw)  # type: ignore[arg-type]
    return gather_local(**kw)  # type: ignore[arg-type]


def _is_own_env(python_prefix: str | None, site_packages: str | None) -> bool:
    import site

    ours = {os.path.realpath(p) for p in [sys.prefix] + list(getattr(site, "getsitepackages", lambda: [])())}
    return any(p and os.path.realpath(p.rstrip("/") or "/") in ours for p in (python_prefix, site_packages))


def gather_local(*, python: str | None = None, python_prefix: str | None = None,
                 site_packages: str | None = None, deep: bool = False, timeout: float = 120.0) -> HostProbe:
    """This machine: GPU and host facts in-process (triage's own NVML bindings); the Python environment
    in-process when it is ours, from its files when a log names it (nothing in it runs), or by the
    probe script in the interpreter the user named (after refuse_reason)."""
    from triage.interpreter import refuse_reason
    from triage.probes.gpu import probe_gpus
    from triage.probes.host import probe_host
    from triage.probes.pyenv import probe_pyenv, probe_pyenv_at

    raw: dict[str, Any] = {"errors": {}}
    try:
        raw["gpu"] = probe_gpus()
    except Exception as exc:  # the probe is meant never to raise; a bug must not hide the rest
        raw["errors"]["gpu"] = f"{type(exc).__name__}: {exc}"
    raw["host"] = probe_host((raw.get("gpu") or {}).get("gpus") or [])
    err = None
    absent = None
    if python:
        err = refuse_reason(python)
        if err is None and _same_env(python):
            raw["pyenv"] = probe_pyenv(deep=deep)
        elif err is None:
            sub, _used, err = run_probe_script(LocalRunner(), [python], sections="pyenv", deep=deep, timeout=timeout)
            if sub is not None:
                raw["pyenv"] = sub.get("pyenv")
                raw["errors"].update(sub.get("errors") or {})
    elif (python_prefix or site_packages) and not _is_own_env(python_prefix, site_packages):
        try:
            raw["pyenv"] = probe_pyenv_at(python_prefix, site_packages)
        except Exception as exc:
            raw["errors"]["pyenv"] = f"{type(exc).__name__}: {exc}"
        if raw.get("pyenv") is None and "pyenv" not in raw["errors"]:
            absent = site_packages or python_prefix
            raw["pyenv"] = probe_pyenv(deep=deep)
    else:
        raw["pyenv"] = probe_pyenv(deep=deep)
    facts, findings = build_facts(raw)
    if absent:
        findings.insert(0, _log_env_absent(str(absent), sys.executable))
    if err:
        findings.insert(0, _finding("python.probe_failed", "error", f"Could not probe the Python environment: {err}",
                                    "Pass the interpreter that runs vLLM: triage probe --python /path/to/bin/python"))
    return HostProbe(host="localhost", ok=True, facts=facts, findings=findings)


def _same_env(python: str) -> bool:
    """Whether `python` runs with our own prefix (so our in-process metadata is its). Not realpath:
    a venv's python is a symlink to the base interpreter but has its own site-packages."""
    p = os.path.abspath(python)
    return p == os.path.abspath(sys.executable) or os.path.dirname(p) == os.path.join(
        os.path.abspath(sys.prefix), "bin")


MAX_SNAPSHOT = 64 << 20  # a fleet of hundreds of hosts is a few MB


def load_snapshot(path: str | os.PathLike[str]) -> HostProbe:
    """A recorded `triage probe --json` (first host) or a bare HostProbe object. ValueError when not one."""
    try:
        with open(path, "rb") as fh:  # a FIFO or /dev/zero too: at most MAX_SNAPSHOT bytes are read
            raw = fh.read(MAX_SNAPSHOT + 1)
    except OSError as exc:
        raise ValueError(f"cannot read snapshot {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_SNAPSHOT:
        raise ValueError(f"snapshot {path} is larger than {MAX_SNAPSHOT >> 20} MB: not a `triage probe --json`")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"snapshot {path} is not JSON: {type(exc).__name__}") from None
    if isinstance(data, dict) and isinstance(data.get("hosts"), list) and data["hosts"]:
        data = data["hosts"][0]
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise ValueError(f"snapshot {path} is not the output of `triage probe --json`")
    hp = HostProbe.from_json(data)
    py = hp.facts.get("python")
    if isinstance(py, dict):
        # Recorded elsewhere: its interpreter is a name to show, never one to run here.
        hp.facts["python"] = {**py, "read_from": "snapshot"}
    return hp
