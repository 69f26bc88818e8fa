"""From a Scan to ranked diagnoses.

Every rule runs; what they find is ranked so that the first real failure of the cascade comes first:
wrappers never count, failures that are usually consequences (NCCL errors after a peer died, a
SIGKILL) are demoted below any primary failure, among primaries the earliest one gets a bonus, and a
logger's INFO/WARNING line ranks below an exception of another kind actually raised after it.
When no rule knows the failure, the first real exception still becomes a diagnosis below 0.5, its
category taken from what decides it (the exception's type and words, where it was raised), else
said to be unrecognised.
"""

from __future__ import annotations

from triage.lazyre import lazy
from typing import Any

from triage.areas import TYPE_AREAS, VAGUE, area_of_native, area_of_trace
from triage.catalogue.wordclass import reconsider
from triage.exception_words import category_from_words, decisive, failure_words
from triage.logread.scan import Scan
from triage.logread.traceback import ExceptionRecord, phase_of
from triage.model import Diagnosis, Evidence, Fix, Note
from triage.rules import all_rules
from triage.rules.base import Rule
from triage.rules.wrappers import is_wrapper

SECONDARY_FACTOR = 0.6
# The fallback's confidence: its category decided by the exception's type or message words, guessed
# from where it was raised, or not decided at all (then the diagnosis says "unrecognised", no more).
WORDED_CONFIDENCE = 0.45
PLACED_CONFIDENCE = 0.4  # where it was raised is code of one subsystem (a quantization method, a kernel wrapper)
FRAMED_CONFIDENCE = 0.35
UNDECIDED_CONFIDENCE = 0.2
# a mined message matched (even a cut one) by the exception raised after warnings the rules knew
MINED_AFTER_WARNINGS = 0.44
WRAPPED_ERROR_RE = lazy(r"failed with error '(.+?)'(?:,|$)")
# A line that calls itself an error, when no level says so; at its start in a whole log, anywhere in a paste.
ERRORISH_RE = lazy(r"(?:\b(?:[Ee]rror|ERROR|FAILED|[Ff]atal)\b|\b[Ff]ailed (?:to|with)\b|[Nn]ot supported|"
                   r"\b[Cc]annot\b|\b[Uu]nable to\b)", needles=("rror", "RROR", "FAILED", "atal", "ailed", "ot supported",
                                                              "annot", "nable to"))
ERRORISH_START_RE = lazy(r"\s*(?:(?:fatal )?error:|Error:|ERROR:|FAILED|Fatal error)")
FRAGMENT_LINES = 40  # an input this short is a paste: every line of it may be the message
# A paste this short with no level, no exception and no line calling itself an error: its most
# failure-like line is still a guess, said as one (below the fallback's "unrecognised" exceptions).
GUESS_LINES = 12
GUESS_CONFIDENCE = 0.3
CODE_START = ("File ", "Traceback", "raise ", "return ", "assert ", "^", "~", "at ", "#")
EARLIEST_BONUS = 0.06

_RULES: list[Rule] | None = None


def rules() -> list[Rule]:
    global _RULES
    if _RULES is None:
        _RULES = all_rules()
    return _RULES


