"""A traceback cut before its message, read by the call it was in.

A paste that ends inside a traceback still shows the source line of its last frame: the call in progress when the
error was raised below it ("inputs = self._process_multimodal(", "tokenizer.apply_chat_template("). In vLLM's request
and start-up paths (vllm/inputs/preprocess.py, the engine's input processor, the renderers) the frames themselves
only say "the engine" or "preprocessing"; the callee says which step, and each step belongs to one area: the model's
multimodal processor (vllm/multimodal/processing: _call_hf_processor, _apply_hf_processor, get_hf_processor,
_process_multimodal in inputs/preprocess.py), the chat template, the tokenizer. A frame deeper in code the area map
knows says more: this reads only tracebacks whose innermost frame is that plumbing.
"""

from __future__ import annotations

import re

from triage.lazyre import LazyPattern, lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

# (callee or frame function, category, the step in words, signature)
CALLS: list[tuple[LazyPattern, str, str, str]] = [
    (lazy(r"\b_?(?:process_multimodal\w*|apply_hf_processor\w*|_?call_hf_processor|cached_apply_hf_processor|"
          r"get_hf_processor|get_hf_mm_inputs|process_mm_inputs|apply_mm_processor\w*)\b"),
     "model_support", "the model's multimodal processor", "model_support.cut_in_mm_processor"),
    (lazy(r"\b(?:apply_hf_chat_template|safe_apply_chat_template|apply_chat_template|render_chat\w*|"
          r"render_jinja_template)\b"),
     "tokenizer_chat_template", "the chat template", "tokenizer.cut_in_tokenizer"),
    (lazy(r"\b(?:get_tokenizer|cached_tokenizer_from_config|init_tokenizer_from_configs?|_tokenize_prompt\w*|"
          r"AutoTokenizer\.from_pretrained)\b"),
     "tokenizer_chat_template", "loading or running the tokenizer", "tokenizer.cut_in_tokenizer"),
    # the engine core building its structured-output manager/backend (V1, 0.8+): the backend's tokenizer support
    (lazy(r"\b(?:StructuredOutputManager|XgrammarBackend|GuidanceBackend|OutlinesBackend|grammar_init)\b"),
     "engine_config", "the structured-output backend's set-up", "config.cut_in_structured_output"),
]
FIXES = {
    "model_support": "The paste ends inside vLLM's call into the model's multimodal processor (the Hugging Face processor "
                     "class transformers gives for this model); the error itself is cut off. Such failures are usually "
                     "a transformers version this vLLM release was not made for (processors change between "
                     "transformers releases: install the version your vLLM pins, `pip show vllm`), or inputs the "
                     "processor refuses. Capture the whole output to see the message.",
    "tokenizer_chat_template": "The paste ends inside the tokenizer or the chat template; the error itself is cut off. "
                               "Check that the model ships a tokenizer and chat template this transformers can load "
                               "(a template for chat requests, --chat-template otherwise), and capture the whole "
                               "output to see the message.",
    "engine_config": "The paste ends inside the engine building its structured-output (guided decoding) backend; the "
                     "error itself is cut off. The backend must support the model's tokenizer (xgrammar and "
                     "MistralTokenizer / --tokenizer-mode mistral did not go together in early V1 releases): upgrade "
                     "vLLM, choose another backend with --structured-outputs-config.backend (older: "
                     "--guided-decoding-backend), and capture the whole output to see the message.",
}
PLAYBOOKS = {"model_support": "model-support", "tokenizer_chat_template": "tokenizer-chat-template",
             "engine_config": "engine-config"}
CONF = 0.55  # above the fallback's frame guess (the call says more than the frames), below any message
# vLLM's request and start-up plumbing: a frame here names no subsystem, the call it makes does
PLUMBING = ("/vllm/inputs/", "/vllm/v1/engine/", "/vllm/engine/", "/vllm/entrypoints/", "/vllm/renderers/",
            "/vllm/multimodal/", "/vllm/transformers_utils/processor", "/vllm/v1/worker/")
TAIL = 40  # lines from the end of a paste where a traceback it ends inside may start


