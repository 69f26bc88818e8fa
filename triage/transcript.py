"""Transcripts: every change triage makes to a machine, recorded so it can be reviewed and undone.

One folder per applied playbook (or `triage apply ...`) under state_dir()/transcripts/<timestamp>-<id>/:

    meta.json       title, where, started, finished, outcome, undone
    journal.jsonl   one JSON object a line, in order: command (argv, where, exit status, output),
                    backup (a file copied aside before it changed, or noted as not existing yet),
                    change (what was changed and the argv that undoes it, if any)
    backups/        the copies themselves (fetched to this machine when the file was remote)

The recorder protocol, shared with `triage apply sparse-mla`:

    t = Transcript.start(title, where)
    t.command(argv, result, where)         # after running a command
    t.backup(path, runner) -> str | None   # BEFORE changing a file; None when it did not exist yet
    t.change(description, undo_argv)       # after a change; undo_argv None when it cannot be undone
    t.finish(outcome)

`undo_last()` reverts the newest transcript that changed something: restores backups, deletes files
that did not exist before, runs recorded undo commands, newest first, and says what it could not revert.

A damaged transcript (not UTF-8, not JSON, a journal line that is no entry) never stops the others: it
is listed as unreadable, and its unreadable entries are named as what cannot be reverted. One undo
runs at a time (a lock file beside the transcripts), and a transcript is marked as being undone before
anything runs, so a second `triage undo` or a crash half-way never runs its undo commands twice.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from triage.runner import LocalRunner, Result, Runner

OUTPUT_LIMIT = 256 * 1024  # characters of stdout/stderr kept per command
LOCAL = LocalRunner.where


def transcripts_dir() -> Path:
    from triage.paths import state_dir

    return state_dir() / "transcripts"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return s[:48] or "change"


def _clip(text: str) -> str:
    if len(text) <= OUTPUT_LIMIT:
        return text
    return text[:OUTPUT_LIMIT] + f"\n[... {len(text) - OUTPUT_LIMIT} more characters not kept]"


def is_local(runner: Any) -> bool:
    return isinstance(runner, LocalRunner) or getattr(runner, "where", None) == LOCAL


class UnreadableTranscript(ValueError):
    """A transcript folder whose meta.json cannot be read as a JSON object."""


class UndoBusy(RuntimeError):
    """Another undo holds the lock, or this transcript is already (being) undone."""


_ENTRY_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "command": {"argv": (list,)},
    "backup": {"path": (str,), "existed": (bool,), "backup": (str, type(None))},
    "change": {"description": (str,), "undo_argv": (list, type(None))},
    "note": {"text": (str,)},
}


def _valid_entry(e: Any) -> bool:
    if not isinstance(e, dict) or e.get("type") not in _ENTRY_FIELDS:
        return False
    if not isinstance(e.get("where", ""), str):
        return False
    for name, types in _ENTRY_FIELDS[e["type"]].items():
        if not isinstance(e.get(name), types):
            return False
    if e["type"] == "backup" and e["existed"] and not e["backup"]:
        return False
    for key in ("argv", "undo_argv"):
        if isinstance(e.get(key), list) and not all(isinstance(a, str) for a in e[key]):
            return False
    return True


class Transcript:
    def __init__(self, root: Path, meta: dict[str, Any]):
        self.root = root
        self.meta = meta
        self.unreadable_entries = 0  # journal lines that are no entry (set by entries())
        self._n = len(self.entries())

    # --- lifecycle ---

    @classmethod
    def start(cls, title: str, where: str, *, id: str | None = None) -> "Transcript":
        base = transcripts_dir()
        base.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"{time.time_ns() % 1_000_000_000 // 1000:06d}Z"
        root = base / f"{stamp}-{_slug(id or title)}"
        n = 1
        while root.exists():
            n += 1
            root = base / f"{stamp}-{_slug(id or title)}-{n}"
        (root / "backups").mkdir(parents=True)
        meta = {"title": title, "id": id, "where": where, "started": _now(), "finished": None, "outcome": None, "undone": None}
        t = cls(root, meta)
        t._write_meta()
        return t

    @classmethod
    def open(cls, root: str | Path) -> "Transcript":
        """UnreadableTranscript when meta.json is missing, not UTF-8, not JSON or not an object."""
        root = Path(root)
        try:
            meta = json.loads((root / "meta.json").read_bytes()[: 1 << 20].decode("utf-8"))
        except OSError as exc:
            raise UnreadableTranscript(f"meta.json: {exc.strerror or exc}") from None
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise UnreadableTranscript(f"meta.json: {type(exc).__name__}") from None
        if not isinstance(meta, dict):
            raise UnreadableTranscript("meta.json is not an object")
        return cls(root, meta)

    def finish(self, outcome: str | None) -> None:
        self.meta["finished"] = _now()
        self.meta["outcome"] = outcome
        self._write_meta()

    # --- recorder protocol ---

    def command(self, argv: list[str], result: Result, where: str) -> None:
        self._append(
            {
                "type": "command",
                "argv": [str(a) for a in argv],
                "where": where,
                "returncode": result.returncode,
                "timed_out": bool(result.timed_out),
                "stdout": _clip(result.stdout or ""),
                "stderr": _clip(result.stderr or ""),
            }
        )

    def backup(self, path: str, runner: Runner) -> str | None:
        """Copy `path` (on the runner's machine) into this transcript before it changes.

        Returns the backup's path here, or None when the file does not exist yet (then undo deletes
        it). Raises OSError when the file exists but cannot be read: the change must not go ahead.
        """
        where = getattr(runner, "where", LOCAL)
        n = self._n + 1
        if is_local(runner):
            src = Path(os.path.abspath(os.path.expanduser(path)))
            if not src.exists():
                self._append({"type": "backup", "path": str(src), "where": where, "existed": False, "backup": None})
                return None
            dest = self.root / "backups" / f"{n:03d}-{src.name}"
            shutil.copy2(src, dest)
            self._append({"type": "backup", "path": str(src), "where": where, "existed": True, "backup": str(dest)})
            return str(dest)
        res = runner.run(["cat", "--", path], timeout=60)
        if not res.ok:
            probe = runner.run(["test", "-e", path], timeout=30)
            if probe.returncode == 1:
                self._append({"type": "backup", "path": path, "where": where, "existed": False, "backup": None})
                return None
            raise OSError(f"cannot back up {path} on {where}: {(res.stderr or '').strip() or 'cat failed'}")
        dest = self.root / "backups" / f"{n:03d}-{Path(path).name}"
        dest.write_text(res.stdout, encoding="utf-8")
        self._append({"type": "backup", "path": path, "where": where, "existed": True, "backup": str(dest)})
        return str(dest)

    def change(self, description: str, undo_argv: list[str] | None, *, where: str | None = None) -> None:
        self._append(
            {
                "type": "change",
                "description": description,
                "undo_argv": [str(a) for a in undo_argv] if undo_argv else None,
                "where": where or self.meta.get("where") or LOCAL,
            }
        )

    def note(self, text: str) -> None:
        """Something worth keeping that is neither a command nor a change (a choice, a skipped step)."""
        self._append({"type": "note", "text": text})

    # --- reading ---

    def entries(self) -> list[dict[str, Any]]:
        """The journal's well-formed entries; the others are counted in unreadable_entries."""
        path = self.root / "journal.jsonl"
        try:
            data = path.read_bytes()
        except OSError:
            return []
        out = []
        bad = 0
        lines = data.decode("utf-8", "replace").splitlines()
        for i, line in enumerate(lines):
            if not line.strip():
                continue
            try:
                e = json.loads(line)
            except (ValueError, RecursionError):
                e = None
            if _valid_entry(e):
                out.append(e)
            elif i < len(lines) - 1 or line.rstrip().endswith("}"):
                bad += 1  # a torn last line after a crash is no loss; anything else is
        self.unreadable_entries = bad
        return out

    @property
    def changed_anything(self) -> bool:
        return any(e["type"] in ("backup", "change") for e in self.entries())

    def state(self) -> str:
        undone = self.meta.get("undone")
        if isinstance(undone, dict) and undone.get("state") == "in-progress":
            return "undo started, not finished"
        if undone:
            return "undone"
        return "changed things" if self.changed_anything else "no changes"

    # --- internals ---

    def _append(self, entry: dict[str, Any]) -> None:
        self._n += 1
        entry = {"n": self._n, "time": _now(), **entry}
        with open(self.root / "journal.jsonl", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")
            fh.flush()

    def _write_meta(self) -> None:
        tmp = self.root / "meta.json.tmp"
        tmp.write_text(json.dumps(self.meta, indent=2), encoding="utf-8")
        os.replace(tmp, self.root / "meta.json")


def scan_transcripts() -> tuple[list[Transcript], list[tuple[Path, str]]]:
    """(the readable transcripts, oldest first; the unreadable folders with the reason)."""
    base = transcripts_dir()
    try:
        dirs = sorted(d for d in base.iterdir() if d.is_dir())
    except OSError:
        return [], []
    out, bad = [], []
    for d in dirs:
        if not (d / "meta.json").exists() and not (d / "journal.jsonl").exists():
            continue
        try:
            out.append(Transcript.open(d))
        except UnreadableTranscript as exc:
            bad.append((d, str(exc)))
    return out, bad


def all_transcripts() -> list[Transcript]:
    return scan_transcripts()[0]


def last_transcript(*, undoable: bool = True) -> Transcript | None:
    """The newest transcript; with undoable=True, the newest that changed something and is not undone."""
    for t in reversed(all_transcripts()):
        if not undoable:
            return t
        if not t.meta.get("undone") and t.changed_anything:
            return t
    return None


# --- undo -------------------------------------------------------------------------------------


@dataclass
class UndoReport:
    transcript: Transcript | None
    reverted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    cannot: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failed


def default_runner_for(where: str) -> Runner:
    """The runner for a recorded `where`: this machine, or the SSH host of triage.remote."""
    if where == LOCAL:
        return LocalRunner()
    try:
        from triage.remote import SSHRunner  # asyncssh loads only for a remote host
    except ModuleNotFoundError as exc:
        if exc.name != "asyncssh":
            raise
        raise RuntimeError(f"cannot reach {where}: SSH needs the asyncssh package (pip install asyncssh)") from None
    return SSHRunner(where)


def _restore(entry: dict[str, Any], runner: Runner) -> str:
    path = entry["path"]
    if is_local(runner):
        if not entry["existed"]:
            if os.path.lexists(path):
                os.unlink(path)
                return f"removed {path} (it did not exist before)"
            return f"{path} is already gone"
        tmp = path + ".triage-restore"
        shutil.copy2(entry["backup"], tmp)
        os.replace(tmp, path)
        return f"restored {path}"
    if not entry["existed"]:
        res = runner.run(["rm", "-f", "--", path], timeout=60)
        if not res.ok:
            raise OSError(res.stderr.strip() or f"rm failed ({res.returncode})")
        return f"removed {path} on {runner.where} (it did not exist before)"
    content = Path(entry["backup"]).read_text(encoding="utf-8")
    res = runner.run(["sh", "-c", 'cat > "$1"', "sh", path], input=content, timeout=60)
    if not res.ok:
        raise OSError(res.stderr.strip() or f"write failed ({res.returncode})")
    return f"restored {path} on {runner.where}"


def undo(
    transcript: Transcript,
    *,
    runner_for: Callable[[str], Runner] = default_runner_for,
    timeout: float = 1800.0,
) -> UndoReport:
    with _undo_lock():
        try:
            fresh = Transcript.open(transcript.root)
        except UnreadableTranscript as exc:
            raise UndoBusy(f"{transcript.root.name} cannot be read now ({exc})") from None
        if fresh.meta.get("undone"):
            raise UndoBusy(f"{transcript.root.name} is already undone ({fresh.state()})")
        transcript.meta = fresh.meta
        # Marked before anything runs: a crash half-way, or a second undo, never runs these twice.
        transcript.meta["undone"] = {"state": "in-progress", "time": _now(), "pid": os.getpid()}
        transcript._write_meta()
        return _undo(transcript, runner_for, timeout)


class _undo_lock:
    """An exclusive, non-blocking lock on the transcripts folder for the length of one undo."""

    def __enter__(self) -> "_undo_lock":
        import fcntl

        base = transcripts_dir()
        base.mkdir(parents=True, exist_ok=True)
        self.fh = open(base / ".undo.lock", "a+")
        try:
            fcntl.flock(self.fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.fh.close()
            raise UndoBusy("another `triage undo` is running; try again when it has finished") from None
        return self

    def __exit__(self, *exc: Any) -> None:
        self.fh.close()  # closing releases the lock


def _undo(transcript: Transcript, runner_for: Callable[[str], Runner], timeout: float) -> UndoReport:
    report = UndoReport(transcript)
    runners: dict[str, Runner] = {}

    def get_runner(where: str) -> Runner:
        if where not in runners:
            runners[where] = runner_for(where)
        return runners[where]

    for entry in reversed(transcript.entries()):
        kind = entry.get("type")
        where = entry.get("where") or LOCAL
        try:
            if kind == "backup":
                report.reverted.append(_restore(entry, get_runner(where)))
            elif kind == "change":
                argv = entry.get("undo_argv")
                if not argv:
                    report.cannot.append(entry["description"])
                    continue
                res = get_runner(where).run(argv, timeout=timeout)
                if res.ok:
                    report.reverted.append(f"undid: {entry['description']} (ran {' '.join(argv)})")
                else:
                    tail = (res.stderr or res.stdout or "").strip().splitlines()[-1:] or [f"exit {res.returncode}"]
                    report.failed.append(f"could not undo: {entry['description']}: {' '.join(argv)} failed: {tail[0]}")
        except (OSError, RuntimeError) as exc:
            what = entry.get("path") or entry.get("description") or kind
            report.failed.append(f"could not revert {what}: {exc}")
    if transcript.unreadable_entries:
        report.cannot.append(f"{transcript.unreadable_entries} journal entr"
                             f"{'y' if transcript.unreadable_entries == 1 else 'ies'} of {transcript.root.name} "
                             "could not be read: check what they changed by hand")
    transcript.meta["undone"] = {
        "state": "done",
        "time": _now(),
        "reverted": report.reverted,
        "failed": report.failed,
        "cannot": report.cannot,
    }
    transcript._write_meta()
    return report


def undo_last(*, runner_for: Callable[[str], Runner] = default_runner_for) -> UndoReport:
    t = last_transcript()
    if t is None:
        return UndoReport(None)
    try:
        return undo(t, runner_for=runner_for)
    except UndoBusy as exc:
        return UndoReport(t, failed=[str(exc)])