def diagnose(scan: Scan, env: dict[str, Any] | None = None) -> tuple[list[Diagnosis], list[Note]]:
    env = env or {}
    found: list[tuple[Rule, Diagnosis]] = []
    notes: list[Note] = []
    harmless_lines: set[int] = set()
    for rule in rules():
        if rule.wrapper:
            continue
        try:
            d = rule.run(scan, env)
        except Exception as exc:  # a broken rule must never take the whole diagnosis down
            scan.warnings.append(f"rule {rule.signature} failed: {type(exc).__name__}: {exc}")
            continue
        if d is None:
            continue
        if rule.harmless:
            notes.append(Note(rule.signature, d.title, d.evidence))
            harmless_lines.update(e.line for e in d.evidence)
            continue
        found.append((rule, d))
    found = [(r, d) for r, d in found if not _only_harmless(d, harmless_lines)]
    # what the report says in its own words yields to a rule that reads the same failure in the log's lines
    read = {d.category for r, d in found if not r.stated}
    found = [(r, d) for r, d in found if not (r.stated and d.category in read)]
    found = _dedupe_same_line(found)
    levels = {ln.no: ln.level for ln in scan.lines if ln.level}
    raised = raised_lines(scan)
    warned = _warned_only(found, raised, levels)
    if not any(not r.secondary for r, _ in found):
        used = {e.line for _, d in found for e in d.evidence}
        fb = unknown(scan, harmless_lines | used) or _unknown_exception(scan, harmless_lines, used)
        if fb is not None:
            fb = reconsider(scan, fb)
        elif not found:
            fb = _stalled(scan)
        # a guess that only agrees with what a hand rule already said adds nothing: the rule's words win
        if fb is not None and all(d.category != fb.category for _, d in found):
            found.append((Rule(fb.signature, fb.category, fb.title, "", confidence=fb.confidence), fb))
    elif warned:
        # Everything the rules know was only warned about; an exception raised after the warnings is
        # what stopped the start-up, even when no rule knows it (a deprecated package warned about, then a
        # crash): read it, and rank it above the warnings when its type or words decide a category of its own.
        used = {e.line for _, d in found for e in d.evidence}
        after = {e.line.no for e in scan.exceptions if e.in_traceback and e.line.no > warned}
        before = {e.line.no for e in scan.exceptions if e.line.no not in after}
        # vLLM's own source may know the exception (a mined message), else its type, words and frames
        fb = unknown(scan, harmless_lines | used | before) if after else None
        if fb is None or fb.first_line not in after or fb.confidence < MINED_AFTER_WARNINGS:
            fb = _unknown_exception(scan, harmless_lines, used | before)
        if fb is not None and fb.confidence >= MINED_AFTER_WARNINGS and fb.first_line in after \
                and (fb.signature.startswith("catalogue.") or fb.confidence >= WORDED_CONFIDENCE) \
                and all(d.category != fb.category for _, d in found):
            ranked = rank(found, raised, levels)
            fb.explanation.append("it was raised after the warnings the rules recognised, which did not stop "
                                  "the start-up themselves")
            return [fb] + ranked, notes
    return rank(found, raised, levels), notes


def _warned_only(found: list[tuple[Rule, Diagnosis]], raised: set[int], levels: dict[int, str]) -> int:
    """The last line of the primary diagnoses when every one of them reads only WARNING lines (none of
    them a raised exception); else 0."""
    prim = [d for r, d in found if not r.secondary]
    if not prim or not all(d.evidence and all(e.line not in raised and levels.get(e.line) == "WARNING"
                                                 for e in d.evidence) for d in prim):
        return 0
    return max(e.line for d in prim for e in d.evidence)


def _only_harmless(d: Diagnosis, harmless_lines: set[int]) -> bool:
    return bool(d.evidence) and all(e.line in harmless_lines for e in d.evidence)


def _dedupe_same_line(found: list[tuple[Rule, Diagnosis]]) -> list[tuple[Rule, Diagnosis]]:
    """Two rules quoting the same first line describe one failure: keep the surer one."""
    best: dict[int, tuple[Rule, Diagnosis]] = {}
    for r, d in found:
        key = d.first_line
        cur = best.get(key)
        if cur is None or d.confidence > cur[1].confidence:
            best[key] = (r, d)
    keep = {id(v[1]) for v in best.values()}
    return [(r, d) for r, d in found if id(d) in keep]


def raised_lines(scan: Scan) -> set[int]:
    """Lines of exceptions actually raised: the exception line that ends a traceback."""
    return {e.line.no for e in scan.exceptions if e.in_traceback}


