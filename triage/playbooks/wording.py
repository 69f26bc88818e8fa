"""What people read while a playbook walks: facts in human units, what a missing fact means and
which command shows it, outcomes in words, and the check that none of our internals leak into it.

A playbook sentence whose fact is missing is left out; the step then says what it could not learn
and the one command that shows it (FACT_SOURCES), never "unknown".
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy

# fact -> (what it is, in words; the command that shows it). The command is shown, never run.
FACT_SOURCES: dict[str, tuple[str, str]] = {
    "driver_version": ("the NVIDIA driver version", "nvidia-smi"),
    "cuda_driver_version": ("the newest CUDA the driver supports", "nvidia-smi"),
    "cuda_version": ("the CUDA version torch was built for", "python -c 'import torch; print(torch.version.cuda)'"),
    "torch_version": ("the installed torch version", "python -m pip show torch"),
    "vllm_version": ("the installed vLLM version", "python -m pip show vllm"),
    "compute_capability": ("the GPU's compute capability", "nvidia-smi --query-gpu=name,compute_cap --format=csv"),
    "cc_major": ("the GPU's compute capability", "nvidia-smi --query-gpu=name,compute_cap --format=csv"),
    "gpu_name": ("the GPU model", "nvidia-smi -L"),
    "gpu_count": ("how many GPUs there are", "nvidia-smi -L"),
    "gpu_memory_mib": ("the GPU memory size", "nvidia-smi --query-gpu=memory.total --format=csv"),
    "gpu_processes": ("which processes hold GPU memory", "nvidia-smi"),
    "max_model_len": ("the max_model_len vLLM started with", "grep -i max_model_len vllm.log"),
    "kv_capacity_tokens": ("how many tokens the KV cache holds", "grep -i 'KV cache' vllm.log"),
    "model": ("the model path", "grep -i 'model=' vllm.log"),
    "dtype": ("the model dtype", "grep -i dtype vllm.log"),
    "kv_cache_dtype": ("the KV-cache dtype", "grep -i kv_cache_dtype vllm.log"),
    "head_size": ("the attention head size", "grep -i head_size vllm.log"),
    "quantization": ("the checkpoint's quantization method", "grep -i quantization vllm.log"),
    "packages": ("the installed packages", "python -m pip list"),
    "patched_files": ("which vLLM files were edited by hand", "triage probe"),
    "shm_bytes": ("the size of /dev/shm", "df -h /dev/shm"),
    "ptxas_version": ("the ptxas version", "ptxas --version"),
    "torch_arches": ("the GPU architectures torch was built for", "python -c 'import torch; print(torch.cuda.get_arch_list())'"),
    "required_torch": ("the torch version vLLM needs", "python -m pip show vllm"),
    "required_transformers": ("the transformers version the model needs", "the model card's config.json"),
    "architecture": ("the model architecture", "the model's config.json"),
    "num_attention_heads": ("the number of attention heads", "the model's config.json"),
    "launch_file": ("the launch script or compose file", "an earlier question asks for it"),
    "launch_argv": ("your `vllm serve` command", "the command line you launched vLLM with"),
    "upstream": ("what upstream knows", "triage --log vllm.log (without --offline)"),
    "port": ("the port", "grep -i port vllm.log"),
    "library": ("the kernel library", "grep -i 'import' vllm.log"),
    "backend": ("the attention backend", "grep -i backend vllm.log"),
    "fix_summary": ("what the diagnosis advises", "triage --log vllm.log"),
    "log_python": ("the Python version", "python --version"),
    "python": ("the Python version", "python --version"),
    "os": ("the operating system and CPU", "uname -sm"),
}

# Outcome kinds (the part before the colon) in words.
OUTCOME_KINDS = {
    "flag": "change the launch flag {target}",
    "env": "set the environment variable {target} at launch",
    "config": "change the launch configuration ({words})",
    "install": "install {target}",
    "upgrade": "upgrade {target}",
    "apply": "apply {words}",
    "manual": "by hand: {words}",
}
OUTCOME_WORDS = {
    "apply:sparse-mla": "install the bundled sparse MLA backend",
    "upgrade:vllm": "upgrade vLLM",
    "flag:replace-removed": "replace a launch flag this vLLM removed",
    "manual:escalate": "report it upstream (nobody seems to have reported it yet)",
    "manual:declined": "stopped: a change was declined",
    "manual:stopped": "stopped: no answer",
    "manual:interrupted": "stopped: interrupted",
    "manual:loop-limit": "stopped: the playbook went round too many times",
    "manual:fix-arguments": "correct the launch arguments by hand",
    "manual:fix-model-path": "correct the model path by hand",
    "manual:fix-tokenizer": "give the tokenizer what it needs",
    "manual:older-vllm": "install the vLLM release that still supports the model",
    "manual:set-hf-token": "give vLLM a Hugging Face token with access to the model",
    "manual:download-model": "download the model where the Hub is reachable and serve it from a folder",
    "manual:freed-memory": "launch again now that the GPU memory is free",
    "manual:indexer-needs-deepgemm": "install DeepGEMM for the DSA indexer",
    "manual:install-build": "install a torch/vLLM build for this driver's CUDA",
    "manual:install-compiler": "install a C compiler",
    "manual:install-cuda-toolkit": "install a newer CUDA toolkit",
    "manual:install-deepgemm": "install DeepGEMM",
    "manual:install-driver": "install or repair the NVIDIA driver",
    "manual:install-library": "install the missing kernel library",
    "manual:install-torch": "install the torch vLLM was built for",
    "manual:install-triage-kernel": "install the bundled sparse MLA backend by hand",
    "manual:linux": "run vLLM on Linux",
    "manual:match-flashinfer": "install matching FlashInfer packages",
    "manual:more-memory": "give the model more GPU memory (more GPUs or a smaller checkpoint)",
    "manual:next-failure": "work on the next failure in the new log",
    "manual:other-checkpoint": "use a checkpoint this GPU can run",
    "manual:match-checkpoint-quantization": "serve a checkpoint quantized the way this vLLM builds the model, or a vLLM that loads it",
    "manual:other-hardware": "run it on a GPU that supports it",
    "manual:other-parallelism": "choose a tensor-parallel size the weights divide into",
    "manual:other-playbook": "follow the guided fix for the new failure",
    "manual:plugin-import-error": "fix the plugin's import error",
    "manual:reboot": "reboot to load the new driver",
    "manual:rebuild": "rebuild vLLM from source for this GPU",
    "manual:redownload": "download the model files again",
    "manual:run-on-gpu-host": "run it on the machine with the GPU",
    "manual:save-patches": "copy the hand-patched files aside, then upgrade",
    "manual:stopped-old-server": "stop the old server and launch again",
    "manual:upgrade-driver": "upgrade the NVIDIA driver",
    "manual:upgrade-transformers": "upgrade transformers",
    "manual:upgrade-vllm-first": "upgrade vLLM first",
    "manual:quantization-setup": "change the quantization setup as the diagnosis says",
    "manual:fix-distributed-setup": "fix how the distributed processes are set up",
    "manual:fix-host-setup": "change the host or container setup",
    "manual:clear-compile-cache": "remove the broken compile cache and start again",
    "manual:python-in-range": "install into a Python version the release supports",
    "manual:other-arch": "install a build made for this CPU, or build vLLM from source",
    "manual:matching-wheel": "install the wheel made for this Python and platform",
    "manual:variant-index": "install that build from the index that carries it",
    "manual:pick-release": "pin a release that has a build for this machine",
    "manual:fresh-venv": "install vLLM into a fresh virtual environment",
    "manual:upgrade-installer": "upgrade the installer and run the same command again",
    "manual:use-uv": "use uv for --torch-backend, or give pip the PyTorch index",
    "manual:visible-devices": "make the GPUs visible to vLLM (CUDA_VISIBLE_DEVICES, the container's --gpus)",
}


# A step result's status, as the reader sees it.
STATUS_WORDS = {"pass": "yes", "fail": "no", "unknown": "cannot tell", "not-run": "not run", "success": "done",
                "failure": "failed", "declined": "declined"}


def status_words(status: str) -> str:
    return STATUS_WORDS.get(status, status)


def outcome_words(outcome: str | None) -> str:
    """`flag:--max-model-len` -> `change the launch flag --max-model-len`."""
    if not outcome:
        return "not finished"
    if outcome in OUTCOME_WORDS:
        return OUTCOME_WORDS[outcome]
    kind, _, target = outcome.partition(":")
    words = target.replace("-", " ").strip()
    form = OUTCOME_KINDS.get(kind, "{words}")
    return form.format(target=target, words=words)


def human_value(name: str, value: Any) -> Any:
    """A fact as people write it: CUDA 12020 -> 12.2, bytes -> GiB."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("cuda_version", "cuda_driver_version") and _int_like(value) and int(str(value)) >= 1000:
        v = int(str(value))
        major, minor = v // 1000, (v % 1000) // 10
        return f"{major}.{minor}"
    if leaf.endswith("_bytes") and _int_like(value):
        return gib(int(str(value)))
    return value


