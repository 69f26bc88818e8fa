"""Messages quoted inside other text: the forms people paste into a ticket.

- A message printed as a Python tuple of string pieces: `raise ValueError("a ", "b")` (a stray comma
  between the pieces of one message) prints `ValueError: ('a ', 'b')`; the pieces are joined back.
- A message inside an HTTP error body: vLLM's `{"object":"error","message":"..."}`, the newer
  `{"error": {"message": ...}}`, FastAPI's `{"detail": "..."}` or `{"detail": [{"msg": ...}]}`, the
  OpenAI client's dict repr `{'object': 'error', 'message': "..."}`; quotes escaped, line breaks as
  `\\n`. The message is decoded and split into its lines (often a whole traceback).
- A traceback quoted as one string with `\\n` escapes.
- A log kept by Docker's json-file driver (`{"log":"INFO ...\\n","stream":"stderr","time":...}`).
- An exception quoted in prose or a list item, between backticks: "I hit `ValueError: ...` in warm-up",
  "- `RuntimeError: ...`": the quoted exception is also read as a line of its own.
- A Jupyter notebook's error output pasted from the .ipynb JSON: `"evalue": "..."`, and the
  `"traceback": [...]` strings with their colours escaped (`"\\u001b[0;31mValueError\\u001b[0m: ..."`).

`expand` returns the lines a line stands for, or None when it quotes nothing. It is called only for
lines that `may_quote` lets through (a few substring checks), so ordinary lines cost next to nothing.
"""

from __future__ import annotations

import re

from triage.lazyre import lazy
from triage.logread.literal import literal_eval

MAX_TEXT = 32 * 1024  # a quoted message longer than this is not decoded (a paste is short)
MAX_LINES = 400
# A JSON/dict key holding the message, and its string value (possibly cut off by the paste).
# (a quoted key may have lost its colon in the paste: `'message' 'max_tokens must be ...`)
_KEY_RE = lazy(r"""(?:["'](?:message|detail|msg|evalue)["']\s*:?|(?:message|detail|msg|evalue)\s*:)\s*(?P<q>["'])(?P<s>(?:[^"'\\]|\\.|(?!(?P=q))["'])*)""",
               needles=("message", "detail", "msg", "evalue"))
# One string of a JSON list on its own line: `  "\u001b[0;31mValueError\u001b[0m: msg",`
_JSON_ITEM_RE = lazy(r'^\s*"(?P<s>(?:[^"\\]|\\.)*)",?\s*$', needles=('"',))
# `ValueError: msg`, `torch.OutOfMemoryError: msg`, `AssertionError` inside backticks (markdown prose)
_TICKED_RE = lazy(r"`(?P<s>(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception|Failure|Interrupt|Exit)\b:[^`]+)`",
                  needles=("`",))


def may_quote(text: str) -> bool:
    return ("('" in text or '("' in text or "message" in text or "detail" in text or "\\n" in text
            or text.startswith('{"log":') or "\\u001b" in text or '"evalue"' in text)


def expand(text: str) -> tuple[bool, list[str]] | None:
    """(whether the lines replace `text`, the lines); None when `text` quotes nothing."""
    got = _expand(text)
    if got is None:
        return None
    # a decoded "\ud800" is a lone surrogate: not printable, not encodable; it becomes "?"
    return got[0], [ln.encode("utf-8", "replace").decode("utf-8") for ln in got[1]]


def ticked(text: str) -> list[str]:
    """The exceptions a line quotes between backticks (call it only for a line no logger printed as INFO or
    WARNING: there a quoted exception is advice, "errors like `OSError: ...`", not what was raised)."""
    if "`" not in text or ("Error" not in text and "Exception" not in text and "Failure" not in text):
        return []
    out: list[str] = []
    for m in _TICKED_RE.finditer(text):
        s = m.group("s").strip()
        # the quoted exception may itself print its message as a tuple of pieces: joined back as on a line
        out.extend((_tuple(s) or [s]) if ("('" in s or '("' in s) else [s])
    return out[:MAX_LINES]


