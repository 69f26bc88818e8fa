"""Whether triage may run an interpreter the user named (`--python`, a confirmed playbook step).

Nothing a log or a snapshot names is ever run; an interpreter the user named still is not when
someone else could have put it there: a file or directory on its path that another user owns or
anyone may write, or anything under /proc (`/proc/PID/cwd/...` reaches another process's files).
"""

from __future__ import annotations

import os
import stat

TRUSTED_OWNERS = (0,)


def _path_of(python: str) -> str | None:
    if os.sep in python:
        return os.path.abspath(os.path.expanduser(python))
    import shutil  # here: the headless report imports this module, and shutil brings bz2, lzma, fnmatch

    return shutil.which(python)


def _component_problem(path: str, uid: int, *, leaf: bool) -> str | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None  # a missing file fails later with its own message
    if st.st_uid not in (uid, *TRUSTED_OWNERS):
        return f"{path} belongs to another user (uid {st.st_uid})"
    if stat.S_ISLNK(st.st_mode):
        return None
    if st.st_mode & stat.S_IWOTH and not (not leaf and st.st_mode & stat.S_ISVTX):
        return f"{path} is writable by every user"
    return None


def refuse_reason(python: str) -> str | None:
    """Why `python` must not run (one line for people), or None when it may."""
    path = _path_of(python)
    if path is None:
        return None
    real = os.path.realpath(path)
    for p in (path, real):
        if p == "/proc" or p.startswith("/proc/"):
            return f"refusing to run {python}: it is under /proc"
    uid = os.geteuid()
    for p in dict.fromkeys((path, real)):
        probs = [_component_problem(p, uid, leaf=True)]
        d = os.path.dirname(p)
        while True:
            probs.append(_component_problem(d, uid, leaf=False))
            parent = os.path.dirname(d)
            if parent == d:
                break
            d = parent
        bad = next((x for x in probs if x), None)
        if bad:
            return f"refusing to run {python}: {bad}"
    return None


def is_own(python: str | None) -> bool:
    """Whether `python` is the interpreter triage itself runs in."""
    import sys

    if not python:
        return False
    path = _path_of(python)
    return path is not None and os.path.abspath(path) == os.path.abspath(sys.executable)


def runnable_python(env: dict | None, user_python: str | None = None) -> str | None:
    """The interpreter triage may run for the environment in `env` without asking: the user's, or one
    a probe ran here or on the host. None for one a log or a snapshot only names."""
    if user_python:
        return user_python
    py = (env or {}).get("python")
    if isinstance(py, dict) and py.get("read_from") == "interpreter" and py.get("executable"):
        return str(py["executable"])
    return None