def gib(n: int) -> str:
    if n >= 1 << 30:
        return f"{n / (1 << 30):.1f} GiB".replace(".0 GiB", " GiB")
    return f"{n / (1 << 20):.0f} MiB"


def _int_like(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) or (isinstance(v, str) and v.isdigit())


def missing_line(names: list[str]) -> str:
    """One sentence for the facts a step could not learn, with the command that shows each."""
    seen: list[tuple[str, str]] = []
    for n in names:
        head = n.split(".", 1)[0]
        if head == "packages" and "." in n:
            pkg = n.split(".", 1)[1]
            what, cmd = f"the installed {pkg} version", f"python -m pip show {pkg}"
        else:
            what, cmd = FACT_SOURCES.get(n) or FACT_SOURCES.get(head) or (n.replace("_", " ").replace(".", " "), "")
        if (what, cmd) not in seen:
            seen.append((what, cmd))
    parts = []
    by_cmd: dict[str, list[str]] = {}
    for what, cmd in seen:
        by_cmd.setdefault(cmd, []).append(what)
    for cmd, whats in by_cmd.items():
        w = _join(whats)
        if not cmd:
            parts.append(w)
        elif cmd.startswith(("the ", "an ")):
            parts.append(f"{w} ({cmd})")
        else:
            parts.append(f"{w} (`{cmd}` shows it)")
    return "Not in the log: " + "; ".join(parts) + "."


