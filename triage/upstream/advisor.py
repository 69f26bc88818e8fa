"""Will upgrading vLLM fix this? Answered from the capability table, the versions this
environment's own installer can reach, and what the upstream search found.

The installer is asked, not PyPI: a user behind a mirror or a pinned index sees what they can
really install (`pip index versions`), and nightly wheels show up when their index is configured.
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy

from triage import capabilities
from triage.capabilities import load_capabilities
from triage.environment import Environment
from triage.model import Upgrade
from triage.record import Record
from triage import versions as V
from triage.upstream.facets import Facets

INSTALLER_TIMEOUT = 8.0
KEEP_PATCHES_CMD = "triage probe --save-patches DIR"


# --- what the installer can reach ------------------------------------------------------------

class Available(Record):
    __slots__ = ("versions", "installed", "source", "message")
    _fields = __slots__

    def __init__(self, versions: list[str] | None = None, installed: str | None = None, source: str = "",
                 message: str = "") -> None:
        self.versions = [] if versions is None else versions  # ascending
        self.installed = installed
        self.source = source  # the command that answered, for the evidence
        self.message = message  # why nothing is known, in plain words

    @property
    def known(self) -> bool:
        return bool(self.versions)

    @property
    def latest(self) -> str | None:
        rel = [v for v in self.versions if not V.is_prerelease(v)]
        found = rel or self.versions
        return found[-1] if found else None

    def to_json(self) -> dict[str, Any]:
        return {"versions": self.versions[-15:], "installed": self.installed, "source": self.source,
                "message": self.message}


_PIP_AVAILABLE = lazy(r"^\s*Available versions:\s*(.+)$", re.M)
_PIP_INSTALLED = lazy(r"^\s*INSTALLED:\s*(\S+)", re.M)
_UV_WOULD = lazy(r"^\s*\+\s*vllm==(\S+)", re.M | re.I)


def parse_pip_index(out: str) -> tuple[list[str], str | None]:
    m = _PIP_AVAILABLE.search(out)
    found = [v.strip() for v in m.group(1).split(",")] if m else []
    inst = _PIP_INSTALLED.search(out)
    return V.sort_versions([v for v in found if v]), (inst.group(1) if inst else None)


def installer_versions(runner: Any, python: str, *, timeout: float = INSTALLER_TIMEOUT) -> Available:
    """Ask the environment's pip (or uv when pip is absent) which vLLM versions it can install."""
    if runner is None or not python:
        return Available(message="no Python environment to ask")
    env = {"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_PROGRESS_BAR": "off"}
    argv = [python, "-m", "pip", "index", "versions", "vllm", "--pre", "--timeout", "3", "--retries", "0"]
    res = runner.run(argv, timeout=timeout, env=env)
    shown = " ".join(argv[1:6])
    if res.ok:
        found, inst = parse_pip_index(res.stdout)
        if found:
            return Available(found, inst, source=f"{shown} ({getattr(runner, 'where', 'here')})")
        return Available(source=shown, message="pip listed no vLLM versions")
    err = (res.stderr or res.stdout or "").strip()
    if res.timed_out:
        return Available(source=shown, message=f"pip did not answer within {timeout:g}s (no network or a slow index?)")
    if "No module named pip" in err:
        return _uv_versions(runner, python, timeout=timeout)
    if re.search(r"unknown command \"index\"|no such command|invalid choice: 'index'", err, re.I):
        return Available(source=shown, message="this pip is too old for `pip index` (needs pip >= 21.2)")
    if re.search(r"No matching distribution|Could not find|ERROR: No matching", err, re.I):
        return Available(source=shown, message="the configured index has no vLLM (offline or a mirror without it?)")
    last = err.splitlines()[-1] if err else f"exit status {res.returncode}"
    return Available(source=shown, message=f"pip could not list versions: {last[:200]}")


def _uv_versions(runner: Any, python: str, *, timeout: float) -> Available:
    # uv has no `index versions`; a dry-run install of "anything newer" names the newest it can reach.
    argv = ["uv", "pip", "install", "--dry-run", "--python", python, "--prerelease=allow", "vllm"]
    res = runner.run(argv, timeout=timeout, env={"UV_NO_PROGRESS": "1"})
    text = (res.stdout or "") + "\n" + (res.stderr or "")
    m = _UV_WOULD.search(text)
    if res.ok and m:
        return Available([m.group(1)], source="uv pip install --dry-run vllm (newest reachable only)")
    if res.ok and re.search(r"Would make no changes|Audited", text):
        return Available(source="uv pip install --dry-run vllm",
                         message="uv: the installed vLLM is the newest it can reach")
    why = "uv is not installed" if res.returncode == -1 else (text.strip().splitlines() or ["uv failed"])[-1][:200]
    return Available(source="uv pip install --dry-run vllm", message=f"no pip in that environment, and {why}")


