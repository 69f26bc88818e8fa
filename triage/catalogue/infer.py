"""Diagnoses for failures no hand rule knows, from what vLLM's and its libraries' own source says:

- a log line that matches a mined message template: the module it is raised in names the category,
  and its releases tell whether upgrading changes it;
- a traceback cut before its exception line: the deepest frame the area map knows names the category,
  its functions the step of start-up.

Both rank between the hand rules (which win) and the plain fallback.
"""

from __future__ import annotations

from typing import Any

from triage.areas import area_of, area_of_trace, category_for
from triage.catalogue.advice import quoted
from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.logread.traceback import ExceptionRecord, phase_of
from triage.model import Diagnosis, Evidence, Fix

CONF_EXACT = 0.5  # every literal piece of the template is in the line
CONF_PARTIAL = 0.44  # most of them: a cut line or a fragment
CONF_WARNING = 0.38  # only a warning matched: it may be the cause, or only what came before it
CONF_FRAMES = 0.4
CONF_NATIVE = 0.45  # a native library's message, reviewed by hand
CONF_GUESSED = 0.38  # the module holding the message says nothing: its frames or words decided
CONF_UNPLACED = 0.3  # ... and neither did they: the category is a guess by the kind of message
MAX_LINES = 2000  # lines looked up, errors first: a long log's rest is read by the hand rules
MAX_ROOTS = 2
FRAGMENT_LINES = 40  # an input this short is a paste, not a whole log
SHORT_PASTE = 12  # ... and this short, a paste of the lines its author took for the failure
SKIP_TYPES = ("KeyboardInterrupt", "SystemExit", "CancelledError")
# Python 3.11+ prints a TaskGroup's failure (starlette/anyio in the API server) as a group first and the
# exceptions it holds after it, each in its own "| " frame: the group says only that something inside failed.
GROUP_TYPES = ("ExceptionGroup", "BaseExceptionGroup")


def drop_groups(excs: list[ExceptionRecord]) -> list[ExceptionRecord]:
    """The exceptions without the groups that only hold them (a group alone stays: it is all there is)."""
    held = [e for e in excs if e.short_type not in GROUP_TYPES]
    return held or excs


def diagnose_unknown(scan: Scan, skip_lines: set[int], wrapper: Any, frames: bool = True,
                     words: Any = None) -> Diagnosis | None:
    """The best catalogue match among the log's exceptions and error lines, else a cut traceback's
    frames (unless `frames` is False: the caller reads a raised exception first); None when neither
    says anything. `skip_lines`: harmless or already explained lines; `wrapper(text)`: whether a line
    is only vLLM's "start-up failed" cascade; `words(exc_type, text)`: (category, why) when an exception's
    words decide it (triage.exception_words), for a message whose module says nothing."""
    from triage.catalogue.store import load

    native = _native(scan, skip_lines)
    if native is not None:  # a library's own statement of the cause (Ray's OOM killer): before its consequences
        return native
    cat = load()
    if cat is not None:
        for text, line, exc, logged_ok in _candidates(scan, skip_lines, wrapper):
            matches = cat.match(text)
            if not logged_ok:
                matches = [m for m in matches if not m.template.logged]
            if matches:
                return _from_match(cat, matches, text, line, exc, words)
    return from_frames(scan) if frames else None


