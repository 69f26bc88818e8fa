"""Diagnoses for failures no hand rule knows, from what vLLM's and its libraries' own source says:

- a log line that matches a mined message template: the module it is raised in names the category,
  and its releases tell whether upgrading changes it;
- a traceback cut before its exception line: the deepest frame the area map knows names the category,
  its functions the step of start-up.

Both rank between the hand rules (which win) and the plain fallback.
"""

from __future__ import annotations

from typing import Any

from triage.catalogue.areas import area_of, area_of_frames, category_for
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
SKIP_TYPES = ("KeyboardInterrupt", "SystemExit", "CancelledError")


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
    excs = [e for e in scan.exceptions if e.line.no not in skip and e.short_type not in SKIP_TYPES
            and not wrapper(e.text)]
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
    if failed:
        for ln in warnings:
            yield ln.text, ln, None, True


def _from_match(cat: Any, matches: list[Any], text: str, line: Line, exc: ExceptionRecord | None,
                words: Any = None) -> Diagnosis:
    best = matches[0]
    # The same message in several modules (or releases): vote among those as good as the best.
    tied = [m for m in matches if m.matched == best.matched]
    exc_type = exc.type if exc is not None else ""
    if exc is not None and exc_type:
        typed = [m for m in tied if m.template.kind == exc.short_type]
        tied = typed or tied
    if line.src:  # "[config.py:123]": the module that logged it
        base = line.src.split(":", 1)[0]
        same = [m for m in tied if m.template.module.rsplit("/", 1)[-1] == base]
        tied = same or tied
    votes: dict[str, int] = {}
    for m in tied:
        c = category_for(m.template.module, text, exc_type or m.template.kind)
        if c:
            votes[c] = votes.get(c, 0) + 1
    t = tied[0].template
    category = max(votes, key=lambda c: (votes[c], c == category_for(t.module, text, exc_type))) if votes else None
    guessed = ""
    if category is None:
        # Where the message lives says nothing (a module of several kinds, or unmapped): the
        # exception's frames or words may, else the kind of message is all there is (said quietly).
        hit = area_of_frames([f.file for f in exc.frames]) if exc is not None else None
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


def from_frames(scan: Scan) -> Diagnosis | None:
    """A traceback the log ends inside: its frames still say where it died."""
    for tb in scan.cut_tracebacks:
        hit = area_of_frames([f.file for f in tb.frames])
        if hit is None:
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
    return None


def _module_of(file: str) -> str:
    p = file.replace("\\", "/")
    for pkg in ("/vllm/", "/site-packages/", "/dist-packages/"):
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
