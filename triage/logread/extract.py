"""Facts about the machine and the launch that a log states in passing.

Each extractor looks at one normalised line and records what it finds into `facts` (the report's
`environment`). Cheap substring checks guard every regex: this runs on every selected line.
"""

from __future__ import annotations

import re
from triage.lazyre import lazy
from typing import Any

from triage.logread.literal import literal_eval
from triage.logread.normalize import Line

# needles: literals every match contains; a line without them is passed over without compiling
# the pattern (triage.lazyre). Start-up matters: most lines meet only a few of these.
VERSION_PATTERNS = [
    lazy(r"vLLM API server version (?P<v>[0-9][\w.+-]*)", needles=("vLLM API server version ",)),
    lazy(r"\bvLLM version (?P<v>[0-9][\w.+-]*)", needles=("vLLM version ",)),
    lazy(r"LLM engine \(v(?P<v>[0-9][\w.+-]*)\)", needles=("LLM engine (v",)),
    lazy(r"^\s*vLLM Version\s*:\s*(?P<v>[0-9][\w.+-]*)", needles=("vLLM Version",)),
    # The ASCII-art banner of newer versions: "... version 0.16.1rc1.dev265+gd106bf39f"
    lazy(r"^[\s\u2580-\u259f]*version (?P<v>\d+\.\d+\.\d+[\w.+-]*)\s*$", needles=("version ",)),
]
def _odd_prefix(prefix: str) -> bool:
    parts = prefix.split("/")
    return prefix == "/proc" or prefix.startswith("/proc/") or ".." in parts or "." in parts


PY_PATH_RE = lazy(
    r'(?P<prefix>/[^"\s]*?)/lib/(?P<py>python\d\.\d+)/(?P<kind>site-packages|dist-packages)/(?P<pkg>[\w.-]+)',
    needles=("/lib/python",),
)
NON_DEFAULT_RE = lazy(r"non-default args: (?P<d>\{.*\})\s*$", needles=("non-default args: {",))
NAMESPACE_RE = lazy(r"args: Namespace\((?P<a>.*)\)\s*$", needles=("args: Namespace(",))
CONFIG_MODEL_RE = lazy(r"with config: model='(?P<m>[^']*)'", needles=("with config: model='",))
ARCH_RES = [
    lazy(r"Resolved architecture: (?P<a>\w+)", needles=("Resolved architecture: ",)),
    lazy(r"Model architectures \['(?P<a>\w+)'", needles=("Model architectures ['",)),
    lazy(r"architectures=\['(?P<a>\w+)'", needles=("architectures=['",)),
]
GPU_NAME_RES = [
    # torch: "Found GPU0 NVIDIA GB10 which is of cuda capability 12.1."
    lazy(r"Found GPU(?P<i>\d+) (?P<name>.+?) which is of (?:cuda|CUDA) capability (?P<cc>\d+\.\d+)",
         needles=("Found GPU",)),
    # torch: "NVIDIA RTX PRO 6000 Blackwell Server Edition with CUDA capability sm_120 is not compatible"
    lazy(r"(?P<name>NVIDIA [\w .-]+?) with CUDA capability sm_(?P<sm>\d+) is not compatible",
         needles=(" with CUDA capability sm_",)),
    # collect-env / nvidia-smi -L: "GPU 0: NVIDIA H100 80GB HBM3"
    lazy(r"^\s*GPU (?P<i>\d+): (?P<name>(?:NVIDIA|Tesla|Quadro|GeForce|AMD|Instinct)[^(]*?)\s*(?:\(UUID.*)?$",
         needles=("GPU ",)),
]
CC_RES = [
    lazy(r"Current capability: (?P<n>\d{2,3})\b", needles=("Current capability: ",)),
    lazy(r"[Cc]ompute capability (?:of )?(?P<maj>\d+)\.(?P<min>\d+)", needles=("ompute capability ",)),
    lazy(r"DeviceCapability\(major=(?P<maj>\d+), minor=(?P<min>\d+)\)", needles=("DeviceCapability(major=",)),
    lazy(r"capability sm_(?P<n>\d{2,3})\b", needles=("capability sm_",)),
]
DRIVER_RES = [
    lazy(r"^\s*Nvidia driver version\s*:\s*(?P<v>[\d.]+)", needles=("Nvidia driver version",)),
    lazy(r"Driver Version: (?P<v>[\d.]+)", needles=("Driver Version: ",)),
]
CUDA_BUILD_RE = lazy(r"^\s*CUDA used to build PyTorch\s*:\s*(?P<v>[\d.]+)", needles=("CUDA used to build PyTorch",))
TORCH_RE = lazy(r"^\s*PyTorch version\s*:\s*(?P<v>\S+)", needles=("PyTorch version",))
PIP_RE = lazy(r"^\s*\[(?:pip3?|conda)\]\s+(?P<name>[\w.-]+)(?:==|\s+)(?P<v>[\w.+!-]+)", needles=("[pip", "[conda]"))
PYVER_RE = lazy(r"^\s*Python version\s*:\s*(?P<v>\d+\.\d+(?:\.\d+)?)", needles=("Python version",))
OS_RE = lazy(r"^\s*OS\s*:\s*(?P<v>.+)$", needles=("OS",))


def _gpu_family(cc: str) -> str:
    try:
        major = int(cc.split(".")[0])
    except ValueError:
        return ""
    return f"SM{major}x"


def _set_cc(facts: dict[str, Any], cc: str) -> None:
    facts.setdefault("compute_capability", cc)


def _cc_from_number(n: str) -> str:
    # "86" -> "8.6", "120" -> "12.0", "90" -> "9.0"
    return f"{n[:-1]}.{n[-1]}"


