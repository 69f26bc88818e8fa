"""ast.literal_eval for the literals vLLM prints, without importing ast.

`non-default args: {...}` and `args: Namespace(...)` lines hold reprs of dicts, lists, tuples,
strings, numbers, True/False/None. Importing ast costs more start-up than reading a small log
(start-up is part of the product), so those are parsed here; anything else (escapes in strings, other names, sets, odd
spacing, ...) goes to ast.literal_eval itself. What this returns is exactly what literal_eval
returns for the same text: it accepts only a strict subset of Python's literal syntax.
"""

from __future__ import annotations

_DIGITS = frozenset("0123456789")
_MAX_DEPTH = 50  # Python's parser refuses deep nesting; leave that to it
_NAMES = {"True": True, "False": False, "None": None}
_CLOSE = {"[": "]", "(": ")", "{": "}"}


class _Unsupported(Exception):
    pass


def literal_eval(text: str):
    """Same result as ast.literal_eval(text) (which raises the same errors where it fails)."""
    try:
        p = _Parser(text)
        value = p.value()
        p.skip()
        if p.i != p.n:
            raise _Unsupported
        return value
    except (_Unsupported, RecursionError, TypeError, ValueError):
        import ast

        return ast.literal_eval(text)


class _Parser:
    __slots__ = ("s", "i", "n", "depth")

    def __init__(self, s: str) -> None:
        self.s = s
        self.i = 0
        self.n = len(s)
        self.depth = 0

    def skip(self) -> None:
        s, i, n = self.s, self.i, self.n
        while i < n and s[i] == " ":
            i += 1
        self.i = i

    def value(self):
        self.skip()
        s, i = self.s, self.i
        if i >= self.n:
            raise _Unsupported
        c = s[i]
        if c == "'" or c == '"':
            end = s.find(c, i + 1)
            if end < 0:
                raise _Unsupported
            body = s[i + 1:end]
            if "\\" in body or not body.isprintable() and any(ch < " " for ch in body):
                raise _Unsupported  # escapes, control characters: leave them to Python
            self.i = end + 1
            return body
        if c in "[({":
            return self.container(c)
        if c in _DIGITS or c == "-":
            return self.number()
        j = i
        while j < self.n and (s[j].isascii() and (s[j].isalnum() or s[j] == "_")):
            j += 1
        word = s[i:j]
        if word in _NAMES:
            self.i = j
            return _NAMES[word]
        raise _Unsupported

    def number(self):
        s, i, n = self.s, self.i, self.n
        j = i + 1 if s[i] == "-" else i
        start = j
        while j < n and (s[j] in _DIGITS or s[j] == "."):
            j += 1
        if j < n and s[j] in "eE":
            j += 1
            if j < n and s[j] in "+-":
                j += 1
            k = j
            while j < n and s[j] in _DIGITS:
                j += 1
            if j == k:
                raise _Unsupported
        tok = s[start:j]
        if not tok or tok[0] not in _DIGITS or (j < n and (s[j].isalnum() or s[j] in "_.'\"")):
            raise _Unsupported  # .5, 1_000, 1j, 0x1f, a name glued on: leave them to Python
        if tok.count(".") > 1:
            raise _Unsupported
        self.i = j
        sign = -1 if s[i] == "-" else 1
        if "." in tok or "e" in tok or "E" in tok:
            return sign * float(tok)
        if len(tok) > 1 and tok[0] == "0":
            raise _Unsupported  # 012 is a syntax error; 00 is zero: let Python say which
        return sign * int(tok)

    def container(self, open_: str):
        close = _CLOSE[open_]
        self.depth += 1
        if self.depth > _MAX_DEPTH:
            raise _Unsupported
        self.i += 1
        items: list = []
        keys: list = []
        comma = False
        while True:
            self.skip()
            if self.i < self.n and self.s[self.i] == close:
                self.i += 1
                break
            if items and not comma:
                raise _Unsupported
            v = self.value()
            if open_ == "{":
                self.skip()
                if self.i >= self.n or self.s[self.i] != ":":
                    raise _Unsupported  # a set, or not a literal
                self.i += 1
                keys.append(v)
                v = self.value()
            items.append(v)
            self.skip()
            comma = self.i < self.n and self.s[self.i] == ","
            if comma:
                self.i += 1
            elif self.i >= self.n or self.s[self.i] != close:
                raise _Unsupported
        self.depth -= 1
        if open_ == "[":
            return items
        if open_ == "{":
            return dict(zip(keys, items))
        if len(items) == 1 and not comma:
            return items[0]  # (x) is x, not a tuple
        return tuple(items)