def _call_line(scan: Scan, frame_line_no: int) -> str:
    """The source line printed under the frame line (`File "...", line N, in f`), if the paste kept it."""
    after = [ln for ln in scan.lines if ln.no > frame_line_no][:2]
    for ln in after:
        t = ln.text.strip()
        if t and not t.startswith(("File ", "^", "~")):
            return t
    return ""


def _ends_in_plumbing(scan: Scan) -> tuple[Line, Line] | None:
    """(frame line, call line) when the paste ends on the source line of a frame in vLLM's plumbing, even where the
    traceback reader could not take the traceback whole (a terminal wrapped its rows mid-path)."""
    lines = [ln for ln in scan.lines if ln.text.strip()]
    # a paste cut in the middle of the next frame's path, and the carets under the call, come after the call line
    while lines and (set(lines[-1].text.strip()) <= set("^~ ") or (lines[-1].text.strip().startswith('File "')
                                                                    and '", line ' not in lines[-1].text)):
        lines.pop()
    if len(lines) < 3 or lines[-1].text.strip().startswith(("File ", "Traceback")):
        return None
    tail = lines[-TAIL:]
    start = next((i for i in range(len(tail) - 1, -1, -1) if "Traceback (most recent call last)" in tail[i].text), None)
    if start is None or any(e.line.no > tail[start].no for e in scan.exceptions):
        return None
    # the rows above the call line, joined without the break a terminal put into the path
    above = "".join(ln.text.strip() for ln in tail[max(start + 1, len(tail) - 3):-1])
    frame = next((ln for ln in reversed(tail[start + 1:-1]) if 'File "' in ln.text), None)
    last_path = re.findall(r'([\w/.-]+\.py)", line \d+', above)
    if frame is None or not last_path or not any("/vllm/" in ln.text for ln in tail[start + 1:]) \
            or not any(p.strip("/").split("/", 1)[-1] in last_path[-1] for p in PLUMBING):
        return None
    return frame, lines[-1]


def _cut_call(scan: Scan, want: str) -> Diagnosis | None:
    found: list[tuple[Line, str, list[str]]] = []
    for tb in scan.cut_tracebacks:
        inner = "/" + tb.frames[-1].file.replace("\\", "/") if tb.frames else ""
        if any(p in inner for p in PLUMBING):
            found.append((tb.line, _call_line(scan, tb.line.no), [f.func for f in tb.frames[-3:]]))
        # else a deeper frame in code of its own says more
    if not scan.cut_tracebacks:
        ends = _ends_in_plumbing(scan)
        if ends is not None:
            found.append((ends[0], ends[1].text.strip(), []))
    for line, call, funcs in found:
        for rx, cat, step, sig in CALLS:
            if cat != want:
                continue
            m = rx.search(call) or next((rx.search(f) for f in reversed(funcs) if rx.search(f)), None)
            if m is None:
                continue
            return Diagnosis(
                category=cat, signature=sig,
                title=f"Failed inside {step} (the traceback is cut in {m.group(0)}); the error message itself is cut off",
                confidence=CONF, evidence=[Evidence(line.no, line.shown)],
                facts={"call": m.group(0), "step": step,
                       "category_guessed_from": "the call in progress where the traceback is cut"},
                fix=Fix(FIXES[cat], PLAYBOOKS[cat]),
                first_line=line.no)
    return None

RULES = [
    Rule(signature="model_support.cut_in_mm_processor", category="model_support",
         title="Failed inside the model's multimodal processor (traceback cut)", fix="",
         check=lambda scan, env: _cut_call(scan, "model_support"), playbook="model-support", confidence=CONF),
    Rule(signature="tokenizer.cut_in_tokenizer", category="tokenizer_chat_template",
         title="Failed inside the tokenizer or chat template (traceback cut)", fix="",
         check=lambda scan, env: _cut_call(scan, "tokenizer_chat_template"), playbook="tokenizer-chat-template",
         confidence=CONF),
    Rule(signature="config.cut_in_structured_output", category="engine_config",
         title="Failed inside the structured-output backend's set-up (traceback cut)", fix="",
         check=lambda scan, env: _cut_call(scan, "engine_config"), playbook="engine-config", confidence=CONF),
]
