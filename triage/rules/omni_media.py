"""Generation beyond text through vLLM-Omni: diffusion pipelines taken from diffusers, and TTS models that clone a voice.

- vLLM-Omni's diffusion models (LongCat-Image, GLM-Image, Qwen-Image, Wan, ...) import their pipeline and transformer
  classes from diffusers (`diffusers.pipelines.<model>`, `diffusers.models.transformers.transformer_<model>`), and
  diffusers adds a model's classes in the release after the model appears. An older diffusers fails the import with
  "No module named 'diffusers.pipelines.longcat_image'" or "cannot import name 'LongCatImageEditPipeline' from
  'diffusers'": the installed diffusers predates the model, the way an old transformers predates a model type.
- Qwen3-TTS (vllm_omni/model_executor/models/qwen3_tts) builds its speaker encoder only in load_weights, and only when
  the checkpoint has `speaker_encoder.*` tensors (the Base checkpoint; CustomVoice and VoiceDesign take a named speaker
  instead). A voice-cloning request (ref_audio) without it raises "This checkpoint does not provide `speaker_encoder`
  weights." ("...; cannot compute ref_spk_embedding from ref_audio." in later releases). With `load_format: dummy`
  vLLM's DummyModelLoader never calls load_weights, so even the Base checkpoint has none (fixed in vLLM-Omni PR 3117,
  which builds the module in __init__).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

# a thread's words naming the missing module in quotes or backticks ("`diffusers.pipelines.longcat_image`")
QUOTED_MODULE_RE = lazy(r"[`'\"](?P<module>diffusers\.(?:pipelines|models)\.\w[\w.]*)[`'\"]")
MODULE_NOT_FOUND_RE = lazy(r"ModuleNotFoundError|No module named")
# a missing module that is not part of diffusers: then that package is what is missing
OTHER_MODULE_RE = lazy(r"No module named '(?!diffusers\b)[\w.]+'")


def _diffusers_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    g = m.groupdict()
    missing = g.get("module") or g.get("name") or "?"
    return {"missing": missing}


DIFFUSERS_PIPELINE_MISSING = Rule(
    signature="model_support.diffusers_pipeline_missing", category="model_support",
    title="The installed diffusers has no {missing}: the model's pipeline needs a newer diffusers",
    fix="vLLM-Omni (like a model's own pipeline code) imports the model's pipeline and transformer classes from "
        "diffusers, which adds them release by release: upgrade diffusers (`pip install -U diffusers`, or from "
        "source, `pip install git+https://github.com/huggingface/diffusers`, for a model newer than the last "
        "release) within the range vllm-omni pins, then restart.",
    patterns=[
        # Python names the first missing part of the dotted path: diffusers is there, the model's module is not
        r"No module named '(?P<module>diffusers\.(?:pipelines|models)\.\w[\w.]*)'",
        r"cannot import name '(?P<name>\w+)' from 'diffusers(?:\.(?:pipelines|models)[\w.]*)?'",
    ],
    facts=_diffusers_facts, playbook="model-support", confidence=0.85,
    check=lambda scan, env: _diffusers_missing(scan))


def _diffusers_missing(scan: Scan) -> Diagnosis | None:
    d = DIFFUSERS_PIPELINE_MISSING.match_lines(scan)
    if d is not None:
        return d
    # the thread's own account: a ModuleNotFoundError said in prose, the diffusers module quoted beside it
    if not any(MODULE_NOT_FOUND_RE.search(ln.text) for ln in scan.lines) \
            or any(OTHER_MODULE_RE.search(ln.text) for ln in scan.lines):
        return None
    hits = [(ln, m) for ln in scan.lines for m in [QUOTED_MODULE_RE.search(ln.text)] if m]
    if not hits:
        return None
    return DIFFUSERS_PIPELINE_MISSING.diagnosis(scan, hits[:3], confidence=0.75)


DUMMY_LOAD_RE = lazy(r"load[_-]format\W{0,4}(?:LoadFormat\.)?dummy\b", re.I)


def _speaker_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    if DUMMY_LOAD_RE.search(scan.joined_text()):
        return {"why": "load_format dummy never runs load_weights, where the speaker encoder is built",
                "todo": "Load the real weights (drop `load_format: dummy` from the stage config), or update vLLM-Omni "
                        "to a release that builds the speaker encoder up front (PR 3117)."}
    return {"why": "the checkpoint has no speaker_encoder weights",
            "todo": "Voice cloning from ref_audio needs the Base Qwen3-TTS checkpoint (the one with a speaker "
                    "encoder); CustomVoice and VoiceDesign checkpoints take a named speaker (`voice`) instead."}


TTS_SPEAKER_ENCODER_MISSING = Rule(
    signature="model_loading.tts_speaker_encoder_missing", category="model_loading",
    title="The TTS model has no speaker encoder for voice cloning ({why})",
    fix="{todo}",
    patterns=[r"This checkpoint does not provide `?speaker_encoder`? weights"],
    facts=_speaker_facts, playbook="model-loading", confidence=0.85)

RULES = [DIFFUSERS_PIPELINE_MISSING, TTS_SPEAKER_ENCODER_MISSING]
