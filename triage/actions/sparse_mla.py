"""Install the bundled sparse MLA backend (package triage_sparse_mla) into the Python environment
that runs vLLM, as a vLLM plugin: `triage apply sparse-mla`.

Steps (every one an argv list run through a Runner, here or over SSH):
  check    read-only: the target Python's vLLM / torch / triton / pip versions
  plan     the exact commands, shown before anything changes
  install  the wheel is built here (pure Python, written with zipfile: no network, no build
           backend), sent to the target over the runner's stdin, installed with
           `pip install --no-deps --no-index`
  verify   through vLLM in the target environment (triage_sparse_mla.vllm_check): its loader, registry,
           MLA layer and selector take the backend for the model's dimensions; then, on a GPU, a
           kernel self-test against the reference. A failed check undoes the install at once.
Recorded for undo through a recorder (triage.transcript.Transcript): uninstall, or reinstall the
version that was there before (saved as a wheel on the target first).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import secrets
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from triage.runner import LocalRunner, Result, Runner

DIST = "triage-sparse-mla"
PKG = "triage_sparse_mla"
ENTRY_GROUP = "vllm.general_plugins"
ENTRY_NAME = "triage_sparse_mla"
ENTRY_VALUE = "triage_sparse_mla.plugin:register"
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed: the same sources give the same wheel bytes


@dataclass(frozen=True)
class InstallResult:
    ok: bool
    message: str
    launch_flag: str | None = None  # the `vllm serve` flag that selects the installed backend


class Recorder(Protocol):
    def command(self, argv: list[str], result: Result, where: str) -> None: ...
    def backup(self, path: str, runner: Runner) -> str | None: ...
    def change(self, description: str, undo_argv: list[str] | None) -> None: ...


# --------------------------------------------------------------------------- the wheel


def _package_dir() -> Path:
    spec = importlib.util.find_spec(PKG)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"cannot find the {PKG} package next to triage")
    return Path(list(spec.submodule_search_locations)[0])


def package_version() -> str:
    text = (_package_dir() / "__init__.py").read_text(encoding="utf-8")
    for line in text.splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise ValueError(f"{PKG}/__init__.py has no __version__")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(dest_dir: str | Path, files: dict[str, bytes], name: str, version: str,
                summary: str = "", requires_python: str = ">=3.10",
                entry_points: dict[str, dict[str, str]] | None = None) -> Path:
    """A pure-Python wheel (py3-none-any) is a zip with a .dist-info holding METADATA, WHEEL,
    entry_points.txt and RECORD. `files` maps archive paths to contents."""
    norm = name.replace("-", "_")
    di = f"{norm}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if summary:
        meta.append(f"Summary: {summary}")
    meta.append(f"Requires-Python: {requires_python}")
    extra = {
        f"{di}/METADATA": ("\n".join(meta) + "\n").encode(),
        f"{di}/WHEEL": b"Wheel-Version: 1.0\nGenerator: triage\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    if entry_points:
        text = "".join(f"[{g}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n"
                       for g, eps in entry_points.items())
        extra[f"{di}/entry_points.txt"] = text.encode()
    allfiles = {**files, **extra}
    record = "\n".join(_record_line(n, d) for n, d in sorted(allfiles.items())) + f"\n{di}/RECORD,,\n"
    dest = Path(dest_dir) / f"{norm}-{version}-py3-none-any.whl"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in sorted(allfiles.items()) + [(f"{di}/RECORD", record.encode())]:
            info = zipfile.ZipInfo(n, date_time=ZIP_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, d)
    return dest


def build_plugin_wheel(dest_dir: str | Path) -> Path:
    """The wheel of triage_sparse_mla alone, with its vLLM plugin entry point."""
    src = _package_dir()
    files = {}
    for path in sorted(src.iterdir()):
        if path.is_file() and path.suffix in (".py", ".md"):
            files[f"{PKG}/{path.name}"] = path.read_bytes()
    if f"{PKG}/plugin.py" not in files:
        raise FileNotFoundError(f"{src} has no plugin.py")
    return write_wheel(dest_dir, files, DIST, package_version(),
                       summary="Triton sparse MLA (DSA) attention backend for vLLM, bundled by triage",
                       entry_points={ENTRY_GROUP: {ENTRY_NAME: ENTRY_VALUE}})


# --------------------------------------------------------------------------- target-side scripts
# Small, fixed programs run with `<python> -c`; their arguments come after them on the argv.

CHECK_SCRIPT = r"""
import json, os, sys, importlib.util
from importlib import metadata
def ver(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
home = os.environ.get("TRIAGE_HOME")
state = os.path.join(home, "state") if home else os.path.join(
    os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state"), "triage")
print(json.dumps({"python": "%d.%d.%d" % sys.version_info[:3], "executable": sys.executable,
    "vllm": ver("vllm"), "torch": ver("torch"), "triton": ver("triton"),
    "installed": ver("triage-sparse-mla"), "pip": importlib.util.find_spec("pip") is not None,
    "state_dir": state, "vllm_plugins_env": os.environ.get("VLLM_PLUGINS")}))
"""

MKDIR_SCRIPT = "import os, sys; os.makedirs(sys.argv[1], mode=0o700)"
WRITE_SCRIPT = (
    "import base64, sys; data = base64.b64decode(sys.stdin.read()); "
    "open(sys.argv[1], 'wb').write(data); print(len(data))"
)
RMTREE_SCRIPT = "import shutil, sys; shutil.rmtree(sys.argv[1], ignore_errors=True)"

# Repack the installed triage-sparse-mla into a wheel (to reinstall it on undo).
SAVE_OLD_SCRIPT = r"""
import base64, hashlib, os, sys, zipfile
from importlib import metadata
dist = metadata.distribution("triage-sparse-mla")
dest = sys.argv[1]
os.makedirs(os.path.dirname(dest), exist_ok=True)
skip = ("INSTALLER", "RECORD", "REQUESTED", "direct_url.json")
entries = []
with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
    for f in dist.files or []:
        name = str(f).replace(os.sep, "/")
        if name.endswith(".pyc") or "__pycache__" in name or name.startswith(".."):
            continue
        if ".dist-info/" in name and name.rsplit("/", 1)[1] in skip:
            continue
        data = f.locate().read_bytes()
        zf.writestr(name, data)
        h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        entries.append("%s,sha256=%s,%d" % (name, h, len(data)))
    di = [e.split(",")[0].split("/")[0] for e in entries if ".dist-info/" in e][0]
    zf.writestr(di + "/RECORD", "\n".join(entries) + "\n" + di + "/RECORD,,\n")
print(dest)
"""

# After installing: vLLM itself loads the plugin, resolves the class through its registry, builds
# the impl through its MLA layer with the model's dimensions, asks block sizes and the KV cache
# shape as its engine does, and runs its selector (triage_sparse_mla/vllm_check.py), in a fresh
# interpreter of the target environment. Then, on a GPU, the kernel against the reference.
VLLM_CHECK_MODULE = "triage_sparse_mla.vllm_check"
SELFTEST_MODULE = "triage_sparse_mla.selftest"
CHECK_MARK = "TRIAGE-VLLM-CHECK "


# --------------------------------------------------------------------------- the action


class ApplyError(Exception):
    """A reason to stop, in one line for the user."""


@dataclass
class Step:
    what: str
    argv: list[str]
    input: str | None = None
    timeout: float = 300.0
    verify: bool = False  # a check after installing: its failure undoes the install


@dataclass
class Facts:
    python: str
    executable: str
    vllm: str | None
    torch: str | None
    triton: str | None
    installed: str | None
    pip: bool
    state_dir: str
    vllm_plugins_env: str | None = None

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Facts":
        return cls(**{k: data.get(k) for k in cls.__dataclass_fields__})  # type: ignore[arg-type]  # JSON the check script wrote


def check_target(runner: Runner, python: str) -> Facts:
    """Read-only look at the target environment; raises ApplyError when the plugin cannot go there."""
    res = runner.run([python, "-c", CHECK_SCRIPT], timeout=120)
    if not res.ok:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
        raise ApplyError(f"cannot run {python} on {runner.where}: {tail[0]}")
    try:
        facts = Facts.from_json(json.loads(res.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError) as exc:
        raise ApplyError(f"unexpected answer from {python}: {exc}") from None
    return facts


def refusal(facts: Facts) -> str | None:
    """Why the plugin must not be installed into this environment, or None."""
    from triage_sparse_mla.support import SUPPORTED_VLLM, vllm_supported

    major_minor = tuple(int(x) for x in facts.python.split(".")[:2])
    if major_minor < (3, 10):
        return f"{facts.executable} is Python {facts.python}; triage_sparse_mla needs 3.10 or newer"
    if not facts.pip:
        return f"{facts.executable} has no pip module to install with"
    if facts.vllm is None:
        return f"vLLM is not installed in {facts.executable}: pass --python with the interpreter that runs vLLM"
    ok, reason = vllm_supported(facts.vllm)
    if not ok:
        return reason + f" (supported {SUPPORTED_VLLM})"
    missing = [n for n in ("torch", "triton") if getattr(facts, n) is None]
    if missing:
        return f"{' and '.join(missing)} missing in {facts.executable}: the kernel needs both"
    return None


@dataclass
class Plan:
    python: str
    facts: Facts
    wheel: Path
    version: str
    tmpdir: str
    steps: list[Step] = field(default_factory=list)
    saved_old: str | None = None  # where the previous version's wheel will be kept

    @property
    def undo_argv(self) -> list[str]:
        if self.saved_old:
            return [self.python, "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
                    "--disable-pip-version-check", self.saved_old]
        return [self.python, "-m", "pip", "uninstall", "-y", DIST]


@dataclass
class ModelDims:
    """The attention shape vLLM's check builds the impl with (DeepSeek-V3.2 / GLM-5 by default)."""

    heads: int = 128
    topk: int = 2048


def make_plan(runner: Runner, python: str, facts: Facts, wheel: Path, *, remote_tmp: str | None = None,
              selftest: bool = True, dims: ModelDims | None = None) -> Plan:
    dims = dims or ModelDims()
    version = package_version()
    base = remote_tmp or (tempfile.gettempdir() if isinstance(runner, LocalRunner) else "/tmp")
    tmpdir = f"{base.rstrip('/')}/triage-sparse-mla-{secrets.token_hex(4)}"
    target_wheel = f"{tmpdir}/{wheel.name}"
    plan = Plan(python, facts, wheel, version, tmpdir)
    payload = base64.b64encode(wheel.read_bytes()).decode()
    plan.steps.append(Step(f"make a private temporary folder on {runner.where}", [python, "-c", MKDIR_SCRIPT, tmpdir]))
    plan.steps.append(Step(f"copy {wheel.name} ({wheel.stat().st_size} bytes) into it",
                           [python, "-c", WRITE_SCRIPT, target_wheel], input=payload))
    if facts.installed:
        plan.saved_old = (f"{facts.state_dir}/sparse-mla-wheels/{secrets.token_hex(4)}/"
                          f"{PKG}-{facts.installed}-py3-none-any.whl")
        plan.steps.append(Step(f"save the installed {DIST} {facts.installed} as a wheel (for undo)",
                               [python, "-c", SAVE_OLD_SCRIPT, plan.saved_old]))
    plan.steps.append(Step(f"install {DIST} {version} (no dependencies, no index)",
                           [python, "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
                            "--disable-pip-version-check", target_wheel], timeout=600))
    plan.steps.append(Step("verify through vLLM: plugin loader, registry, the MLA layer building the impl "
                           f"({dims.heads} heads, top-k {dims.topk}), KV cache shape, block sizes, selector",
                           [python, "-m", VLLM_CHECK_MODULE, "--heads", str(dims.heads), "--topk", str(dims.topk)],
                           timeout=900, verify=True))
    if selftest:
        plan.steps.append(Step("verify the kernel against the reference on the GPU (skipped without one)",
                               [python, "-m", SELFTEST_MODULE], timeout=900, verify=True))
    plan.steps.append(Step("remove the temporary folder", [python, "-c", RMTREE_SCRIPT, tmpdir]))
    return plan


@dataclass
class Outcome:
    ok: bool
    lines: list[str]
    checks: dict[str, Any] | None = None


def execute(plan: Plan, runner: Runner, recorder: Recorder, say: Callable[[str], None] = print) -> Outcome:
    """Run the plan's steps in order; stop at the first failure. Records every command, and the
    install as a change with its undo. A failed check after installing undoes the install at once
    (uninstall, or reinstall the previous version) and says which check failed."""
    from triage_sparse_mla.support import LAUNCH_FLAG, indexer_note

    installed = False
    checks: dict[str, Any] | None = None
    selftest: dict[str, Any] | None = None
    failed: list[str] = []
    for step in plan.steps:
        if failed and step.argv[2:3] != [RMTREE_SCRIPT]:
            continue  # after a failed check only the cleanup runs
        say(f"- {step.what}")
        res = runner.run(step.argv, timeout=step.timeout, input=step.input)
        recorder.command(_shown(step), res, runner.where)
        if step.argv[1:3] == ["-m", "pip"] and "install" in step.argv and res.ok:
            installed = True
            recorder.change(f"installed {DIST} {plan.version} into {plan.facts.executable}", plan.undo_argv)
        if step.verify:
            if step.argv[2:3] == [VLLM_CHECK_MODULE]:
                checks = _parse_mark(res, CHECK_MARK)
                failed += _failed_checks(checks, res)
            else:
                selftest = _parse_selftest(res)
                if selftest.get("ok") is False:
                    failed.append(f"kernel self-test on the GPU: {json.dumps(selftest)[:300]}")
            continue
        if not res.ok:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
            if step.argv[2:3] != [RMTREE_SCRIPT]:
                runner.run([plan.python, "-c", RMTREE_SCRIPT, plan.tmpdir], timeout=60)
            return Outcome(False, [f"step failed: {step.what}: {tail[0]}"])
    if failed:
        lines = [f"check failed: {f}" for f in failed]
        if installed:
            lines.append(_undo_now(plan, runner, recorder, say))
        return Outcome(False, lines, checks)
    lines = []
    st = selftest or {}
    if st.get("ok") is True:
        lines.append(f"kernel self-test on {st.get('gpu')} passed ({len(st.get('cases', []))} cases)")
    elif st:
        lines.append(f"kernel self-test skipped: {st.get('reason', 'no GPU')}")
    n = len((checks or {}).get("checks", {}))
    lines.append(f"installed {DIST} {plan.version}; vLLM {plan.facts.vllm} loaded it, selected it and built it "
                 f"({n} checks passed)")
    lines.append(f"add this flag to your vllm serve command: {LAUNCH_FLAG}")
    env = plan.facts.vllm_plugins_env
    if env is not None and ENTRY_NAME not in env.split(","):
        lines.append(f"VLLM_PLUGINS is set ({env!r}): add {ENTRY_NAME} to it or the plugin is not loaded")
    cap = st.get("capability")
    note = indexer_note(tuple(cap) if cap else None)
    if note:
        lines.append(note)
    return Outcome(True, lines, checks)


def _failed_checks(checks: dict[str, Any] | None, res: Result) -> list[str]:
    if checks is None:
        tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
        return [f"vLLM check printed no result: {tail[0][:300]}"]
    bad = [f"{name}: {c.get('detail')}" for name, c in checks.get("checks", {}).items() if not c.get("ok")]
    if not bad and not res.ok:
        bad = [f"vLLM check exited {res.returncode}"]
    return bad[:1] + ([f"({len(bad) - 1} later checks failed too)"] if len(bad) > 1 else [])


def _undo_now(plan: Plan, runner: Runner, recorder: Recorder, say: Callable[[str], None]) -> str:
    say("- undo the install: " + " ".join(_quote(a) for a in plan.undo_argv))
    res = runner.run(plan.undo_argv, timeout=600)
    recorder.command(plan.undo_argv, res, runner.where)
    note = getattr(recorder, "note", None)
    what = f"reinstalled {DIST} {plan.facts.installed}" if plan.saved_old else f"removed {DIST}"
    if res.ok:
        if callable(note):
            note(f"the checks failed, so the install was undone at once ({what})")
        return f"the install was undone: {what}; nothing else was changed"
    tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
    return f"undoing the install failed ({tail[0]}): run triage apply --undo"


def _shown(step: Step) -> list[str]:
    """The argv as recorded and displayed: scripts shortened to their first line."""
    out = []
    for a in step.argv:
        if "\n" in a.strip() or len(a) > 120:
            first = a.strip().splitlines()[0]
            out.append(f"<script: {first[:60]}...>")
        else:
            out.append(a)
    return out


def show_plan(plan: Plan) -> list[str]:
    f = plan.facts
    have = lambda v: v or "not installed"  # noqa: E731
    lines = [f"target: {f.executable} (Python {f.python}; vLLM {have(f.vllm)}, torch {have(f.torch)}, "
             f"triton {have(f.triton)})"]
    if plan.facts.installed:
        lines.append(f"{DIST} {plan.facts.installed} is installed there now; undo will reinstall it")
    for i, step in enumerate(plan.steps, 1):
        lines.append(f"{i}. {step.what}")
        lines.append("   $ " + " ".join(_quote(a) for a in _shown(step)) + (" < wheel (base64)" if step.input else ""))
    lines.append("undo: $ " + " ".join(_quote(a) for a in plan.undo_argv))
    return lines


def _quote(arg: str) -> str:
    import shlex

    return arg if arg.startswith("<script") else shlex.quote(arg)


def _parse_mark(res: Result, mark: str) -> dict[str, Any] | None:
    for line in reversed(res.stdout.splitlines()):
        if line.startswith(mark):
            try:
                return json.loads(line[len(mark):])
            except ValueError:
                return None
    return None


def _parse_selftest(res: Result) -> dict[str, Any]:
    """selftest prints one JSON line; exit 3 = no GPU (nothing checked)."""
    for line in reversed(res.stdout.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
    return {"ok": False, "reason": tail[0][:300]}


# ---- the two calls the playbook engine makes (triage.playbooks.actions.SparseMla) --------------

def checked(runner: Runner, python: str) -> Facts:
    facts = check_target(runner, python)
    why_not = refusal(facts)
    if why_not:
        raise ApplyError(why_not)
    return facts


def preview(*, runner: Runner, python: str) -> list[str]:
    """The exact plan, in words and commands, without changing anything."""
    facts = checked(runner, python)
    with tempfile.TemporaryDirectory(prefix="triage-wheel-") as tmp:
        return show_plan(make_plan(runner, python, facts, build_plugin_wheel(tmp)))


def apply(*, runner: Runner, python: str, recorder: Recorder, dry_run: bool = False,
          say: Callable[[str], None] = print) -> InstallResult:
    """Check, build, install, verify; the confirmation was asked by the caller."""
    from triage_sparse_mla.support import LAUNCH_FLAG

    try:
        facts = checked(runner, python)
    except ApplyError as exc:
        return InstallResult(False, str(exc))
    with tempfile.TemporaryDirectory(prefix="triage-wheel-") as tmp:
        plan = make_plan(runner, python, facts, build_plugin_wheel(tmp))
        if dry_run:
            return InstallResult(True, "\n".join(show_plan(plan)), LAUNCH_FLAG)
        outcome = execute(plan, runner, recorder, say)
    return InstallResult(outcome.ok, "; ".join(outcome.lines), LAUNCH_FLAG)
