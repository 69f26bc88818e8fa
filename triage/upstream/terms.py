"""The distinctive words of an error message: what a search must carry to find the same failure.

"undefined symbol", "No module named" or "unrecognized arguments" alone match thousands of
threads; the symbol, the module or the argument is what finds the one about this failure. This
module reads an evidence line as its exception type, its message, a stable phrase and a ranked
list of specific tokens (the unknown flag, the missing module, the symbol, the architecture, the
backend, quoted identifiers), so that queries and ranking speak of the same things.
"""

from __future__ import annotations

import re

from triage.lazyre import lazy
from triage.upstream.facets import _WRAPPER_PREFIX, BACKEND_NAMES, error_phrase

# Phrases that say what kind of error it is but not which one: never a query on their own.
GENERIC_PHRASES = frozenset(
    p.lower()
    for p in (
        "undefined symbol", "No module named", "object has no attribute", "has no attribute",
        "unrecognized arguments", "CUDA out of memory", "out of memory", "out of resource", "CUDA error",
        "Not Supported", "not supported", "EngineCore failed to start", "Engine core initialization failed",
        "Timed out after", "timed out", "No such file or directory", "cannot open shared object file",
        "Invalid Argument", "invalid argument", "Worker failed with error", "not find", "could not find",
        "requires GPUs", "to infer device", "is not subscriptable", "Value error", "Assertion failed",
        "cannot import name", "invalid choice", "is not supported", "not implemented", "unknown error",
        "an illegal memory access was encountered", "Error while", "Failed to import", "Traceback",
        "See root cause above", "Internal Server Error", "KeyError", "segmentation fault", "not found",
        "Killed", "error", "failed",
    )
)

_LOG_HEADER = lazy(
    r"^(?:\S+\s+\|\s+)?(?:\[rank\d+\]:\s*)?(?:\([^)]*\)\s*)*"
    r"(?:(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s*)?"
)
_EXC = lazy(r"^((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Warning|Exit|Interrupt))(?::\s*|$)", )


# (pattern, group names to keep): specific shapes first; each names the token that matters.
_SPECIFIC = [
    lazy(r"unrecognized arguments?:\s*(?P<flag>--?[A-Za-z][\w-]*)", needles=("unrecognized argument",)),
    lazy(r"argument (?P<flag>--[\w-]+)(?:/-\w+)?: invalid choice: '(?P<value>[^']{1,60})'", needles=("invalid choice",)),
    lazy(r"No module named '(?P<module>[\w.]+)'", needles=("No module named",)),
    lazy(r"cannot import name '(?P<name>\w+)' from '(?P<module>[\w.]+)'", needles=("cannot import name",)),
    lazy(r"undefined symbol:\s*(?P<symbol>[\w$@.]+)", needles=("undefined symbol",)),
    lazy(r"'(?P<type>\w+)' object has no attribute '(?P<attr>\w+)'", needles=("has no attribute",)),
    lazy(r"module '(?P<module>[\w.]+)' has no attribute '(?P<attr>\w+)'", needles=("has no attribute",)),
    lazy(r"(?P<lib>lib[\w+-]+\.so(?:\.\d+)*): cannot open shared object", needles=("cannot open shared object",)),
    lazy(r"Model architectures \['(?P<arch>\w+)'", needles=("Model architectures",)),
    lazy(r"model type [`'\"](?P<model_type>\w+)[`'\"]", needles=("model type",)),
    lazy(r"(?P<quant>\w+) quantization is currently not supported|quantization method (?P<quant2>\w+)",
         needles=("quantization",)),
    lazy(r"KeyError: '(?P<key>[^']{2,60})'", needles=("KeyError",)),
    lazy(r"version [`'](?P<abi>(?:GLIBCXX|CXXABI|GLIBC)_[\d.]+)' not found", needles=("not found",)),
]
_FLAG = lazy(r"(?<![\w-])(--[a-z][\w-]{2,})", needles=("--",))  # a flag a message names, often as advice
_QUOTED = lazy(r"[`'\"]([A-Za-z_][\w.-]{2,60})[`'\"]")
_CAMEL = lazy(r"\b([A-Z][a-z0-9]+(?:[A-Z][A-Za-z0-9]*){1,6})\b")
_SNAKE = lazy(r"\b([a-z][a-z0-9]*(?:_[a-z0-9]+){1,5})\b", needles=("_",))
_DOTTED = lazy(r"\b([a-z_][\w]*(?:\.[a-z_]\w*){1,4})\b", needles=(".",))
_ENVVAR = lazy(r"\b((?:VLLM|NCCL|CUDA|TORCH|HF|FLASHINFER|TRITON)_[A-Z0-9_]{2,40})\b", )
_BACKEND_SET = frozenset(BACKEND_NAMES)
_IDENT = lazy(r"\w+")
_PATHISH = lazy(r"\S*/\S*", needles=("/",))
_FILE_OR_TYPE = lazy(r"\.(?:py|so|cc|cpp|cu|cuh|h|hpp|json)$|(?:Error|Exception|Warning)$")