def _candidates(scan: Scan, skip: set[int], wrapper: Any):
    """(text, line, exception or None, whether a logged-warning template may explain it), errors first."""
    excs = drop_groups([e for e in scan.exceptions if e.line.no not in skip and e.short_type not in SKIP_TYPES
                        and not wrapper(e.text)])
    roots = []
    for e in sorted(excs, key=lambda e: (not e.in_traceback, e.line.no)):
        while e.caused_by is not None and not wrapper(e.caused_by.text):
            e = e.caused_by
        roots.append(e)
    seen: set[int] = set()
    for e in roots[:MAX_ROOTS]:  # later exceptions are mostly consequences of the first
        if e.line.no in seen:
            continue
        seen.add(e.line.no)
        extra = " ".join(x.text.strip() for x in e.extra[:4])
        yield (e.message + (" " + extra if extra else "")) or e.text, e.line, e, False
        # a message quoted inside it (an HTTP error body, an escaped traceback) was read as lines of
        # their own, numbered as the line that holds them
        for ln in scan.lines:
            if ln.no == e.line.no and ln is not e.line and ln.text.strip() and ln.text != e.line.text:
                yield ln.text, ln, e, False
    n = 0
    errors: list[Line] = []
    plain: list[Line] = []
    warnings: list[Line] = []
    for ln in scan.lines:
        if ln.no in seen or ln.no in skip or ln.text.startswith((" ", "\t", "Traceback", "File ")) or wrapper(ln.text):
            continue
        n += 1
        if n > MAX_LINES:
            break
        (errors if ln.level in ("ERROR", "CRITICAL") else warnings if ln.level == "WARNING"
         else plain if not ln.level else []).append(ln)
    if roots:
        # An exception no template knows is the cause still (the fallback reads its frames); an
        # error logged before it may have said why.
        first = min(e.line.no for e in roots)
        for ln in errors:
            if ln.no < first:
                yield ln.text, ln, None, True
        return
    for ln in errors:
        yield ln.text, ln, None, True
    # A healthy log prints warnings and plain lines too: they count only when something failed, or
    # when the whole input is a fragment pasted from a ticket.
    failed = bool(errors or scan.cut_tracebacks) or any(wrapper(ln.text) for ln in scan.lines[-200:])
    if failed or scan.lines_total <= FRAGMENT_LINES:
        for ln in plain:  # the message without its ERROR prefix or exception type
            yield ln.text, ln, None, False
    # A paste of a few lines with nothing worse than a warning: the warning is what its author saw go
    # wrong (a healthy start-up is longer; a match here stays below the harmless ceiling).
    if failed or scan.lines_total <= SHORT_PASTE:
        for ln in warnings:
            yield ln.text, ln, None, True


def _own_words(t: Any, text: str) -> str:
    """The words a matched line says in the message's own literal pieces: what fills its holes is a value (a model
    path under /dev/shm, a name) whose words say nothing of the failure; except a message that ends with a value
    (`... with %r`, `: {e}`), where that value is the underlying error."""
    return text if t.open_end else " ".join(t.pieces)


