"""Regular expressions compiled on first use.

Start-up is part of the product (`triage --json` runs in CI loops and on every failed launch):
compiling every module's patterns at import costs more than diagnosing a small log, and most
patterns never meet a line that needs them.

A pattern may also name `needles`: literals of which every match contains at least one. A text
that contains none of them cannot match, so it is answered without compiling (or running) the
regex. needles=AUTO derives them from the pattern on first use (triage.regexlit). For a
case-insensitive pattern the needles are lower case and compared with the lowered text, and only
for ASCII text (Unicode case folding has surprises such as the Kelvin sign).
"""

from __future__ import annotations

import re

from typing import Any


AUTO = "auto"


class LazyPattern:
    __slots__ = ("pattern", "flags", "_needles", "_fold", "_rx")

    def __init__(self, pattern: str | bytes, flags: int = 0, needles: tuple | str = ()) -> None:
        self.pattern = pattern
        self.flags = flags
        self._needles = needles if needles == AUTO else tuple(needles)
        prefix = pattern[:4]
        self._fold = bool(flags & re.IGNORECASE) or prefix in ("(?i)", b"(?i)")
        self._rx: re.Pattern | None = None

    @property
    def needles(self) -> tuple:
        n = self._needles
        if n == AUTO:
            n = self._needles = self._derive_needles()
        return n  # type: ignore[return-value]

    @needles.setter
    def needles(self, value: tuple) -> None:
        self._needles = tuple(value)

    def _derive_needles(self) -> tuple:
        p = self.pattern
        if not isinstance(p, str) or self.flags & re.VERBOSE:
            return ()  # verbose patterns: whitespace and comments are not literals
        from triage.regexlit import best_clause, derived

        best = best_clause(list(derived(p)[1])) or ()
        if self._fold:
            if not all(x.isascii() for x in best):
                return ()  # a non-ASCII letter may fold to an ASCII one (K, the Kelvin sign)
            best = tuple(dict.fromkeys(x.lower() for x in best))
        return best

    def compiled(self) -> re.Pattern:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.pattern, self.flags)
        return rx

    def cannot_match(self, text: Any) -> bool:
        """True when `text` holds none of the needles (so no match is possible)."""
        needles = self.needles
        if not needles or not isinstance(text, (str, bytes)):
            return False
        if self._fold:
            if not text.isascii():
                return False
            text = text.lower()
        for n in needles:
            if n in text:
                return False
        return True

    def search(self, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return None
        return self.compiled().search(string, *args, **kw)

    def match(self, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return None
        return self.compiled().match(string, *args, **kw)

    def fullmatch(self, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return None
        return self.compiled().fullmatch(string, *args, **kw)

    def finditer(self, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return iter(())
        return self.compiled().finditer(string, *args, **kw)

    def findall(self, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return []
        return self.compiled().findall(string, *args, **kw)

    def sub(self, repl: Any, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return string
        return self.compiled().sub(repl, string, *args, **kw)

    def subn(self, repl: Any, string: Any, *args: Any, **kw: Any) -> Any:
        if self._needles and self.cannot_match(string):
            return string, 0
        return self.compiled().subn(repl, string, *args, **kw)

    def split(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().split(*args, **kw)

    def __getattr__(self, name: str) -> Any:  # groupindex, groups, ...
        return getattr(self.compiled(), name)


def lazy(pattern: str | bytes, flags: int = 0, needles: tuple | str = ()) -> LazyPattern:
    return LazyPattern(pattern, flags, needles)