def _printed(d: Diagnosis, raised: set[int], levels: dict[int, str]) -> bool:
    """Read only from a logger's INFO/WARNING lines, none of them a raised exception."""
    # (not DEBUG: that is where vLLM explains an exception it caught, "Failed to initialize NVML: ...")
    return bool(d.evidence) and all(e.line not in raised and levels.get(e.line) in ("INFO", "WARNING")
                                    for e in d.evidence)


def rank(found: list[tuple[Rule, Diagnosis]], raised: set[int] | None = None,
         levels: dict[int, str] | None = None) -> list[Diagnosis]:
    # The fallback's guess is no evidence that a known secondary failure had another cause, nor is a rule's category
    # guessed from the frames of a traceback cut before its message (a NumPy-2 banner printed above an import
    # traceback cut short states the cause the cut traceback cannot).
    primaries = [d for r, d in found if not r.secondary and not d.signature.startswith("generic.")
                 and "category_guessed_from" not in d.facts]
    # A message a logger printed on the way (a dtype fallback, a backend choice) ranks below the
    # exception actually raised after it: that is what stopped the start-up.
    raised = raised or set()
    levels = levels or {}
    # (Of one category, the earlier line stays first: "Failed to import vllm._C ... undefined symbol"
    # printed, then the AttributeError it causes raised.)
    printed = {id(d) for d in primaries if _printed(d, raised, levels)}
    raised_cats = {d.category for d in primaries if id(d) not in printed
                   and any(e.line in raised for e in d.evidence)}
    printed = {i for i in printed if all(d.category not in raised_cats for d in primaries if id(d) == i)}
    if not raised_cats:
        printed = set()  # nothing raised is diagnosed: the printed lines are all there is
    ranked = [d for d in primaries if id(d) not in printed] or primaries
    earliest = min((d.first_line for d in ranked), default=None)
    scores: dict[int, float] = {}
    for r, d in found:
        score = d.confidence
        if r.secondary and primaries:
            d.confidence = round(d.confidence * SECONDARY_FACTOR, 2)
            score = d.confidence
        elif not r.secondary and d.first_line == earliest and len(primaries) > 1:
            score += EARLIEST_BONUS
        scores[id(d)] = score
    if printed:
        below = min(scores[id(d)] for d in ranked) - 0.01
        for i in printed:
            scores[i] = min(scores[i], below)
    scored = sorted(found, key=lambda rd: (-scores[id(rd[1])], rd[1].first_line))
    return [d for _, d in scored]


# ---- fallback for failures no rule knows -------------------------------------------------------

def guess_category(exc: ExceptionRecord) -> str:
    if exc.short_type in TYPE_AREAS:
        return TYPE_AREAS[exc.short_type]
    hit = area_of_trace(exc.frames)  # the deepest frame the map knows
    if hit is not None:
        return hit[0]
    msg = exc.message
    if "NCCL" in msg or "Gloo" in msg or "gloo" in msg:
        return "distributed"
    if "CUDA" in msg or "cuda" in msg:
        return "cuda_driver" if "driver" in msg else "kernel_library"
    return "engine_config" if exc.short_type in ("ValueError", "TypeError", "AssertionError", "KeyError") else "environment"


def _raise_site(scan: Scan, exc: ExceptionRecord) -> str:
    """For a bare exception (`AssertionError`, a short message): the source line printed under the
    last frame (`assert num_spec_tokens > 0 ...`) and the frame's function, whose words say more."""
    if len(exc.message) >= 40 or not exc.frames:
        return ""
    words = [exc.frames[-1].func]
    lines = scan.lines
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] is exc.line or lines[i].no == exc.line.no and lines[i].text == exc.line.text:
            for ln in lines[max(0, i - 3):i]:
                t = ln.text.strip()
                if ln.proc == exc.line.proc and t and not t.startswith(("File ", "^", "~", "Traceback")):
                    words.append(t)
            break
    return " " + " ".join(words)


def _asserted(scan: Scan, exc: ExceptionRecord) -> tuple[str, str, float, dict[str, Any]] | None:
    """A bare AssertionError (no message) placed by its printed `assert ...` line in vLLM's mined asserts."""
    if exc.short_type != "AssertionError" or exc.message.strip():
        return None
    from triage.catalogue.infer import assert_place

    return _guarded(scan, "assert lookup", assert_place, scan, exc)


