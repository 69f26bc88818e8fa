"""The stable facets of a failure, and how to recognise them in a GitHub issue's text.

One vocabulary serves both directions: `query` builds search terms from a diagnosis' facets,
`rank` finds the same facets in each hit and compares. Facets: subsystem (attention backend,
MoE kernels, quantization, ...), backend names, GPU family (by compute capability), model
family, and the error phrase.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from triage.computecap import parse_cc
from triage.lazyre import AUTO, lazy

# --- subsystems -------------------------------------------------------------------------------
# Keyword weights per subsystem; the text's subsystem is the best-scoring one. Strong, specific
# phrases weigh more than words shared with other subsystems (an NVFP4 attention issue mentions
# NVFP4 but is about attention).
SUBSYSTEMS: dict[str, list[tuple[str, float]]] = {
    "attention backend": [
        (r"attention backend", 4), (r"no valid attention", 5), (r"\bMLA\b", 2), (r"sparse[ -]?MLA", 4),
        (r"\bDSA\b", 2), (r"FLASH_?ATTN|FLASHMLA|FLASHINFER_MLA|TRITON_MLA|CUTLASS_MLA", 3),
        (r"\battention\b", 1), (r"AttentionSelectorConfig|head_size", 2), (r"\bindexer\b", 1),
        (r"flash[- ]?attention|FlashMLA", 1.5), (r"is not valid for this configuration", 4),
    ],
    "MoE kernels": [
        (r"\bMoE\b", 3), (r"fused[_ ]moe|FusedMoE", 4), (r"\bexperts?\b", 1.5), (r"grouped[ -]?GEMM", 2),
        (r"\bEP\b|expert parallel", 1.5), (r"moe[_ -]backend|moe runner", 3),
    ],
    "quantization": [
        (r"NVFP4|MXFP4|\bFP4\b", 2), (r"\bFP8\b", 1.5), (r"\bAWQ\b|\bGPTQ\b|\bMarlin\b", 2),
        (r"compressed[-_ ]tensors|modelopt|bitsandbytes|\bGGUF\b", 2), (r"quantiz", 2.5),
        (r"\bW4A(?:16|8|4)\b|\bW8A8\b", 2), (r"scaled_mm|cutlass_scaled", 2),
    ],
    "KV cache memory": [
        (r"KV cache", 2), (r"max(?:imum)? (?:seq|model) len", 2), (r"gpu[_ ]memory[_ ]utilization", 2),
        (r"cache blocks", 2), (r"out of memory|\bOOM\b", 2),
    ],
    "CUDA graphs": [(r"cuda ?graph", 4), (r"graph capture", 3)],
    "distributed": [(r"\bNCCL\b|\bGloo\b|\bRay\b", 3), (r"/dev/shm|shared memory segment", 2),
                    (r"tensor[-_ ]parallel|pipeline[-_ ]parallel|multi[- ]node", 1.5)],
    "install / build": [(r"undefined symbol", 4), (r"vllm\._C|_C\.abi3", 3), (r"pip install|wheel|build from source", 1.5),
                        (r"\bABI\b", 2), (r"no kernel image", 3)],
    "CUDA driver": [(r"driver (?:version )?(?:is )?(?:too old|insufficient)", 4), (r"Error 803|forward compatib", 4),
                    (r"\bPTX\b", 2), (r"CUDA driver", 2)],
    "Triton compile": [(r"out of resource", 3), (r"\bptxas\b", 3), (r"triton", 1.5), (r"shared memory", 1)],
    "kernel libraries": [(r"flashinfer", 1.5), (r"deep_?gemm", 2), (r"flash[_-]attn", 1), (r"\bJIT\b", 1.5)],
    "model support": [(r"architecture.*not supported|not supported.*architecture", 4), (r"model type", 2),
                      (r"transformers version|upgrade transformers", 3)],
    "tokenizer / chat template": [(r"tokenizer", 3), (r"chat template", 4)],
    "speculative decoding": [(r"speculative|\bEAGLE\d?\b|\bMTP\b|draft model|\bDFlash\b", 3)],
    "engine config": [(r"unrecognized arguments|unknown argument|invalid argument", 3),
                      (r"is not divisible by|divisible", 2)],
    "environment": [(r"address already in use", 4), (r"no GPU|Failed to infer device", 3),
                    (r"container|docker", 1)],
    "docs / misc": [(r"\bdocs?\b|documentation|typo|README", 2), (r"\bCI\b|pre-commit|lint", 2)],
}
_SUB_RE: dict[str, list[tuple[re.Pattern[str], float]]] = {}  # compiled on first use: start-up matters

# The diagnosis categories of spec/report.md mapped to the subsystem vocabulary above.
CATEGORY_SUBSYSTEM = {
    "attention_backend": "attention backend",
    "unsupported_gpu": "install / build",
    "dtype_unsupported": "attention backend",
    "quantization": "quantization",
    "cuda_driver": "CUDA driver",
    "install_mismatch": "install / build",
    "kernel_library": "kernel libraries",
    "triton_compile": "Triton compile",
    "kv_cache_memory": "KV cache memory",
    "gpu_oom": "KV cache memory",
    "cudagraph_capture": "CUDA graphs",
    "distributed": "distributed",
    "model_support": "model support",
    "model_loading": "model support",
    "tokenizer_chat_template": "tokenizer / chat template",
    "speculative_decoding": "speculative decoding",
    "engine_config": "engine config",
    "environment": "environment",
}


def subsystem_scores(text: str) -> dict[str, float]:
    if not _SUB_RE:
        _SUB_RE.update({name: [(re.compile(p, re.I), w) for p, w in pats] for name, pats in SUBSYSTEMS.items()})
    scores: dict[str, float] = {}
    for name, pats in _SUB_RE.items():
        s = 0.0
        for rx, w in pats:
            n = len(rx.findall(text))
            if n:
                s += w * min(n, 3)
        if s:
            scores[name] = s
    return scores


def classify_subsystem(title: str, body: str = "") -> str | None:
    """The subsystem a hit is about: its title counts three times its body."""
    scores = subsystem_scores(title)
    for k in scores:
        scores[k] *= 3
    for k, v in subsystem_scores(body[:4000]).items():
        scores[k] = scores.get(k, 0.0) + v
    if not scores:
        return None
    best = max(scores.items(), key=lambda kv: kv[1])
    return best[0] if best[1] >= 2 else None


# --- attention backends -----------------------------------------------------------------------
BACKEND_NAMES = (
    "FLASH_ATTN_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120", "FLASHINFER_MLA_SPARSE", "FLASHMLA_SPARSE",
    "TRITON_MLA_SPARSE", "XPU_MLA_SPARSE", "ROCM_AITER_MLA_SPARSE", "FLASH_ATTN_MLA", "FLASHINFER_MLA", "FLASHMLA",
    "TRITON_MLA", "CUTLASS_MLA", "TOKENSPEED_MLA", "ROCM_AITER_MLA", "ROCM_AITER_TRITON_MLA", "FLASH_ATTN", "FLASHINFER",
    "TRITON_ATTN", "FLEX_ATTENTION", "TREE_ATTN", "ROCM_ATTN", "ROCM_AITER_FA", "XFORMERS", "TORCH_SDPA",
)
BACKEND_RE = lazy(r"\b(" + "|".join(BACKEND_NAMES) + r")\b")
_BACKEND_SET = frozenset(BACKEND_NAMES)
_WORD = lazy(r"\w+")


def backends_in(text: str) -> set[str]:
    # The names are made of word characters only, so BACKEND_RE matches whole words (\b on both
    # sides): the same set, without compiling a 24-way alternation (start-up).
    return {w for w in _WORD.findall(text or "") if w in _BACKEND_SET}


# --- GPU families (by compute capability) -------------------------------------------------------
# (pattern, family key, label). Order: most specific first; "Blackwell" alone is ambiguous
# (B200 is 10.0, RTX PRO 6000 is 12.0) and is resolved by the other words around it.
GPU_PATTERNS: list[tuple[str, str, str]] = [
    (r"\bsm_?12[01][af]?\b|\bSM12x\b|\bcc ?12\.[01]\b|compute capability 12|compute_12[01]", "12", "SM12x"),
    (r"RTX ?PRO ?[456]000 ?(?:Blackwell)?|RTX ?50[6789]0|GB10\b|DGX ?Spark|GB20[2-7]|"
     r"(?:consumer|workstation|desktop) Blackwell", "12", "SM12x"),
    (r"\bsm_?10[03][af]?\b|\bSM10x\b|compute capability 10|\bB[23]00\b|\bGB[23]00\b|datacenter Blackwell", "10", "SM10x"),
    (r"\bsm_?90a?\b|\bH100\b|\bH200\b|\bH20\b|\bH800\b|\bGH200\b|Hopper", "9", "Hopper"),
    (r"\bsm_?89\b|\bL40S?\b|\bL4\b|RTX ?40[6789]0|RTX ?6000 Ada|\bAda\b", "8.9", "Ada"),
    (r"\bsm_?8[06]\b|\bA100\b|\bA800\b|\bA10G?\b|\bA40\b|\bA30\b|RTX ?30[6789]0|RTX ?A6000|Ampere", "8", "Ampere"),
    (r"\bsm_?7[05]\b|\bV100\b|\bT4\b|Turing|Volta|RTX ?20[6789]0", "7", "Volta/Turing"),
    (r"\bMI[0-9]{3}X?\b|ROCm|gfx9[0-9]{2}", "rocm", "AMD ROCm"),
]
_GPU_RE = [(lazy(p, re.I, needles=AUTO), k, label) for p, k, label in GPU_PATTERNS]


def gpu_families_in(text: str) -> dict[str, str]:
    """{family key: label} of the GPU families a text names."""
    found: dict[str, str] = {}
    for rx, key, label in _GPU_RE:
        if key not in found and rx.search(text or ""):
            found[key] = label
    return found


def family_of_cc(cc: str | None) -> tuple[str, str] | None:
    """Family key and label for a compute capability like "12.0"."""
    parsed = parse_cc(cc)
    if not parsed:
        return None
    major, minor = parsed.major, parsed.minor
    if major == 12:
        return "12", "SM12x"
    if major == 10 or major == 11:
        return "10", "SM10x"
    if major == 9:
        return "9", "Hopper"
    if major == 8 and minor == 9:
        return "8.9", "Ada"
    if major == 8:
        return "8", "Ampere"
    if major == 7:
        return "7", "Volta/Turing"
    return str(major), f"SM{major}{minor}"


# Search words that find a GPU family in GitHub text.
FAMILY_SEARCH_TERMS = {
    "12": ["SM120", "RTX PRO 6000", "Blackwell"],
    "10": ["SM100", "B200", "Blackwell"],
    "9": ["H100", "Hopper"],
    "8.9": ["Ada", "L40"],
    "8": ["A100", "Ampere"],
    "7": ["V100", "T4"],
}


# --- model families ------------------------------------------------------------------------------
# (pattern over architecture or text, family, group). Group ties related families together
# (DeepSeek-V3.2 and GLM-5 are both DSA sparse-MLA models and fail for the same reasons).
MODEL_PATTERNS: list[tuple[str, str, str]] = [
    (r"DeepseekV32|DeepSeek[- ]?V3\.2|deepseek_v32", "DeepSeek-V3.2", "dsa"),
    (r"GlmMoeDsa|GLM[- ]?5(?:\.\d)?(?:[- ]Flash)?\b|glm5|glm_moe_dsa", "GLM-5", "dsa"),
    (r"DeepseekV4|DeepSeek[- ]?V4", "DeepSeek-V4", "dsa"),
    (r"DeepseekV3|DeepSeek[- ]?(?:V3(?!\.2)|R1)", "DeepSeek-V3/R1", "mla"),
    (r"DeepseekV2|DeepSeek[- ]?V2", "DeepSeek-V2", "mla"),
    (r"Kimi|KimiK2|Moonlight", "Kimi", "mla"),
    (r"Qwen3", "Qwen3", "qwen"),
    (r"Qwen2|Qwen\b", "Qwen2", "qwen"),
    (r"Llama|LLaMA", "Llama", "llama"),
    (r"Mistral|Mixtral", "Mistral", "mistral"),
    (r"gpt-oss|GptOss", "gpt-oss", "gpt-oss"),
    (r"MiniMax", "MiniMax", "minimax"),
    (r"Gemma", "Gemma", "gemma"),
    (r"GLM-?4|Glm4", "GLM-4", "glm4"),
]
_MODEL_RE = [(lazy(p, re.I, needles=AUTO), fam, grp) for p, fam, grp in MODEL_PATTERNS]


def model_families_in(text: str) -> dict[str, str]:
    """{family: group} of the model families a text names."""
    found: dict[str, str] = {}
    for rx, fam, grp in _MODEL_RE:
        if fam not in found and rx.search(text or ""):
            found[fam] = grp
    return found


# --- error phrase ----------------------------------------------------------------------------------
_LOG_HEADER = lazy(
    r"^(?:\S+\s+\|\s+)?(?:\[rank\d+\]:\s*)?(?:\([^)]*\)\s*)?(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL)\s+\d\d-\d\d\s+[\d:.]+\s+\[[^\]]*\]\s*)?"
)
_EXC_PREFIX = lazy(r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit)|AssertionError|torch\.OutOfMemoryError):\s*",
                   needles=AUTO)
_EXC_LINE = lazy(r"\b[A-Za-z_]\w*(?:Error|Exception):|\berror:", needles=("Error", "Exception", "error:"))
# pydantic's "Value error, ..." and argparse's "prog: error: ..." wrap the message proper.
_WRAPPER_PREFIX = lazy(r"^(?:(?:Value error|Assertion failed),\s*|[\w./ -]{1,40}: error:\s*)",
                       needles=("Value error", "Assertion failed", ": error:"))
_VOLATILE = lazy(
    r"[/\\]|0x[0-9a-f]+|\d|[=()\[\]{}<>'\"`]|^[A-Z][A-Za-z]+\.[A-Z_]+$"  # paths, hex, numbers, assignments, brackets
)
_STOP_TAIL = {"for", "with", "on", "in", "at", "of", "to", "the", "a", "an", "and", "or", "is", "are", "was", "by",
              "from", "cuda", "cpu", "but", "got", "this", "that", "found"}
_PHRASE_KEEP_TAIL = {"found"}  # "No valid attention backend found" reads better with it


def error_phrase(line: str, *, max_words: int = 8) -> str:
    """The stable core of an error message: no log header, no exception class, no volatile tokens.

    The message is cut into runs of plain words at volatile tokens (paths, numbers, hex,
    assignments, brackets) and at sentence and clause ends.
    The first run of three words or more wins (the head of a message is its stable part; what
    follows is detail), else the longest ("No valid attention backend found", "no kernel image
    is available for execution").
    """
    text = _LOG_HEADER.sub("", line.strip())
    text = _EXC_PREFIX.sub("", text).strip()
    text = _WRAPPER_PREFIX.sub("", text)
    runs: list[list[str]] = [[]]
    for raw in text.split():
        w = raw.strip(",.;:!?")
        if not w or _VOLATILE.search(w):
            runs.append([])
            continue
        runs[-1].append(w)
        if raw.endswith((".", ":", ";", "!", "?")):
            runs.append([])
    best: list[str] = []
    for run in runs:
        words = run[:max_words]
        while words and words[-1].lower() in _STOP_TAIL and words[-1].lower() not in _PHRASE_KEEP_TAIL:
            words.pop()
        if len(words) >= 3:
            return " ".join(words)
        if len(words) > len(best):
            best = words
    return " ".join(best) if len(best) >= 2 else ""


@dataclass(slots=True)
class Facets:
    """What a diagnosis is about, in the vocabulary hits are compared in."""

    subsystem: str | None = None
    phrase: str = ""
    backends: set[str] = field(default_factory=set)  # named in the failure
    related_backends: set[str] = field(default_factory=set)  # would fix it (from the capability table)
    gpu_family: tuple[str, str] | None = None  # (key, label)
    gpu_name: str | None = None
    model_family: str | None = None
    model_group: str | None = None
    architecture: str | None = None
    use_sparse: bool | None = None
    use_mla: bool | None = None
    repos: list[str] = field(default_factory=lambda: ["vllm-project/vllm"])
    text: str = ""  # the diagnosis' own text, for reference
    line: str = ""  # the evidence line that says what failed (the exception, else the first)
    vllm_version: str | None = None  # of the failing install, to prefer threads of its releases
    message: Any = field(default=None, init=False)  # that line read by triage.upstream.terms, on first use
    title: str = field(default="", init=False)  # the diagnosis' title: the query of last resort
    releases: tuple[str, str] | None = field(default=None, init=False)  # the releases whose source holds the message


def _gpu_from_env(env: dict[str, Any]) -> tuple[str | None, str | None]:
    cc = env.get("compute_capability")
    name = None
    gpus = env.get("gpus") or []
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict):
        name = gpus[0].get("name")
        cc = cc or gpus[0].get("compute_capability")
    return (str(cc) if cc else None), name


RELATED_REPOS = [
    (lazy(r"flashinfer", re.I, needles=AUTO), "flashinfer-ai/flashinfer"),
    (lazy(r"FlashMLA|flashmla|_flashmla_C", re.I, needles=AUTO), "deepseek-ai/FlashMLA"),
    (lazy(r"deep_?gemm", re.I, needles=AUTO), "deepseek-ai/DeepGEMM"),
    (lazy(r"\btriton\b.*(?:compile|ptxas|out of resource)|ptxas|triton\.compiler|TritonError", re.I, needles=AUTO),
     "triton-lang/triton"),
]


def diagnosis_facets(diag: Any, env: dict[str, Any]) -> Facets:
    facts = dict(getattr(diag, "facts", {}) or {})
    evidence = [getattr(e, "text", str(e)) for e in (getattr(diag, "evidence", []) or [])]
    title = getattr(diag, "title", "") or ""
    text = "\n".join([title, *evidence])
    f = Facets(text=text)
    f.title = title
    f.subsystem = CATEGORY_SUBSYSTEM.get(getattr(diag, "category", ""), None) or classify_subsystem(title, text)

    phrase = facts.get("search_phrase") or ""
    # The raised exception says what failed; an INFO line before it only sets the scene.
    ordered = sorted(evidence, key=lambda ln: not _EXC_LINE.search(ln))
    for line in ordered:
        p = error_phrase(line)
        if p:
            f.line = line
            phrase = phrase or p
            break
    if not f.line and evidence:
        f.line = evidence[0]
    f.phrase = phrase
    f.vllm_version = str(env.get("vllm_version") or facts.get("vllm_version") or "") or None
    cat = facts.get("catalogue")
    if isinstance(cat, dict) and cat.get("package") == "vllm" and cat.get("first_release") and cat.get("last_release"):
        f.releases = (str(cat["first_release"]), str(cat["last_release"]))

    rejected = facts.get("rejected")
    if isinstance(rejected, dict):
        f.backends |= {str(k) for k in rejected}
    for key in ("backend", "selected_backend"):
        if isinstance(facts.get(key), str):
            f.backends |= backends_in(facts[key].upper()) or {facts[key].split(".")[-1].upper()}
    f.backends |= backends_in(text)

    cc, name = _gpu_from_env(env)
    cc = cc or facts.get("compute_capability")
    f.gpu_family = family_of_cc(cc)
    f.gpu_name = name
    if f.gpu_family is None and name:
        # Only the GPU's own name: rejection reasons mention "Hopper and Blackwell" on any GPU.
        fams = gpu_families_in(name)
        if fams:
            key, label = next(iter(fams.items()))
            f.gpu_family = (key, label)

    arch = env.get("architecture") or facts.get("architecture")
    f.architecture = arch
    fams = model_families_in(" ".join(filter(None, [arch, str(env.get("model") or "")])))
    if fams:
        f.model_family, f.model_group = next(iter(fams.items()))

    for key in ("use_sparse", "use_mla"):
        v = facts.get(key)
        if isinstance(v, str):
            v = v.strip().lower() == "true"
        setattr(f, key, v if isinstance(v, bool) else None)
    if f.use_sparse is None and re.search(r"use_sparse[=:] ?True", text):
        f.use_sparse = True

    for rx, repo in RELATED_REPOS:
        if rx.search(text) and repo not in f.repos:
            f.repos.append(repo)
    # The attention selector names FlashMLA in its reasons for every MLA failure; that does not
    # make FlashMLA's tracker relevant unless the failure is about FlashMLA itself.
    if f.subsystem == "attention backend":
        f.repos = [r for r in f.repos if r not in ("deepseek-ai/FlashMLA", "flashinfer-ai/flashinfer")]
    return f