def _from_match(cat: Any, matches: list[Any], text: str, line: Line, exc: ExceptionRecord | None,
                words: Any = None) -> Diagnosis:
    best = matches[0]
    # The same message in several modules (or releases): vote among those as good as the best.
    tied = [m for m in matches if m.matched == best.matched]
    exc_type = exc.type if exc is not None else ""
    if exc is not None and exc_type:
        typed = [m for m in tied if m.template.kind == exc.short_type]
        tied = typed or tied
    if exc is not None and exc.frames:
        # the traceback's frames name the file that raised it: of the modules holding the same words, that one
        files = ["/" + f.file.replace("\\", "/").lstrip("/") for f in exc.frames]
        framed = [m for m in tied if any(f.endswith("/" + m.template.module) for f in files)]
        tied = framed or tied
    if line.src:  # "[config.py:123]": the module that logged it
        base = line.src.split(":", 1)[0]
        same = [m for m in tied if m.template.module.rsplit("/", 1)[-1] == base]
        tied = same or tied
    votes: dict[str, int] = {}
    for m in tied:
        c = category_for(m.template.module, _own_words(m.template, text), exc_type or m.template.kind)
        if c:
            votes[c] = votes.get(c, 0) + 1
    t = tied[0].template
    category = max(votes, key=lambda c: (votes[c], c == category_for(t.module, _own_words(t, text), exc_type))) \
        if votes else None
    guessed = ""
    if category is None:
        # Where the message lives says nothing (a module of several kinds, or unmapped): the
        # exception's frames or words may, else the kind of message is all there is (said quietly).
        hit = area_of_trace(exc.frames) if exc is not None else None
        worded = words(exc_type, text) if words is not None else None
        if hit is not None:
            category, guessed = hit[0], f"the traceback's innermost frame that is not plumbing ({hit[1].rsplit('/', 1)[-1]})"
        elif worded is not None:
            category, guessed = worded[0], worded[1]
        else:
            category, guessed = ("engine_config" if not t.logged else "environment"), "nothing decisive"
    conf = CONF_EXACT if best.share >= 0.999 else CONF_PARTIAL
    if t.logged and exc is None and line.level == "WARNING":
        conf = CONF_WARNING
    if guessed:
        conf = min(conf, CONF_GUESSED if guessed != "nothing decisive" else CONF_UNPLACED)
    if len(votes) > 1:
        conf -= 0.04  # modules disagree on what it is
    same_pkg = [m.template for m in tied if m.template.package == t.package]
    order = cat.releases[cat.packages.index(t.package)]
    first = min((x.first for x in same_pkg), key=order.index)
    last = max((x.last for x in same_pkg), key=order.index)
    releases = first if first == last else f"{first}-{last}"
    kind = "logged" if t.logged else "raised"
    i, j = order.index(first), order.index(last)
    facts: dict[str, Any] = {
        "catalogue": {"package": t.package, "module": t.module, "kind": t.kind, "template": t.shown(),
                      "first_release": first, "last_release": last, "newest_release": t.newest,
                      # the mined releases around the range: the message is absent in both
                      "absent_in": order[i - 1] if i > 0 else None,
                      "gone_by": order[j + 1] if j + 1 < len(order) else None,
                      "modules": sorted({m.template.module for m in tied})[:5]},
    }
    if exc is not None:
        facts["exception"] = exc.type
        if exc.frames:
            ph = phase_of(exc.frames)
            if ph:
                facts["phase"] = ph
    evidence = [Evidence(line.no, line.shown)]
    where = f"{kind} in {t.module} ({t.package} {releases})"
    facts["source"] = where
    title = f"{_short(text)} ({kind} in {t.module.rsplit('/', 1)[-1]})"
    said = quoted(text)
    if said:
        fix = Fix(f"{said} ({t.package}'s own message, {where}; triage has no hand-written rule for it.) "
                  + _release_words(t.package, last, t.newest), None)
    else:
        fix = Fix(f"This is {t.package}'s own message, {where}; triage has no hand-written rule for it. "
                  + _release_words(t.package, last, t.newest)
                  + " Search upstream for its text, or file it with `triage report --log FILE`.", None)
    why = [f"{where}: the line matches this message of {t.package}'s source ({t.shown()[:160]})",
           (f"category {category}: {t.module} is {category} code" if area_of(t.module) == category else
            f"category {category}, likely: from {guessed} ({t.module} is {area_of(t.module) or 'unmapped'} code)"
            if guessed else
            f"category {category} from the message's words ({t.module} is {area_of(t.module) or 'unmapped'} code)") + (
               f" (the modules holding it disagree: {', '.join(sorted(votes))})" if len(votes) > 1 else ""),
           _release_words(t.package, last, t.newest)]
    return Diagnosis(category=category, signature="catalogue." + _sig(t.module), title=title,
                     confidence=round(conf, 2), evidence=evidence, facts=facts, fix=fix, first_line=line.no,
                     explanation=why)


def _native(scan: Scan, skip: set[int]) -> Diagnosis | None:
    from triage.catalogue.native import find

    for ln in scan.lines:
        if ln.no in skip:
            continue
        n = find(ln.text)
        if n is None:
            continue
        where = f"printed by {n.where} of {n.package}"
        return Diagnosis(
            category=n.category, signature=f"catalogue.native.{n.package}",
            title=f"{n.meaning[:1].upper()}{n.meaning[1:]}", confidence=CONF_NATIVE,
            evidence=[Evidence(ln.no, ln.shown)],
            facts={"source": where, "catalogue": {"package": n.package, "module": n.where, "template": n.text}},
            fix=Fix(f"This message is {where}: {n.meaning}. triage has no hand-written rule "
                    "for it; search upstream for its text, or file it with `triage report --log FILE`.", None),
            first_line=ln.no, explanation=[f"{where}: the line holds its message ({n.text})"])
    return None