# Words too common in errors to tell one apart from another.
_COMMON_TOKENS = frozenset(
    w.lower()
    for w in (
        "self", "none", "true", "false", "cuda", "cpu", "torch", "vllm", "model", "config", "args", "kwargs",
        "forward", "init", "main", "run", "call", "load", "value", "error", "ValueError", "RuntimeError",
        "TypeError", "AssertionError", "max_model_len", "dtype", "device", "python", "str", "int", "dict",
        "list", "object", "NoneType", "Traceback", "EngineCore", "EngineCoreProc", "site-packages", "os.path",
        "PyTorch", "expandable_segments", "PYTORCH_CUDA_ALLOC_CONF", "e.g", "i.e", "etc", "HuggingFace",
        "CUDA_LAUNCH_BLOCKING", "TORCH_USE_CUDA_DSA", "CUDA_VISIBLE_DEVICES",
    )
)


def strip_header(line: str) -> str:
    return _LOG_HEADER.sub("", line.strip()).strip()


class Message:
    """An evidence line read as an error: type, message, stable phrase and specific tokens.

    `key` holds the tokens read from the message's known shapes (the unknown flag, the missing
    module, the symbol, one or two backends): they name this failure. `others` are identifiers
    found anywhere in it (quoted names, CamelCase classes, snake_case options): useful when the
    phrase alone is generic, noise when it is not.
    """

    __slots__ = ("exc_type", "text", "phrase", "key", "others", "generic")

    def __init__(self, exc_type: str, text: str, phrase: str, key: list[str], others: list[str]) -> None:
        self.exc_type = exc_type
        self.text = text
        self.phrase = phrase
        self.key = key
        self.others = others
        self.generic = is_generic(phrase)

    @property
    def tokens(self) -> list[str]:
        return self.key + self.others

    def __repr__(self) -> str:
        return f"Message({self.exc_type!r}, phrase={self.phrase!r}, key={self.key!r}, others={self.others!r})"


def is_generic(phrase: str) -> bool:
    p = " ".join(phrase.lower().split())
    return not p or p in GENERIC_PHRASES or len(p.split()) < 2


def _ok_token(tok: str) -> bool:
    if not tok or len(tok) > 100 or "/" in tok or "\\" in tok:
        return False
    if re.fullmatch(r"[\d.x_-]+", tok) or re.fullmatch(r"0x[0-9a-fA-F]+", tok):
        return False
    if re.fullmatch(r"[A-Z][a-z]?[A-Z]?", tok) or (tok[0].isupper() and len(tok) < 5 and "_" not in tok):
        return False  # units and short capitalised words (GiB, MiB, Tried)
    return tok.lower() not in _COMMON_TOKENS


def _collect(text: str) -> tuple[list[str], list[str]]:
    key: list[str] = []
    others: list[str] = []

    def add(into: list[str], tok: str | None) -> None:
        if tok:
            tok = tok.strip(".,;:")
            if _ok_token(tok) and not any(tok in o for o in key + others):
                into.append(tok)

    for rx in _SPECIFIC:
        m = rx.search(text)
        if m:
            for v in m.groupdict().values():
                add(key, v)
    backends = list(dict.fromkeys(w for w in _IDENT.findall(text) if w in _BACKEND_SET))
    # A selector dump names every backend it tried: then none of them is what this failure is about.
    for b in backends if len(backends) <= 2 else []:
        add(key, b)
    plain = _PATHISH.sub(" ", text)  # pieces of paths and model ids are not what failed
    for rx in (_ENVVAR, _QUOTED, _FLAG, _CAMEL, _DOTTED, _SNAKE):
        for m in rx.finditer(plain):
            tok = m.group(1)
            if tok in _BACKEND_SET or _FILE_OR_TYPE.search(tok):
                continue
            add(others, tok)
            if len(others) >= 8:
                break
    return key[:4], others[:4]


def specific_tokens(text: str, limit: int = 6) -> list[str]:
    """Tokens that name this failure, most telling first."""
    key, others = _collect(text)
    return (key + others)[:limit]


def read_message(line: str) -> Message:
    body = strip_header(line)
    exc_type = ""
    m = _EXC.match(body)
    if m:
        exc_type = m.group(1).rsplit(".", 1)[-1]
        body = body[m.end():].strip()
    body = _WRAPPER_PREFIX.sub("", body)
    # argparse puts the flag before the words; the words are what every such thread shares.
    phrase = "invalid choice" if "invalid choice:" in body else error_phrase(body)
    key, others = _collect(body)
    # The phrase's own words are not tokens of their own.
    words = set(phrase.lower().split())
    key = [t for t in key if t.lower() not in words]
    others = [t for t in others if t.lower() not in words]
    return Message(exc_type, body, phrase, key, others)


def looks_like_error(line: str) -> bool:
    body = strip_header(line)
    return bool(_EXC.match(body)) or "error" in body.lower()


def message_of(f: object) -> Message:
    """The facets' evidence line read as a message (kept on the facets: queries and ranking share it)."""
    msg = getattr(f, "message", None)
    if msg is None:
        msg = read_message(getattr(f, "line", "") or "")
        f.message = msg  # type: ignore[attr-defined]
    return msg


def search_term(tok: str) -> str:
    """A token as GitHub search takes it: quoted unless a plain word (a leading '-' means NOT)."""
    tok = tok.replace('"', "")
    return tok if re.fullmatch(r"\w+", tok) else f'"{tok}"'
