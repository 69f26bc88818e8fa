"""Equality and repr by fields for plain classes with __slots__ and an explicit __init__.

The records between stages are dataclasses (triage.model, triage.environment); a few classes
inside the intake and upstream stages still use this base.
"""

from __future__ import annotations


class Record:
    __slots__ = ()
    _fields: tuple[str, ...] = ()  # compared and shown, in constructor order

    def _astuple(self) -> tuple:
        return tuple(getattr(self, k) for k in self._fields)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._astuple() == other._astuple()  # type: ignore[attr-defined]

    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass with eq=True

    def __repr__(self) -> str:
        return f"{type(self).__qualname__}(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields) + ")"