CONF_CUT_WORDED = 0.35  # a cut traceback whose frames say nothing, read by the failure line printed before it
CUT_LOOKBACK = 40  # lines before a cut traceback where a library may have said what went wrong


def from_frames(scan: Scan, words: Any = None, failed: Any = None) -> Diagnosis | None:
    """A traceback the log ends inside: its frames still say where it died. When no frame is in code
    the area map knows (a redacted path, plumbing only), a line printed just before it that says
    something failed and names a subsystem (`words(exc_type, text)`: (category, why); `failed(text)`:
    its failure words) decides, said as likely."""
    unplaced: ExceptionRecord | None = None
    for tb in scan.cut_tracebacks:
        typed = _by_head_type(tb, words) if tb.type and words is not None else None
        if typed is not None:
            return typed
        hit = area_of_trace(tb.frames)
        if hit is None:
            worded = _worded_before(scan, tb, words, failed) if words is not None and failed is not None else None
            if worded is not None:
                return worded
            stepped = _by_step(tb)
            if stepped is not None:
                return stepped
            unplaced = unplaced or tb
            continue
        category, file = hit
        frame = next(f for f in reversed(tb.frames) if f.file == file)
        short = _module_of(file)
        phase = phase_of(tb.frames)
        facts: dict[str, Any] = {"raised_at": f"{short}:{frame.line} in {frame.func}",
                                 "category_guessed_from": "traceback frames (the exception line is cut)"}
        if phase:
            facts["phase"] = phase
        during = f" during {phase}" if phase else ""
        return Diagnosis(
            category=category, signature="catalogue.cut_traceback",
            title=f"Failed in {short} ({frame.func}){during}; the error message itself is cut off",
            confidence=CONF_FRAMES, evidence=[Evidence(tb.line.no, tb.line.shown)], facts=facts,
            fix=Fix("The traceback ends before its exception line. The deepest known frame says which part "
                    "failed; capture the whole output (`vllm serve ... 2>&1 | tee vllm.log`) to see the message.",
                    None),
            first_line=tb.line.no)
    if unplaced is None:
        return None
    return _by_words(scan, unplaced) or _import_chain(unplaced)


def _import_chain(tb: ExceptionRecord) -> Diagnosis | None:
    """A traceback cut inside a chain of imports (every frame a module's top level): something did not import,
    which is mostly the install (a missing or mismatched package, a build for another platform); a guess."""
    if not tb.frames or tb.frames[-1].func != "<module>":
        return None
    short = _module_of(tb.frames[-1].file)
    return Diagnosis(
        category="install_mismatch", signature="catalogue.cut_traceback",
        title=f"Failed while importing {short}; the error message itself is cut off",
        confidence=CONF_STEP, evidence=[Evidence(tb.line.no, tb.line.shown)],
        facts={"raised_at": f"{short}:{tb.frames[-1].line} at import",
               "category_guessed_from": "a traceback of imports only (a package that does not import)",
               "category_decided": False},
        explanation=["category install_mismatch: likely, because the traceback is a chain of imports cut before "
                     "its message: a package did not import, which is mostly the install"],
        fix=Fix("The traceback ends before its exception line, inside an import. Capture the whole output "
                "(`vllm serve ... 2>&1 | tee vllm.log`) to see which package failed to import and why.", None),
        first_line=tb.line.no)


CONF_CUT_WORDS = 0.3
CUT_WORDS_P = 0.95  # frames of plumbing only: the word model must be all but sure


