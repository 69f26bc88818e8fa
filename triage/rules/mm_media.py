"""The packages a modality needs, which vLLM (and a model's remote code) import only when that modality is used.

vLLM installs no audio or video decoders by default. Their imports go through `PlaceholderModule`
(vllm/utils.py 0.7+, vllm/utils/import_utils.py later): the first attribute access re-imports the package and, when
it belongs to one of vLLM's extras, raises `ImportError: Please install vllm[audio] for audio support` (the same
sentence for every extra and release: librosa/soundfile/av for audio, decord for video in 0.7's `vllm[video]`);
a package in no extra re-raises Python's own `No module named 'decord'`. So a server starts and the first
transcription or video request fails, and the published images (vllm/vllm-openai) leave the audio extra out on
purpose. A checkpoint's remote code does the same through transformers' `check_imports`
(dynamic_module_utils): "Encountered exception while importing decord: No module named 'decord'", then
"This modeling file requires the following packages that were not found in your environment: decord. Run `pip
install decord`"; transformers' own classes through requires_backends ("TimmWrapperConfig requires the timm library
but it was not found in your environment", Gemma 3n's vision tower).

The speech-to-text endpoint hides the import error: `load_audio` fails on the missing decoder (soundfile, then
PyAV), and serving wraps every failure as "Invalid or unsupported audio file." (0.1x-0.2x, until the install hint
was propagated): the same 400 for every upload, valid or not, is the missing audio extra far more often than the
file.

A missing package of vLLM's own requirements is install.dependency_missing; a kernel library (flash_attn) keeps
its own rules.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

# Import names of the packages a modality or a model's processor needs beside vLLM, and how to get them.
AUDIO = ("librosa", "soundfile", "av", "resampy", "soxr")
VIDEO_PYAV = ("pyav",)  # torchvision's video reader names PyAV
VIDEO = ("decord",)
VISION = ("qwen_vl_utils", "qwen_omni_utils", "keye_vl_utils", "timm", "open_clip")
_PIP = {"qwen_vl_utils": "qwen-vl-utils", "qwen_omni_utils": "qwen-omni-utils", "keye_vl_utils": "keye-vl-utils",
        "open_clip": "open-clip-torch", "pyav": "av"}
PACKAGE = "|".join(AUDIO + VIDEO + VIDEO_PYAV + VISION)


def _advice(m, line, scan: Scan) -> dict[str, Any]:
    g = m.groupdict()
    extra = g.get("extra")
    package = (g.get("package") or "").strip()
    if extra is None and package.lower() in AUDIO:
        extra = "audio"
    docker = ("vllm/vllm-openai" in scan.joined_text() or "docker" in scan.joined_text().lower())
    image = (" The published vllm/vllm-openai images leave these out on purpose: build on top of yours "
             "(`FROM vllm/vllm-openai:<tag>` then `RUN pip install ...`)." if docker else "")
    if extra:
        what = f"vLLM's {extra} extra"
        cmd = f"`pip install 'vllm[{extra}]'`"
        if extra == "audio":
            cmd += " (or the packages alone, without rebuilding vLLM: `pip install librosa soundfile av`)"
        elif extra == "video":
            cmd += " (or `pip install decord`)"
    else:
        pip = _PIP.get(package.lower(), package.replace("_", "-"))
        what = f"the package {package}"
        cmd = f"`pip install {pip}`"
    return {"what": what, "install": f"{cmd}{image}"}


MM_PACKAGE_MISSING = Rule(
    signature="model_support.mm_package_missing", category="model_support",
    title="The multimodal input needs {what}, which is not installed",
    fix="vLLM imports a modality's decoders (and a model's processor its helpers) only when that input is used, so "
        "the server starts and the request or the model's processor fails: {install} in the environment that runs "
        "vLLM, then restart the server.",
    patterns=[
        # PlaceholderModule (vllm/utils.py 0.7+, vllm/utils/import_utils.py) and 0.6's try_import_video_packages:
        # one sentence for every extra (a retold title may lower-case it)
        r"[Pp]lease install vllm\[(?P<extra>audio|video)\] for \w+ support",
        # transformers' check_imports for a checkpoint's remote code: the warning, then the ImportError
        rf"Encountered exception while importing (?P<package>{PACKAGE}): No module named",
        rf"This modeling file requires the following packages that were not found in your environment: "
        rf"(?P<package>{PACKAGE})\b",
        # the import itself (a package in no vLLM extra re-raises Python's error; a title may drop the quotes)
        rf"No module named '?(?P<package>{PACKAGE})'?(?![\w.])",
        # transformers' requires_backends (a processor or a timm-backed vision tower: "TimmWrapperConfig requires the
        # timm library but it was not found in your environment. You can install it with pip: `pip install timm`")
        rf"requires the (?P<package>{PACKAGE}) library but it was not found in your environment",
        # torchvision's video reader without PyAV
        r"(?P<package>PyAV) is not installed, and is necessary for the video operations",
        # a thread's own words: "librosa is not installed by default in the dockerfile", "missing install vllm[audio]"
        rf"\b(?P<package>{PACKAGE}) (?:is|was) not (?:installed|included)",
        r"\bmissing\W+(?:\w+\W+){0,2}vllm\[(?P<extra>audio|video)\]",
    ],
    facts=_advice, check=lambda scan, env: _package_raised(scan, env), playbook="model-support", confidence=0.85)


def _package_raised(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    """The bare import error counts where it was raised, not where an INFO/WARNING line mentions it in passing
    (an optional import probed at start-up); the other wordings are raised or said by the thread."""
    d = MM_PACKAGE_MISSING.match_lines(scan)
    if d is None:
        return None
    levels = {ln.no: (ln.level, ln.text) for ln in scan.lines}
    for e in d.evidence:
        level, text = levels.get(e.line, ("", ""))
        if level not in ("INFO", "WARNING", "DEBUG") or "No module named" not in text \
                or "Encountered exception" in text:
            return d
    return None


AUDIO_UNDECODABLE = Rule(
    signature="model_support.audio_undecodable", category="model_support",
    title="vLLM answers every audio upload with 'Invalid or unsupported audio file' (no audio decoder installed?)",
    fix="vLLM's speech-to-text endpoint reports any failure of its audio loader this way, including soundfile and "
        "PyAV not being installed, which gives the same 400 for every file: `pip install 'vllm[audio]'` (soundfile, "
        "av) where the server runs (a vllm/vllm-openai image needs them added on top). If other files do decode, the "
        "upload itself is not a format the loader reads: convert it to WAV/FLAC.",
    patterns=[r"Invalid or unsupported audio file\."],
    playbook="model-support", confidence=0.6)

# What the multimodal path prints on a healthy start-up and reads like a failure: transformers' processor refusing
# a kwarg vLLM passes to it anyway (max_pixels, fps: processing_utils warns and vLLM's own merge still applies it),
# the slow/fast image processor switch and the rescale notice, and vLLM's profiling note that the profiled sequence
# cannot hold the worst-case multimodal embeddings (V0 then sets max_num_seqs to 1; a request may fail later, the
# start-up does not).
HARMLESS = [
    Rule(signature="harmless.processor_kwarg_ignored", category="", harmless=True,
         title="The HF processor says a multimodal kwarg 'will be ignored' (vLLM still applies it; harmless)",
         fix="", patterns=[r"Keyword argument `?\w+`? is not a valid argument for this processor and will be ignored"]),
    Rule(signature="harmless.image_processor_fast_slow", category="", harmless=True,
         title="transformers notes the fast/slow image processor choice (harmless)",
         fix="", patterns=[r"Using a slow image processor as `use_fast` is unset",
                           r"is now loaded as a fast processor by default, even if the model checkpoint was saved",
                           r"It looks like you are trying to rescale already rescaled images"]),
    Rule(signature="harmless.mm_profiling_seq_short", category="", harmless=True,
         title="Profiling cannot fit the worst-case multimodal embeddings in one sequence (a note, not a failure)",
         fix="", patterns=[r"is too short to hold the multi-modal embeddings in the worst case",
                           r"Computed max_num_seqs \(min\(\d+, \d+ // \d+\)\) to be less than 1"]),
]

RULES = [MM_PACKAGE_MISSING, AUDIO_UNDECODABLE, *HARMLESS]