def fact_words(name: str) -> str:
    head = name.split(".", 1)[0]
    if head == "packages" and "." in name:
        return f"the installed {name.split('.', 1)[1]} version"
    got = FACT_SOURCES.get(name) or FACT_SOURCES.get(head)
    return got[0] if got else name.replace("_", " ").replace(".", " ")


def _join(xs: list[str]) -> str:
    return xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]


# --- the reads-clean check --------------------------------------------------------------------

# Internal text that must never reach a reader of a guided fix.
_LEAKS = [
    ("'unknown' for a missing fact", lazy(r"(?<![`'\"-])\bunknown\b(?! (?:error|architecture|argument|backend|model|option|quantization|dtype|CUDA|to|type|method|name)\b)(?!['`\"])")),
    ("'None'", lazy(r"\bNone\b")),
    ("an unfilled {placeholder}", lazy(r"\{\*?[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)*(?:\|[^{}]*)?\}")),
    ("a condition expression", lazy(r"(?: == | != |\b[a-z]+[_.][a-z_.-]+ is (?:not )?known\b| not in \[|\bin \[[^\]]*\]:|: (?:pass|fail|unknown)$)")),
    ("a Python traceback", lazy(r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+")),
    ("an internal outcome id", lazy(r"\b(?:outcome|Outcome): [a-z]+:\S+")),
    ("an internal repr", lazy(r"\boutcome=|\b[a-z_]+=None\b|<[a-z_.]+ object at 0x")),
]


def leaks(text: str) -> list[str]:
    """The kinds of internal text found in what a user reads (empty: it reads clean), each with the line."""
    found = []
    for line in text.splitlines():
        plain = _CODE.sub("`…`", line)  # code in backticks is quoted on purpose (`if __name__ == '__main__':`)
        for what, rx in _LEAKS:
            if rx.search(plain):
                found.append(f"{what}: {line.strip()[:160]}")
    return found


_CODE = lazy(r"`[^`]+`")