def unknown(scan: Scan, skip_lines: set[int]) -> Diagnosis | None:
    """No rule knows it: vLLM's own source may (the mined message catalogue, loaded only now)."""
    from triage.catalogue.infer import diagnose_unknown

    return _guarded(scan, "message catalogue", diagnose_unknown, scan, skip_lines, is_wrapper, frames=False,
                    words=category_from_words)


def _stalled(scan: Scan) -> Diagnosis | None:
    """No error anywhere: the step of start-up the log stops in, where vLLM is known to hang."""
    from triage.catalogue.stall import stalled

    return _guarded(scan, "start-up step reading", stalled, scan)


def _cut(scan: Scan) -> Diagnosis | None:
    from triage.catalogue.infer import from_frames

    return _guarded(scan, "frame reading", from_frames, scan, category_from_words, failure_words)


def _guarded(scan: Scan, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
    """fn(*args, **kwargs), or None with a warning when it fails: like a broken rule, a broken layer of the
    fallback must never take the whole diagnosis down (the plainer layers still answer)."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:
        scan.warnings.append(f"{what} failed: {type(exc).__name__}: {exc}")
        return None


def _unknown_exception(scan: Scan, harmless_lines: set[int], used_lines: set[int]) -> Diagnosis | None:
    """No rule and no mined message: the first real exception read by its type, words and frames; a
    traceback the log ends inside read by its frames; else an error line or the wrappers alone."""
    exc = fallback(scan, harmless_lines, used_lines, lines=False)
    if exc is not None and exc.confidence > UNDECIDED_CONFIDENCE:
        return exc
    return _cut(scan) or exc or fallback(scan, harmless_lines, used_lines)


def _decide(exc: ExceptionRecord, words: str) -> tuple[str, str, float]:
    """(category, what decided it, confidence) for an exception no rule or template knows. Surest
    first: its type; words that name a subsystem whatever raised them (out of memory, the driver, NCCL, a
    package that does not import); the innermost frame that is not plumbing, when it lies in one
    subsystem's code; the message's topical words; a frame in code of several kinds; words that hint."""
    short = exc.short_type
    if short in TYPE_AREAS and short not in ("ImportError", "ModuleNotFoundError"):
        return TYPE_AREAS[short], f"the exception type {short}", WORDED_CONFIDENCE
    worded = category_from_words(exc.type, words)
    if worded is not None and decisive(*worded):
        return worded[0], worded[1], WORDED_CONFIDENCE
    hit = area_of_trace(exc.frames)
    if hit is not None and hit[0] not in VAGUE:
        where = f"it was raised in {_short_path(hit[1])}, {hit[0]} code"
        if worded is None:
            return hit[0], where, PLACED_CONFIDENCE
        if worded[0] == hit[0]:
            return hit[0], f"{where}, and {worded[1]}", WORDED_CONFIDENCE
        # the words point elsewhere: the place is the better guess, said with less certainty
        return hit[0], f"{where} (though {worded[1]})", FRAMED_CONFIDENCE
    if worded is not None:
        return worded[0], worded[1], WORDED_CONFIDENCE
    if hit is not None:
        return hit[0], f"it was raised in {_short_path(hit[1])}", FRAMED_CONFIDENCE
    weak = category_from_words(exc.type, words, weak=True)
    if weak is not None:
        return weak[0], weak[1], FRAMED_CONFIDENCE
    return guess_category(exc), "exception type", UNDECIDED_CONFIDENCE


def _unknown_fix(message: str, otherwise: str) -> Fix:
    """A failure no rule knows: the remedy its own message gives, quoted, else `otherwise`."""
    from triage.catalogue.advice import quoted

    said = quoted(message)
    if said:
        return Fix(f"{said} (triage has no rule for this failure yet.)", None)
    return Fix(otherwise, None)


def _short_path(file: str) -> str:
    p = file.replace("\\", "/")
    for pkg in ("/site-packages/", "/dist-packages/", "/vllm/"):
        if pkg in p:
            return ("vllm/" if pkg == "/vllm/" else "") + p.rsplit(pkg, 1)[-1]
    return "/".join(p.rsplit("/", 2)[-2:])


def fallback(scan: Scan, harmless_lines: set[int], used_lines: set[int], lines: bool = True) -> Diagnosis | None:
    candidates = [e for e in scan.exceptions
                  if not is_wrapper(e.text) and e.line.no not in harmless_lines and e.line.no not in used_lines
                  and e.short_type not in ("KeyboardInterrupt", "SystemExit", "CancelledError")]
    if candidates:
        from triage.catalogue.infer import drop_groups

        candidates = drop_groups(candidates)
        # The root of a chain, else the earliest exception that ended a traceback.
        in_tb = [e for e in candidates if e.in_traceback] or candidates
        exc = min(in_tb, key=lambda e: e.line.no)
        while exc.caused_by is not None and not is_wrapper(exc.caused_by.text):
            exc = exc.caused_by
        # What decides the category, surest first: the exception's type, its decisive words, where it
        # was raised, words that only hint; else it is unrecognised (a prior by type, said quietly).
        words = " ".join([exc.message] + [x.text.strip() for x in exc.extra]) + _raise_site(scan, exc)
        placed = _asserted(scan, exc)
        cat, basis, conf = placed[:3] if placed is not None else _decide(exc, words)
        where = ""
        for fr in reversed(exc.frames):
            if "/vllm/" in fr.file:
                where = f"{fr.file.split('/vllm/', 1)[-1]}:{fr.line} in {fr.func}"
                break
        title = f"Unrecognised failure: {exc.text[:160]}"
        evidence = [Evidence(exc.line.no, exc.line.shown)]
        facts: dict[str, Any] = {"exception": exc.type, "message": exc.message[:500], "raised_at": where or None,
                                 "category_guessed_from": basis, "category_decided": conf > UNDECIDED_CONFIDENCE}
        phase = phase_of(exc.frames) if exc.frames else None
        if phase:
            facts["phase"] = phase
        if placed is not None:
            facts.update(placed[3])
        why = ([f"category {cat}: {'likely, ' if conf < WORDED_CONFIDENCE else ''}because {basis}"]
               if conf > UNDECIDED_CONFIDENCE else [])
        if placed is not None and facts.get("releases_say"):
            why.append(str(facts.pop("releases_say")))
        return Diagnosis(
            category=cat, signature="generic.unrecognized_exception", title=title, confidence=conf,
            evidence=evidence, explanation=why,
            facts=facts,
            fix=_unknown_fix(exc.message, "triage has no rule for this failure yet; the exception above is the first "
                             "real error. Search upstream for its message, or file it with `triage report --log FILE`."),
            first_line=exc.line.no)
    if not lines:
        return None
    # an INFO line ("Parent process exited, terminating worker") is how a clean shutdown reads too
    wrappers = [ln for ln in scan.lines if ln.level not in ("INFO", "DEBUG") and is_wrapper(ln.text)]
    # Error lines by level first; without any, a line that says it is an error in its own words ("error:",
    # "Error ...", "FAILED"): a pasted fragment has no levels, a build tool or launcher prints none.
    fragment = scan.lines_total <= FRAGMENT_LINES
    errorish = [ln for ln in scan.lines if ln.level in ("ERROR", "CRITICAL")] or \
        [ln for ln in scan.lines if not ln.level and ERRORISH_RE.search(ln.text) is not None
         and (fragment or ERRORISH_START_RE.match(ln.text) is not None)]
    guess = fragment_guess(scan, harmless_lines | used_lines) if scan.lines_total <= GUESS_LINES else None
    # The first error line, unless a later one names its subsystem (in its words, or by the C++ source that
    # logged it) where the first does not: a ticket's "the error shown below" before the library's own lines.
    picked: tuple[Any, tuple[str, str] | None] | None = None
    for ln in errorish:
        if not is_wrapper(ln.text) and ln.no not in harmless_lines \
                and ln.no not in used_lines and not ln.text.startswith((" ", "Traceback")):
            worded = category_from_words("", ln.text)
            if worded is None:
                native = area_of_native(ln.text, ln.src)
                worded = (native[0], f"it was logged by {native[1]}, {native[0]} code") if native else None
            if picked is None or (picked[1] is None and worded is not None):
                picked = (ln, worded)
            if worded is not None:
                break
    if picked is not None:
        ln, worded = picked
        if worded is None and guess is not None:
            return guess  # a line whose words name a subsystem says more than one that only says "error"
        return Diagnosis(
            category=worded[0] if worded else "environment", signature="generic.error_line",
            title=f"Unrecognised error: {ln.text[:160]}",
            confidence=0.25 if worded else 0.15, evidence=[Evidence(ln.no, ln.shown)],
            facts={"category_guessed_from": worded[1] if worded else "nothing decisive",
                   "category_decided": bool(worded)},
            fix=_unknown_fix(ln.text, "triage has no rule for this error yet; search upstream for it or file it with "
                             "`triage report --log FILE`."),
            first_line=ln.no)
    if guess is not None:
        return guess
    if wrappers:
        # vLLM says it failed, but the worker's own error is not in this log (some wrappers quote it).
        quoted = next((m.group(1) for ln in wrappers if (m := WRAPPED_ERROR_RE.search(ln.text))), None)
        worded = category_from_words("", quoted) if quoted else None
        hint = None
        if worded is None:
            # a warning the process printed on its way down may still say which part failed
            for ln in scan.lines:
                if ln.no >= wrappers[0].no:
                    break
                if ln.level == "WARNING" and ln.no not in harmless_lines and ERRORISH_RE.search(ln.text):
                    worded = category_from_words("", ln.text) or worded
                    hint = ln if worded else hint
        said: dict[str, Any] = {"wrapped_error": quoted} if quoted else {}
        if hint is not None and worded is not None:
            said["category_guessed_from"] = f"a warning before the failure: {worded[1]}"
        said["category_decided"] = worded is not None
        return Diagnosis(
            category=worded[0] if worded else "environment", signature="generic.root_cause_missing",
            title="vLLM failed to start, but the root cause is not in this log"
                  + (f" (a worker reported: {quoted[:120]})" if quoted else ""),
            confidence=0.2, evidence=([Evidence(hint.no, hint.shown)] if hint is not None else [])
            + [Evidence(ln.no, ln.shown) for ln in wrappers[:3]],
            facts=said,
            fix=Fix("Only the wrapper lines of the failure cascade are here: the failing worker printed its error "
                    "elsewhere. Capture the whole start-up with stderr (`vllm serve ... 2>&1 | tee vllm.log`), or "
                    "rerun with VLLM_LOGGING_LEVEL=DEBUG, and diagnose that log.", None),
            first_line=wrappers[0].no)
    return words_guess(scan, harmless_lines | used_lines)


WORDS_GUESS_CONFIDENCE = 0.25
WORDS_GUESS_P = 0.8
UNTOLD_P = 0.5


def words_guess(scan: Scan, skip_lines: set[int]) -> Diagnosis | None:
    """A paste with no exception, error line or wrapper that still says something failed (a ticket's title
    and prose, a traceback cut before anything is raised): the word model, learnt from real labelled
    failure logs, reads its words. Only text no logger printed counts as saying so: a healthy start-up's
    lines all carry a level."""
    from triage.catalogue.wordclass import guess, words

    told = next((ln for ln in scan.lines if _says_failed(ln, skip_lines)), None)
    if told is None and not _untold_failure(scan, skip_lines):
        return None
    g = guess(scan, WORDS_GUESS_P if told is not None else UNTOLD_P)
    if g is None:
        return None
    cat, p, led = g
    if told is None:
        # a short paste that never says it failed (a ticket's title, a command and what it printed): the line
        # holding most of the words that led is what the guess rests on
        told = max((ln for ln in scan.lines if ln.no not in skip_lines and ln.text.strip()),
                   key=lambda ln: (len(words(ln.text) & set(led)), -ln.no), default=None)
        if told is None:
            return None
    kind = cat.replace("_", " ")
    article = "an" if kind[0] in "aeiou" else "a"
    return Diagnosis(
        category=cat, signature="generic.words_guess",
        title=f"Likely {article} {kind} failure (a guess from the text's words): {told.text.strip()[:140]}",
        confidence=WORDS_GUESS_CONFIDENCE, evidence=[Evidence(told.no, told.shown)],
        explanation=[f"category {cat}: likely, because its words ({', '.join(led)}) are those of {cat} failures in "
                     f"the real failure logs triage learnt from ({p:.0%})",
                     "no exception, error line or known message is in this text: nothing here decides it"],
        facts={"category_guessed_from": f"the text's words ({', '.join(led)})", "category_decided": False},
        fix=Fix("triage found no error message here, only words around one. Diagnose the whole start-up log "
                "(`vllm serve ... 2>&1 | tee vllm.log`), with the exception's line, to get a decided answer.", None),
        first_line=told.no)


def _untold_failure(scan: Scan, skip_lines: set[int]) -> bool:
    """Whether a paste that never says it failed is still taken for a failure's: short (what someone handed
    triage as their failure), with no line some rule already read as harmless and none of vLLM's start-up
    progress lines (those are how a healthy start-up reads, its words topical as they are)."""
    if scan.lines_total > FRAGMENT_LINES:
        return False
    from triage.catalogue.stall import progress

    return not any(ln.no in skip_lines or progress(ln.text) for ln in scan.lines)


def _says_failed(ln: Any, skip_lines: set[int]) -> list[str]:
    """The failure words of a line no logger printed (no level), that is no code, traceback row or wrapper and
    not already read: how a paste says in its own words that something failed. Empty otherwise."""
    text = ln.text.strip()
    if ln.level or not text or ln.no in skip_lines or text.startswith(CODE_START) or is_wrapper(ln.text):
        return []
    return failure_words(text)


def fragment_guess(scan: Scan, skip_lines: set[int]) -> Diagnosis | None:
    """A short paste's most failure-like line, when its words also name a subsystem: a guess said as
    one. Only lines with no log level count (a logger's INFO or WARNING line is how a healthy start-up
    reads), and only words from how failures are worded (exception_words.FAILURE_RE): a line that names
    a subsystem without saying anything went wrong is not a failure."""
    best: tuple[int, Any, tuple[str, str], list[str]] | None = None
    for ln in scan.lines:
        said = _says_failed(ln, skip_lines)
        if not said:
            continue
        text = ln.text.strip()
        worded = category_from_words("", text)
        if worded is None:
            continue
        if best is None or len(said) > len(best[3]):
            best = (len(said), ln, worded, said)
    if best is None:
        return None
    _, ln, (cat, why), said = best
    return Diagnosis(
        category=cat, signature="generic.fragment_guess",
        title=f"Likely failure (a guess from a short fragment): {ln.text.strip()[:160]}",
        confidence=GUESS_CONFIDENCE, evidence=[Evidence(ln.no, ln.shown)],
        explanation=[f"category {cat}: likely, because {why}",
                     f"no log level or exception marks a failure here; this line reads as one "
                     f"({', '.join(repr(w) for w in said[:4])})"],
        facts={"category_guessed_from": why, "category_decided": False, "failure_words": said},
        fix=Fix("triage has no rule for this message and the fragment says little else: diagnose the whole "
                "start-up log (`vllm serve ... 2>&1 | tee vllm.log`), or search upstream for the line above.", None),
        first_line=ln.no)
