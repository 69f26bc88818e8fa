"""What a library's own message tells the user to do.

Many vLLM and library messages end in their remedy ("Please install X", "Try increasing
`gpu_memory_utilization`", "Re-run with --kv-cache-dtype float16"). When no hand rule knows the
failure, that sentence is a better fix than a generic one: its authors wrote it for this failure.
It is quoted as text, never turned into a command.
"""

from __future__ import annotations

from triage.lazyre import lazy

# a sentence that tells the reader to do something (imperative or "you can/should ...")
_ADVICE = lazy(r"(?i)\b(?:please|try|consider|you (?:can|could|may|might|should|need to|must)|make sure|"
               r"to (?:fix|avoid|resolve) (?:this|it)|(?:uv )?pip install)\b|"
               # an imperative opening the sentence
               r"^(?:re-?run|increase|decrease|reduce|lower|install|upgrade|downgrade|specify|set|use|pass|add|"
               r"remove|run|enable|disable|ensure|provide|switch|update|change)\b")
# where one sentence ends and the next begins; a dot inside a version, path or flag is not an end
_SENTENCE_END = lazy(r"(?<=[.!?])\s+(?=[A-Z`'\"(])|(?<=[a-z)`'\"][.!?])(?=[A-Z][a-z])")
_NOT_ADVICE = lazy(r"(?i)\b(?:deprecated|will be removed)\b")
MAX_CHARS = 280


def advice(message: str) -> str | None:
    """The sentences of `message` that say what to do, at most two, or None when it says nothing of the kind."""
    text = " ".join(message.split())
    if not text or _NOT_ADVICE.search(text):  # a deprecation's advice is about the warning, not a failure
        return None
    found: list[str] = []
    for s in _SENTENCE_END.split(text):
        s = s.strip()
        if len(s) < 12 or not _ADVICE.search(s):
            continue
        found.append(s)
        if len(found) == 2:
            break
    if not found:
        return None
    said = " ".join(found)
    if len(said) > MAX_CHARS:
        said = said[:MAX_CHARS - 3].rstrip() + "..."
    return said


def quoted(message: str) -> str | None:
    """The fix sentence that quotes the message's own remedy, or None when it gives none."""
    said = advice(message)
    return f"The message says what to do: \u201c{said}\u201d" if said else None