def _by_words(scan: Scan, tb: ExceptionRecord) -> Diagnosis | None:
    """A cut traceback whose frames are all plumbing (the engine's wait on its workers, an import chain):
    the word model, learnt from real labelled logs, reads the whole failure's words."""
    from triage.catalogue.wordclass import guess

    g = guess(scan, CUT_WORDS_P)
    if g is None:
        return None
    cat, p, led = g
    phase = phase_of(tb.frames)
    during = f" during {phase}" if phase else ""
    facts: dict[str, Any] = {"category_guessed_from": f"the failure's words ({', '.join(led)})",
                             "category_decided": False}
    if phase:
        facts["phase"] = phase
    return Diagnosis(
        category=cat, signature="catalogue.cut_traceback",
        title=f"A traceback cut before its message{during}; its words read like "
              f"{'an' if cat[0] in 'aeiou' else 'a'} {cat.replace('_', ' ')} failure",
        confidence=CONF_CUT_WORDS, evidence=[Evidence(tb.line.no, tb.line.shown)], facts=facts,
        explanation=[f"category {cat}: likely, because its words ({', '.join(led)}) are those of {cat} failures in "
                     f"the real failure logs triage learnt from ({p:.0%}); no frame names the subsystem"],
        fix=Fix("The traceback ends before its exception line and its frames are vLLM's plumbing only. Capture the "
                "whole output (`vllm serve ... 2>&1 | tee vllm.log`) to see the message, then diagnose that log.",
                None),
        first_line=tb.line.no)


CONF_HEAD_TYPE = 0.55  # the exception's type, printed in a notebook traceback's head, names the subsystem


def _by_head_type(tb: ExceptionRecord, words: Any) -> Diagnosis | None:
    """A notebook (IPython) traceback cut before its last line: its head already named the exception
    ("OutOfMemoryError      Traceback (most recent call last)"); a type that names a subsystem decides."""
    worded = words(tb.type, tb.type)  # a type is one specific word ("OutOfMemoryError"): what it names decides
    if worded is None:
        return None
    cat, why = worded
    phase = phase_of(tb.frames)
    during = f" during {phase}" if phase else ""
    facts: dict[str, Any] = {"exception": tb.type, "category_guessed_from": f"the traceback's head: {why}"}
    if phase:
        facts["phase"] = phase
    return Diagnosis(
        category=cat, signature="catalogue.cut_traceback",
        title=f"{tb.type}{during}; the notebook traceback is cut before its message",
        confidence=CONF_HEAD_TYPE, evidence=[Evidence(tb.line.no, tb.line.shown)], facts=facts,
        explanation=[f"category {cat}: the notebook printed the exception type {tb.type} above its frames ({why})"],
        fix=Fix("The notebook's traceback is cut before the exception's message; its type is in the head. Paste the "
                "cell's whole output (the last line holds the message) to see the details.", None),
        first_line=tb.line.no)


CONF_STEP = 0.3  # only the step of start-up it died in: a guess, said as one
# Steps of start-up (traceback.STEPS) that belong to one subsystem whatever failed in them; the others
# (weight loading, memory profiling, warm-up) run code of every kind.
STEP_AREAS = {"CUDA graph capture": "cudagraph_capture", "KV cache allocation": "kv_cache_memory",
              "distributed start-up": "distributed", "tokenizer loading": "tokenizer_chat_template",
              "config loading": "model_loading", "argument checking": "engine_config", "device start-up": "environment"}


def _by_step(tb: ExceptionRecord) -> Diagnosis | None:
    """A cut traceback of vLLM's start-up whose frames name no subsystem but the step it died in does."""
    if not any("/vllm/" in "/" + f.file.replace("\\", "/") for f in tb.frames):
        return None
    phase = phase_of(tb.frames)
    cat = STEP_AREAS.get(phase or "")
    if cat is None:
        return None
    frame = tb.frames[-1]
    return Diagnosis(
        category=cat, signature="catalogue.cut_traceback",
        title=f"Failed during {phase} (last frame {frame.func}); the error message itself is cut off",
        confidence=CONF_STEP, evidence=[Evidence(tb.line.no, tb.line.shown)],
        facts={"phase": phase, "raised_at": f"{_module_of(frame.file)}:{frame.line} in {frame.func}",
               "category_guessed_from": f"the step of start-up it died in ({phase})", "category_decided": False},
        explanation=[f"category {cat}: likely, because the traceback died during {phase}, and no frame or "
                     "message says more"],
        fix=Fix("The traceback ends before its exception line; only the step it died in is known. Capture the "
                "whole output (`vllm serve ... 2>&1 | tee vllm.log`) to see the message.", None),
        first_line=tb.line.no)


