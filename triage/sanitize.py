"""One cleaner for every string from outside (a log, a snapshot, a remote host's output, GitHub) before
it reaches rich, Textual, the JSON writer or a terminal.

A terminal obeys what it is sent: ESC sequences (OSC 52 writes the clipboard, OSC 0 the window title,
CSI moves the cursor or hides text) and their one-byte C1 forms (U+009B CSI, U+009D OSC, ...). `clean`
removes whole ESC sequences, every other C0 control but tab and newline, DEL and C1; `markup` also
escapes rich markup, for strings interpolated into a markup template.
"""

from __future__ import annotations

import re
from typing import Any

# ESC [ ... final (CSI), ESC ] ... BEL/ST (OSC), ESC P/X/^/_ ... ST (DCS, SOS, PM, APC), ESC + one byte.
_ESC_SEQ = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]?"
    r"|[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[ -/]*[0-~]?)"
)
# The C1 string introducers (DCS, SOS, OSC, PM, APC) swallow their payload up to ST or BEL.
_C1_STRING = re.compile(r"\x9b[0-?]*[ -/]*[@-~]?|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x9c)?")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SUSPECT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(s: str) -> str:
    """`s` without terminal control: ESC sequences, C0 but tab/newline, DEL, C1."""
    if not _SUSPECT.search(s):
        return s
    s = _ESC_SEQ.sub("", s)
    s = _C1_STRING.sub("", s)
    return _CONTROL.sub("", s)


def markup(value: Any) -> str:
    """A value for a rich markup template: cleaned, its `[` escaped."""
    from rich.markup import escape

    return escape(clean(str(value)))


def clean_tree(obj: Any, _depth: int = 0) -> Any:
    """`obj` with every string in it (dict keys too) cleaned; dicts and lists are rebuilt."""
    if isinstance(obj, str):
        return clean(obj)
    if _depth > 64:
        return obj
    if isinstance(obj, dict):
        return {clean_tree(k, _depth + 1): clean_tree(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(clean_tree(v, _depth + 1) for v in obj)
    return obj


def _attributes(o: Any) -> list[str]:
    names = list(getattr(o, "__dict__", {}) or {})
    for cls in type(o).__mro__:
        slots = getattr(cls, "__slots__", ())
        names += [slots] if isinstance(slots, str) else [n for n in slots if n not in ("__dict__", "__weakref__")]
    return list(dict.fromkeys(names))


def clean_object(obj: Any) -> Any:
    """Clean, in place, every string reachable from one of triage's own objects (a Report, its
    diagnoses and evidence) through attributes, dicts and lists. Returns obj."""
    seen: set[int] = set()

    def ours(o: Any) -> bool:
        return type(o).__module__.startswith("triage.") and not isinstance(o, type)

    def walk(o: Any, depth: int) -> Any:
        if isinstance(o, str):
            return clean(o)
        if depth > 64:
            return o
        if isinstance(o, dict):
            return {walk(k, depth + 1): walk(v, depth + 1) for k, v in o.items()}
        if isinstance(o, (list, tuple)):
            return type(o)(walk(v, depth + 1) for v in o)
        if ours(o) and id(o) not in seen:
            seen.add(id(o))
            for name in _attributes(o):
                try:
                    value = getattr(o, name)
                except AttributeError:
                    continue
                new = walk(value, depth + 1)
                if new is not value:
                    try:
                        setattr(o, name, new)
                    except (AttributeError, TypeError):  # a frozen record: cleaned for display all the same
                        object.__setattr__(o, name, new)
        return o

    return walk(obj, 0)

