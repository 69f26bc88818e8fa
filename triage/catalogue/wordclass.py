"""The category a failure's words point to, learnt from real labelled failure logs: the last word of the
fallback, for a failure that no rule, mined message, exception type or frame decides.

A naive Bayes model over the words of the failure's part of the log (error lines, exceptions and their
frames; the whole text of a short paste), trained by scripts/train_wordclass.py on the project's labelled
logs (never the held-out validation sets) and shipped as wordclass.json.gz. It answers only when one
category clearly leads: a guess, said as one, with the words that led it as the reason.
"""

from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any

from triage.lazyre import lazy

if TYPE_CHECKING:
    from triage.logread.scan import Scan

DATA = os.path.join(os.path.dirname(__file__), "wordclass.json.gz")  # (os.path: pathlib costs start-up)
FRAGMENT_LINES = 40  # a paste this short is all failure: every line counts
MAX_LINES = 400
FRAMES_PER_EXC = 8
TOKEN_RE = lazy(r"[A-Za-z][A-Za-z0-9]{2,}")
CAMEL_RE = lazy(r"(?<=[a-z0-9])(?=[A-Z])")
HEXISH_RE = lazy(r"^(?:[0-9a-f]{6,}|0x\w+)$")
# Words every failure log has, whatever failed: they only add noise to the counts.
STOP = frozenset("""
the and for with that this from not are was were has have had but can cannot could into than then there their
when which while will would you your our its all any one two use used using also may might must should been being
does did done only other some such more most very just now get got set see none true false self return def
error errors exception traceback most recent call last file line lines info warning debug critical raise raised
value object type args kwargs func function module main run runs running process pid worker engine core
python python3 site packages dist lib local usr home root opt envs env venv conda miniconda anaconda bin
""".split())
_model: dict[str, Any] | None = None


def words(text: str) -> set[str]:
    """The distinct lower-case words of a text, identifiers split (snake, camel, dotted, paths) and kept whole."""
    out: set[str] = set()
    for tok in TOKEN_RE.findall(text):
        low = tok.lower()
        if HEXISH_RE.match(low):
            continue
        if low not in STOP:
            out.add(low)
        for part in CAMEL_RE.split(tok):
            p = part.lower()
            if len(p) >= 3 and p not in STOP and not HEXISH_RE.match(p):
                out.add(p)
    return out


def failure_text(scan: Scan) -> str:
    """The part of a log that says what failed: all of a short paste; else its error and warning lines,
    its exceptions, their messages and the files and functions of their innermost frames."""
    if scan.lines_total <= FRAGMENT_LINES:
        return "\n".join(ln.text for ln in scan.lines[:MAX_LINES])
    parts = [ln.text for ln in scan.lines if ln.level in ("ERROR", "CRITICAL", "WARNING")][:MAX_LINES]
    for e in scan.exceptions[:20]:
        parts.append(e.text)
        parts.extend(x.text for x in e.extra[:4])
        parts.extend(f"{fr.file} {fr.func}" for fr in e.frames[-FRAMES_PER_EXC:])
    for e in scan.cut_tracebacks[:4]:
        parts.extend(f"{fr.file} {fr.func}" for fr in e.frames[-FRAMES_PER_EXC:])
    return "\n".join(parts)


def train(docs: list[tuple[str, set[str]]], min_docs: int = 2) -> dict[str, Any]:
    """A model from (category, words) pairs: per-word document counts by category, words seen in at least
    `min_docs` documents."""
    classes = sorted({c for c, _ in docs})
    seen: dict[str, int] = {}
    for _, ws in docs:
        for w in ws:
            seen[w] = seen.get(w, 0) + 1
    vocab = sorted(w for w, n in seen.items() if n >= min_docs)
    index = {w: i for i, w in enumerate(vocab)}
    counts = {w: [0] * len(classes) for w in vocab}
    totals = [0] * len(classes)
    ndocs = [0] * len(classes)
    for c, ws in docs:
        k = classes.index(c)
        ndocs[k] += 1
        for w in ws:
            if w in index:
                counts[w][k] += 1
                totals[k] += 1
    return {"classes": classes, "totals": totals, "docs": ndocs, "counts": counts}


def load() -> dict[str, Any] | None:
    global _model
    if _model is None and os.path.exists(DATA):
        import gzip  # only when the fallback needs the model: start-up stays as it was
        import json

        with gzip.open(DATA, "rt", encoding="utf-8") as f:
            _model = json.load(f)
    return _model


