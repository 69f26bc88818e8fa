"""vLLM on Huawei Ascend NPUs (the vllm-ascend plugin): what CANN, torch_npu and vllm-ascend raise when the card,
the dtype or the graph mode is not one the installed stack takes.

- CANN's operator library ships its kernels per SoC (the Ascend-cann-kernels-<soc> package; vllm-ascend images are
  built for one family: 910B "A2", A3, or 310P): an aclnn operator whose kernels are not installed for this SoC
  fails with "EZ1001: ... Get path and read binary_info_config.json failed, please check if the opp_kernel package
  is installed". In a vllm-ascend image that means the card is not the one the image (and often the release) was
  built for: Atlas 300I Duo/Pro (310P) under a 910B image, the 0.7.x releases supporting only Atlas 800I A2.
- Triton-Ascend compiles through bishengir-compile, whose --target list names the SoCs it supports; on a card it
  does not know (310P; older compilers lacking newer 910B variants) it says "bishengir-compile: for the --target
  option: Cannot find option named 'Ascend310P3'!" (wrapped in triton's MLIRCompilationError).
- aclnn operators check their tensors' dtypes: "AclNN_Parameter_Error(EZ1001): Tensor scale not implemented for
  DT_FLOAT16, should be in dtype support list [DT_UINT64, DT_BFLOAT16, DT_INT64, DT_FLOAT]." (also "self not
  implemented for DT_BFLOAT16, ..."), often after "call aclnnQuantMatmulWeightNz failed, error code is 161002".
  On a quantized matmul (w8a8 / w8a16: aclnnQuantMatmul*, aclnnWeightQuantBatchMatmul*, QuantBatchMatmulV3) the
  scale or bias dtype follows --dtype (float16 scales are refused: serve the w8a8 model with --dtype bfloat16);
  elsewhere it is a dtype this NPU does not compute (bfloat16 on 310P and 910A: --dtype float16).
- vllm_ascend/platform.py (0.9.x) refuses ACL graph mode, the V1 default, for DeepSeek models: "ACL Graph does not
  support deepseek. Please adopt additional_config={'enable_graph_mode': True} to serve deepseek models with NPU
  graph mode ..." / "... Please try torchair graph mode to serve deepseek models on vllm-ascend. Or set
  `enforce_eager=True` to use eager mode."
- TorchAir graph mode (DeepSeek, 0.9.x) keeps each layer's KV cache as a (k, v) tuple and works only with chunked
  prefill off (the maintainers' answer); with it on, the MLA chunked-prefill path (vanilla_chunked_prefill_mla)
  calls kv_cache.size(1) on the tuple: "AttributeError: 'tuple' object has no attribute 'size'".
- vllm-ascend's fused MoE routing (ops/fused_moe.py, 2025) used grouped top-k, made for DeepSeek V2/V3's expert
  groups: a MoE model without groups (num_expert_group 0/None: Aria) reshapes the router scores to
  [tokens, 0, -1] and fails: "RuntimeError: shape '[38400, 0, -1]' is invalid for input of size 2457600".
- torch_npu links CANN's libraries at import: the toolkit's (libascendcl, libhccl, libge_runner, libopapi, ...:
  /usr/local/Ascend/ascend-toolkit/latest/lib64, on the path once set_env.sh is sourced) and, for the torch_npu
  builds vllm-ascend pins since 0.7.1, NNAL's ATB (libatb.so: /usr/local/Ascend/nnal/atb, a separate package with
  its own set_env.sh). "ImportError: libatb.so: cannot open shared object file" means NNAL is not installed or not
  sourced; vLLM then finds no platform ("Failed to infer device type").
- vllm_ascend_C holds vllm-ascend's optional Ascend C custom kernels; an install built without them logs "Failed to
  import vllm_ascend_C:No module named 'vllm_ascend.vllm_ascend_C'" from camem.py (as ERROR before #956, WARNING
  after) and serves normally; only sleep mode needs them ("camem allocator is not available": pool_lora.py).
"""

from __future__ import annotations

import re
from typing import Any

from triage.lazyre import lazy
from triage.logread.normalize import Line
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

SOC_KERNELS_MISSING: Rule = Rule(
    signature="ascend.soc_kernels_missing", category="unsupported_gpu",
    title="CANN has no operator kernels installed for this NPU's SoC (the image or release was built for another "
          "Ascend card)",
    fix="The aclnn kernels are installed per SoC and none is there for this card: check the card with `npu-smi "
        "info` and use the vllm-ascend image and CANN kernels package built for it (the -310p images for Atlas 300I "
        "Duo/Pro, the -a3 images for A3, the default ones for Atlas 800I/800T A2), from a vllm-ascend release that "
        "lists the card as supported; on a host install, install Ascend-cann-kernels-<soc> matching the toolkit.",
    # (either half: a long line wrapped by a terminal or collector keeps one of them whole)
    patterns=[r"read binary_info_config\.json failed", r"please check if the opp_kernel package is instal"],
    playbook="unsupported-gpu", confidence=0.85)