# --- which table entries speak to this failure -------------------------------------------------

def matches(entry: dict[str, Any], diag: Any, env: dict[str, Any], f: Facets) -> bool | None:
    """True/False; None when the entry would apply but the compute capability is unknown."""
    family = f.gpu_family[0] if f.gpu_family else None
    return capabilities.matches(entry, diag, env, text=f.text, gpu_family=family)


# --- the verdict ------------------------------------------------------------------------------

CATALOGUE_SOURCE = "vLLM's source, release by release (triage/catalogue, scripts/mine_messages.py)"


def release_range_evidence(cat: dict[str, Any], installed: str | None) -> tuple[str | None, str] | None:
    """What the releases a message occurs in say about upgrading: ("does-not-fix" or None, the
    evidence line). A message still in the newest mined release will be printed after an upgrade
    too; one gone by a release means upgrading changes the code that printed it (not proof that
    the failure goes: the check may have moved or been reworded). Only the last patch of each minor
    release is mined, so the range's edges are known to a minor release."""
    pkg, first, last, newest = (cat.get(k) for k in ("package", "first_release", "last_release", "newest_release"))
    if pkg != "vllm" or not (first and last and newest):
        return None
    where = f"{cat.get('kind', 'raised')} in {cat.get('module', '?')}"
    span = first if first == last else f"{first}-{last}"
    absent, gone = cat.get("absent_in"), cat.get("gone_by")
    if installed and absent and not V.lt(absent, installed):
        return None, (f"the matched message is in vLLM {span} ({where}) but not in {absent}, and the installed "
                      f"vLLM is {installed}: it may come from another package (source: {CATALOGUE_SOURCE})")
    if installed and gone and not V.lt(installed, gone):
        return None, (f"the matched message is gone by vLLM {gone} ({where}, vLLM {span}), yet the installed "
                      f"vLLM is {installed}: a modified install or another package (source: {CATALOGUE_SOURCE})")
    if last == newest:
        return "does-not-fix", (f"the message is still in vLLM {newest}, the newest release ({where}, vLLM {span}): "
                                f"upgrading alone does not remove this check (source: {CATALOGUE_SOURCE})")
    return None, (f"the message is gone since vLLM {gone or 'the release after ' + last} ({where}, vLLM {span}; "
                  f"not in {newest}): upgrading changes the code that printed it (source: {CATALOGUE_SOURCE})")


def _release_range(diag: Any, installed: str | None, verdict: str, target: str | None, evidence: list[str],
                   table_applies: bool) -> tuple[str, str | None]:
    cat = (getattr(diag, "facts", None) or {}).get("catalogue")
    if not isinstance(cat, dict):
        return verdict, target
    got = release_range_evidence(cat, installed)
    if got is None:
        return verdict, target
    say, line = got
    evidence.append(line)
    if say and verdict == "unknown" and not table_applies:
        verdict = say
    return verdict, target


def _installed_version(env: dict[str, Any]) -> str | None:
    """The installed vLLM as a comparable release; None for a tagless build (`0.1.dev20051+g487ecf187`,
    a PR image or a checkout without tags), whose number says nothing about what it contains."""
    v = env.get("vllm_version")
    if not v or re.match(r"^0\.1\.dev\d+", str(v)):
        return None
    return str(v)


def _requirements_note(entry: dict[str, Any], env: dict[str, Any]) -> list[str]:
    out = []
    pkgs = env.get("packages") or {}
    for name, spec in (entry.get("requires") or {}).items():
        if name == "kv_cache_dtype":
            out.append(f"needs --kv-cache-dtype {spec}")
            continue
        have = pkgs.get(name) if isinstance(pkgs, dict) else None
        if have:
            ok = V.satisfies(str(have), str(spec))
            state = "ok" if ok else ("too old" if ok is False else "unknown")
            out.append(f"needs {name}{spec} (installed {have}: {state})")
        else:
            out.append(f"needs {name}{spec}")
    return out


def _prs_text(entry: dict[str, Any]) -> str:
    prs = entry.get("prs") or []
    return ", ".join(f"#{p['number']} ({p.get('state', '?')})" for p in prs if isinstance(p, dict) and p.get("number"))


def patched_files(env: dict[str, Any]) -> list[str]:
    return list(Environment.from_facts(env).patched_files)