def classify(text: str, model: dict[str, Any] | None = None, alpha: float = 0.5) -> list[tuple[str, float, list[str]]]:
    """Categories by posterior probability (uniform prior), each with the words that favoured it most."""
    m = model if model is not None else load()
    if not m:
        return []
    classes, totals, counts = m["classes"], m["totals"], m["counts"]
    ws = [w for w in words(text) if w in counts]
    if not ws:
        return []
    v = len(counts)
    denom = [math.log(t + alpha * v) for t in totals]
    scores = [0.0] * len(classes)
    lift: list[list[tuple[float, str]]] = [[] for _ in classes]
    for w in ws:
        row = counts[w]
        logs = [math.log(row[k] + alpha) - denom[k] for k in range(len(classes))]
        mean = sum(logs) / len(logs)
        for k, lp in enumerate(logs):
            scores[k] += lp
            if row[k]:
                lift[k].append((lp - mean, w))
    top = max(scores)
    exp = [math.exp(s - top) for s in scores]
    z = sum(exp)
    ranked = sorted(range(len(classes)), key=lambda k: -exp[k])
    return [(classes[k], exp[k] / z, [w for _, w in sorted(lift[k], reverse=True)[:5]]) for k in ranked]


def guess(scan: Scan, min_probability: float = 0.8,
          model: dict[str, Any] | None = None) -> tuple[str, float, list[str]] | None:
    """(category, probability, the words that led) when the failure's words clearly point to one
    category other than "none"; else None."""
    ranked = classify(failure_text(scan), model)
    if not ranked:
        return None
    cat, p, led = ranked[0]
    if cat == "none" or p < min_probability:
        return None
    return cat, p, led


# When the model may overrule the fallback: over a guess (<= GUESSED, the fallback's "unrecognised" and
# bare error lines) when it is fairly sure, over a mined message's module or a frame (<= PLACED) only when
# it is all but certain; never over a hand rule, nor over an exception's type or decisive words
# (>= DECIDED: exception_words, reviewed by hand). Measured on six dev sets gathered after the fallback
# was written, each left out of the training: it fixed 11 of the fallback's 36 misses and broke none.
GUESSED, GUESSED_P = 0.3, 0.8
PLACED, PLACED_P = 0.5, 0.99
# Where nothing decided the category at all (an exception read by its type's prior, an error line whose words
# name nothing: at most UNDECIDED), that prior is right a fifth of the time; the model, each dev set left out of
# its training in turn, named 76 of those 103 dev logs right at 50% and 68 at 80% (the prior alone: 14).
UNDECIDED, UNDECIDED_P = 0.2, 0.5
# An exception placed only by a frame its words disagree with, or by words that merely hint (FRAMED): the
# model, each dev set left out in turn, fixed 6 of those 819 logs at 70% and broke none (at 99%: none fixed).
FRAMED, FRAMED_P = 0.35, 0.7
DECIDED = 0.45
WORD_CONFIDENCE = 0.35
FALLBACKS = ("generic.", "catalogue.")


def _decisive_line(d: Any) -> bool:
    """An error line that names what failed to import (exception_words: the package, the shared library),
    said low only because no exception carries it: the package decides, not the words around it. (A line
    that only mentions a subsystem stays open to the model: "compute capability" is said of dtypes too.)"""
    return d.signature == "generic.error_line" and bool(d.facts.get("category_decided")) \
        and not str(d.facts.get("category_guessed_from", "its message mentions")).startswith("its message mentions")


def reconsider(scan: Scan, d: Any, model: dict[str, Any] | None = None) -> Any:
    """The fallback's diagnosis `d`, its category replaced by the word model's when the model clearly
    disagrees (see the levels above); said as a guess, with the words that led it."""
    if not d.signature.startswith(FALLBACKS) or d.confidence > PLACED \
            or (d.signature.startswith("generic.") and d.confidence >= DECIDED) or _decisive_line(d):
        return d
    undecided = d.confidence <= UNDECIDED and d.facts.get("category_decided") is False
    framed = d.signature.startswith("generic.") and d.confidence <= FRAMED
    g = guess(scan, UNDECIDED_P if undecided else GUESSED_P if d.confidence <= GUESSED
              else FRAMED_P if framed else PLACED_P, model)
    if g is None or g[0] == d.category:
        return d
    cat, p, led = g
    was = d.category
    d.category = cat
    d.confidence = min(d.confidence, WORD_CONFIDENCE)
    d.explanation = [f"category {cat}: likely, because its words ({', '.join(led)}) are those of {cat} failures "
                     f"in the real failure logs triage learnt from ({p:.0%}); what else it read pointed to {was}"] \
        + [x for x in d.explanation if not x.startswith("category ")]
    d.facts["category_guessed_from"] = f"the failure's words ({', '.join(led)})"
    d.facts["category_decided"] = False
    return d