TRITON_SOC_UNKNOWN: Rule = Rule(
    signature="ascend.triton_soc_target_unknown", category="unsupported_gpu",
    title="Triton-Ascend's compiler has no target for this NPU ({soc})",
    fix="bishengir-compile, which Triton-Ascend compiles vllm-ascend's Triton kernels with, does not know {soc}: on "
        "Atlas 300I (310P) cards Triton-Ascend is not supported, so serve a model and vllm-ascend release whose 310P "
        "path needs no Triton kernels (the -310p images and the models their guide lists); for a newer 910B variant, "
        "upgrade CANN and triton-ascend to the versions the vllm-ascend release pins.",
    patterns=[r"Cannot find option named '(?P<soc>Ascend[\w\-]+)'"],
    playbook="unsupported-gpu", confidence=0.85)

CANN_LIBS = r"lib(?:atb|hccl|ascendcl|acl_op_compiler|ge_runner|opapi|nnopbase|tiling_api|runtime_common)\.so"


def _cann_package(m: re.Match[str], ln: Line, scan: Scan) -> dict[str, Any]:
    if m.group("lib").startswith("libatb"):
        return {"package": "the CANN NNAL (ATB) package"}
    return {"package": "the CANN toolkit"}


CANN_LIBRARY_MISSING: Rule = Rule(
    signature="ascend.cann_library_missing", category="environment",
    title="torch_npu cannot load {lib} from {package} (not installed, or its set_env.sh not sourced)",
    fix="torch_npu links {package} at import, and {lib} is not on the library path: install the CANN toolkit and "
        "NNAL versions the vllm-ascend release pins (or use its image), then `source "
        "/usr/local/Ascend/ascend-toolkit/set_env.sh` and `source /usr/local/Ascend/nnal/atb/set_env.sh` in the shell "
        "(or entrypoint) that starts vLLM; check with `python -c 'import torch_npu'`.",
    patterns=[rf"(?P<lib>{CANN_LIBS})[^:\n]*: cannot open shared object file"],
    facts=_cann_package, playbook="environment", confidence=0.9)

ACL_GRAPH_MODEL_REFUSED: Rule = Rule(
    signature="ascend.acl_graph_model_refused", category="engine_config",
    title="vllm-ascend's ACL graph mode does not support {model} models",
    fix="This vllm-ascend release refuses its default graph mode (ACL graph) for {model}: serve with "
        "`--enforce-eager`, or turn on TorchAir graph mode with `--additional-config "
        "'{{\"torchair_graph_config\": {{\"enabled\": true}}}}'` (`{{\"enable_graph_mode\": true}}` on the releases "
        "whose message says so); newer vllm-ascend releases run it in graph mode.",
    patterns=[r"ACL Graph does not support (?P<model>\w+)"],
    playbook="engine-config", confidence=0.9)

# the torchair KV-cache tuple reaching the chunked-prefill MLA path: the error line, and the frame that proves it
TUPLE_SIZE_RE = lazy(r"'tuple' object has no attribute 'size'")
CHUNKED_MLA_RE = lazy(r"vanilla_chunked_prefill_mla|chunked_prefill_mla|_forward_prefill.*\bkv_c(?:ache)?\b")


def _torchair_chunked(scan: Scan) -> Diagnosis | None:
    if not any(CHUNKED_MLA_RE.search(ln.text) for ln in scan.lines):
        return None
    hits = [(ln, m) for ln in scan.lines for m in [TUPLE_SIZE_RE.search(ln.text)] if m]
    return TORCHAIR_CHUNKED_PREFILL.diagnosis(scan, hits[:1]) if hits else None


TORCHAIR_CHUNKED_PREFILL: Rule = Rule(
    signature="ascend.torchair_chunked_prefill", category="engine_config",
    title="TorchAir graph mode runs with chunked prefill on (the MLA chunked-prefill path gets its KV-cache tuple)",
    fix="vllm-ascend's TorchAir graph mode keeps the KV cache as a (k, v) tuple and works only with chunked prefill "
        "off: launch with `--no-enable-chunked-prefill` (with --max-num-batched-tokens >= --max-model-len), and "
        "with prefix caching off, as vllm-ascend's TorchAir guide does; or drop torchair_graph_config to run eager.",
    patterns=[r"'tuple' object has no attribute 'size'"],
    check=lambda scan, env: _torchair_chunked(scan), playbook="engine-config", confidence=0.8)

# aclnn's dtype check (CANN op-api): "<tensor> not implemented for DT_<dtype>, should be in dtype support list [...]"
DTYPE_RE = lazy(r"\b(?P<tensor>\w+) not implemented for DT_(?P<dtype>[A-Z0-9]+)\b")
SUPPORTED_RE = lazy(r"dtype support list\s*\[(?P<list>[^\]]*)")
# the operator it happened in: "call aclnnX failed", "aclnnX failed, error code", "op[QuantBatchMatmulV3]"
OP_RE = lazy(r"\baclnn(?P<op>[A-Z]\w+)|\bop\[(?P<op2>\w+)\]")
QUANT_OP_RE = lazy(r"Quant")
LOOKBACK = 6


