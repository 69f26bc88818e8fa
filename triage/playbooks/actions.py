"""Built-in actions that `apply` steps name: each previews what it would do (commands, a diff), then
applies it through a Runner (this machine or an SSH host) with a transcript recorder.

    sparse-mla     install the bundled sparse MLA Triton backend (through triage.actions.sparse_mla)
    upgrade-vllm   pip install a vLLM version into the environment that runs vLLM, saving patched files first
    set-flag       set a `vllm serve` flag in a launch script or compose file (diff first, backup kept)
    set-env        set an environment variable there
    save-patches   copy the hand-patched vLLM files aside, so an upgrade cannot lose them

An action that fails leaves the machine as it was: file edits restore their backup; pip keeps the
old version when an install fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from triage.actions import sparse_mla
from triage.actions.sparse_mla import InstallResult, Recorder
from triage.lazyre import lazy
from triage.playbooks import edits
from triage.playbooks.conditions import lookup
from triage.runner import Result, Runner
from triage.transcript import is_local
from triage.versions import InvalidVersion, Version

INSTALL_TIMEOUT = 3600.0


@dataclass
class Preview:
    lines: list[str] = field(default_factory=list)  # what will happen, in words
    commands: list[list[str]] = field(default_factory=list)  # every argv it will run
    diff: str = ""  # for file edits
    problem: str | None = None  # set when it cannot be done: nothing is asked, the step fails
    facts: dict[str, Any] = field(default_factory=dict)  # facts it would set (a dry run walks on with them)


@dataclass
class ActionResult:
    ok: bool
    message: str
    facts: dict[str, Any] = field(default_factory=dict)  # facts learned (saved_patches_dir, launch_args, ...)


@dataclass
class ActionContext:
    runner: Runner
    recorder: Any  # a triage.transcript.Transcript (recorder protocol); None in dry-run
    facts: dict[str, Any]
    python: str
    timeout: float = INSTALL_TIMEOUT

    def run(self, argv: list[str], *, timeout: float | None = None, input: str | None = None) -> Result:
        res = self.runner.run(argv, timeout=timeout or self.timeout, input=input)
        if self.recorder is not None:
            self.recorder.command(list(argv), res, self.runner.where)
        return res


class Action(Protocol):
    name: str

    def preview(self, args: dict[str, Any], ctx: ActionContext) -> Preview: ...

    def apply(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult: ...


def _tail(res: Result) -> str:
    lines = (res.stderr or res.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit status {res.returncode}"


# --- files through a runner --------------------------------------------------------------------


def read_file(ctx: ActionContext, path: str) -> str:
    if is_local(ctx.runner):
        try:
            return Path(path).expanduser().read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise OSError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    res = ctx.runner.run(["cat", "--", path], timeout=60)
    if not res.ok:
        raise OSError(f"cannot read {path} on {ctx.runner.where}: {_tail(res)}")
    return res.stdout


def write_file(ctx: ActionContext, path: str, text: str) -> None:
    if is_local(ctx.runner):
        p = Path(path).expanduser()
        tmp = p.with_name(p.name + ".triage-new")
        tmp.write_text(text, encoding="utf-8")
        if p.exists():
            shutil.copymode(p, tmp)
        os.replace(tmp, p)
        return
    res = ctx.runner.run(["sh", "-c", 'cat > "$1"', "sh", path], input=text, timeout=60)
    if not res.ok:
        raise OSError(f"cannot write {path} on {ctx.runner.where}: {_tail(res)}")


# --- set-flag / set-env -----------------------------------------------------------------------


class _FileEdit:
    name = ""

    def _new_text(self, args: dict[str, Any], path: str, old: str) -> str:
        raise NotImplementedError

    def _describe(self, args: dict[str, Any]) -> str:
        raise NotImplementedError

    def preview(self, args: dict[str, Any], ctx: ActionContext) -> Preview:
        path = str(args.get("file") or "")
        if not path:
            return Preview(problem="no launch file given")
        try:
            old = read_file(ctx, path)
            new = self._new_text(args, path, old)
        except (OSError, edits.EditError) as exc:
            return Preview(problem=str(exc))
        if new == old:
            return Preview(lines=[f"{path} already has {self._describe(args)}; nothing to change"])
        return Preview(
            lines=[f"{self._describe(args)} in {path} on {ctx.runner.where} (a backup is kept for `triage undo`)"],
            diff=edits.unified_diff(path, old, new),
        )

    def apply(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        path = str(args.get("file") or "")
        try:
            old = read_file(ctx, path)
            new = self._new_text(args, path, old)
        except (OSError, edits.EditError) as exc:
            return ActionResult(False, str(exc))
        if new == old:
            return ActionResult(True, f"{path} already has {self._describe(args)}", self._facts(args, ctx))
        if ctx.recorder is None:
            return ActionResult(False, "refusing to edit a file without a transcript to undo it")
        try:
            ctx.recorder.backup(path, ctx.runner)
        except OSError as exc:
            return ActionResult(False, f"no change made: {exc}")
        try:
            write_file(ctx, path, new)
        except OSError as exc:
            # Put back what was there (the write may have been partial).
            try:
                write_file(ctx, path, old)
            except OSError:
                pass
            return ActionResult(False, f"no change made: {exc}")
        ctx.recorder.change(f"{self._describe(args)} in {path}", None, where=ctx.runner.where)
        return ActionResult(True, f"{self._describe(args)} in {path}", self._facts(args, ctx))

    def _facts(self, args: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        return {}


class SetFlag(_FileEdit):
    name = "set-flag"

    def _value(self, args: dict[str, Any]) -> str | None:
        v = args.get("value")
        return None if v is None or v == "" or v is True else str(v)

    def _describe(self, args: dict[str, Any]) -> str:
        v = self._value(args)
        return f"set {args.get('flag')}" + (f" {v}" if v is not None else "")

    def _new_text(self, args: dict[str, Any], path: str, old: str) -> str:
        return edits.set_flag(old, str(args.get("flag") or ""), self._value(args), compose=edits.is_compose(path, old))

    def _facts(self, args: dict[str, Any], ctx: ActionContext) -> dict[str, Any]:
        launch = dict(ctx.facts.get("launch_args") or {})
        v = self._value(args)
        launch[str(args.get("flag"))] = True if v is None else v
        return {"launch_args": launch}


class SetEnv(_FileEdit):
    name = "set-env"

    def _describe(self, args: dict[str, Any]) -> str:
        return f"set {args.get('name')}={args.get('value')}"

    def _new_text(self, args: dict[str, Any], path: str, old: str) -> str:
        return edits.set_env(old, str(args.get("name") or ""), str(args.get("value") or ""), compose=edits.is_compose(path, old))


# --- save-patches -----------------------------------------------------------------------------


def _site_packages(ctx: ActionContext) -> str | None:
    known = lookup(ctx.facts, "vllm_install.site_packages")
    if known:
        return str(known)
    res = ctx.runner.run([ctx.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=60)
    return res.stdout.strip() if res.ok and res.stdout.strip() else None


def _patched(args: dict[str, Any], ctx: ActionContext) -> list[str]:
    files = args.get("files")
    if files is None:
        files = ctx.facts.get("patched_files") or []
    if isinstance(files, str):
        files = [files]
    return [str(f) for f in files if str(f).strip()]


class SavePatches:
    name = "save-patches"

    def _dest(self, args: dict[str, Any]) -> Path:
        if args.get("dest"):
            return Path(str(args["dest"])).expanduser()
        from triage.paths import state_dir

        return state_dir() / "patches" / time.strftime("%Y%m%d-%H%M%S")

    def preview(self, args: dict[str, Any], ctx: ActionContext) -> Preview:
        files = _patched(args, ctx)
        if not files:
            return Preview(lines=["no hand-patched vLLM files are known; nothing to save"])
        dest = self._dest(args)
        return Preview(
            lines=[f"copy {len(files)} patched file(s) from {ctx.runner.where} to {dest} on this machine:"]
            + [f"  {f}" for f in files],
            facts={"saved_patches_dir": str(dest)},
        )

    def apply(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        files = _patched(args, ctx)
        if not files:
            return ActionResult(True, "no patched files to save")
        dest = self._dest(args)
        base = None
        if any(not os.path.isabs(f) for f in files):
            base = _site_packages(ctx)
            if base is None:
                return ActionResult(False, f"cannot find site-packages of {ctx.python} to locate the patched files")
        manifest: list[dict[str, Any]] = []
        missing: list[str] = []
        for f in files:
            src = f if os.path.isabs(f) else os.path.join(base or "", f)
            rel = f.lstrip("/") if os.path.isabs(f) else f
            target = dest / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                if is_local(ctx.runner):
                    shutil.copy2(src, target)
                else:
                    target.write_text(read_file(ctx, src), encoding="utf-8")
            except OSError as exc:
                missing.append(f"{src}: {getattr(exc, 'strerror', None) or exc}")
                continue
            digest = hashlib.sha256(target.read_bytes()).hexdigest()
            manifest.append({"path": src, "saved_as": str(target), "sha256": digest})
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "MANIFEST.json").write_text(
            json.dumps({"where": ctx.runner.where, "vllm_version": ctx.facts.get("vllm_version"), "files": manifest}, indent=2),
            encoding="utf-8",
        )
        if ctx.recorder is not None and hasattr(ctx.recorder, "note"):
            ctx.recorder.note(f"saved {len(manifest)} patched file(s) to {dest}")
        if missing:
            return ActionResult(False, "could not save: " + "; ".join(missing), {"saved_patches_dir": str(dest)})
        return ActionResult(True, f"saved {len(manifest)} patched file(s) to {dest}", {"saved_patches_dir": str(dest)})


# --- upgrade-vllm -----------------------------------------------------------------------------


_NEEDS_PACKAGE = lazy(r"^needs ([A-Za-z][\w.-]*)\s*(>=|==|~=)\s*([\w.+!-]+)(?:\s*\(installed ([\w.+!-]+))?")
_NEEDS_FLAG = lazy(r"^needs (--[a-z][\w-]*)(?:[ =]([\w.:-]+))?")


def upgrade_needs(facts: dict[str, Any]) -> tuple[list[str], dict[str, str], list[str]]:
    """What the upgrade verdict says the new vLLM needs beside itself: requirements to install in the
    same pip command (`flashinfer-python>=0.6.14`), launch flags (`--kv-cache-dtype fp8_ds_mla`), and
    the installed versions of those packages (for undo)."""
    specs: list[str] = []
    flags: dict[str, str] = {}
    was: list[str] = []
    for line in lookup(facts, "upstream.evidence") or []:
        line = str(line).strip()
        m = _NEEDS_PACKAGE.match(line)
        if m and m.group(1).lower() != "vllm":
            specs.append(f"{m.group(1)}{m.group(2)}{m.group(3)}")
            if m.group(4):
                was.append(f"{m.group(1)}=={m.group(4)}")
            continue
        m = _NEEDS_FLAG.match(line)
        if m:
            flags[m.group(1)] = m.group(2) or ""
    return specs, flags, was


class UpgradeVllm:
    name = "upgrade-vllm"

    def _spec(self, args: dict[str, Any], ctx: ActionContext) -> tuple[str | None, str | None]:
        target = args.get("version") or lookup(ctx.facts, "upstream.target_version")
        if not target:
            return None, "no vLLM version to upgrade to is known"
        target = str(target).strip()
        if target == "nightly":
            return "vllm", None
        try:
            Version.parse(target)
        except InvalidVersion:
            return None, f"not a vLLM version: {target!r}"
        return f"vllm=={target}", None

    def _argv(self, args: dict[str, Any], ctx: ActionContext, spec: str) -> list[str]:
        extra = [str(a) for a in (args.get("index_args") or [])]
        target = str(args.get("version") or lookup(ctx.facts, "upstream.target_version") or "")
        if target == "nightly":
            extra = ["--pre", "--extra-index-url", "https://wheels.vllm.ai/nightly", *extra]
        elif target:
            try:
                if Version.parse(target).is_prerelease:
                    extra = ["--pre", *extra]
            except InvalidVersion:
                pass
        also, _flags, _was = upgrade_needs(ctx.facts)
        if lookup(ctx.facts, "vllm_install.installer") == "uv":
            return ["uv", "pip", "install", "--python", ctx.python, *extra, spec, *also]
        return [ctx.python, "-m", "pip", "install", *extra, spec, *also]

    def preview(self, args: dict[str, Any], ctx: ActionContext) -> Preview:
        spec, problem = self._spec(args, ctx)
        if problem or spec is None:
            return Preview(problem=problem)
        now = ctx.facts.get("vllm_version")
        lines = [f"install {spec} into {ctx.python} on {ctx.runner.where}" + (f" (vLLM now: {now})" if now else "")]
        also, flags, _was = upgrade_needs(ctx.facts)
        if also:
            lines.append(f"with {', '.join(also)} in the same command: the new vLLM needs it")
        if flags:
            lines.append("then launch with " + " ".join(f"{k} {v}".strip() for k, v in flags.items())
                         + " (the new version needs it for this model)")
        files = _patched(args, ctx)
        if files and not ctx.facts.get("saved_patches_dir"):
            lines.append(f"first save the {len(files)} hand-patched vLLM file(s): the upgrade overwrites them")
        return Preview(lines=lines, commands=[self._argv(args, ctx, spec)], facts=self._launch_facts(ctx, flags))

    @staticmethod
    def _launch_facts(ctx: ActionContext, flags: dict[str, str]) -> dict[str, Any]:
        """The launch arguments with the flags the new version needs (the relaunch offered next uses them)."""
        if not flags:
            return {}
        args_now = dict(ctx.facts.get("launch_args") or {})
        for flag, value in flags.items():
            args_now[flag.lstrip("-").replace("-", "_")] = value or True
        return {"launch_args": args_now}

    def apply(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        spec, problem = self._spec(args, ctx)
        if problem or spec is None:
            return ActionResult(False, problem or "no target")
        facts: dict[str, Any] = {}
        if _patched(args, ctx) and not ctx.facts.get("saved_patches_dir"):
            saved = SavePatches().apply({}, ctx)
            if not saved.ok:
                return ActionResult(False, f"not upgrading: {saved.message}")
            facts.update(saved.facts)
        argv = self._argv(args, ctx, spec)
        res = ctx.run(argv, timeout=float(args.get("timeout") or INSTALL_TIMEOUT))
        if not res.ok:
            why = "timed out" if res.timed_out else _tail(res)
            return ActionResult(False, f"the install failed ({why}); pip keeps the old version when an install fails", facts)
        old = ctx.facts.get("vllm_version")
        also, flags, was = upgrade_needs(ctx.facts)
        undo = None
        note = ""
        if old:
            try:
                v = Version.parse(old)
                if not v.is_prerelease and "+" not in str(old):
                    undo = [*argv[:len(argv) - 1 - len(also)], f"vllm=={old}", *was]
                else:
                    note = f" (the previous build {old} is not on an index by version: reinstall it from where it came)"
            except InvalidVersion:
                pass
        ctx.recorder.change(f"installed {' '.join([spec, *also])} into {ctx.python}" + (f" (was {old})" if old else "")
                            + note, undo, where=ctx.runner.where)
        facts.update(self._launch_facts(ctx, flags))  # the relaunch offered next carries the flags it needs
        check = ctx.run([ctx.python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"], timeout=120)
        if check.ok and check.stdout.strip():
            facts["vllm_version"] = check.stdout.strip()
        msg = f"vLLM is now {facts.get('vllm_version', spec)}"
        if facts.get("saved_patches_dir"):
            msg += f"; your patched files are saved in {facts['saved_patches_dir']}: compare them with the new version before re-applying any"
        return ActionResult(True, msg, facts)


# --- sparse-mla (the bundled backend's installer, triage.actions.sparse_mla) --------------------

SPARSE_MLA_MODULE = "triage.actions.sparse_mla"
SPARSE_MLA_FLAG = "--attention-backend CUSTOM"


class SparseMlaInstaller(Protocol):
    """What SparseMla needs from the installer: triage.actions.sparse_mla, or a test's stand-in."""

    def preview(self, *, runner: Runner, python: str) -> list[str]: ...

    def apply(self, *, runner: Runner, python: str, recorder: Recorder, dry_run: bool = False) -> InstallResult: ...


