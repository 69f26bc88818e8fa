"""Failures of the V0-engine era (vLLM 0.3-0.6) told the way 2024's threads tell them.

- A chat template that refuses the messages' roles: the templates of Mistral, Mixtral, Llama 2 and Gemma call
  `raise_exception(...)` when user/assistant turns do not alternate ("Conversation roles must alternate
  user/assistant/user/assistant/...", Mistral v0.3: "After the optional system message, conversation roles must
  alternate ..."), on a system message (Gemma: "System role not supported") or on another role (Mistral: "Only user
  and assistant roles are supported!", "Only user, assistant and tool roles are supported, with the exception of
  an initial optional system message!"). vLLM's OpenAI server answers 400 with those words and no jinja2 prefix.
- FlashInfer imported behind a guard: vLLM 0.5's attention/backends/flashinfer.py and worker/model_runner.py do
  `try: from flashinfer import BatchDecodeWithPagedKVCacheWrapper ... except ImportError: ... = None`, so with
  VLLM_ATTENTION_BACKEND=FLASHINFER (which Gemma 2 needed for its logit soft-capping in 0.5.1-0.5.3) and no
  matching flashinfer wheel, the first use calls None: "TypeError: 'NoneType' object is not callable".
- The CPU backend's build refusing the machine's instruction set (cmake/cpu_extension.cmake): "vLLM CPU backend
  requires AVX512 ISA support." (0.4-0.5), later "... requires AVX512 or AVX2 ISA support.", "... AVX512, AVX2,
  Power9+ ISA, S390X ISA, ARMv8 or RISC-V support." (CMake wraps the longer forms).
- A report whose traceback stops before the message while its title says the model's architecture is not
  supported (an embedding checkpoint declaring `MistralModel`, which 0.3's registry did not have).
- Code written for another release calling the engine's request methods: AsyncLLMEngine/LLMEngine's
  generate()/add_request() took `prompt=` and `prompt_token_ids=` up to 0.4.x, `inputs=` from 0.4.3/0.5 to 0.6.0,
  and `prompt=` again from 0.6.2/0.6.3 (`inputs=` deprecated, gone with V0). A thread often quotes only Python's
  message ("AsyncLLMEngine.generate() got an unexpected keyword argument 'inputs'") without "TypeError:".
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule
from triage.rules.oom_stated import NOT_STATED_RE, STATED_CONFIDENCE, _prose

# ---- FlashInfer's guarded import left None ------------------------------------------------------------------

_NONE_CALL_RE = lazy(r"'NoneType' object is not callable")
# the frame (FlashInfer's backend, where vLLM 0.5 also guarded vllm_flash_attn's flash_attn_varlen_func) or the
# source row under it (model_runner building FlashInfer's wrappers) when the guarded import failed
_FLASHINFER_CALL_RE = lazy(r"\b(?:CUDAGraph)?Batch(?:Decode|Prefill)With(?:Paged|Ragged)KVCacheWrapper\(|"
                           r"attention[/\\]backends[/\\]flashinfer\.py")
# the run chose FlashInfer (the backend variable, vLLM's selection line, the package named)
_FLASHINFER_WORD_RE = lazy(r"flashinfer", re.IGNORECASE)
# Gemma 2 (vLLM 0.5.1-0.5.3 refused it on any backend but FlashInfer, for its logit soft-capping)
_GEMMA2_RE = lazy(r"\bgemma[\s_-]?2\b", re.IGNORECASE)


def _failed_in_flashinfer(scan: Scan, exc: Any) -> bool:
    """The exception's last frame is FlashInfer's backend, or its source row calls a guarded FlashInfer name."""
    f = exc.frames[-1]
    if _FLASHINFER_CALL_RE.search(f.file):
        return True
    where = f", line {f.line}, in {f.func}"
    lines = scan.lines
    for i, ln in enumerate(lines):
        if where in ln.text and ln.no < exc.line.no:
            nxt = lines[i + 1] if i + 1 < len(lines) else None
            if nxt is not None and _FLASHINFER_CALL_RE.search(nxt.text):
                return True
    return False


def _flashinfer_none(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "'NoneType' object is not callable" not in joined:
        return None
    rule = RULES_BY_SIG["kernel.flashinfer_import_none"]
    framed = False
    for exc in scan.exceptions:
        if not exc.frames or "'NoneType' object is not callable" not in exc.message:
            continue
        if _failed_in_flashinfer(scan, exc):
            return rule.diagnosis(scan, [(exc.line, _NONE_CALL_RE.search(exc.line.text))], confidence=0.85,
                                  facts={"how": "the call that failed is FlashInfer's (its guarded import left it unset)"})
        framed = True
    if framed:
        return None  # a traceback that shows some other callable being None
    hit = next((ln for ln in scan.lines if _NONE_CALL_RE.search(ln.text)), None)
    if hit is None:
        return None
    if _FLASHINFER_WORD_RE.search(joined):
        how, conf = "the run uses the FlashInfer attention backend and no traceback shows another cause", 0.7
    elif _GEMMA2_RE.search(joined):
        how, conf = ("Gemma 2 ran on FlashInfer in vLLM 0.5.1-0.5.3 (its logit soft-capping), and no traceback "
                     "shows another cause"), 0.6
    else:
        return None
    return rule.diagnosis(scan, [(hit, _NONE_CALL_RE.search(hit.text))], facts={"how": how}, confidence=conf)


# ---- the report's title: the model's architecture is not supported ---------------------------------------

_ARCH_STATED_RE = lazy(r"\b(?:model|(?P<arch>[A-Z]\w*(?:ForCausalLM|ForConditionalGeneration|Model)))\s+"
                       r"architectures?\b[^.]{0,40}?\b(?:is|are)\s+(?:still\s+)?not\s+(?:yet\s+)?supported\b"
                       r"|\b(?:unsupported|not\s+supported)\s+model\s+architectures?\b"
                       r"|\bdoes(?:n't| not)\s+support\s+(?:the\s+)?(?:\w+\s+)?model\s+architectures?\b", re.IGNORECASE)


def _arch_stated(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    if "rchitecture" not in scan.joined_text():
        return None
    for ln in scan.lines:
        text = _prose(ln)
        if not text:
            continue
        m = _ARCH_STATED_RE.search(text)
        if m is None or NOT_STATED_RE.search(text):
            continue
        return RULES_BY_SIG["model_support.arch_unsupported_stated"].diagnosis(
            scan, [(ln, m)], facts={"stated_by": "the report's own words"}, confidence=STATED_CONFIDENCE)
    return None


# ---- the engine's request methods called with another release's keywords ---------------------------------

_ENGINE_KWARG_RE = lazy(r"(?<![\w.])(?P<callee>(?:Async)?LLMEngine|_AsyncLLMEngine|AsyncLLM)\.(?P<method>generate|"
                        r"add_request|encode|process_request|abort)\(\) got an unexpected keyword argument "
                        r"'(?P<arg>\w+)'")

_KWARG_ADVICE = {
    "inputs": "`inputs=` exists only from vLLM 0.4.3 (0.5.0) to 0.6.x: older releases take `prompt=` (and "
              "`prompt_token_ids=`), newer ones `prompt=` (V1's AsyncLLM of 0.8+ has no `inputs`).",
    "prompt": "the first parameter was called `inputs` from vLLM 0.4.3 (0.5.0) to 0.6.1; `prompt=` works before "
              "and after those releases.",
    "prompt_token_ids": "`prompt_token_ids=` was a parameter only up to vLLM 0.4.x: pass the ids in the prompt "
                        "instead (`{'prompt_token_ids': ids}`, TokensPrompt).",
}


def _engine_kwarg(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    if "got an unexpected keyword argument" not in scan.joined_text():
        return None
    for ln in scan.lines:
        m = _ENGINE_KWARG_RE.search(ln.text)
        if m is None:
            continue
        arg = m.group("arg")
        advice = _KWARG_ADVICE.get(arg, f"'{arg}' is a parameter of {m.group('callee')}.{m.group('method')}() "
                                        "in other vLLM releases only.")
        return RULES_BY_SIG["api.engine_method_kwarg_release"].diagnosis(
            scan, [(ln, m)], facts={"advice": advice})
    return None


def _isa_facts(m: "re.Match[str]", line: Any, scan: Scan) -> dict[str, Any]:
    isa = re.sub(r"\s+(?:or|and)$|\s*(?:ISA\s+)?support$", "", m.group("isa").strip()).strip()
    return {"isa": isa or "an instruction set this CPU lacks"}


RULES = [
    Rule(signature="tokenizer.template_roles_refused", category="tokenizer_chat_template",
         title="The model's chat template refuses the request's message roles ({detail})",
         fix="The chat template raised on the messages' order or roles: Mistral/Mixtral/Llama 2/Gemma templates want "
             "user and assistant turns to alternate (one optional system message first; Gemma's take none). Merge "
             "consecutive messages of one role in the client (fold a system message into the first user turn for "
             "Gemma), or serve a more permissive --chat-template.",
         # (behind jinja2's exception name the words are tokenizer.template_error's)
         patterns=[r"^(?!.*jinja2\.exceptions).*?(?P<detail>[Cc]onversation roles must)(?: alternate\b|\s*$)",
                   r"^(?!.*jinja2\.exceptions).*?(?P<detail>System role not supported)\b",
                   r"^(?!.*jinja2\.exceptions).*?(?P<detail>Only user(?:,? (?:and )?\w+){1,3} roles are supported)"],
         playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="kernel.flashinfer_import_none", category="kernel_library",
         title="FlashInfer is not installed (or does not import), so vLLM called a None in its place",
         fix="vLLM imports FlashInfer behind a guard and leaves its wrappers unset when the import fails; {how}. "
             "Install the flashinfer wheel built for this torch and CUDA (e.g. `pip install flashinfer -i "
             "https://flashinfer.ai/whl/cu121/torch2.3` for vLLM 0.5.x), check `python -c 'import flashinfer'`, or "
             "unset VLLM_ATTENTION_BACKEND=FLASHINFER (Gemma 2 runs on FlashAttention from vLLM 0.5.4).",
         check=_flashinfer_none, playbook="kernel-library", confidence=0.85),
    Rule(signature="environment.cpu_backend_isa", category="environment",
         title="vLLM's CPU backend does not build on this CPU: it requires {isa}",
         fix="cmake/cpu_extension.cmake checks the build machine's CPU flags (`lscpu`, /proc/cpuinfo): vLLM 0.4-0.5's "
             "CPU backend needs AVX512 (avx512f) on x86, later releases also accept AVX2, Power9+, Arm and others. "
             "Build and run on a machine with that instruction set, or install a newer vLLM whose CPU backend "
             "supports this CPU; in a Docker build it is the build host's CPU that is probed.",
         patterns=[r"vLLM CPU backend requires (?P<isa>[^.\n]{2,100}?)(?:\.|\s*$)"],
         facts=_isa_facts, playbook="environment", confidence=0.85),
    Rule(signature="model_support.arch_unsupported_stated", category="model_support",
         title="The report says vLLM does not support the model's architecture (its error lines are not in this text)",
         fix="Compare the `architectures` entry of the model's config.json with the installed vLLM's supported-models "
             "list: an architecture added in a later release needs an upgrade, an embedding or other non-generative "
             "architecture (e.g. MistralModel) needs a vLLM release that serves it (pooling models, 0.4.3+), and one "
             "vLLM lacks can be served through transformers or another engine.",
         check=_arch_stated, playbook="model-support", confidence=STATED_CONFIDENCE, stated=True),
    Rule(signature="api.engine_method_kwarg_release", category="install_mismatch",
         title="The code calling vLLM's engine was written for another vLLM release (a keyword it does not take)",
         fix="{advice} Install the vLLM release the calling project pins (its requirements), or update the calling "
             "code to the installed release's signature.",
         check=_engine_kwarg, playbook="install-mismatch", confidence=0.7),
]
RULES_BY_SIG = {r.signature: r for r in RULES}