def _aclnn_dtype(scan: Scan, quant: bool) -> Diagnosis | None:
    lines = scan.lines
    for i, ln in enumerate(lines):
        m = DTYPE_RE.search(ln.text)
        if m is None:
            continue
        ops = [o.group("op") or o.group("op2") for x in lines[max(0, i - LOOKBACK):i + 1]
               for o in OP_RE.finditer(x.text)]
        if bool(ops) and quant != any(QUANT_OP_RE.search(op) for op in ops):
            continue
        if not ops and quant:
            continue
        near = " ".join(x.text for x in lines[i:i + 3])
        s = SUPPORTED_RE.search(near)
        supported = ", ".join(t.strip().removeprefix("DT_").lower() for t in s.group("list").split(",")
                              if t.strip()) if s else "?"
        rule = ACLNN_QUANT_DTYPE if quant else ACLNN_DTYPE
        facts = {"tensor": m.group("tensor"), "dtype": m.group("dtype").lower(), "supported": supported,
                 "op": ops[-1] if ops else "an aclnn operator"}
        return rule.diagnosis(scan, [(ln, m)], facts=facts)
    return None


ACLNN_QUANT_DTYPE: Rule = Rule(
    signature="ascend.quant_matmul_dtype", category="quantization",
    title="The Ascend quantized matmul ({op}) does not take a {dtype} {tensor}",
    fix="CANN's quantized matmul accepts {tensor} only as {supported}, and this model's {tensor} follows the served "
        "dtype (or the checkpoint's): serve the quantized model with `--dtype bfloat16` (with "
        "`--mamba-ssm-cache-dtype bfloat16` on hybrid models) instead of float16; if it already runs in bfloat16, "
        "upgrade vllm-ascend (its w8a8 methods pass a float32 copy of the scale in later releases).",
    patterns=[r"not implemented for DT_"],
    check=lambda scan, env: _aclnn_dtype(scan, quant=True), playbook="quantization", confidence=0.85)

ACLNN_DTYPE: Rule = Rule(
    signature="ascend.aclnn_dtype_unsupported", category="dtype_unsupported",
    title="The NPU operator {op} does not compute {dtype} ({tensor})",
    fix="This Ascend operator takes {tensor} only as {supported}: serve in a dtype it supports, e.g. `--dtype "
        "float16` on cards without bfloat16 (Atlas 300I / 310P, 910A), or `--dtype bfloat16` where float16 is the one "
        "refused; a checkpoint stored in the refused dtype is cast by --dtype.",
    patterns=[r"not implemented for DT_"],
    check=lambda scan, env: _aclnn_dtype(scan, quant=False), playbook="dtype-unsupported", confidence=0.8)

# a group_topk frame (vllm-ascend's fused MoE routing) and the router scores reshaped with zero expert groups
GROUP_TOPK_RE = lazy(r"\bgroup_topk\b")
ZERO_GROUPS_RE = lazy(r"shape '\[(?P<tokens>-?\d+), 0, -1\]' is invalid for input of size")


def _group_topk(scan: Scan) -> Diagnosis | None:
    if not any(GROUP_TOPK_RE.search(ln.text) for ln in scan.lines):
        return None
    hits = [(ln, m) for ln in scan.lines for m in [ZERO_GROUPS_RE.search(ln.text)] if m]
    return MOE_GROUP_TOPK.diagnosis(scan, hits[:1]) if hits else None


MOE_GROUP_TOPK: Rule = Rule(
    signature="ascend.moe_group_topk_no_groups", category="model_support",
    title="vllm-ascend routes this MoE model with grouped top-k, but the model has no expert groups",
    fix="This vllm-ascend release's fused MoE supports only models whose router uses expert groups (DeepSeek V2/V3); "
        "this model has none (num_expert_group 0), so the routing reshape fails: check the model against vllm-ascend's "
        "supported-models list and upgrade to a release that lists it, or serve it elsewhere.",
    patterns=[r"shape '\[-?\d+, 0, -1\]' is invalid"],
    check=lambda scan, env: _group_topk(scan), playbook="model-support", confidence=0.8)

ASCEND_C_OPTIONAL: Rule = Rule(
    signature="harmless.ascend_c_optional_import", category="", harmless=True,
    title="vllm-ascend's optional custom kernels (vllm_ascend_C) are not built (only sleep mode needs them; harmless)",
    fix="", patterns=[r"Failed to import vllm_ascend_C\s*:"])

RULES = [CANN_LIBRARY_MISSING, SOC_KERNELS_MISSING, TRITON_SOC_UNKNOWN, ACL_GRAPH_MODEL_REFUSED, TORCHAIR_CHUNKED_PREFILL,
         ACLNN_QUANT_DTYPE, ACLNN_DTYPE, MOE_GROUP_TOPK, ASCEND_C_OPTIONAL]