class SparseMla:
    """Installs the bundled sparse MLA Triton backend into the Python that runs vLLM, then sets
    the launch flag that selects it."""

    name = "sparse-mla"

    def __init__(self, installer: SparseMlaInstaller = sparse_mla) -> None:
        self._installer = installer

    def preview(self, args: dict[str, Any], ctx: ActionContext) -> Preview:
        try:
            lines = self._installer.preview(runner=ctx.runner, python=ctx.python)
        except Exception as exc:  # the installer's own checks failing must not kill the walk
            return Preview(problem=f"the sparse MLA installer cannot plan: {exc}")
        return Preview(lines=[str(x) for x in lines] + [f"then launch vLLM with: {SPARSE_MLA_FLAG}"])

    def apply(self, args: dict[str, Any], ctx: ActionContext) -> ActionResult:
        try:
            got = self._installer.apply(runner=ctx.runner, python=ctx.python, recorder=ctx.recorder)
        except Exception as exc:  # report, do not crash the walk; the installer cleans up after itself
            return ActionResult(False, f"the sparse MLA install failed: {exc}")
        flag = got.launch_flag or SPARSE_MLA_FLAG
        facts: dict[str, Any] = {"sparse_mla": {"installed": got.ok, "launch_flag": flag}}
        message = got.message
        if got.ok:
            launch = dict(ctx.facts.get("launch_args") or {})
            name, _, value = flag.partition(" ")
            launch[name] = value or True
            facts["launch_args"] = launch
            message = (message or "installed the sparse MLA backend") + f"; launch vLLM with {flag}"
        return ActionResult(got.ok, message or "the sparse MLA install failed", facts)


def default_actions() -> dict[str, Action]:
    return {a.name: a for a in (SparseMla(), UpgradeVllm(), SetFlag(), SetEnv(), SavePatches())}