def _worded_before(scan: Scan, tb: ExceptionRecord, words: Any, failed: Any) -> Diagnosis | None:
    lines = [ln for ln in scan.lines if tb.line.no - CUT_LOOKBACK <= ln.no < tb.line.no]
    for ln in reversed(lines):
        t = ln.text.strip()
        if not t or ln.level in ("INFO", "DEBUG") or t.startswith(("File ", "Traceback")) or not failed(t):
            continue
        worded = words("", t)
        if worded is None:
            continue
        cat, why = worded
        phase = phase_of(tb.frames) if tb.frames else None
        during = f" during {phase}" if phase else ""
        facts: dict[str, Any] = {"category_guessed_from": f"the failure printed before the cut traceback: {why}",
                                 "category_decided": False}
        if phase:
            facts["phase"] = phase
        return Diagnosis(
            category=cat, signature="catalogue.cut_traceback",
            title=f"Failed{during}; the error message is cut off, and before it: {_short(t)[:110]}",
            confidence=CONF_CUT_WORDED, evidence=[Evidence(ln.no, ln.shown), Evidence(tb.line.no, tb.line.shown)],
            facts=facts, explanation=[f"category {cat}: likely, because {why} in the line printed before the "
                                      "traceback, whose frames name no subsystem"],
            fix=Fix("The traceback ends before its exception line and its frames name no subsystem; the line "
                    "printed before it says what failed. Capture the whole output (`vllm serve ... 2>&1 | tee "
                    "vllm.log`) to see the message.", None),
            first_line=ln.no)
    return None


def _module_of(file: str) -> str:
    p = file.replace("\\", "/")
    # the last package marker wins: a checkout named vllm/ may hold a virtualenv's site-packages
    pkg = max(("/vllm/", "/site-packages/", "/dist-packages/"), key=lambda k: p.rfind(k))
    if pkg in p:
        rest = p.rsplit(pkg, 1)[-1]
        return ("vllm/" + rest) if pkg == "/vllm/" else rest
    return p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] if p.count("/") >= 2 else p


def _release_words(package: str, last: str, newest: str) -> str:
    if last != newest:
        return f"It is gone from {package} releases after {last} (the newest is {newest}): upgrading changes this code."
    return f"It is still in {package} {newest}: upgrading alone does not remove this check."


def _short(text: str) -> str:
    t = " ".join(text.split())
    return t if len(t) <= 140 else t[:137] + "..."


def _sig(module: str) -> str:
    m = module[:-3] if module.endswith(".py") else module
    return m.replace("/", ".")


# ---- bare asserts -------------------------------------------------------------------------------

CONF_ASSERT = 0.4  # the asserted expression is in code of one subsystem
CONF_ASSERT_FRAMED = 0.45  # ... and the traceback's own frame is in that code
ASSERT_LOOKBACK = 5  # lines above the AssertionError where its source line may be printed


# An assert that a model's sizes (heads, experts, layers, ...) split evenly over a parallel size checks the
# launch's tensor/pipeline/expert parallelism against the model, whatever module holds it (model code
# mostly): `assert self.total_num_kv_heads % tp_size == 0`.
PARALLEL_SPLIT_RE = lazy(r"(?:head|expert|intermediate|hidden|layer|vocab|rank|output_size)\w*(?:\)|\])*\s*%\s*"
                         r"\(?[\w.]*(?:tp|world_size|parallel|pp_size|ep_size|dp_size)\w*(?:\(\))?\)?\s*==\s*0")


