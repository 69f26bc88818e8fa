"""The model itself: architectures the install does not know, loading, tokenizer, speculative decoding."""

from __future__ import annotations

import re
from typing import Any

from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.lazyre import lazy
from triage.rules.base import Rule, not_in_passing
from triage.rules.i3_versions import library_importing_transformers
from triage.rules.pool_lora import VLLM_CONFIG_CLASSES
from triage.rules.wrapped import read_wrapped_messages, wrapped_texts
from triage.rules.wrappers import is_wrapper


def _gguf_speculators(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    """GGUF files crash in `maybe_override_with_speculators` (it reads the .gguf as a HF config)."""
    for exc in scan.exceptions:
        funcs = {f.func for f in exc.frames}
        if "maybe_override_with_speculators" in funcs:
            gguf = ".gguf" in exc.message or any(".gguf" in str(v) for v in (scan.facts.get("model"),))
            return Diagnosis(
                category="model_loading", signature="model_loading.gguf_speculators_override",
                title="vLLM crashed reading the model's config for the speculators check"
                      + (" (a GGUF file)" if gguf else ""),
                confidence=0.9,
                evidence=[Evidence(exc.line.no, exc.line.shown)],
                facts={"exception": exc.type, "gguf": gguf},
                fix=Fix("This vLLM reads a HF config from the model path before loading (maybe_override_with_speculators), "
                        "which fails for GGUF files: pass --tokenizer <the original HF repo> and --hf-config-path <that repo>, "
                        "or upgrade to a vLLM that skips the check for GGUF.", "model-loading"),
                first_line=exc.line.no)
    return None


ARCH_UNSUPPORTED = Rule(
    signature="model_support.architecture_unsupported", category="model_support",
    title="This vLLM does not support the model architecture {arch}",
    fix="The installed vLLM predates this architecture: upgrade vLLM (with a matching transformers), or use "
        "--model-impl transformers if transformers supports it.",
    patterns=[r"Model architectures \['(?P<arch>\w+)'(?:, [^\]]*)?\] are not supported for now",
              # a title or a retyped message that lost the list's brackets or a quote ("architectures X' are not")
              r"Model architectures \[?'?(?P<arch>[A-Z]\w+)'?(?:, [^\]]*)?\]? are not supported for now",
              r"Model architectures \['(?P<arch>\w+)'\] failed to be inspected",
              r"Model architectures \[?'?(?P<arch>\w[\w ]*?)'?\]? failed to be inspected",
              r"Cannot find model module\. '(?P<arch>\w+)' is not a registered model",
              # no native class, and the Transformers backend cannot run the model either (0.8: model_loader/utils.py;
              # 0.10+: registry.py); "falling back to Transformers implementation" is only a warning
              r"(?P<arch>\w+) has no vLLM implementation and the Transformers implementation is not compatible",
              r"The Transformers implementation of '(?P<arch>\w+)' is not compatible with vLLM"],
    playbook="model-support", confidence=0.95)
# vLLM imports each model class in a subprocess first; when that import crashes (broken install, missing
# module, unsupported platform) the architecture is then reported as "not supported" or "failed to be
# inspected": the subprocess's own error, printed before, is the cause.
INSPECTION_CRASHED = ("Error in inspecting model architecture", "failed to be inspected")


# Draft-model classes in vLLM's registry (_SPECULATIVE_DECODING_MODELS, 0.6 .. 0.33: EAGLEModel, EagleLlamaForCausalLM,
# Eagle3LlamaForCausalLM, DeepSeekMTPModel, Qwen3NextMTP, MedusaModel, MLPSpeculatorPreTrainedModel, DFlashDraftModel,
# DSparkV41DraftModel, PEagleDraftModel, MuseGlimmerAssistantModel, ...): when the unsupported architecture is one of
# these, it is the --speculative-config draft that this vLLM cannot load, not the served model.
DRAFT_ARCH_RE = lazy(r"(?i:eagle)|MTP|Medusa|Speculator|Draft|DFlash|DSpark|NextN|AssistantModel")


def _draft_arch_unsupported(scan: Scan) -> Diagnosis | None:
    d = ARCH_UNSUPPORTED.match_lines(scan)
    arch = str(d.facts.get("arch") or "") if d else ""
    if d is None or not DRAFT_ARCH_RE.search(arch):
        return None
    d.category = "speculative_decoding"
    d.signature = "speculative.draft_architecture_unsupported"
    d.title = f"This vLLM cannot load the draft model: its architecture {arch} is not a drafter it knows"
    d.fix = Fix(f"{arch} is a draft-model (EAGLE/MTP/Medusa) class that this vLLM does not register. Use a draft "
                "checkpoint whose architecture this vLLM lists for the --speculative-config method (for EAGLE, a "
                "Llama-style EAGLE or EAGLE3 head, i.e. EagleLlamaForCausalLM or Eagle3LlamaForCausalLM; for MTP, "
                "method mtp with the target model's own MTP layers), or the vLLM release the draft's model card "
                "names.", "speculative-decoding")
    d.facts["draft_model"] = True
    return d


# A bare backbone class (Qwen2VLModel, LlamaModel: no "For<Head>"): for a generative model, config.json's
# architectures was written by a tool that saved the base AutoModel (a fine-tuning or merge script), and a newer vLLM
# does not help; the head class the base model's config names does. Encoder/embedding checkpoints are legitimately
# "<Name>Model" (BertModel, XLMRobertaModel): vLLM 0.8+, which words the refusal "has no vLLM implementation and the
# Transformers implementation is not compatible", registers the common ones, so only that wording is read this way,
# and the fix still names the upgrade for an encoder this release lacks.
BARE_BACKBONE_RE = lazy(r"^(?!\w*For[A-Z])(?P<stem>[A-Z]\w*?)(?:PreTrained)?Model$")


def _bare_backbone(d: Diagnosis) -> Diagnosis:
    arch = str(d.facts.get("arch") or "")
    stem = BARE_BACKBONE_RE.match(arch).group("stem")  # type: ignore[union-attr]
    d.title = f"This vLLM cannot serve {arch}, a bare backbone class (the model without its head)"
    d.fix = Fix(f"For a fine-tuned or merged generative checkpoint, config.json's architectures was saved from the "
                f"base AutoModel: set \"architectures\" to the class the base model's config.json names (e.g. "
                f"{stem}ForConditionalGeneration or {stem}ForCausalLM), or pass it at launch with --hf-overrides "
                f"'{{\"architectures\": [\"{stem}ForCausalLM\"]}}' (the head class the base repo names). For an "
                "embedding/encoder model that really is a bare Model class, upgrade to a vLLM release that lists it "
                "among its pooling models.", "model-support")
    d.facts["bare_backbone"] = True
    return d


def _arch_unsupported(scan: Scan) -> Diagnosis | None:
    d = ARCH_UNSUPPORTED.match_lines(scan)
    if d is None:
        return None
    if DRAFT_ARCH_RE.search(str(d.facts.get("arch") or "")):
        return None  # speculative.draft_architecture_unsupported
    if d.evidence and "is not compatible with vLLM" in d.evidence[0].text:
        if BARE_BACKBONE_RE.match(str(d.facts.get("arch") or "")):
            return _bare_backbone(d)
        arch = d.facts.get("arch", "the model")
        d.title = f"This vLLM has no implementation of {arch}, and its Transformers backend cannot run it"
        d.fix = Fix(f"vLLM has no native class for {arch} in this release, and the Transformers fallback needs the model's "
                    "transformers class to support vLLM's attention interface, which this one does not. Upgrade to a "
                    "vLLM release that lists the architecture among its supported models (on 0.8.x the message's "
                    "VLLM_USE_V1=0 may help); for a fine-tuned checkpoint check that config.json's architectures names "
                    "the base model's class (a ...ForConditionalGeneration, not a bare ...Model or a "
                    "...ForSequenceClassification head).", "model-support")
        return d
    if any(any(m in ln.text for m in INSPECTION_CRASHED) for ln in scan.lines):
        arch = d.facts.get("arch", "the model")
        d.title = f"vLLM could not import the model class for {arch} (its inspection subprocess crashed)"
        d.fix = Fix("vLLM registers the architecture, but importing its model code failed in a subprocess: the "
                    "error printed under 'Error in inspecting model architecture' is the cause (often a broken or "
                    "mismatched install: an undefined symbol, a missing module, an unsupported platform). Fix that "
                    "error; upgrading vLLM does not help by itself.", "model-support")
        d.facts["inspection_crashed"] = True
        d.confidence = 0.6
    return d


# The draft/EAGLE/MTP code path: an exception raised there is a speculative-decoding failure even when its
# message (an AttributeError, a shape assert) does not say so.
SPEC_FRAME_PARTS = ("/spec_decode/", "/speculative/")
# The draft models' own files (vllm/model_executor/models/*_mtp.py, *_eagle3.py, qwen3_dflash.py, medusa.py,
# mlp_speculator.py; vllm/models/<model>/mtp.py): an exception there is the drafter failing, whatever its words.
# (eagle2_5_vl.py is NVIDIA's Eagle vision-language model, not a draft.)
DRAFT_MODEL_FILE_RE = lazy(r"models/(?:[\w/]+/)?(?:\w+_)?(?:mtp|eagle3?|dflash\d*)\.py$|"
                           r"models/(?:medusa|mlp_speculator)\.py$")


# The model runner's own drafting steps (gpu_model_runner.propose_draft_token_ids, a runner's _propose_*): what
# fails under them is the drafter's forward, whatever file the innermost frame is in.
DRAFT_FUNC_RE = lazy(r"^_?(?:propose\w*|\w*drafter\w*)$")


def _in_draft_code(file: str, func: str = "") -> bool:
    f = file.replace("\\", "/")
    return (any(p in f for p in SPEC_FRAME_PARTS) or DRAFT_MODEL_FILE_RE.search(f) is not None
            or ("vllm/" in f and DRAFT_FUNC_RE.match(func) is not None))
SPEC_NAME_RE = lazy(r"\b(?:Eagle\w*|\w*Eagle3?\w*|Medusa\w*|\w*Drafter|\w*Proposer|\w*MTP\w*)\b")


# A frame line a paste garbled (its ", line N" moved or lost, a slash typed away) is not read as a frame, but its
# path still says where it was: the speculative-decoding code, just above or below the exception line.
LOOSE_SPEC_FILE_RE = lazy(r'File "[^"]*(?:spec_decode|/speculative/|eagle\w*\.py|\w*proposer\.py|'
                          r'models/(?:[\w/]+/)?\w*(?:mtp|dflash\d*)\.py|models/(?:medusa|mlp_speculator)\.py)[^"]*"',
                          needles=('File "',))
LOOSE_SPAN = 4


def _loose_spec_frame(scan: Scan, exc_line: int) -> str | None:
    for ln in scan.lines:
        if abs(ln.no - exc_line) <= LOOSE_SPAN and ln.no != exc_line:
            m = LOOSE_SPEC_FILE_RE.search(ln.text)
            if m is not None:
                return m.group(0)[6:-1].rsplit("/", 1)[-1]
    return None


def _drafter_crash(scan: Scan) -> Diagnosis | None:
    for exc in scan.exceptions:
        if is_wrapper(exc.text):
            continue
        in_spec = [f for f in exc.frames if _in_draft_code(f.file, f.func)]
        loose = None if in_spec or exc.frames else _loose_spec_frame(scan, exc.line.no)
        named = SPEC_NAME_RE.search(exc.message) if exc.short_type in ("AttributeError", "AssertionError", "KeyError",
                                                                        "TypeError", "RuntimeError", "ValueError") else None
        if not in_spec and not named and not loose:
            continue
        fr = in_spec[-1] if in_spec else None
        where = (f"{fr.file.rsplit('/vllm/', 1)[-1].removeprefix('vllm/')} ({fr.func})" if fr else
                 (named.group(0) if named else (loose or "the drafter")))
        # "'EagleProposer' object has no attribute 'positions'" raised in vLLM's own files: its code does not fit
        # together (a release bug), which no draft model can cause.
        own = re.match(r"'(\w+)' object has no attribute '(\w+)'", exc.message) if exc.short_type == "AttributeError" else None
        vllm_raised = bool(exc.frames) and "/vllm/" in exc.frames[-1].file
        # a config object without a field is a draft/target mismatch, not vLLM's code
        if own and vllm_raised and not own.group(1).endswith(("Config", "config")):
            ver = scan.facts.get("vllm_version")
            fix = (f"vLLM's own {own.group(1)} has no attribute '{own.group(2)}': its speculative-decoding code does not "
                   f"fit together in this release{' (' + str(ver) + ')' if ver else ''}, which no draft model or flag "
                   "causes. Use the vLLM release before it or a newer one that fixes it, or run without "
                   "--speculative-config meanwhile; report it upstream with this traceback.")
            facts = {"exception": exc.type, "message": exc.message[:300], "where": where, "code_bug": True}
        else:
            fix = ("The draft/EAGLE/MTP code of this vLLM failed: check that the draft model was made for this target "
                   "model and this method (EAGLE vs EAGLE3 heads, `method` in --speculative-config) and for this vLLM "
                   "version (the draft's model card names one); run once without --speculative-config to confirm the "
                   "target alone works, then upgrade/downgrade vLLM or report it upstream with this traceback.")
            facts = {"exception": exc.type, "message": exc.message[:300], "where": where}
        return Diagnosis(
            category="speculative_decoding", signature="speculative.drafter_crash",
            title=f"Speculative decoding crashed in {where}: {exc.text[:140]}",
            confidence=0.7, evidence=[Evidence(exc.line.no, exc.line.shown)],
            facts=facts, fix=Fix(fix, "speculative-decoding"),
            first_line=exc.line.no)
    return None


# A parameter name with a doubled piece ("qkqkv_proj": "qk" + "qkv_proj"; "experts.experts") is built by vLLM's own
# name mapping (a substring replaced twice), not read from a checkpoint: a loader bug of that vLLM release.
DOUBLED_NAME_RE = lazy(r"(?:^|[._])([a-z]{2,})\1[a-z]*_proj\b|\b([a-z_]{3,})\.\2\.")


# PEFT's names for an adapter's tensors ("base_model.model.<layer>.lora_A.weight", lora_embedding_A, a bare
# "base_model" module): a LoRA adapter (or a checkpoint saved with its adapter unmerged) loaded as the model. Its
# "base_model.model.model." is PEFT's prefix, not a doubled name.
PEFT_NAME_RE = lazy(r"^base_model(?:\.model\.|$)|\.lora_(?:[AB]|embedding_[AB]|magnitude_vector)\b")


def _weight_mismatch_facts(m, line, scan) -> dict:
    detail = m.groupdict().get("detail") or ""
    quoted = re.search(r"'([\w.]+)'", detail)
    name = quoted.group(1) if quoted else detail.rsplit(" ", 1)[-1]
    if PEFT_NAME_RE.search(name):
        return {"adapter_as_model": True, "param": name,
                "headline": f"The checkpoint's tensors carry PEFT's names ('{name}'): a LoRA adapter or a PEFT-wrapped "
                            "save was loaded as the model",
                "advice": ("vLLM loads plain models. A LoRA adapter goes on top of its base model: serve the base with "
                           "`--enable-lora --lora-modules name=ADAPTER_DIR` (offline: enable_lora=True and a "
                           "LoRARequest); a full model must be saved from what peft's merge_and_unload() returns, not "
                           "from the PeftModel (Unsloth: save_pretrained_merged(..., save_method='merged_16bit')).")}
    dm = DOUBLED_NAME_RE.search(name)
    if dm:
        ver = scan.facts.get("vllm_version")
        return {"loader_bug": True, "param": name,
                "headline": f"vLLM's weight loader built a doubled parameter name ('{name}'): a loader bug, not the checkpoint",
                "advice": (f"No checkpoint names a parameter '{name}': vLLM's own name mapping rewrote it twice. This is a "
                           f"bug of this vLLM release{' (' + str(ver) + ')' if ver else ''}: use the release before it "
                           "or one that fixes the mapping, and report it upstream with this name; the checkpoint "
                           "is not the problem.")}
    return {"headline": f"The checkpoint's weights do not match the model definition ({detail})",
            "advice": ("The checkpoint does not match what vLLM builds (another quantization, a fine-tune with renamed "
                       "layers, or the wrong --quantization): check the model's config.json and the vLLM version it "
                       "needs.")}


# Scale tensors only a quantized checkpoint holds: FP8 / NVFP4 activation and block scales, and the KV-cache and
# attention scales (k_scale, v_scale, q_scale, prob_scale) that vLLM's loaders remap per quantization format. A
# plain weight_scale is left out: a checkpoint whose layers are renamed fails on it as well.
QUANT_ONLY_SCALES = (r"input_scale|weight_scale_inv|weight_global_scale|input_global_scale|activation_scale|"
                     r"[kvq]_scale|prob_scale")
# vLLM's AutoWeightsLoader (models/utils.py, 0.7+), whole: the name the checkpoint has, then what the layer vLLM
# built does have. People paste it wrapped over lines: it is read from the exception with its continuation.
NO_PARAM_RE = lazy(r"There is no module or parameter named '(?P<name>[\w.]+)' in (?P<model>\w+)\.? The available "
                   r"parameters belonging to (?P<parent>[\w.]+) \((?P<cls>\w+)\) are: \{(?P<avail>[^}]*)\}",
                   needles=("There is no module or parameter named",))
QUANT_TENSOR_RE = lazy(r"\.(?:weight_scale|weight_packed|weight_zero_point|weight_shape|qweight|qzeros|scales|g_idx|"
                       r"absmax|SCB|" + QUANT_ONLY_SCALES + r")$", needles=(".",))
PLAIN_PARAM_RE = lazy(r"\.(?:weight|bias)$", needles=(".",))


def _built_unquantized(scan: Scan) -> Diagnosis | None:
    """The checkpoint has a quantized layer's tensor (a scale, packed weights) where the layer vLLM built lists
    only plain weights: vLLM did not apply the checkpoint's quantization to that layer."""
    for line, text in wrapped_texts(scan, "There is no module or parameter named"):
        m = NO_PARAM_RE.search(text)
        if m is None or not QUANT_TENSOR_RE.search(m.group("name")):
            continue
        avail = [a.strip().strip("'\"") for a in m.group("avail").split(",") if a.strip()]
        if not avail or not all(PLAIN_PARAM_RE.search(a) for a in avail):
            continue  # the layer is quantized in vLLM too: a name mapping, not a missing quantization
        tensor = m.group("name").rsplit(".", 1)[-1]
        parent, model = m.group("parent"), m.group("model")
        fix = (f"The checkpoint stores '{m.group('name')}', a tensor of its quantization format, but vLLM built "
               f"{parent} ({m.group('cls')}) with only {', '.join(avail)}: the checkpoint's quantization_config was not "
               f"applied to this layer. Check that --quantization (if given) matches quantization_config in config.json "
               f"and that this vLLM release supports that quantization for {model} (its layers, ignore list and fused "
               f"modules); else use a newer vLLM or a checkpoint quantized the way this vLLM expects.")
        return Diagnosis(category="quantization", signature="quant.layer_built_unquantized",
                         title=f"vLLM built {parent} unquantized, but the checkpoint has its {tensor}",
                         confidence=0.88, evidence=[Evidence(line.no, line.shown)],
                         facts={"param": m.group("name"), "tensor": tensor, "parent": parent, "model": model,
                                "available": avail},
                         fix=Fix(fix, "quantization"), first_line=line.no)
    return None


# vLLM's weight loaders check each checkpoint tensor against the parameter they built with a bare assert
# (layers/linear.py, parameter.py, model_loader/weight_utils.py, vocab_parallel_embedding.py: "assert
# param_data.shape == loaded_weight.shape"); Python prints only "AssertionError" (or the assert's own
# "Shapes do not match" text) under the source line. Where it was raised says what it is.
WEIGHT_LOADER_FUNCS = {"weight_loader", "weight_loader_v2", "load_column_parallel_weight", "load_merged_column_weight",
                       "load_qkv_weight", "load_row_parallel_weight", "default_weight_loader", "_assert_and_load",
                       "_load_into_shard_id"}
SHAPE_ASSERT_RE = lazy(r"assert param(?:_data|\.data)?\.(?:shape|size\(\)) == loaded_weight\.(?:shape|size\(\))",
                       needles=("loaded_weight",))


def _checkpoint_mismatch(scan: Scan) -> Diagnosis | None:
    d = CHECKPOINT_MISMATCH.match_lines(scan)
    if d is not None:
        return d
    for exc in scan.exceptions:
        if exc.short_type != "AssertionError" or any(_in_draft_code(f.file) for f in exc.frames):
            continue  # (a drafter's weights: the speculative-decoding rules read those)
        inner = exc.frames[-1] if exc.frames else None
        loader = inner is not None and "/vllm/" in inner.file and inner.func in WEIGHT_LOADER_FUNCS
        stated = "loaded_weight" in exc.message or "Shapes do not match" in exc.message
        shown = any(SHAPE_ASSERT_RE.search(ln.text) for ln in scan.lines if 0 < exc.line.no - ln.no <= 3)
        if not (loader or stated or shown):
            continue
        where = f" in {inner.func}" if inner is not None else ""
        return Diagnosis(
            category="model_loading", signature="model_loading.checkpoint_mismatch",
            title="A checkpoint tensor's shape does not match the parameter vLLM built (the weight loader's shape "
                  "check failed" + where + ")",
            confidence=0.8, evidence=[Evidence(exc.line.no, exc.line.shown)],
            facts={"exception": exc.type, "message": exc.message[:300], "where": inner.func if inner else ""},
            fix=Fix(CHECKPOINT_MISMATCH.fix, "model-loading"), first_line=exc.line.no)
    return None


# vLLM builds a model class as cls(vllm_config=..., prefix=...) since 0.6.4 (model_loader initialize_model); a class
# written for the older interface (an out-of-tree or plugin model, or remote code made for another vLLM) is
# warned about ("old-style model class"), its arguments guessed, and the call then fails with a TypeError.
OLD_STYLE_RE = lazy(r"old-style model class|vLLM model class should accept `vllm_config` and `prefix`",
                    needles=("old-style model class", "should accept `vllm_config`"))
INTERFACE_TYPEERROR_RE = lazy(r"(?P<cls>[\w.]+)\(\) got an unexpected keyword argument '(?P<arg>vllm_config|prefix)'",
                              needles=("got an unexpected keyword argument",))


def _model_class_interface(scan: Scan) -> Diagnosis | None:
    if not any(e.short_type == "TypeError" for e in scan.exceptions):
        return None
    joined = scan.joined_text()
    warned = (next((ln for ln in scan.lines if OLD_STYLE_RE.search(ln.text)), None)
              if "old-style model class" in joined or "should accept `vllm_config`" in joined else None)
    for exc in scan.exceptions:
        if exc.short_type != "TypeError":
            continue
        m = INTERFACE_TYPEERROR_RE.search(exc.message)
        if m is None and (warned is None or exc.line.no < warned.no):
            continue
        named = m or re.search(r"(?P<cls>\w+)\.__init__\(\)", exc.message)
        cls = named.group("cls").split(".")[0] if named else "The model class"
        ev = [Evidence(ln.no, ln.shown) for ln in (warned,) if ln is not None] + [Evidence(exc.line.no, exc.line.shown)]
        fix = ("The model class does not follow this vLLM's model interface (__init__(self, *, vllm_config, prefix)): "
               "it was written for another vLLM release (an out-of-tree or plugin model registered with "
               "ModelRegistry, or the model's remote code). Use the vLLM release it was made for, or update the class "
               "to the current interface; a model vLLM supports natively needs no plugin.")
        return Diagnosis(category="model_support", signature="model_support.model_class_interface",
                         title=f"{cls} does not take vLLM's model constructor arguments (written for another vLLM)",
                         confidence=0.85, evidence=ev, facts={"exception": exc.type, "message": exc.message[:300]},
                         fix=Fix(fix, "model-support"), first_line=ev[0].line)
    return None



# (a third-party library's own import of a transformers name is that library's release: i3_versions)
TRANSFORMERS_IMPORT: Rule = Rule(
    signature="model_support.transformers_import", category="model_support",
    title="transformers is too old or too new for this vLLM (cannot import {name})",
    fix="Install the transformers version this vLLM release requires (`pip show vllm` lists it).",
    patterns=[r"cannot import name '(?P<name>\w+)' from 'transformers(?:\.[\w.]+)?'",
              r"transformers(?:>=|==)(?P<name>[\d.]+) is required"],
    playbook="model-support", confidence=0.85,
    check=lambda scan, env: None if library_importing_transformers(scan) else TRANSFORMERS_IMPORT.match_lines(scan))

RULES_INTERFACE = [
    Rule(signature="model_support.model_class_interface", category="model_support",
         title="The model class does not take vLLM's model constructor arguments", fix="",
         check=lambda scan, env: _model_class_interface(scan), playbook="model-support", confidence=0.85),
]


def _processor_advice(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    what = m.group("processor")
    if "Unrecognized" in line.text:
        return {"what": f"transformers does not recognize the {what} the checkpoint names",
                "advice": f"The checkpoint's preprocessor/processor config names a {what} class (image_processor_type, "
                          "processor_class) the installed transformers does not have: transformers renames processors "
                          "between releases (Qwen2_5_VLImageProcessor became Qwen2VLImageProcessor). Install the "
                          "transformers version your vLLM release and the model card name, or refresh the checkpoint's "
                          "preprocessor_config.json from its upstream repository."}
    if "custom" in line.text or (what in ("processor", "feature extractor", "image processor") and "Failed to load" in line.text):
        return {"what": f"the custom {what} did not load", "advice": f"The model ships its own {what} code: launch with --trust-remote-code (after reading that "
                          "code), or install the transformers version that has the class built in."}
    if what in ("processor", "proceesor", "config"):
        kind = "config" if what == "config" else "processor"
        return {"what": f"transformers gave another {kind} class than vLLM expects",
                "advice": f"transformers returned another {kind} class than "
                          "this vLLM's model implementation expects (the line names both): the installed transformers "
                          "is not the one this vLLM release was made for (a class renamed or moved), or the model's "
                          "custom processor did not load (it needs --trust-remote-code). Install the transformers "
                          "version this vLLM pins (`pip show vllm`), or upgrade vLLM."}
    return {"what": what, "advice": "The Hugging Face processor this model uses does not work with the installed transformers: install "
                      "the transformers version this vLLM pins (`pip show vllm`), and check the model's "
                      "preprocessor_config.json."}


def _tokenizer_advice(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    text = line.text
    if "custom tokenizer" in text or ("does not exist or is not currently imported" in text
                                      and "TokenizersBackend" not in text and "trust_remote_code" in scan.joined_text()):
        return {"advice": "The tokenizer is a custom class shipped in the model repository: launch with "
                          "--trust-remote-code (after reading that code), or point --tokenizer at a tokenizer "
                          "transformers knows."}
    if "LLaMA-based" in text:
        return {"advice": "This early vLLM cannot convert this LLaMA tokenizer: pass --tokenizer "
                          "hf-internal-testing/llama-tokenizer (or the base model's repo), or upgrade vLLM."}
    if "TokenizersBackend" in text:
        return {"advice": "The model's tokenizer_config.json names TokenizersBackend, the tokenizer class of transformers 5: "
                          "the installed transformers 4.x does not have it. Upgrade transformers (with a vLLM release "
                          "that supports transformers 5), or set \"tokenizer_class\" to \"PreTrainedTokenizerFast\" in a "
                          "local copy of tokenizer_config.json."}
    return {"advice": "Install what the tokenizer needs (sentencepiece, tiktoken, mistral_common) or a newer "
                      "tokenizers/transformers; for Mistral models try --tokenizer-mode mistral."}


# The flag as a launch passes it: the CLI option, vLLM's non-default args dict, its engine-config line, a Python call.
# The refusal's own text ("Please pass the argument `trust_remote_code=True`") is no sign of it.
TRUST_PASSED_RE = lazy(r"--trust[-_]remote[-_]code\b|'trust_remote_code': True|(?<![`'\"])\btrust_remote_code\s*=\s*True",
                       needles=("trust",))
_REFUSED_RE = lazy(r"Please pass the argument|set the option `trust_remote_code|contains custom code which must be "
                   r"executed|requires you to execute the", needles=("trust", "custom code", "execute"))
# The flag's CLI spellings; a bare `trust_remote_code=True` word on a `vllm serve` command is no flag (argparse
# rejects it as an unrecognized argument).
_TRUST_FLAG_RE = lazy(r"--trust[-_]remote[-_]code\b|'trust_remote_code': True", needles=("trust",))
_CLI_LAUNCH_RE = lazy(r"\bvllm\s+serve\b|-m\s+vllm\.entrypoints\.", needles=("vllm",))


def _trust_passed(text: str) -> bool:
    if not TRUST_PASSED_RE.search(text) or _REFUSED_RE.search(text) or "unrecognized arguments" in text:
        return False
    return bool(_TRUST_FLAG_RE.search(text)) or not _CLI_LAUNCH_RE.search(text)


def _remote_code_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    passed = any(_trust_passed(ln.text) for ln in scan.lines)
    if not passed:
        return {"headline": "The model needs --trust-remote-code",
                "advice": "The model ships its own code: add --trust-remote-code after checking the repository's code."}
    # vLLM hands the flag to its own config and tokenizer loads; a refusal despite it comes from a load that does not
    # get it, reached because the installed transformers does not know the model type natively and falls back to the
    # repository's code (minimax_m2 before transformers 5, through a quantization or processor look-up).
    return {"headline": "The model's custom code was refused although --trust-remote-code was passed",
            "advice": "A load vLLM makes without the flag asked for the repository's code: usually the installed "
                      "transformers does not know this model type natively (check `model_type` in config.json against "
                      "`pip show transformers`), so a look-up outside vLLM's config load falls back to remote code. "
                      "Install the transformers (and vLLM) release that supports the model type; the flag itself is "
                      "already set."}


RULES = [
    Rule(signature="model_support.architecture_unsupported", category="model_support",
         title="This vLLM does not support the model architecture {arch}", fix="", check=lambda scan, env: _arch_unsupported(scan),
         playbook="model-support", confidence=0.95),
    Rule(signature="speculative.draft_architecture_unsupported", category="speculative_decoding",
         title="This vLLM cannot load the draft model's architecture", fix="",
         check=lambda scan, env: _draft_arch_unsupported(scan), playbook="speculative-decoding", confidence=0.95),
    Rule(signature="model_support.transformers_unknown_type", category="model_support",
         title="transformers does not know model type {model_type}",
         fix="The installed transformers is older than the model: upgrade transformers (and vLLM to a version "
             "that supports the model); for brand-new models install transformers from the version the model card names.",
         # configuration_auto.py (4.3x .. 5.x), as pasted: backticks dropped by markdown, inside pydantic's "Value
         # error, ...", lower-cased or retyped ("checkoutpoint"); the words after the model type stay
         patterns=[r"model type [`'\"]?(?P<model_type>[\w.-]+)[`'\"]?\s+but [Tt]ransformers does not recognize this "
                   r"architecture",
                   r"The checkpoint you are trying to load has model type `(?P<model_type>[\w-]+)`",
                   r"[Tt]ransformers does not recognize this architecture",
                   # the same message retold in Chinese in a ticket title ("Transformers 库无法识别 glm4v moe 这种模型架构")
                   r"[Tt]ransformers\s*库?\s*(?:无法|不能)识别\s*(?P<model_type>[\w.-]+(?: [\w.-]+)?)?\s*(?:这种|这个|该)?"
                   r"\s*(?:模型)?架构"],
         facts=lambda m, line, scan: {} if m.groupdict().get("model_type") else {"model_type": "(cut off)"},
         playbook="model-support", confidence=0.9),
    TRANSFORMERS_IMPORT,
    Rule(signature="model_support.trust_remote_code", category="model_support",
         title="{headline}",
         fix="{advice}", facts=_remote_code_facts,
         patterns=[r"requires you to execute the (?:configuration|modeling|tokenizer) file in that repo on your local machine",
                   r"Please pass the argument `trust_remote_code=True`", r"set the option `trust_remote_code=True`",
                   r"contains custom code which must be executed to correctly load the model"],
         playbook="model-support", confidence=0.9),
    Rule(signature="model_loading.gguf_speculators_override", category="model_loading",
         title="GGUF config crash", fix="", check=_gguf_speculators, playbook="model-loading", confidence=0.93),
    Rule(signature="model_loading.config_no_model_type", category="model_loading",
         title="The model folder's config.json is missing or has no model_type ({path})",
         fix="The path does not hold a Hugging Face model folder (wrong directory, a GGUF file, or a Mistral-format "
             "repo): point --model at the folder with config.json, use --tokenizer-mode mistral --config-format mistral "
             "--load-format mistral for Mistral-format repos, or pass --hf-config-path.",
         patterns=[r"Unrecognized model in (?P<path>\S+?)\.? Should have a `?model_type`? key in its config\.json"],
         playbook="model-loading", confidence=0.9),
    Rule(signature="model_loading.gguf_unsupported", category="model_loading",
         title="GGUF loading failed ({detail})",
         fix="vLLM's GGUF support is per architecture: use the original HF checkpoint, or pass --tokenizer and "
             "--hf-config-path of the original model, or upgrade vLLM/gguf.",
         patterns=[# GGUF architecture names carry hyphens and dots (ernie4_5-moe, minimax-m2, gpt-oss)
                   r"(?P<detail>GGUF model with architecture [\w.-]+ is not supported yet)",
                   r"(?P<detail>Unknown gguf model_type: \w+)", r"(?P<detail>No module named 'gguf')",
                   # transformers' GGUF reader before 5.x (modeling_gguf_pytorch_utils.load_gguf_checkpoint)
                   r"(?P<detail>Architecture [\w.-]+ not supported)(?:\s*$|[.'\"])",
                   r"(?P<detail>From file name, cannot determine the number of parameters for \w+ architecture)",
                   # a vLLM without GGUF support (before 0.5.5) reads the .gguf file as config.json
                   r"(?P<detail>It looks like the config file at '[^']+\.gguf' is not a valid JSON file)"],
         playbook="model-loading", confidence=0.9),
    Rule(signature="model_loading.files_missing", category="model_loading",
         title="Model files not found ({what})",
         fix="Check the model path or repo id (mounted into the container?), HF_HOME/HF_HUB_OFFLINE, and that the "
             "download completed.",
         patterns=[r"(?P<what>does not appear to have a file named [\w.-]+)",
                   # a local path that does not exist is validated as a repo id (absolute, ./, ~, or with 2+ slashes)
                   r"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '(?P<what>(?:/|\./|\.\./|~|"
                   r"[^'/]+/[^'/]+/)[^']*)'",
                   r"(?P<what>Cannot find any model weights with `[^`]+`)",
                   r"(?P<what>Repository Not Found for url)", r"(?P<what>Can't load the configuration of '[^']+')",
                   # huggingface_hub's EntryNotFoundError (a file the repo does not have at that revision), and the
                   # plain requests error older hubs re-raised from
                   r"(?P<what>Entry Not Found for url)",
                   r"(?P<what>404 Client Error: Not Found for url): https?://(?:huggingface\.co|hf\.co|hf-mirror\.com)/",
                   r"(?P<what>Invalid repository ID or local directory specified)",
                   # huggingface_hub's CacheNotFound: HF_HOME / HF_HUB_CACHE points at a folder that does not exist
                   r"(?P<what>Cache directory not found: \S+?)\.? Please use `cache_dir`",
                   # (an adapter's adapter_config.json is lora_adapters' lora.adapter_not_found)
                   r"(?P<what>No such file or directory: '[^']*(?:(?<!adapter_)config\.json|\.safetensors|tokenizer[^']*)')"],
         playbook="model-loading", confidence=0.9),
    Rule(signature="model_loading.gated_or_auth", category="model_loading",
         title="The model repository needs authentication (gated or private)",
         fix="Accept the model's licence on Hugging Face and set HF_TOKEN for the vLLM process.",
         patterns=[r"GatedRepoError", r"Access to model [\w/.-]+ is restricted", r"401 Client Error.{0,80}huggingface",
                   r"You are trying to access a gated repo",
                   # a token without access: huggingface_hub's 403 (fine-grained tokens lack gated-repo access by default)
                   r"403 (?:Client Error|Forbidden).{0,80}(?:huggingface\.co|hf\.co)",
                   r"enable access to public gated repositories in your fine-grained token"],
         playbook="model-loading", confidence=0.9),
    Rule(signature="model_loading.corrupt_weights", category="model_loading",
         title="The weight files are corrupt or incomplete",
         fix="Re-download the weights (an interrupted download leaves truncated .safetensors): "
             "`huggingface-cli download <repo> --force-download`, and check the disk is not full.",
         # safetensors' loaders: "Error while deserializing header: {e:?}" (HeaderTooLarge, InvalidHeaderDeserialization,
         # MetadataIncompleteBuffer), "{e}" in newer bindings ("header too large"), "...metadata" in the oldest; raised
         # as SafetensorError, or a bare Exception before 0.3
         patterns=[r"Error while deserializing (?:header|metadata)\b", r"HeaderTooLarge", r"MetadataIncompleteBuffer",
                   r"InvalidHeaderDeserialization",
                   r"invalid load key", r"PytorchStreamReader failed reading zip archive"],
         playbook="model-loading", confidence=0.9),
    Rule(signature="model_loading.weight_mismatch", category="model_loading",
         title="{headline}",
         fix="{advice}", facts=_weight_mismatch_facts,
         patterns=[r"(?P<detail>size mismatch for [\w.]+)", r"(?P<detail>There is no module or parameter named '[\w.]+')",
                   # a model's load_weights indexes params_dict[name] with each checkpoint name it does not map
                   # ('lm_head.weight', 'layers.0.mlp.down_proj.weight_scale', 'blocks.0.attn.qkv.weight')
                   r"KeyError: '(?P<detail>(?:[\w]+\.)+(?:\w*weight\w*|\w*bias|\w*scales?|\w*zeros|g_idx|inv_freq|"
                   r"SCB|\w*_proj))'"],
         playbook="model-loading", confidence=0.8),
    # A quantized checkpoint's own tensors (GPTQ/AWQ g_idx/qweight/qzeros/scales, bitsandbytes absmax/
    # quant_state/SCB, compressed-tensors weight_packed/weight_zero_point) that the model vLLM built has no
    # parameter for: that layer is quantized in the checkpoint but not in vLLM's
    # quantization config for it (a router gate, an ignored module), or the method is another than the
    # checkpoint's. The same KeyError on a plain weight (or an FP8 weight_scale, which renamed layers also
    # give) is model_loading.weight_mismatch above.
    Rule(signature="quant.checkpoint_layout_mismatch", category="quantization",
         title="The checkpoint has quantized tensors vLLM's quantization does not build ({detail})",
         fix="The checkpoint stores '{detail}', a tensor of its quantization format, for a layer that this vLLM "
             "builds unquantized or with another method: check that --quantization (if given) matches "
             "quantization_config in config.json, and whether this vLLM release supports that quantization for "
             "this architecture (quantized MoE router gates and shared experts were added per model); else use "
             "a checkpoint quantized with the layers this vLLM expects, or a newer vLLM.",
         patterns=[r"KeyError: '(?P<detail>(?:[\w]+\.)+(?:g_idx|qweight|qzeros|scales|absmax|quant_state[\w.]*|SCB|"
                   r"weight_packed|weight_zero_point|weight_shape|" + QUANT_ONLY_SCALES + r"))'"],
         playbook="quantization", confidence=0.85),
    Rule(signature="quant.layer_built_unquantized", category="quantization",
         title="vLLM built {parent} unquantized, but the checkpoint has its {tensor}", fix="",
         check=lambda scan, env: _built_unquantized(scan), playbook="quantization", confidence=0.88),
    Rule(signature="model_loading.disk_full", category="model_loading",
         title="No space left on device while downloading or loading",
         fix="Free disk space where HF_HOME/the model cache lives (or point HF_HOME to a larger volume).",
         patterns=[r"No space left on device(?!.{0,60}/dev/shm)", r"\[Errno 122\] Disk quota exceeded"],
         playbook="model-loading", confidence=0.85),
    Rule(signature="tokenizer.chat_template_missing", category="tokenizer_chat_template",
         title="The tokenizer has no chat template",
         fix="Pass --chat-template <file.jinja> (the model card or vLLM's examples/ folder has one), or use the "
             "completions endpoint for base models.",
         patterns=[r"default chat template is no longer allowed, so you must provide a chat template",
                   r"Cannot use (?:chat template functions|apply_chat_template\(\)) because tokenizer\.chat_template is not set",
                   r"[Nn]o chat template (?:is )?(?:found|defined|set)"],
         playbook="tokenizer-chat-template", confidence=0.9),
    Rule(signature="tokenizer.template_error", category="tokenizer_chat_template",
         title="The chat template does not render ({detail})",
         fix="If the template raised its own error (e.g. conversation roles must alternate user/assistant), the "
             "request's messages break the template's rules: fix them in the client (merge consecutive messages, put "
             "the system message first) or serve a more permissive --chat-template. Otherwise the Jinja template has "
             "an error or expects other message fields: fix or replace it, and match --chat-template-content-format.",
         patterns=[r"jinja2\.exceptions\.(?:TemplateSyntaxError|UndefinedError|TemplateError): (?P<detail>.{1,160})",
                   r"jinja2\.exceptions\.(?P<detail>TemplateSyntaxError|UndefinedError|TemplateError)(?![(\w])",
                   r"(?P<detail>Chat template .{0,60}(?:failed|invalid))"],
         playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="tokenizer.mm_placeholder_missing", category="tokenizer_chat_template",
         title="The prompt has no placeholder for the {modality} input (multimodal prompt replacement failed)",
         fix="The prompt or chat template does not contain the model's image/audio placeholder tokens: use the chat "
             "endpoint with the model's own chat template (not a text-only --chat-template), or put the placeholder "
             "in raw prompts exactly as the model card shows.",
         patterns=[r"Failed to apply prompt replacement for mm_items\['(?P<modality>\w+)'\]",
                   r"Expected there to be \d+ prompt (?:updates|replacements) corresponding to \d+ (?P<modality>\w+) items"],
         playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="model_support.mm_processor_failed", category="model_support",
         title="The model's multimodal processor failed ({what})",
         fix="{advice}", facts=_processor_advice,
         patterns=[r"Failed to apply (?P<processor>\w+Processor) on data=",
                   # transformers_utils/processor.py and multimodal/processing (0.6 .. 0.33; "proceesor" in some)
                   r"Invalid type of HuggingFace (?P<processor>processor|proceesor|config)\. Expected type",
                   # the message's first sentence alone, as a report's title retells it
                   r"Invalid type of HuggingFace (?P<processor>processor|proceesor|config)\.?\s*$",
                   r"Failed to load the (?P<processor>processor|feature extractor|image processor)\. If the",
                   # transformers' Auto* classes: the processor class named in the checkpoint is one this transformers
                   # does not have (renamed, newer, or remote code)
                   r"Unrecognized (?P<processor>image processor|processing class|video processor|feature extractor) in ",
                   # a processor class of another transformers release: its constructor takes other arguments
                   r"(?P<processor>\w+(?:Processor|FeatureExtractor))(?:\.__init__)?\(\) (?:got an unexpected keyword "
                   r"argument|missing \d+ required positional argument)"],
         playbook="model-support", confidence=0.8),
    Rule(signature="tokenizer.load_failed", category="tokenizer_chat_template",
         title="The tokenizer could not be loaded ({detail})",
         fix="{advice}", facts=_tokenizer_advice,
         patterns=[r"(?P<detail>Tokenizer class \w+ does not exist or is not currently imported)",
                   r"(?P<detail>Couldn't instantiate the backend tokenizer)",
                   r"(?P<detail>data did not match any variant of untagged enum \w+)",
                   r"(?P<detail>requires the (?:SentencePiece|tiktoken|protobuf) library)",
                   # (blobfile: tiktoken's loader of a vocabulary file, used by tiktoken tokenizers such as Kimi's)
                   r"(?P<detail>No module named '(?:sentencepiece|tiktoken|mistral_common|blobfile)')",
                   # vLLM's get_tokenizer: the LLaMA hint (0.1) and the custom-tokenizer hint (0.2 .. 0.33)
                   r"(?P<detail>Failed to load the tokenizer)\. If (?:you are using a LLaMA|the tokenizer is a custom)"],
         playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="speculative.unsupported", category="speculative_decoding",
         title="Speculative decoding cannot run this configuration ({detail})",
         fix="This draft/EAGLE/MTP configuration is not supported by this vLLM: check --speculative-config "
             "(method, model, num_speculative_tokens) against the vLLM docs for your version, or run without it.",
         patterns=[r"(?P<detail>[Ss]peculative decoding (?:with [\w -]+ )?(?:is )?not (?:yet )?supported[^.]*)",
                   r"(?P<detail>(?:EAGLE|Eagle|eagle3?|MTP|Medusa|ngram)[\w ]{0,40}(?:is )?not (?:yet )?supported[^.]*)",
                   r"(?P<detail>not supported with speculative decoding)",
                   # a kernel path without the spec-decode inputs (Qwen3.5's XPU gated-delta-net: "XPU gdn_attention
                   # does not yet support 'spec_sequence_masks'."): the draft tokens are what it cannot take
                   r"(?P<detail>[\w.]+(?: [\w.]+){0,3} does not (?:yet )?support '?(?:spec_\w+|speculative[ _]"
                   r"decoding|spec[ _-]decode)'?)",
                   r"(?P<detail>\w+ with speculative decoding is not supported(?: yet)?)",
                   r"(?P<detail>num_speculative_tokens .{0,60})(?:must|should)"],
         playbook="speculative-decoding", confidence=0.85),
    Rule(signature="speculative.draft_mismatch", category="speculative_decoding",
         title="The draft model does not match the target model ({detail})",
         fix="The draft/EAGLE head must share the target's vocabulary and be built for it: use the draft model "
             "published for this target model.",
         patterns=[r"(?P<detail>[Dd]raft (?:model )?vocab(?:ulary)?[ _]size.{0,80})",
                   # V0 SpecDecodeWorker: the assert itself is the message (the exception line is a bare AssertionError);
                   # threads retell it in prose ("... line 564: asserts all(vocab_sizes[0] == ...)")
                   r"asserts? all\((?P<detail>vocab_sizes)\[0\] == vocab_size for vocab_size in vocab_sizes\)",
                   r"(?P<detail>EAGLE.{0,40}(?:hidden size|vocab).{0,60}(?:mismatch|does not match))"],
         facts=lambda m, line, scan: {"detail": "the draft and target vocabulary sizes differ"}
         if m.groupdict().get("detail") == "vocab_sizes" else {},
         playbook="speculative-decoding", confidence=0.85),
    Rule(signature="speculative.drafter_crash", category="speculative_decoding",
         title="Speculative decoding crashed in {where} ({exception})", fix="", check=lambda scan, env: _drafter_crash(scan),
         playbook="speculative-decoding", confidence=0.7),
]


# What vLLM logs while it builds the speculative-decoding drafter (V1 gpu_model_runner "Loading drafter model...",
# v1/spec_decode/eagle.py, V0 spec_decode_worker "Configuring SpecDecodeWorker"), by message or by source file.
DRAFTER_NEEDLES = ("Loading drafter", "EAGLE head", "SpecDecodeWorker", "draft model", "drafter")
DRAFTER_STEP_RE = lazy(r"Loading drafter model|Assuming the EAGLE head shares|EAGLE head|Configuring SpecDecodeWorker|"
                       r"draft model|drafter", needles=DRAFTER_NEEDLES)
DRAFTER_SOURCES = ("eagle.py", "medusa.py", "ngram_proposer.py", "draft_model.py", "spec_decode_worker.py",
                   "multi_step_worker.py", "dflash.py", "suffix_decoding.py", "mtp_proposer.py")
STEP_WINDOW = 3  # logged lines before the first failure line that say what start-up was doing
STEP_GAP = 12  # at most this many input lines from that step's line to the failure
FAILED_RE = lazy(r"\b(?:failed|Failed|FAILED)\b|Traceback \(most recent call last\)",
                 needles=("ailed", "FAILED", "Traceback"))


def _failed_after_drafter(scan: Scan) -> Diagnosis | None:
    """A start-up that died with its message missing (only vLLM's "failed to start" cascade, a traceback cut in
    the engine's plumbing) right after the log said it was building the drafter: speculative decoding, as the
    step it died in. An exception with a message of its own right after that step is the drafter's too, said with
    less confidence, so that the rules that read its message (out of memory, a missing package) still win."""
    said = any(not is_wrapper(e.text) and e.message for e in scan.exceptions)
    lines = scan.lines
    joined = scan.joined_text()
    if not any(n in joined for n in DRAFTER_NEEDLES) and not any(ln.src.startswith(DRAFTER_SOURCES)
                                                                          for ln in lines):
        return None
    first = next((i for i, ln in enumerate(lines) if ln.level in ("ERROR", "CRITICAL") or FAILED_RE.search(ln.text)),
                 None)
    if not first:
        return None
    before = [ln for ln in lines[:first] if ln.level in ("INFO", "WARNING", "DEBUG")][-STEP_WINDOW:]
    step = next((ln for ln in reversed(before) if DRAFTER_STEP_RE.search(ln.text)
                 or ln.src.split(":", 1)[0] in DRAFTER_SOURCES), None)
    fail = lines[first]
    # the log's own line numbers: lines the selection dropped (other start-up steps) may lie between them
    if step is None or fail.no - step.no > STEP_GAP:
        return None
    fix = ("vLLM failed right after it logged building the speculative-decoding drafter, and the error itself is "
           "not in this log: run once without --speculative-config to confirm the target model alone starts, and "
           "check that the draft (EAGLE/EAGLE3/MTP head) was made for this target model, for this `method` and for "
           "this vLLM release (EAGLE3 needs a target model that implements it); capture the whole log "
           "(`2>&1 | tee vllm.log`) to see the exception.")
    if said:
        exc = next(e for e in scan.exceptions if not is_wrapper(e.text) and e.message)
        fix = ("vLLM failed right after it logged building the speculative-decoding drafter: the error above is the "
               "drafter's (its weights, its architecture or its forward). Run once without --speculative-config to "
               "confirm the target model alone starts, and check that the draft (EAGLE/EAGLE3/MTP head) was made for "
               "this target model, for this `method` and for this vLLM release.")
        return Diagnosis(category="speculative_decoding", signature="speculative.failed_after_drafter",
                         title=f"vLLM failed while building the speculative-decoding drafter: {exc.text[:140]}",
                         confidence=0.6, evidence=[Evidence(step.no, step.shown), Evidence(exc.line.no, exc.line.shown)],
                         facts={"step": step.text.strip()[:200], "exception": exc.type},
                         fix=Fix(fix, "speculative-decoding"), first_line=step.no)
    return Diagnosis(category="speculative_decoding", signature="speculative.failed_after_drafter",
                     title="vLLM failed while building the speculative-decoding drafter (the error itself is not in "
                           "the log)",
                     confidence=0.55, evidence=[Evidence(step.no, step.shown), Evidence(fail.no, fail.shown)],
                     facts={"step": step.text.strip()[:200]}, fix=Fix(fix, "speculative-decoding"),
                     first_line=step.no)


RULES += [
    Rule(signature="speculative.failed_after_drafter", category="speculative_decoding",
         title="vLLM failed while building the speculative-decoding drafter", fix="",
         check=lambda scan, env: _failed_after_drafter(scan), playbook="speculative-decoding", confidence=0.55),
]


def _config_mapping_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    # the KeyError that CONFIG_MAPPING[...] raises names the model type transformers does not know
    for exc in scan.exceptions:
        if exc.short_type == "KeyError" and any("configuration_auto" in f.file for f in exc.frames):
            return {"model_type": exc.message.strip("'\"")}
    return {}


HUB_UNREACHABLE: Rule = Rule(
    signature="model_loading.hub_unreachable", category="model_loading",
    title="The model could not be fetched: the Hugging Face Hub is unreachable, or offline mode is on",
    fix="On a machine without access to huggingface.co, download the model elsewhere (`hf download MODEL "
        "--local-dir DIR`) and pass --model DIR; behind a proxy, set HTTPS_PROXY (or HF_ENDPOINT for a "
        "mirror). With HF_HUB_OFFLINE=1 every file the model needs must already be in the HF cache "
        "(HF_HOME) of the user vLLM runs as.",
    patterns=[r"We couldn't connect to '?https?://(?:huggingface\.co|hf\.co|hf-mirror\.com)[^' ]*'? to load",
              r"outgoing traffic has been disabled",
              r"offline mode is enabled\. To disable it, please unset the `HF_HUB_OFFLINE`",
              r"OfflineModeIsEnabled",
              # the Hub's own outage (huggingface_hub / requests: "503 Server Error: Service Unavailable for url: ...")
              r"\b5\d\d Server Error: [\w ]{0,40}for url: https?://(?:huggingface\.co|hf\.co|hf-mirror\.com)",
              r"An error happened while trying to locate the files? on the Hub and we cannot find the",
              r"(?:huggingface\.co|hf\.co)\S*.{0,120}(?:Max retries exceeded|Read timed out|Failed to establish a "
              r"new connection|Temporary failure in name resolution|Name or service not known|ProxyError|"
              r"CERTIFICATE_VERIFY_FAILED|Connection reset by peer)"],
    check=lambda scan, env: not_in_passing(HUB_UNREACHABLE, scan),
    playbook="model-loading", confidence=0.85)

# Well-known failures of fetching a model and reading its config (huggingface_hub, transformers,
# vLLM's config loader), worded as those libraries word them.
RULES += [
    HUB_UNREACHABLE,
    Rule(signature="model_loading.model_not_found", category="model_loading",
         title="The model name is neither a local folder nor a repository on the Hugging Face Hub",
         fix="Check the --model value: a Hub id is 'namespace/name' exactly as on huggingface.co (case "
             "included), a local path must exist inside the container; a private or gated repository also needs "
             "HF_TOKEN set for the user vLLM runs as.",
         patterns=[r"(?P<model>\S+) is not a local folder and is not a valid model identifier listed on",
                   r"Revision Not Found for url", r"RevisionNotFoundError",
                   r"Invalid rev id: \S+"],
         playbook="model-loading", confidence=0.85),
    Rule(signature="model_loading.config_format", category="model_loading",
         title="vLLM found no model config it can read (config.json or params.json)",
         fix="Point --model at the folder that holds config.json (HF format) or params.json (Mistral format); "
             "for a Mistral-format checkpoint pass --config-format mistral --load-format mistral --tokenizer-mode "
             "mistral, for a GGUF file pass --tokenizer (and --hf-config-path) of the original model; a LoRA "
             "adapter folder (adapter_config.json only) is no model: load the base model with --enable-lora and "
             "give the adapter with --lora-modules name=path (offline: a LoRARequest).",
         patterns=[r"Could not detect config format for no config file found",
                   r"With config_format 'auto', ensure your model has either config\.json",
                   r"Unknown config format `[\w-]+`",
                   r"Failed to load mistral '[^']+' config for model",
                   r"No supported config format found in \S+"],
         playbook="model-loading", confidence=0.85),
    Rule(signature="model_support.transformers_config_unknown", category="model_support",
         title="The installed transformers cannot read this model's config (too old for it)",
         fix="Upgrade transformers to a release that knows this model (`pip install -U transformers`, or the "
             "version the model card names) within what your vLLM supports, or upgrade vLLM; a brand-new "
             "architecture may need transformers from source.",
         patterns=[r'config_class = CONFIG_MAPPING\[config_dict\["model_type"\]\]',
                   r"`rope_scaling` must be a dictionary with (?:with )?two fields",
                   r"`rope_scaling`'s type field must be one of \[",
                   r"Unrecognized configuration class .{0,160} for this kind of AutoModel"],
         # secondary: the message vLLM raises after it (model_support.transformers_unknown_type), when
         # the log has it, names the model type outright
         facts=_config_mapping_facts, playbook="model-support", confidence=0.85, secondary=True),
]

# vLLM's speculative-decoding config checks (config/speculative.py, and the older forms of 0.5-0.8).
RULES += [
    Rule(signature="speculative.config_invalid", category="speculative_decoding",
         title="The speculative-decoding configuration is not valid for this model or vLLM",
         fix="Check --speculative-config against the vLLM docs of your version: the method, the draft model "
             "(its vocabulary and hidden size must match the target) and num_speculative_tokens; an EAGLE3 or MTP "
             "head only works with the target models it was trained for.",
         patterns=[r"Unsupported speculative method: '?[\w-]+'?",
                   r"Eagle3 is only supported for .{1,200}? models",
                   r"\w+ is only supported for .{1,200}? models\. Got self\.target_model_config",  # 0.17+: the method's name
                   r"num_speculative_tokens was provided but without speculative model",
                   r"num_speculative_tokens must be provided with speculative model",
                   r"Expected num_speculative_tokens to be greater than zero",
                   # an MTP/EAGLE head with n_predict layers is reused: the token count must be a multiple (0.9+)
                   r"num_speculative_tokens:\d+ must be divisible by n_predict=\d+",
                   r"A speculative model was provided, but (?:neither `speculative_token_tree` nor )?"
                   r"`num_speculative_tokens`",
                   # ngram's lookup window (0.8+: "must be > 0", "must be <= prompt_lookup_max=N")
                   r"prompt_lookup_m(?:in|ax)=-?\d+ must be (?:> 0|<= prompt_lookup_max)",
                   # a draft model runs with TP 1 or the target's TP, nothing between
                   r"speculative_draft_tensor_parallel_size=\d+ cannot be other value than 1",
                   r"Either prompt_lookup_max or prompt_lookup_min must be provided when using the ngram method",
                   r"target_model_config must be present for mtp",
                   r"Arctic Inference is required for suffix decoding",
                   r"'tensor_parallel_size' is not a valid argument in the speculative_config",
                   r"Expected both speculative_model and num_speculative_tokens to be provided",
                   r"Speculative decoding requires usage of the V2 block manager"],
         playbook="speculative-decoding", confidence=0.85),
]

RULES += [
    Rule(signature="model_loading.checkpoint_mismatch", category="model_loading",
         check=lambda scan, env: _checkpoint_mismatch(scan),
         title="The checkpoint's weights do not fit the model vLLM built (missing or differently shaped weights)",
         fix="The checkpoint and the model vLLM builds disagree: a --quantization that does not match the "
             "checkpoint's quantization_config, a quantized checkpoint that this --tensor-parallel-size cannot "
             "split, an incomplete download, or a model revision newer than this vLLM. Drop --quantization, try "
             "another --tensor-parallel-size, re-download, or upgrade vLLM.",
         patterns=[r"Following weights were not initialized from checkpoint: ",
                   r"Attempted to load weight \(torch\.Size\(\[[\d, ]*\]\)\) into parameter \(torch\.Size\(\[[\d, ]*\]\)\)"],
         playbook="model-loading", confidence=0.8),
]

RULES += [
    Rule(signature="model_support.transformers_too_new", category="model_support",
         title="The installed transformers is newer than this vLLM supports (it already defines '{name}')",
         fix="vLLM registers its own config for this model type, which this transformers now ships itself: install "
             "the transformers version your vLLM release pins (`pip install 'transformers<X'` per its "
             "requirements), or upgrade vLLM.",
         # configuration_auto's "... config, pick another name." (a title may cut the tail), auto_factory's
         # "'<class ...Config'>' is already used by a Transformers model." for a processor/model registered on a config
         patterns=[r"'(?P<name>[\w.-]+|<class '[\w.]+'>)' is already used by a Transformers (?:config|model)\b"],
         playbook="model-support", confidence=0.9),
]

RULES += [
    Rule(signature="model_support.rope_unknown", category="model_support",
         title="This vLLM does not know the model's RoPE scaling type ({rope})",
         fix="The model's config.json asks for a rotary-embedding scaling this vLLM does not implement: upgrade "
             "vLLM to a release that supports the model (its model card usually names one).",
         patterns=[r"Unknown RoPE scaling type (?P<rope>[\w'\"-]+)"],
         playbook="model-support", confidence=0.9),
    # vllm/transformers_utils/config.py patches the model's RoPE dict into the form its layers read; a form it does
    # not know (transformers 5's per-layer rope_parameters under an older vLLM, a config with neither rope_type nor
    # type) is refused there, usually inside pydantic's "validation error for ModelConfig".
    Rule(signature="model_support.rope_config_unreadable", category="model_support",
         title="vLLM cannot read the model's RoPE configuration ({detail})",
         fix="The rope_scaling / rope_parameters in the model's config.json has a form this vLLM and transformers pair "
             "does not read (transformers 5 moved RoPE settings into per-layer rope_parameters; old configs name the "
             "kind `type`): install the transformers version your vLLM release pins, or a vLLM release made for this "
             "model; if you edited config.json, give rope_scaling a rope_type.",
         patterns=[r"(?P<detail>rope_(?:scaling|parameters) should have a 'rope_type' key)",
                   r"(?P<detail>Found conflicts between 'rope_type=[\w-]+' \(modern field\) and 'type=[\w-]+')",
                   r"(?P<detail>rope_parameters must define each attention block type)",
                   # a RoPE key the reading side does not find: configs written for transformers 5 (rope_theta inside
                   # rope_parameters) read by an older vLLM, or the other way round
                   r"KeyError: '(?P<detail>rope_theta|rope_type|rope_parameters|rope_scaling|mrope_section|"
                   r"partial_rotary_factor)'"],
         playbook="model-support", confidence=0.85),
]

CONFIG_ATTR_MISSING: Rule = Rule(
    signature="model_support.transformers_config_attr", category="model_support",
    title="The model's config object lacks '{attr}' (transformers and vLLM versions do not match)",
    fix="vLLM reads a config attribute this transformers does not provide (transformers 5 moved RoPE and "
        "other fields; an old transformers lacks new ones): install the transformers version your vLLM "
        "release pins, or upgrade vLLM.",
    # vLLM's own config classes (LoRAConfig, ModelConfig, ...) are another vLLM release's code: pool_lora's rule
    patterns=[r"'(?!" + VLLM_CONFIG_CLASSES + r"')(?P<cls>\w+Config)' object has no attribute '(?P<attr>\w+)'"],
    playbook="model-support", confidence=0.75,
    check=lambda scan, env: not_in_passing(CONFIG_ATTR_MISSING, scan))

# The same mismatch on the tokenizer or processor object: transformers' own __getattr__ ("Qwen2Tokenizer has no
# attribute all_special_tokens_extended", tokenization_utils_base / processing_utils) when vLLM reads an
# attribute the installed transformers removed (transformers 5 dropped all_special_tokens_extended) or does not
# have yet.
TOKENIZER_ATTR_MISSING: Rule = Rule(
    signature="model_support.transformers_tokenizer_attr", category="model_support",
    title="The {cls} object lacks '{attr}' (transformers and vLLM versions do not match)",
    fix="vLLM reads an attribute of the tokenizer/processor that this transformers does not provide (transformers 5 "
        "removed some, e.g. all_special_tokens_extended): install the transformers version your vLLM release pins "
        "(`pip show vllm` lists the range; vLLM before the transformers-5 releases needs transformers<5), or "
        "upgrade vLLM.",
    patterns=[r"^(?:AttributeError: )?(?P<cls>\w*(?:Tokenizer(?:Fast)?|TokenizersBackend|Processor)) has no attribute "
              r"(?P<attr>\w+)",
              # Python's own wording when the class has no __getattr__ of its own: vLLM's multimodal processors read
              # attributes a transformers release added ('Qwen2VLProcessor' object has no attribute 'image_token'
              # before 4.47)
              r"'(?P<cls>\w*(?:Tokenizer(?:Fast)?|TokenizersBackend|Processor))' object has no attribute "
              r"'(?P<attr>\w+)'"],
    playbook="model-support", confidence=0.75,
    check=lambda scan, env: not_in_passing(TOKENIZER_ATTR_MISSING, scan))

RULES += [
    CONFIG_ATTR_MISSING,
    TOKENIZER_ATTR_MISSING,
]


# transformers 5 renames legacy layer types while it builds the config (configuration_utils._LEGACY_LAYER_TYPE_REMAP:
# attention -> full_attention, mamba -> linear_attention, deepseek_sparse_attention -> indexed_attention); a vLLM model
# that indexes its own table by the old names (granitemoehybrid's ALL_DECODER_LAYER_TYPES[config.layer_types[i]],
# up to 0.25; 0.28 lists both) then raises KeyError on the new one. The other way round, an older transformers refuses a layer type
# it does not know yet ("The `layer_types` entries must be in (...)").
NEW_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention", "linear_attention", "indexed_attention",
                   "compressed_sparse_attention", "heavily_compressed_attention", "hybrid_sliding")


def _layer_types_facts(m: "re.Match[str]", line: Line, scan: Scan) -> dict[str, Any]:
    name = m.groupdict().get("layer_type")
    if name:
        return {"headline": f"This vLLM's model code does not know the layer type '{name}' that transformers now writes",
                "advice": (f"The installed transformers renames the model's layer types while it reads config.json "
                           f"(transformers 5 calls them '{name}'), and this vLLM's model code still looks up the old "
                           "names: install the transformers version your vLLM release pins (`pip show vllm` lists "
                           "the range), or upgrade vLLM to a release that knows the new names.")}
    return {"headline": "The installed transformers does not know a layer type in this model's config",
            "advice": ("The model's config.json lists layer types newer than the installed transformers accepts: upgrade "
                       "transformers (within the range your vLLM pins), or upgrade vLLM together with it.")}


RULES += [
    Rule(signature="model_support.layer_types_mismatch", category="model_support",
         title="{headline}",
         fix="{advice}",
         patterns=[r"KeyError: '(?P<layer_type>" + "|".join(NEW_LAYER_TYPES) + r")'",
                   r"The `layer_types` entries must be in \("],
         facts=_layer_types_facts, playbook="model-support", confidence=0.85),
]


# Speculative decoding and pipeline parallelism: V0's SpecDecodeWorker refuses PP outright (0.5 .. 0.8); V1 copies the
# target's pipeline size into the draft's parallel config and verifies the draft (an MTP/EAGLE head, no SupportsPP)
# against it (config/speculative.py _verify_args -> ModelConfig.verify_with_parallel_config), so the model-level
# message "Pipeline parallelism is not supported for this model" is then about the draft, not the served model.
SPEC_PP_DIRECT = lazy(r"Speculative decoding is (?:currently )?incompatible with pipeline parallelism")
PP_MODEL_MSG = "Pipeline parallelism is not supported for this model"
SPEC_CONTEXT = lazy(r"speculative[_-]config|speculative\.py|draft_model_config|draft_parallel_config|"
                    r"num[_-]speculative[_-]tokens|--speculative-model|SpecDecodeWorker|spec_decode|"
                    # V1's model runner logs this only when speculative decoding is on
                    r"Loading drafter model")


def _spec_pp(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "pipeline parallelism" not in joined.lower():
        return None
    hit = next((ln for ln in scan.lines if SPEC_PP_DIRECT.search(ln.text)), None)
    if hit is None and PP_MODEL_MSG in joined and (
            SPEC_CONTEXT.search(joined) or any("speculative" in f for f in scan.frame_files)):
        hit = next(ln for ln in scan.lines if PP_MODEL_MSG in ln.text)
    if hit is None:
        return None
    return Diagnosis(
        category="speculative_decoding", signature="speculative.pipeline_parallel_unsupported",
        title="Speculative decoding cannot run with pipeline parallelism in this vLLM",
        confidence=0.92, evidence=[Evidence(hit.no, hit.shown)], facts={},
        fix=Fix("The draft model or MTP head is checked against --pipeline-parallel-size and has no pipeline-parallel "
                "support here (V0 refuses the combination; V1 copies the target's PP size into the draft's config): "
                "serve with tensor parallelism only (--tensor-parallel-size, or data parallelism across nodes) when "
                "speculative decoding is on, or drop --speculative-config to keep pipeline parallelism.",
                "speculative-decoding"),
        first_line=hit.no)


RULES += [
    Rule(signature="speculative.pipeline_parallel_unsupported", category="speculative_decoding",
         title="Speculative decoding cannot run with pipeline parallelism", fix="", check=_spec_pp,
         playbook="speculative-decoding", confidence=0.92),
]


# A checkpoint tensor the model does not define, while speculative decoding is configured: unless the traceback shows
# the target's own loader, it is the draft head's checkpoint (EAGLE/EAGLE3 heads carry their own embed_tokens, lm_head,
# fc or d2t tensors; llama_eagle3.load_weights learnt to take embed_tokens in 0.9.1).
DRAFT_FILE_RE = lazy(r"eagle|mtp|medusa|draft|spec_decode|speculat", re.I)


def _draft_weights(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if not SPEC_CONTEXT.search(joined):
        return None
    weights = next(r for r in RULES if r.signature == "model_loading.weight_mismatch")
    d = weights.match_lines(scan)
    if d is None or d.facts.get("loader_bug"):
        return None
    exc = next((e for e in scan.exceptions if e.line.no == d.first_line), None)
    files = [f.file for f in exc.frames] if exc else []
    if any("/model_executor/models/" in f and not DRAFT_FILE_RE.search(f) for f in files) and not any(
            DRAFT_FILE_RE.search(f) for f in files):
        return None  # the served model's own load_weights
    param = d.facts.get("param") or (d.evidence[0].text if d.evidence else "")
    quoted = re.search(r"'([\w.]+)'", d.evidence[0].text) if d.evidence else None
    name = quoted.group(1) if quoted else param
    return Diagnosis(
        category="speculative_decoding", signature="speculative.draft_weights_mismatch",
        title=f"The draft model's checkpoint does not fit the draft model vLLM builds ({name})",
        confidence=0.85, evidence=d.evidence, facts={"param": name},
        fix=Fix(f"Speculative decoding is on, and the draft (EAGLE/EAGLE3/MTP) checkpoint has a tensor this vLLM's draft "
                f"model does not define ({name}): the head was saved in another layout (its own embed_tokens or "
                "lm_head, a head trained with another tool or for a newer vLLM) or for another target model. Use the "
                "draft published for this target and vLLM version, or upgrade vLLM (newer EAGLE3 loaders take a "
                "head's own embed_tokens); run once without --speculative-config to confirm the target loads.",
                "speculative-decoding"),
        first_line=d.first_line)


RULES += [
    Rule(signature="speculative.draft_weights_mismatch", category="speculative_decoding",
         title="The draft model's checkpoint does not fit", fix="", check=_draft_weights,
         playbook="speculative-decoding", confidence=0.85),
]


# registry.py (0.10 .. 0.33): architectures vLLM dropped, and those moved out of tree into a plugin.
RULES += [
    Rule(signature="model_support.architecture_removed", category="model_support",
         title="This vLLM no longer supports the model architecture {arch}",
         fix="{advice}",
         patterns=[r"Model architecture (?P<arch>\w+) was supported in vLLM until v(?P<version>[\w.]+), and is not "
                   r"supported anymore",
                   r"Model architecture (?P<arch>\w+) is not supported in-tree anymore\. Please install the plugin at "
                   r"(?P<plugin>\S+?)\.? if"],
         facts=lambda m, line, scan: {"advice": (
             f"vLLM removed {m.group('arch')} after v{m.groupdict()['version']}: install vLLM {m.groupdict()['version']} "
             "(or older) to serve this model, or a newer model of the same family." if m.groupdict().get("version") else
             f"{m.group('arch')} moved out of vLLM into a plugin: install the plugin the message names "
             f"({m.groupdict().get('plugin')}) into the same environment, or use the last vLLM release that had it.")},
         playbook="model-support", confidence=0.9),
]


# transformers' CONFIG_MAPPING[config_dict["model_type"]] raises a bare KeyError with the model type when the
# installed transformers predates the model ("KeyError: 'qwen2'"); pasted without its frames it is told apart from
# any other KeyError by the list of model types transformers knows (model_types.txt, scripts/model_types.py).
MODEL_TYPE_KEYERROR_RE = lazy(r"KeyError: '(?P<model_type>[a-z][a-z0-9_-]{2,40})'\s*$")


def _known_model_types() -> frozenset[str]:
    global _MODEL_TYPES
    if _MODEL_TYPES is None:
        from pathlib import Path
        path = Path(__file__).with_name("model_types.txt")
        _MODEL_TYPES = frozenset(path.read_text().split()) if path.exists() else frozenset()
    return _MODEL_TYPES


_MODEL_TYPES: frozenset[str] | None = None


def _model_type_keyerror(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    joined = scan.joined_text()
    if "KeyError: '" not in joined or "CONFIG_MAPPING[" in joined:
        return None  # with its frame the lookup is model_support.transformers_config_unknown
    for ln in scan.lines:
        m = MODEL_TYPE_KEYERROR_RE.search(ln.text)
        if m and m.group("model_type") in _known_model_types():
            mt = m.group("model_type")
            return Diagnosis(
                category="model_support", signature="model_support.model_type_keyerror",
                title=f"The installed transformers does not know model type {mt}",
                confidence=0.85, evidence=[Evidence(ln.no, ln.shown)], facts={"model_type": mt},
                fix=Fix(f"'{mt}' is the model's config.json model_type; transformers looks it up in its table of "
                        "model types and raises KeyError when it is older than the model. Upgrade transformers "
                        "(within the range your vLLM pins) or upgrade vLLM with it; a model newer than every "
                        "transformers release needs the version its model card names.", "model-support"),
                first_line=ln.no)
    return None


RULES += [
    Rule(signature="model_support.model_type_keyerror", category="model_support",
         title="The installed transformers does not know the model type", fix="", check=_model_type_keyerror,
         playbook="model-support", confidence=0.85),
]


# transformers imports a model's own code as transformers_modules.<repo folder>; in a worker process that did not
# run the import (multiprocessing, Ray on another node) or for a folder name with dots, that module is missing.
RULES += [
    Rule(signature="model_support.remote_code_module_missing", category="model_support",
         title="The model's own code could not be imported in a worker ({module})",
         fix="transformers keeps a model's custom code as the module transformers_modules.<folder>; the worker that "
             "failed could not import it. Launch with --trust-remote-code; if the model folder's name has dots "
             "(e.g. Qwen2.5-7B) rename it without them; with Ray or several nodes, make HF_MODULES_CACHE (by default "
             "~/.cache/huggingface/modules) the same shared path on every node.",
         patterns=[r"No module named '(?P<module>transformers_modules\.[^']+)'"],
         playbook="model-support", confidence=0.8),
]


def _runner_spec(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    from triage.rules.config import _runner_unsupported
    return _runner_unsupported(scan, env, spec=True)


# The OpenAI server logs "Error in preprocessing prompt inputs" (serving_chat.py / serving.py) before the error of
# turning the request into a prompt; when the paste is cut after the frames into the chat template, the template is
# where it failed (the more exact rules, e.g. tokenizer.template_error, win when the error line is there).
CHAT_TEMPLATE_CALL = lazy(r"apply_hf_chat_template|apply_chat_template|safe_apply_chat_template|render_jinja_template")

CHAT_PREPROCESS: Rule = Rule(
    signature="tokenizer.chat_preprocessing_failed", category="tokenizer_chat_template",
    title="The request could not be turned into a prompt by the model's chat template",
    fix="The server failed while applying the model's chat template to a request (the error line after the "
        "traceback says why). Usual causes: the model has no chat template (a base model: pass --chat-template), the "
        "template rejects the conversation (roles, several tool calls, system message position), or the request's "
        "content format does not fit the template (--chat-template-content-format).",
    patterns=[r"Error in preprocessing prompt inputs"],
    check=lambda scan, env: (CHAT_PREPROCESS.match_lines(scan) if CHAT_TEMPLATE_CALL.search(scan.joined_text())
                             else None),
    playbook="tokenizer-chat-template", confidence=0.6)

RULES += [
    Rule(signature="speculative.model_runner_unsupported", category="speculative_decoding",
         title="The model runner does not support this speculative decoding method", fix="", check=_runner_spec,
         playbook="speculative-decoding", confidence=0.88),
    CHAT_PREPROCESS,
]

CHECKPOINT_MISMATCH: Rule = next(r for r in RULES if r.signature == "model_loading.checkpoint_mismatch")
RULES += RULES_INTERFACE

# a message a paste wrapped over lines still reaches every plain pattern rule here
read_wrapped_messages(RULES)
