"""The host or container around vLLM: GPUs not visible, ports taken; and harmless warnings."""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="environment.no_gpu_visible", category="environment",
         title="No GPU is visible to vLLM ({detail})",
         fix="Inside a container the GPUs must be passed through: install nvidia-container-toolkit and run with "
             "`--gpus all` (or `--runtime nvidia`); check `nvidia-smi` inside the container and CUDA_VISIBLE_DEVICES.",
         patterns=[r"(?P<detail>Failed to infer device type)", r"(?P<detail>No CUDA GPUs are available)",
                   r"(?P<detail>Found no NVIDIA driver on your system)",
                   r"(?P<detail>CUDA_VISIBLE_DEVICES is set to empty string)",
                   r"(?P<detail>Torch not compiled with CUDA enabled)",
                   r"(?P<detail>libnvidia-ml\.so\.1: cannot open shared object file)",
                   r"(?P<detail>device_count\(\) (?:returned|is) 0)",
                   r"(?P<detail>could not select device driver \"\S*\" with capabilities: \[\[gpu\]\])"],
         playbook="environment", confidence=0.9),
    Rule(signature="environment.port_in_use", category="environment",
         title="The API server's port is already in use ({port})",
         fix="Another process (often a previous vLLM) holds the port: stop it (`ss -ltnp | grep :{port}`) or "
             "start with --port <free port>.",
         patterns=[r"\[Errno 98\] error while attempting to bind on address \('[^']*', (?P<port>\d+)\): address already in use",
                   r"\[Errno 98\] Address already in use(?P<port>)", r"OSError: \[Errno 98\].{0,40}port (?P<port>\d+)"],
         playbook="environment", confidence=0.95),
    Rule(signature="environment.host_oom_killed", category="environment",
         title="The process was killed (likely the host's out-of-memory killer)",
         fix="Host RAM ran out (loading weights, or many workers): check `dmesg | grep -i oom`, add swap/RAM, lower "
             "--swap-space / --cpu-offload-gb, or limit workers; in Kubernetes raise the memory limit.",
         patterns=[r"^Killed\s*$", r"died with <Signals\.SIGKILL: 9>", r"exit code -9\b", r"exited with code 137",
                   r"Out of memory: Killed process"],
         playbook="environment", confidence=0.6, secondary=True),
    Rule(signature="environment.unsupported_platform", category="environment",
         title="vLLM does not support this platform ({detail})",
         fix="vLLM's CUDA build needs Linux x86_64/aarch64 with an NVIDIA GPU: use WSL2/Linux or the matching "
             "platform build (CPU, ROCm, XPU).",
         patterns=[r"(?P<detail>vLLM only supports Linux platform)", r"(?P<detail>Unsupported platform[^.]*)"],
         playbook="environment", confidence=0.85),
    # -- harmless: recognised so that they are not taken for the failure -------------------------
    Rule(signature="harmless.torch_capability_range", category="", harmless=True,
         title="PyTorch warns that the GPU's compute capability is outside its tested range (harmless on GB10/SM121)",
         fix="", patterns=[r"Minimum and Maximum cuda capability supported by this version of PyTorch is"]),
    Rule(signature="harmless.wsl_pin_memory", category="", harmless=True,
         title="pin_memory is disabled under WSL (harmless; slightly slower)",
         fix="", patterns=[r"Using 'pin_memory=False' as WSL is detected"]),
    Rule(signature="harmless.ulimit", category="", harmless=True,
         title="Open-file limit warning (harmless unless 'Too many open files' follows)",
         fix="", patterns=[r"Found ulimit of \d+ and failed to automatically increase"]),
    Rule(signature="harmless.custom_allreduce_disabled", category="", harmless=True,
         title="Custom all-reduce disabled (a performance note, not a failure)",
         fix="", patterns=[r"Custom allreduce is disabled"]),
    Rule(signature="harmless.commit_hash", category="", harmless=True,
         title="vLLM could not read its commit hash (harmless)",
         fix="", patterns=[r"Failed to read commit hash", r"No module named 'vllm\._version'"]),
    Rule(signature="harmless.tokenizer_parallelism", category="", harmless=True,
         title="HF tokenizers parallelism warning after fork (harmless)",
         fix="", patterns=[r"huggingface/tokenizers: The current process just got forked"]),
]