def _expand(text: str) -> tuple[bool, list[str]] | None:
    if len(text) > MAX_TEXT:
        return None
    if text.startswith('{"log":'):
        # Docker's json-file log driver: one JSON object per line, the line itself under "log"
        val = _json(text.rstrip())
        if isinstance(val, dict) and isinstance(val.get("log"), str):
            return True, val["log"].rstrip("\n").split("\n")
    if "\\u001b" in text:
        m = _JSON_ITEM_RE.match(text)
        if m:  # a notebook traceback's line, colours and all: the terminal text it stands for
            lines = [ln for ln in _decode(m.group("s")).split("\n") if ln.strip()]
            if lines:
                return True, lines[:MAX_LINES]
    if text.lstrip().startswith('"evalue"'):
        m = _KEY_RE.search(text)
        if m:
            lines = [ln for ln in _decode(m.group("s")).split("\n") if ln.strip()]
            if lines:
                return True, lines[:MAX_LINES]
    if "('" in text or '("' in text:
        out = _tuple(text)
        if out:
            return True, out[:MAX_LINES]
    out = None
    if out is None and "{" in text and ("message" in text or "detail" in text):
        out = _body(text)
    if out is None and "\\n" in text and ("Traceback (most recent call last)" in text or "Error" in text):
        out = _escaped_lines(text)
    return (False, out[:MAX_LINES]) if out else None


def _tuple(text: str) -> list[str] | None:
    """The whole message is the tuple: the line is the tuple alone, or "SomeError: (...)"."""
    for mark in ("('", '("'):
        i = text.find(mark)
        if i < 0:
            continue
        head = text[:i].strip()
        if head and not (head.endswith(":") and " " not in head and head[:-1].replace(".", "_").isidentifier()):
            continue
        rest = text[i:].rstrip()
        if not rest.endswith(")"):
            continue
        end = len(rest) - 1
        val = _literal(rest)
        if isinstance(val, tuple) and val and all(isinstance(p, str) for p in val):
            joined = ""
            for p in val:
                sep = "" if not joined or joined[-1:].isspace() or p[:1].isspace() else " "
                joined += sep + p
            lines = (text[:i] + joined + rest[end + 1:]).split("\n")
            return [ln for ln in lines if ln.strip()]
    return None


def _body(text: str) -> list[str] | None:
    j = text.find("{")
    k = text.rfind("}")
    msg = None
    if 0 <= j < k:
        raw = text[j:k + 1]
        val = _json(raw)
        if val is None:
            val = _literal(raw)
        if isinstance(val, dict):
            msg = _message(val)
    if msg is None:
        m = _KEY_RE.search(text, max(j, 0))
        if m is None:
            return None
        msg = _decode(m.group("s"))
    if not msg:
        return None
    lines = [ln for ln in msg.split("\n") if ln.strip()]
    return lines or None


def _message(d: dict, depth: int = 0) -> str | None:
    if depth > 3:
        return None
    for key in ("message", "detail", "msg", "error"):
        v = d.get(key)
        if isinstance(v, str) and v.strip():
            return v
        if isinstance(v, dict):
            got = _message(v, depth + 1)
            if got:
                return got
        if isinstance(v, list):
            msgs = [str(x["msg"]) for x in v if isinstance(x, dict) and isinstance(x.get("msg"), str)]
            if msgs:
                return "\n".join(msgs)
    return None


def _escaped_lines(text: str) -> list[str] | None:
    lines = [_decode(p) for p in text.split("\\n")]
    lines = [ln for ln in lines if ln.strip()]
    return lines if len(lines) > 1 else None


_ESC_RE = lazy(r"\\(u[0-9a-fA-F]{4}|.)", needles=("\\",))
_ESC = {"n": "\n", "t": "    ", "r": "", '"': '"', "'": "'", "\\": "\\", "/": "/"}


def _decode(s: str) -> str:
    """A JSON / Python string body's escapes, undone by hand: nothing is evaluated."""
    if "\\" not in s:
        return s

    def one(m: "re.Match[str]") -> str:
        e = m.group(1)
        if len(e) == 5:
            return chr(int(e[1:], 16))
        return _ESC.get(e, "\\" + e)

    return _ESC_RE.sub(one, s)


def _json(raw: str):
    if '"' not in raw:
        return None
    import json

    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _literal(raw: str):
    try:
        return literal_eval(raw)  # literal_eval only: log text is never executed
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None
