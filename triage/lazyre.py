"""Regular expressions compiled on first use.

Start-up is part of the product (`triage --json` runs in CI loops and on every failed launch):
compiling every module's patterns at import costs more than diagnosing a small log, and most
patterns never meet a line that needs them.
"""

from __future__ import annotations

import re
from typing import Any


class LazyPattern:
    __slots__ = ("pattern", "flags", "_rx")

    def __init__(self, pattern: str | bytes, flags: int = 0) -> None:
        self.pattern = pattern
        self.flags = flags
        self._rx: re.Pattern | None = None

    def compiled(self) -> re.Pattern:
        rx = self._rx
        if rx is None:
            rx = self._rx = re.compile(self.pattern, self.flags)
        return rx

    def search(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().search(*args, **kw)

    def match(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().match(*args, **kw)

    def fullmatch(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().fullmatch(*args, **kw)

    def finditer(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().finditer(*args, **kw)

    def findall(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().findall(*args, **kw)

    def sub(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().sub(*args, **kw)

    def subn(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().subn(*args, **kw)

    def split(self, *args: Any, **kw: Any) -> Any:
        return self.compiled().split(*args, **kw)

    def __getattr__(self, name: str) -> Any:  # groupindex, groups, ...
        return getattr(self.compiled(), name)


def lazy(pattern: str | bytes, flags: int = 0) -> LazyPattern:
    return LazyPattern(pattern, flags)