def advise(diag: Any, env: dict[str, Any], f: Facets, avail: Available, *, hits: list[dict[str, Any]] | None = None,
           offline: bool = False) -> Upgrade:
    installed = _installed_version(env)
    evidence: list[str] = []
    applicable: list[dict[str, Any]] = []
    cc_unknown = False
    conditional: list[str] = []
    for entry in load_capabilities():
        m = matches(entry, diag, env, f)
        if m is None:
            cc_unknown = True
            majors = "/".join(f"{c}.x" for c in (entry.get("applies") or {}).get("cc_major", []))
            if entry.get("status") == "released" and entry.get("since"):
                conditional.append(f"if the GPU has compute capability {majors}: {entry['title']} is in vLLM >= "
                                   f"{entry['since']}")
            elif entry.get("status") == "unreleased":
                conditional.append(f"if the GPU has compute capability {majors}: {entry['title']} is only in open "
                                   f"pull requests ({_prs_text(entry)})")
        elif m:
            applicable.append(entry)

    verdict, target = "unknown", None
    released = [e for e in applicable if e.get("status") == "released" and e.get("since")]
    unreleased = [e for e in applicable if e.get("status") == "unreleased"]
    never = [e for e in applicable if e.get("status") == "never"]

    if installed:
        evidence.append(f"installed vLLM: {installed}")
    if avail.known:
        evidence.append(f"available to this environment: up to {avail.latest} (from `{avail.source}`)")
    elif offline:
        evidence.append("versions available to this environment were not checked (offline)")
    elif avail.message:
        evidence.append(f"versions available to this environment unknown: {avail.message}")

    for e in never:
        verdict = "does-not-fix"
        evidence.append(f"{e['title']}: {e['summary'].strip()}")
        evidence.append("sources: " + "; ".join(e.get("sources", [])[:2]))

    for e in released:
        if verdict == "does-not-fix" and never:
            break
        since = str(e["since"])
        if installed and V.ge(installed, since):
            # Already there: an upgrade is not what is missing. Say what the capability needs.
            verdict = "does-not-fix" if verdict != "fixes" else verdict
            evidence.append(f"{e['title']}: already in the installed {installed} (since {since}); "
                            "upgrading does not change that")
            evidence.extend(_requirements_note(e, env))
            continue
        candidates = [v for v in avail.versions if V.ge(v, since)] if avail.known else []
        stable = [v for v in candidates if not V.is_prerelease(v)]
        between = ""
        if e.get("absent_in"):
            between = (f" (absent in {e['absent_in']}; releases between {e['absent_in']} and {since} "
                       "are not verified)")
        if avail.known and not candidates:
            if verdict != "fixes":
                verdict = "does-not-fix"
            evidence.append(f"{e['title']}: needs vLLM >= {since}{between}, but the newest this environment "
                            f"can install is {avail.latest}")
            continue
        verdict = "fixes"
        pick = (stable or candidates or [since])[0]
        if target is None or V.lt(pick, target):
            target = pick
        via = f" (added by {_prs_text(e)})" if e.get("prs") else ""
        evidence.append(f"{e['title']}: in vLLM >= {since}{via}{between}")
        evidence.extend(_requirements_note(e, env))
        for c in e.get("caveats", []) or []:
            evidence.append(f"caveat: {c}")
        if e.get("sources"):
            evidence.append("sources: " + "; ".join(e["sources"][:3]))

    for e in unreleased:
        prs = _prs_text(e)
        evidence.append(f"{e['title']}: not in any release; open pull requests: {prs}")
        if verdict == "unknown":
            verdict = "does-not-fix"

    if verdict == "does-not-fix" and unreleased and not never:
        evidence.insert(0, "no released vLLM available to this environment fixes this on this GPU"
                        + (f" (the open PRs are {_prs_text(unreleased[0])})" if _prs_text(unreleased[0]) else ""))

    if not applicable:
        if cc_unknown:
            evidence.append("the compute capability is unknown (run with the probe, or --snapshot), so the "
                            "capability table cannot be applied")
            evidence.extend(conditional)
        else:
            evidence.append("the capability table has no entry for this failure")
        merged = [h for h in (hits or []) if h.get("kind") == "pr" and h.get("state") == "merged"
                  and "other subsystem" not in h.get("why", "")]
        for h in merged[:2]:
            fixed_in = h.get("fixed_in")
            evidence.append(f"upstream: merged PR #{h['number']} {h['title']!r}"
                            + (f", first in {fixed_in}" if fixed_in else ", release not determined"))
            if fixed_in and installed and V.lt(installed, fixed_in):
                verdict, target = "fixes", fixed_in if target is None else target

    verdict, target = _release_range(diag, installed, verdict, target, evidence, bool(applicable))

    files = patched_files(env)
    keep = (f"an upgrade replaces these {len(files)} hand-patched file(s); save them first with "
            f"`{KEEP_PATCHES_CMD}` and re-apply after (or drop the ones the new version makes unneeded)") if files else None
    return Upgrade(verdict, target, evidence, files, keep,
                   avail.to_json() if avail.known or avail.message else None)