def assert_source(scan: Scan, exc: ExceptionRecord) -> Line | None:
    """The `assert ...` source line printed above a bare AssertionError (under its last frame)."""
    lines = scan.lines
    for i in range(len(lines) - 1, -1, -1):
        if lines[i] is exc.line:
            for ln in reversed(lines[max(0, i - ASSERT_LOOKBACK):i]):
                t = ln.text.strip()
                if t.startswith("assert ") or t.startswith("assert("):
                    return ln if ln.proc == exc.line.proc else None
                if t.startswith("File "):  # the frame's header: its source line was not printed
                    return None
            return None
    return None


def assert_place(scan: Scan, exc: ExceptionRecord) -> tuple[str, str, float, dict[str, Any]] | None:
    """(category, why, confidence, facts) for a bare AssertionError whose source line names an assert
    of vLLM's own code (scripts/mine_asserts.py): the module holding it decides, the traceback's frames
    pick among modules holding the same expression. None when the line is absent or unknown, or the
    modules holding it are of several kinds."""
    from triage.catalogue.asserts import expression, load

    src = assert_source(scan, exc)
    expr = expression(src.text) if src is not None else None
    table = load() if expr else None
    if src is None or expr is None or table is None:
        return None
    sites = table.sites(expr)
    split = PARALLEL_SPLIT_RE.search(expr) is not None
    if not sites:
        if not split:
            return None
        # a release not mined (or a fork): the expression still says what it checks
        return ("engine_config", f"the bare `assert {expr}` checks that the model's sizes split evenly over the "
                "parallel ranks the launch asked for", CONF_ASSERT, {"assert": {"expression": expr}})
    files = ["/" + f.file.replace("\\", "/").lstrip("/") for f in exc.frames]
    # a frame header the traceback reader did not take (a paste without line numbers) still names the file
    near = " ".join(ln.text for ln in scan.lines[max(0, scan.lines.index(src) - 3):scan.lines.index(src)])
    framed = [s for s in sites if any(f.endswith("/" + s.module) for f in files)
              or "/" + s.module.rsplit("/", 1)[-1] + '"' in near]
    chosen = framed or sites
    cats = {"engine_config" if split else category_for(s.module, expr, "AssertionError") for s in chosen}
    cat = cats.pop() if len(cats) == 1 else None
    if cat is None:
        return None
    order = table.releases
    site = max(chosen, key=lambda s: (order.index(s.last), order.index(s.first)))
    first = min((s.first for s in chosen), key=order.index)
    last = max((s.last for s in chosen), key=order.index)
    releases = first if first == last else f"{first}-{last}"
    where = site.module if len(chosen) == 1 else f"{site.module} (and {len(chosen) - 1} more of its kind)"
    why = (f"the bare `assert {expr}` (in {where}, vLLM {releases}) checks that the model's sizes split evenly "
           "over the parallel ranks the launch asked for" if split else
           f"the bare `assert {expr}` is in {where}, {cat} code (vLLM {releases})")
    i, j = order.index(first), order.index(last)
    facts = {"assert": {"expression": expr, "module": site.module, "modules": sorted(s.module for s in chosen)[:5],
                        "first_release": first, "last_release": last, "newest_release": site.newest},
             # the shape the upgrade advisor reads a mined message's releases from (upstream/advisor.py)
             "catalogue": {"package": "vllm", "module": site.module, "kind": "AssertionError",
                           "template": f"assert {expr}", "first_release": first, "last_release": last,
                           "newest_release": site.newest, "absent_in": order[i - 1] if i > 0 else None,
                           "gone_by": order[j + 1] if j + 1 < len(order) else None},
             "source": f"asserted in {site.module} (vllm {releases})",
             "releases_say": _release_words("vllm", last, site.newest)}
    return cat, why, (CONF_ASSERT_FRAMED if framed else CONF_ASSERT), facts