def _literal(text: str) -> Any:
    try:
        return literal_eval(text)  # literal_eval only: log text is never executed
    except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
        return None


def _add_gpu(facts: dict[str, Any], name: str, index: int | None = None, cc: str | None = None) -> None:
    gpus: list[dict[str, Any]] = facts.setdefault("gpus", [])
    name = name.strip()
    for g in gpus:
        if (index is not None and g.get("index") == index) or (index is None and g["name"] == name):
            if cc and "compute_capability" not in g:
                g["compute_capability"] = cc
            return
    if len(gpus) >= 64:
        return
    new: dict[str, Any] = {"name": name}
    if index is not None:
        new["index"] = index
    if cc:
        new["compute_capability"] = cc
    gpus.append(new)


def extract(line: Line, facts: dict[str, Any]) -> None:
    t = line.text
    if "ersion" in t:
        if "vllm_version" not in facts or "vLLM API server version" in t:
            for rx in VERSION_PATTERNS:
                m = rx.search(t)
                if m:
                    facts["vllm_version"] = m.group("v").rstrip(".,")
                    break
        m = TORCH_RE.match(t)
        if m and m.group("v") != "N/A":
            facts.setdefault("torch_version", m.group("v"))
        m = PYVER_RE.match(t)
        if m:
            facts.setdefault("python_version", m.group("v"))
        for rx in DRIVER_RES:
            m = rx.search(t)
            if m:
                facts.setdefault("driver_version", m.group("v"))
    if "CUDA used to build" in t:
        m = CUDA_BUILD_RE.match(t)
        if m:
            facts.setdefault("cuda_version", m.group("v"))
    if 'File "' in t or "-packages/" in t:
        m = PY_PATH_RE.search(t)
        # Where the log's Python lives is read from disk, never run; a prefix under /proc or with `..`
        # names another process's files or climbs out of the path, and is no environment.
        if m and "python_prefix" not in facts and not _odd_prefix(m.group("prefix")):
            facts["python_prefix"] = m.group("prefix") or "/"
            facts["python_version"] = facts.get("python_version") or m.group("py").removeprefix("python")
            facts["site_packages"] = f"{m.group('prefix')}/lib/{m.group('py')}/{m.group('kind')}"
    if "args" in t:
        m = NON_DEFAULT_RE.search(t)
        if m:
            d = _literal(m.group("d"))
            if isinstance(d, dict):
                facts["launch_args"] = {str(k): v for k, v in d.items()}
                model = d.get("model") or d.get("model_tag")
                if isinstance(model, str):
                    facts["model"] = model
        else:
            m = NAMESPACE_RE.search(t)
            if m:
                args = _namespace_args(m.group("a"))
                if args:
                    facts["launch_args"] = args
                    if isinstance(args.get("model"), str):
                        facts["model"] = args["model"]
    if "with config" in t:
        m = CONFIG_MODEL_RE.search(t)
        if m:
            facts.setdefault("model", m.group("m"))
    if "rchitecture" in t:
        for rx in ARCH_RES:
            m = rx.search(t)
            if m:
                facts.setdefault("architecture", m.group("a"))
                break
    if "GPU" in t or "NVIDIA" in t:
        for rx in GPU_NAME_RES:
            m = rx.search(t)
            if m:
                gd = m.groupdict()
                cc = gd.get("cc") or (_cc_from_number(gd["sm"]) if gd.get("sm") else None)
                idx = int(gd["i"]) if gd.get("i") else None
                _add_gpu(facts, gd["name"], idx, cc)
                if cc:
                    _set_cc(facts, cc)
                break
    if "apability" in t:
        for rx in CC_RES:
            m = rx.search(t)
            if m:
                gd = m.groupdict()
                cc = _cc_from_number(gd["n"]) if gd.get("n") else f"{gd['maj']}.{gd['min']}"
                _set_cc(facts, cc)
                break
    if "[" in t and ("[pip" in t or "[conda]" in t):
        m = PIP_RE.match(t)
        if m:
            pk = facts.setdefault("packages", {})
            if len(pk) < 500:
                pk.setdefault(m.group("name").lower(), m.group("v"))
    if t.lstrip().startswith("OS") and "os" not in facts:
        m = OS_RE.match(t)
        if m:
            facts["os"] = {"name": m.group("v").strip()}


def _namespace_args(text: str) -> dict[str, Any]:
    """Parse "host=None, port=8000, model='x', ..." from an argparse Namespace repr."""
    out: dict[str, Any] = {}
    for m in re.finditer(r"(\w+)=('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|\[[^\]]*\]|[^,]+)", text):
        key, raw = m.group(1), m.group(2).strip()
        val = _literal(raw)
        out[key] = val if val is not None or raw == "None" else raw
    return out


def finish(facts: dict[str, Any]) -> None:
    """Derived facts once the whole log has been read."""
    cc = facts.get("compute_capability")
    if not cc:
        ccs = {g.get("compute_capability") for g in facts.get("gpus", []) if g.get("compute_capability")}
        if len(ccs) == 1:
            cc = facts["compute_capability"] = ccs.pop()
    if cc:
        facts["gpu_family"] = _gpu_family(cc)
    pk = facts.get("packages")
    if pk and "torch_version" not in facts and "torch" in pk:
        facts["torch_version"] = pk["torch"]
    if pk and "vllm_version" not in facts and "vllm" in pk:
        facts["vllm_version"] = pk["vllm"]
    args = facts.get("launch_args") or {}
    for key in ("tensor_parallel_size", "pipeline_parallel_size", "max_model_len", "gpu_memory_utilization",
                "kv_cache_dtype", "dtype", "quantization", "attention_backend", "block_size"):
        if key in args and key not in facts:
            facts[key] = args[key]
