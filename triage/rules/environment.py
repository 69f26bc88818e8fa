"""The host or container around vLLM: GPUs not visible, ports taken; and harmless warnings."""

from __future__ import annotations

import re

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, not_in_passing
from triage.rules.wrappers import is_wrapper

# Native Windows, as a paste shows it: a traceback through a drive-letter path, the Windows Python
# banner, collect_env's platform line, pip's console-script launcher.
WINDOWS_RE = lazy(r'File "[A-Za-z]:\\[^"]*\\vllm\\|\[MSC v\.\d+|\bon win32\b|Python platform\s*:\s*Windows-'
                  r'|\\Scripts\\vllm(?:\.exe)?\\__main__\.py')
# What vLLM's import dies of there: Linux-only stdlib modules (resource in vllm/utils, fcntl, termios),
# the CUDA extension no Windows wheel ships, uvloop; any part of vllm itself (pip there installs a release
# that is not whole, or an old one without the module the console script imports).
WINDOWS_IMPORT_RE = lazy(r"No module named '(?:vllm(?:\.[\w.]+)?|resource|fcntl|termios|uvloop)'")


def native_windows(scan: Scan) -> bool:
    """The log shows vLLM run by a native Windows Python."""
    return any(WINDOWS_RE.search(ln.text) for ln in scan.lines)


def _native_windows(scan: Scan) -> Diagnosis | None:
    """vLLM run on native Windows: every vLLM release is Linux-only (pip installs an sdist or a wheel
    without its CUDA extensions), so whatever import or start-up step fails, the platform is the cause."""
    sign = next((ln for ln in scan.lines if WINDOWS_RE.search(ln.text)), None)
    if sign is None:
        return None
    win_frames = [e for e in scan.exceptions + scan.cut_tracebacks
                  if any(re.match(r"[A-Za-z]:\\", f.file) and "\\vllm\\" in f.file for f in e.frames)]
    imports = [e for e in scan.exceptions if WINDOWS_IMPORT_RE.search(e.text)]
    died = [e for e in imports + win_frames if not is_wrapper(e.text)]
    if not died:
        return None
    ev = died[0]
    return Diagnosis(
        category="environment", signature="environment.unsupported_platform",
        title="vLLM does not support this platform (native Windows)",
        # above the install rules' readings of the same import error: there, the platform explains it
        confidence=0.85, evidence=[Evidence(ev.line.no, ev.line.shown), Evidence(sign.no, sign.shown)],
        facts={"detail": "native Windows", "platform": "windows"},
        fix=Fix("vLLM runs on Linux only: on Windows run it inside WSL2 (Ubuntu, with the NVIDIA driver for WSL) "
                "or in a Linux container with Docker Desktop's GPU support; pip on native Windows installs a vLLM "
                "without its CUDA extensions, whatever error it stops at.", "environment"),
        first_line=ev.line.no)


# Native macOS, as a pip build shows it: Homebrew's or python.org's framework Python, a home under /Users.
MACOS_RE = lazy(r'File "(?:/opt/homebrew/|/usr/local/Caskroom/|/Library/Frameworks/Python\.framework/|/Users/[^/"]+/)'
                r'|Python platform\s*:\s*macOS-')
# pip/uv building a package from source and failing (the build backend's own step)
SOURCE_BUILD_FAILED_RE = lazy(r"Getting requirements to build (?:wheel|editable) did not run successfully"
                              r"|Building (?:wheel|editable) for vllm \(pyproject\.toml\)[ .]*error"
                              r"|Failed to build `?vllm|Failed to (?:download and )?build `vllm")
# what says the package being built is vLLM: its name, or its setup.py's warning when git has no commit
VLLM_BUILD_RE = lazy(r"\bvllm\b|Failed to get commit hash", re.IGNORECASE)


def _macos_source_build(scan: Scan) -> Diagnosis | None:
    """vLLM built from source by a native macOS Python: its CUDA build needs Linux (macOS only gets the
    experimental CPU build or vllm-metal), so the build fails whichever step it stops at."""
    failed = next((ln for ln in scan.lines if SOURCE_BUILD_FAILED_RE.search(ln.text)), None)
    if failed is None:
        return None
    mac = next((ln for ln in scan.lines if MACOS_RE.search(ln.text)), None)
    if mac is None or not any(VLLM_BUILD_RE.search(ln.text) for ln in scan.lines):
        return None
    return Diagnosis(
        category="environment", signature="environment.unsupported_platform",
        title="vLLM does not support this platform (a source build on macOS)",
        # above install.build_failed's reading of the same lines: the platform is why the build fails
        confidence=0.75, evidence=[Evidence(failed.no, failed.shown), Evidence(mac.no, mac.shown)],
        facts={"detail": "macOS", "platform": "macos"},
        fix=Fix("pip is building vLLM from source on macOS, where its CUDA build cannot run: on Apple silicon use "
                "vllm-metal, or follow vLLM's CPU build for macOS (VLLM_TARGET_DEVICE=cpu, Xcode command-line "
                "tools); to serve on a GPU, use a Linux machine or container.", "environment"),
        first_line=failed.no)


def _unsupported_platform(scan: Scan) -> Diagnosis | None:
    return UNSUPPORTED_PLATFORM.match_lines(scan) or _native_windows(scan) or _macos_source_build(scan)


# A traceback that ends inside a socket's bind() (its message cut off): binding is what failed, and an
# address already taken is by far the usual reason (vLLM binds its API port and its ZMQ/RPC ports).
BIND_FRAMES = (("zmq/sugar/socket.py", "bind"), ("asyncio/base_events.py", "create_server"),
               ("socket.py", "bind"), ("uvicorn/server.py", "startup"))


def _port_in_use(scan: Scan) -> Diagnosis | None:
    d = PORT_IN_USE.match_lines(scan)
    if d is not None:
        return d
    for tb in scan.cut_tracebacks:
        if tb.frames and any(tb.frames[-1].file.endswith(f) and tb.frames[-1].func == fn for f, fn in BIND_FRAMES):
            return Diagnosis(
                category="environment", signature="environment.port_in_use",
                title="vLLM died binding a socket (the message is cut off): a port it needs is most likely taken",
                confidence=0.6, evidence=[Evidence(tb.line.no, tb.line.shown)],
                facts={"raised_at": f"{tb.frames[-1].file}:{tb.frames[-1].line} in {tb.frames[-1].func}"},
                fix=Fix("A port vLLM binds (the API --port, or an internal ZMQ/RPC port) is held by another process, "
                        "usually an earlier vLLM that did not exit: stop it (`ss -ltnp` shows the owner), give each "
                        "server its own --port, and capture the whole output to see the address.", "environment-port-in-use"),
                first_line=tb.line.no)
    return None


PORT_IN_USE: Rule = Rule(
    signature="environment.port_in_use", category="environment",
    title="A port vLLM binds is already in use{port_suffix}",
    fix="Another process (often a previous vLLM) holds the port: stop it (`ss -ltnp | grep :{port}`) or "
        "start with --port <free port>.",
    patterns=[r"\[Errno 98\] error while attempting to bind on address \('[^']*', (?P<port>\d+)\): (?:\[errno 98\] )?"
              r"[Aa]ddress already in use",
              # the docker daemon publishing a port another container or process holds
              r"Bind for [\d.:\[\]]*:(?P<port>\d+) failed: port is already allocated",
              r"listen tcp[46]? [\d.:\[\]]*:(?P<port>\d+): bind: address already in use",
              r"\[Errno 98\] Address already in use(?P<port>)", r"OSError: \[Errno 98\].{0,40}port (?P<port>\d+)",
              # vLLM's ZMQ sockets (the V0 RPC server, the V1 engine-core and KV-transfer side channels)
              r"ZMQError: Address already in use \(addr='(?:tcp://)?[^']*?:(?P<port>\d+)'\)",
              r"ZMQError: Address already in use(?P<port>)",
              # a title or prose ("startup failure due to port conflict with VLLM_PORT from another instance")
              r"(?i)\b(?:fail\w*|error|crash\w*)\b.{0,60}\bdue to (?:a )?port conflicts?\b(?P<port>)"],
    facts=lambda m, line, scan: {"port_suffix": f" (port {m.group('port')})" if m.group("port") else ""},
    # its own playbook (the environment one only points at it)
    playbook="environment-port-in-use", confidence=0.95, check=lambda scan, env: _port_in_use(scan))


UNSUPPORTED_PLATFORM: Rule = Rule(
    signature="environment.unsupported_platform", category="environment",
    title="vLLM does not support this platform ({detail})",
    fix="vLLM's CUDA build needs Linux x86_64/aarch64 with an NVIDIA GPU: use WSL2/Linux or the matching "
        "platform build (CPU, ROCm, XPU).",
    patterns=[r"(?P<detail>vLLM only supports Linux platform)", r"(?P<detail>Unsupported platform[^.]*)",
              # a container image built for another CPU architecture (docker's warning; the kernel refusing it)
              r"The requested image's platform \((?P<detail>[\w/]+)\) does not match the detected host platform",
              r"exec (?:/\S+: )?(?P<detail>exec format error)"],
    playbook="environment", confidence=0.85, check=lambda scan, env: _unsupported_platform(scan))

# vLLM's platform detection (vllm/platforms/__init__.py, every release) ends in "No platform detected" /
# "Failed to infer device type" / an empty device string whenever no platform plugin accepts the machine.
# A GPU missing from the container is one cause; a vLLM build that cannot run here is the other, and the same
# log then says so: the package metadata missing (vllm_version_matches_substr's warning, which makes the
# CUDA and CPU plugins fail), or vllm._C failing to load its CUDA runtime.
DETECTION_FAILED_RE = lazy(r"No platform detected|Failed to infer device type|Device string must not be empty")
BUILD_SIGNS_RE = lazy(
    r"The vLLM package was not found, so its version could not be inspected"
    # (libcuda / NVML missing is the driver's absence, environment.no_gpu_visible's case)
    r"|Failed to import from vllm\._C with (?:ImportError|ModuleNotFoundError|OSError)\((?!['\"](?:libcuda\.so|libnvidia))"
    r"|No module named 'vllm\._C'"
    r"|lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink|amdhip64|rocblas|hipblas)\S*\.so[\w.]*: cannot open shared object file"
    r"|_C\.\S*\.so: undefined symbol"
    # torch_xla found the TPU (its own warning) while vLLM's platform detection did not: the TPU stack is broken
    r"|libtpu\.so and TPU device found")


# The CPU platform is only chosen for a CPU build of vLLM ("cpu" in its version; macOS aside): a run meant for the
# CPU that ends in "Failed to infer device type" has a CUDA wheel (PyPI's) where a CPU build is needed.
CPU_INTENT_RE = lazy(r"--device[= ]cpu\b|VLLM_TARGET_DEVICE=cpu|device=['\"]cpu['\"]|['\"]device['\"]: ['\"]cpu['\"]"
                     r"|\bcpu[- ](?:device|backend|only|inference|mode)\b"
                     r"|\b(?:on|use|using|run|running|with) (?:a |the |my )?cpu\b(?![-_ ]?(?:offload|blocks|cores))",
                     re.I)
TPU_WORD_RE = lazy(r"\btpu\b|libtpu|torch_xla", re.I)
# Gaudi is detected from software alone (hpu_platform_plugin: habana_frameworks importable; from 0.9 the vllm-gaudi
# plugin), never from the devices: a Gaudi machine that ends in "Failed to infer device type" lacks that software.
HPU_WORD_RE = lazy(r"\bGaudi\s?\d?\b|\bHPU\b|habana", re.I)


def build_explains_no_platform(scan: Scan):
    """(the detection line, the line showing the vLLM build cannot run here), or None."""
    failed = next((ln for ln in scan.lines if DETECTION_FAILED_RE.search(ln.text)), None)
    if failed is None:
        return None
    sign = next((ln for ln in scan.lines if BUILD_SIGNS_RE.search(ln.text)), None)
    # on Gaudi vllm._C is absent by design (a non-CUDA platform): only the package metadata outranks the machine
    hpu = next((ln for ln in scan.lines if HPU_WORD_RE.search(ln.text)), None)
    if hpu is not None and (sign is None or "package was not found" not in sign.text):
        sign = hpu
    if sign is None and _other_platform(scan) is None and not any(TPU_WORD_RE.search(ln.text) for ln in scan.lines):
        sign = next((ln for ln in scan.lines if CPU_INTENT_RE.search(ln.text)), None)
    return None if sign is None else (failed, sign)


# vLLM picked another accelerator (platforms/__init__.py, "Automatically detected platform tpu."; torch_xla's
# "libtpu.so and TPU device found. Setting PJRT_DEVICE=TPU."): a CUDA call then is a CUDA-only code path, not a
# GPU missing from a container.
OTHER_PLATFORM_RE = lazy(r"(?:Automatically )?detected platform (?P<p>tpu|xpu|hpu|neuron)\b"
                         r"|Setting PJRT_DEVICE=(?P<pj>TPU)|libtpu\.so and (?P<lt>TPU) device found"
                         # an out-of-tree platform plugin (vllm-ascend, vllm-gaudi, vllm-spyre, ...) took over
                         r"|Platform plugin (?P<pp>(?!cuda\b|rocm\b)\w+) is activated")
CUDA_ASKED_RE = lazy(r"Torch not compiled with CUDA enabled|No CUDA GPUs are available")


def _other_platform(scan: Scan) -> str | None:
    for ln in scan.lines:
        m = OTHER_PLATFORM_RE.search(ln.text)
        if m:
            return (m.group("p") or m.group("pj") or m.group("lt") or m.group("pp")).upper()
    return None


def _no_gpu_visible(scan: Scan) -> Diagnosis | None:
    d = NO_GPU_VISIBLE.match_lines(scan)
    if d is not None and d.facts.get("detail") and CUDA_ASKED_RE.search(str(d.facts["detail"])):
        plat = _other_platform(scan)
        if plat is not None:
            return Diagnosis(
                category="environment", signature="environment.unsupported_platform",
                title=f"A CUDA-only code path was reached on this {plat} machine ({d.facts['detail']})",
                confidence=0.75, evidence=d.evidence, facts={"detail": f"CUDA-only code on {plat}", "platform": plat},
                fix=Fix(f"vLLM runs on its {plat} backend here, and this model, feature or option calls CUDA directly, "
                        f"which the {plat} backend does not provide: check the {plat} backend's supported models and "
                        "features for this vLLM release (and its platform plugin, e.g. tpu-inference), drop the "
                        "CUDA-only option, or run on a GPU.", "environment"),
                first_line=d.first_line)
    if d is not None and "not compiled with CUDA" in str(d.facts.get("detail", "")):
        return None  # torch itself is a build without CUDA: install.torch_without_cuda names it
    if d is None or build_explains_no_platform(scan) is None:
        return d
    # only detection lines as evidence: the install rule (install.platform_build_mismatch) names the cause
    rest = [e for e in d.evidence
            if not DETECTION_FAILED_RE.search(next((ln.text for ln in scan.lines if ln.no == e.line), ""))]
    return d if rest else None


NO_GPU_VISIBLE: Rule = Rule(signature="environment.no_gpu_visible", category="environment",
         title="No GPU is visible to vLLM ({detail})",
         fix="Inside a container the GPUs must be passed through: install nvidia-container-toolkit and run with "
             "`--gpus all` (or `--runtime nvidia`); check `nvidia-smi` inside the container and CUDA_VISIBLE_DEVICES.",
         patterns=[r"(?P<detail>Failed to infer device type)", r"(?P<detail>No (?:CUDA|HIP) GPUs are available)",
                   # DeviceConfig of 0.3.x with device "auto": torch sees no CUDA device and no Neuron
                   r"(?P<detail>No supported device detected)",
                   # the NVIDIA container runtime's hook, before anything in the container runs
                   r"nvidia-container-cli: (?P<detail>initialization error: [^:]{1,40}(?:: [^:.]{1,60})?)",
                   # the runtime cannot inject the driver's files or devices; docker has no "nvidia" runtime configured
                   r"nvidia-container-cli: (?P<detail>(?:mount|device|ldcache|detection) error: [^:]{1,60})",
                   r"(?P<detail>unknown or invalid runtime name: nvidia)",
                   r"(?P<detail>Found no NVIDIA driver on your system)",
                   r"(?P<detail>CUDA_VISIBLE_DEVICES is set to empty string)",
                   r"(?P<detail>Torch not compiled with CUDA enabled)",
                   r"(?P<detail>libnvidia-ml\.so\.1: cannot open shared object file)",
                   r"(?P<detail>device_count\(\) (?:returned|is) 0)",
                   r"(?P<detail>could not select device driver \"\S*\" with capabilities: \[\[gpu\]\])",
                   # newer vLLM: no platform detected -> DeviceConfig(device="") (vllm/config/device.py)
                   r"(?P<detail>Device string must not be empty)",
                   # vllm/platforms/__init__.py (INFO in 0.7-0.8, DEBUG later): no CUDA/ROCm/... platform found
                   r"(?P<detail>No platform detected), vLLM is running on UnspecifiedPlatform",
                   r"(?P<detail>libcuda\.so(?:\.1)?: cannot open shared object file)",
                   r"(?P<detail>NVML Shared Library Not Found)", r"(?P<detail>NVMLError_LibraryNotFound)",
                   r"(?P<detail>NVMLError_DriverNotLoaded|NVML.{0,20}Driver Not Loaded)",
                   # cudaErrorNoDevice (100) as torch's c10/cuda prints it; torch 2.6+'s accelerator API
                   r"(?P<detail>no CUDA-capable device is detected)",
                   r"NVIDIA-SMI has failed because (?P<detail>it couldn't communicate with the NVIDIA driver)",
                   # the container runtime injects nvidia-smi with the driver: its absence is a container without GPUs
                   r"(?P<detail>nvidia-smi: (?:command )?not found)",
                   # the entrypoint banner of NVIDIA's CUDA base images (vllm/vllm-openai's too) started without GPUs
                   r"(?P<detail>The NVIDIA Driver was not detected)\.\s+GPU functionality will not be available",
                   r"(?P<detail>Cannot access accelerator device when none is available)",
                   r"Failed to initialize NVML: (?P<detail>Insufficient Permissions)",
                   # Kubernetes' scheduler: no node has a free GPU for the pod
                   r"(?P<detail>\d+ Insufficient (?:nvidia\.com|amd\.com|gpu\.intel\.com)/\w+)"],
         playbook="environment", confidence=0.9, check=lambda scan, env: _no_gpu_visible(scan))

RULES = [
    NO_GPU_VISIBLE,
    Rule(signature="environment.nvml_invalid_device", category="environment",
         title="NVML rejected a GPU index: this process sees a GPU that does not exist for it",
         fix="The process asked NVML for a device index it cannot see (CUDA_VISIBLE_DEVICES / Ray placement "
             "hands it no or other GPUs): check CUDA_VISIBLE_DEVICES and, with Ray or data parallel, that every "
             "engine runs on a node with its GPUs (`ray status`, one GPU bundle per rank).",
         patterns=[r"NVMLError_InvalidArgument"],
         playbook="environment", confidence=0.8),
    PORT_IN_USE,
    Rule(signature="environment.invalid_device_ordinal", category="environment",
         title="A GPU index this process was given does not exist for it (invalid device ordinal)",
         fix="The process asked CUDA for a GPU number it cannot see: CUDA_VISIBLE_DEVICES lists fewer GPUs than "
             "--tensor-parallel-size x --pipeline-parallel-size (or data parallel) needs, or names GPUs the container "
             "was not given. Compare `nvidia-smi -L` inside the container with CUDA_VISIBLE_DEVICES and the parallel "
             "sizes, and make them agree.",
         patterns=[r"CUDA error: invalid device ordinal", r"cudaErrorInvalidDevice\b", r"CUDA_ERROR_INVALID_DEVICE\b"],
         playbook="environment", confidence=0.8),
    Rule(signature="environment.gpu_busy", category="environment",
         title="The GPU is busy or unavailable (exclusive compute mode or held by another process)",
         fix="Another process owns the GPU in exclusive-process mode, or the GPU is in a bad state: check "
             "`nvidia-smi` (Compute M. column and processes), stop the other process or set "
             "`nvidia-smi -c DEFAULT`; pick free GPUs with CUDA_VISIBLE_DEVICES.",
         patterns=[r"CUDA-capable device\(s\) is/are busy or unavailable", r"cudaErrorDevicesUnavailable",
                   r"CUDA_ERROR_DEVICES_UNAVAILABLE"],
         playbook="environment", confidence=0.85),
    Rule(signature="environment.host_oom_killed", category="environment",
         title="The process was killed (likely the host's out-of-memory killer)",
         fix="Host RAM ran out (loading weights, or many workers): check `dmesg | grep -i oom`, add swap/RAM, lower "
             "--swap-space / --cpu-offload-gb, or limit workers; in Kubernetes raise the memory limit.",
         patterns=[r"^Killed\s*$", r"died with <Signals\.SIGKILL: 9>",
                   # the shell's report of a job it ran ("bash: line 1: 4242 Killed  vllm serve ...", "[1]+ Killed ...")
                   r"\bline \d+: +\d+ Killed\s", r"^\[\d+\][+-]? +Killed\s", r"exit code:? -9\b", r"exited with code 137",
                   # vLLM's executors on a worker killed by SIGKILL (V0 ChildProcessError, v1/utils)
                   r"worker died \(-9\)", r"died with exit code -9\b",
                   # Kubernetes' container status: the cgroup memory limit (host RAM, not GPU memory)
                   r"Reason:\s+OOMKilled\b", r"\bOOMKilled\b",
                   # the kernel's OOM killer, whole-host and cgroup (mm/oom_kill.c, "Memory cgroup out of memory: ...")
                   r"[Oo]ut of memory: Killed process",
                   # Ray's raylet and memory monitor (C++ strings of every 2.x raylet): a worker killed for host RAM
                   r"killed due to memory pressure \(OOM\)", r"worker\(s\) were killed due to the node running low on memory",
                   r"Memory on the node \(IP: [^)]*\) was [\d.]+GB used / [\d.]+GB limit",
                   # Ray's note on a worker that vanished (connection EOF): the OOM killer is its first named cause
                   r"(?:The process is killed by SIGKILL by OOM killer|the process was killed by the OOM killer) due to high memory usage"],
         playbook="environment", confidence=0.6, secondary=True),
    UNSUPPORTED_PLATFORM,
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
    Rule(signature="harmless.fa_version_fallback", category="", harmless=True,
         title="FlashAttention is not available on this GPU; vLLM falls back to another backend (logged as ERROR, harmless)",
         fix="", patterns=[r"Cannot use FA version \d+ is not supported due to"]),
    Rule(signature="harmless.fp8_marlin_fallback", category="", harmless=True,
         title="No native FP8 on this GPU: FP8 weights run weight-only through Marlin (harmless, slower)",
         fix="", patterns=[r"Your GPU does not have native support for FP8 computation but FP8 quantization is being used"]),
    Rule(signature="harmless.slow_tokenizer", category="", harmless=True,
         title="A slow (Python) tokenizer is used (harmless, slower)",
         fix="", patterns=[r"Using a slow tokenizer\. This might cause a significant slowdown"]),
    Rule(signature="harmless.process_group_not_destroyed", category="", harmless=True,
         title="torch.distributed warns that the process group was not destroyed at exit (harmless)",
         fix="", patterns=[r"destroy_process_group\(\) was not called before program exit",
                           r"process group has NOT been destroyed before we destruct ProcessGroupNCCL"]),
    Rule(signature="harmless.safetensors_metadata_retry", category="", harmless=True,
         title="vLLM could not read safetensors metadata for a local path or GGUF file (logged as ERROR, harmless)",
         fix="", patterns=[r"Error retrieving safetensors: "]),
    Rule(signature="harmless.flashinfer_sampler_fallback", category="", harmless=True,
         title="FlashInfer is not installed: top-p/top-k sampling uses the PyTorch implementation (harmless, slower)",
         fix="", patterns=[r"FlashInfer is not available\. Falling back to the PyTorch-native implementation"]),
    Rule(signature="harmless.nccl_net_plugin", category="", harmless=True,
         title="NCCL found no external network plugin and uses its internal one (NCCL_DEBUG=INFO noise, harmless)",
         fix="", patterns=[r"NET/Plugin: Plugin load returned \d+ : libnccl-net\.so", r"NET/Plugin: No plugin found \(libnccl-net\.so\)"]),
    Rule(signature="harmless.tokenizer_parallelism", category="", harmless=True,
         title="HF tokenizers parallelism warning after fork (harmless)",
         fix="", patterns=[r"huggingface/tokenizers: The current process just got forked"]),
]

RULES += [
    # vLLM's profiling check (V0 worker.py, V1 gpu_worker.py): free memory grew while it measured, so another
    # process on the same GPU released memory in the meantime; the budget it computed is meaningless.
    Rule(signature="environment.gpu_memory_changed", category="environment",
         title="Another process changed the GPU's memory while vLLM profiled it (free {initial} -> {current})",
         fix="vLLM measures free GPU memory before and after profiling; here it rose, so another process on the same "
             "GPU released memory meanwhile (a previous vLLM still exiting, another container or job). Give vLLM GPUs "
             "of its own (stop the other process, or pick free GPUs with CUDA_VISIBLE_DEVICES / a dedicated "
             "container), wait for earlier servers to exit, and launch again.",
         patterns=[r"Error in memory profiling\. Initial (?:free|used) memory (?P<initial>[\d.]+(?: GiB)?), current(?:ly used| free) memory "
                   r"(?P<current>[\d.]+(?: GiB)?)"],
         playbook="environment", confidence=0.85),
    # vllm/v1/worker/gpu/buffer_utils.py (the V2 model runner's staging buffers): pinned host memory is off. On
    # CUDA that happens only under WSL2, where vLLM enables pinned memory only on request (platforms/cuda.py);
    # its in_wsl() looks for 'microsoft' in all of platform.uname(), the node name too.
    Rule(signature="environment.uva_unavailable", category="environment",
         title="Pinned (UVA) host memory is not available: vLLM's V2 model runner cannot start (vLLM sees WSL2)",
         fix="vLLM's V2 model runner keeps its staging buffers in pinned host memory, which vLLM leaves off under "
             "WSL2: set VLLM_WSL2_ENABLE_PIN_MEMORY=1 (WSL2 kernel 4.19.121 or newer; run `wsl --update`), or use "
             "the V1 model runner with VLLM_USE_V2_MODEL_RUNNER=0. vLLM takes any 'microsoft' in `uname -a` for WSL, "
             "the host name included: on a Linux GPU host whose pod/host name contains 'microsoft' (a deployment "
             "named after microsoft/phi-4), rename it.",
         patterns=[r"RuntimeError: UVA is not available", r"^UVA is not available$"],
         playbook="environment", confidence=0.9),
    Rule(signature="environment.nvml_unknown_error", category="environment",
         title="The container lost access to its GPUs (NVML: Unknown Error)",
         fix="A running container loses its GPU device permissions when the host reloads systemd (`systemctl "
             "daemon-reload`) under Docker's systemd cgroup driver: restart the container now; for good, switch "
             "Docker to the cgroupfs driver or upgrade the NVIDIA Container Toolkit and follow its notes on this "
             "error.",
         patterns=[r"Failed to initialize NVML: Unknown Error", r"NVMLError_Unknown"],
         playbook="environment", confidence=0.85),
]

RULES += [
    # cudaErrorECCUncorrectable / the kernel driver's Xid reports: the GPU itself failed, not the software on it
    Rule(signature="environment.gpu_hardware_fault", category="environment",
         title="The GPU reported a hardware fault ({detail})",
         fix="The GPU (or its link) failed underneath vLLM: check `nvidia-smi -q -d ECC,PAGE_RETIREMENT` and `dmesg | grep "
             "-i xid`, reset the GPU (`nvidia-smi -r`) or reboot the node, and take a GPU that keeps failing out of "
             "service (a retired-pages / row-remapping failure needs a reset; a GPU fallen off the bus, the hardware "
             "team).",
         patterns=[r"(?P<detail>uncorrectable ECC error encountered)", r"(?P<detail>cudaErrorECCUncorrectable)",
                   r"(?P<detail>GPU has fallen off the bus)", r"(?P<detail>NVRM: Xid \(PCI:[^)]*\): (?:48|62|74|79|92|94|95|119|120)\b)",
                   r"(?P<detail>NVMLError_GpuIsLost|GPU is lost)"],
         playbook="environment", confidence=0.85),
    # cudaErrorLaunchTimeout: the display driver's watchdog (a GPU that also drives a screen, Windows/WSL TDR)
    Rule(signature="environment.gpu_watchdog_timeout", category="environment",
         title="A GPU kernel was stopped by the display driver's watchdog (launch timed out)",
         fix="This GPU also drives a display (or runs under Windows/WSL, whose TDR watchdog stops long kernels): run "
             "vLLM on a GPU without a display, raise the Windows TdrDelay, or reduce --max-num-batched-tokens so "
             "that single kernels finish sooner.",
         patterns=[r"the launch timed out and was terminated", r"cudaErrorLaunchTimeout", r"CUDA_ERROR_LAUNCH_TIMEOUT"],
         playbook="environment", confidence=0.75),
]

# libtpu (under torch_xla and JAX) opening the TPU chips: /dev/accel* held by another process, or a runtime that
# cannot bring the chips (or a multi-host slice) up.
RULES += [
    Rule(signature="environment.tpu_unavailable", category="environment",
         title="The TPU cannot be opened ({detail})",
         fix="Another process holds the TPU chips (a previous vLLM, JAX or PyTorch/XLA run that did not exit): stop it "
             "(`sudo lsof -w /dev/accel* /dev/vfio/*` shows it; remove a stale /tmp/libtpu_lockfile), and run one TPU "
             "program at a time per VM. If no process holds them, the libtpu in the environment does not match the TPU "
             "VM's runtime version, or a multi-host slice was started on one host only: install the libtpu/torch_xla "
             "pair the vLLM TPU build pins and launch on every host of the slice.",
         patterns=[r"TPU initialization failed: (?P<detail>open\(/dev/(?:accel|vfio/)\d+\): Device or resource busy)",
                   r"The TPU is already in use by (?P<detail>process with pid \d+)",
                   r"(?P<detail>Failed to get global TPU topology)",
                   r"(?P<detail>TPU initialization failed)"],
         playbook="environment", confidence=0.85),
]


# ---- a path that must be writable is not --------------------------------------------------------------------
# vLLM and the libraries it loads write caches under HOME at start-up (the HF hub, vLLM's torch.compile cache
# under VLLM_CACHE_ROOT, FlashInfer's and Triton's JIT caches, numba, outlines): the arbitrary uid OpenShift
# assigns with HOME=/, a root-owned parent of a bind mount, a read-only root filesystem, a model folder the
# container's user may not read.
PERMISSION_PATTERNS = [
    # PermissionError as raised, or as pip and others print it ("OSError: [Errno 13] Permission denied: ...")
    r"\[[Ee]rr(?:no|or) 13\] [Pp]ermission denied: '(?P<path>[^']+)'",
    r"OSError: \[Errno 30\] Read-only file system: '(?P<path>[^']+)'",
    # the dynamic loader (an executable's libraries, a dlopen from Python): the file is there but not readable
    r"(?P<path>[^\s`'\"]+\.so[\w.]*): cannot open shared object file: Permission denied",
    r"failed to create directory `(?P<path>[^`]+)`: Permission denied",  # uv
    r"mkdir: cannot create directory ['‘](?P<path>[^'’]+)['’]: Permission denied",
    # a shell that may not execute the program (a venv or entrypoint not executable by the container's user)
    r"^(?:/bin/|/usr/bin/)?(?:ba|da)?sh: (?:(?:line )?\d+: )?(?P<path>[^\s:]+): Permission denied",
    # a title or prose naming the exception without its message ("k8s deployment failure vllm OSError: PermissionError")
    r"(?:OSError: |\bwith |\bfails? with )PermissionError\b(?!: \[)(?P<path>)",
]


def _permission_facts(m, line, scan) -> dict:
    path = m.group("path")
    if "Read-only file system" in line.text:
        return {"path": path, "what": "the file system is mounted read-only",
                "hint": ("mount that volume read-write (docker `-v src:dst` without `:ro`, Kubernetes `readOnly: false`), "
                         "or point HF_HOME / HOME at a writable directory; the HF cache needs its .lock and metadata "
                         "files even for a model already downloaded, so a read-only model volume is passed as a local "
                         "path (the snapshot folder), not as a repo id")}
    if not path:  # named without its message: the path is not in the log
        return {"path": "a path the log does not show", "what": "most likely a cache under HOME",
                "hint": ("point the caches at a writable directory: HOME (or XDG_CACHE_HOME), HF_HOME, VLLM_CACHE_ROOT; "
                         "in a container mount a writable volume there; on OpenShift set HOME=/tmp or mount an emptyDir")}
    if path.startswith("/root/") or "/root/.local/" in path:
        what = "a file under /root, which a non-root user cannot read"
        hint = ("the image installs Python (or the model) under /root: run it as root, or give the runtime user "
                "those files (`chown -R <uid> /root /opt/venv` in a derived image), or install into a directory "
                "the user owns")
    elif path.startswith("/dev/"):
        what = "a device node (the container's user may not open the GPU)"
        hint = ("run the container with the GPUs passed through by the NVIDIA runtime (`--gpus all`), not a "
                "bind-mounted /dev node, and as a user in the video/render group")
    elif "site-packages" in path or "dist-packages" in path:
        what = "the Python installation's packages"
        hint = ("install into a virtual environment you own (`python -m venv`, `uv venv`) instead of the system "
                "Python, or with --user; do not mix sudo and user installs in one environment")
    elif "cache" in path.lower() or path.rstrip("/") in ("", "/") or path.startswith("/."):
        what = "a cache directory"
        hint = ("point the caches at a writable directory: HOME (or XDG_CACHE_HOME), HF_HOME, VLLM_CACHE_ROOT; "
                "in a container mount a writable volume there or make the mount's parent owned by the container's "
                "user; on OpenShift set HOME=/tmp or mount an emptyDir")
    else:
        what = "a file or directory the process must open"
        hint = ("give the user the container runs as read access to the model folder and write access to the "
                "directories vLLM writes (the caches under HOME, --download-dir)")
    return {"path": path, "what": what, "hint": hint}



PERMISSION_DENIED: Rule = Rule(
    signature="environment.permission_denied", category="environment",
    title="Permission denied writing or reading {path} ({what})",
    fix="The user vLLM runs as may not write (or read) {path}: {hint}.",
    patterns=PERMISSION_PATTERNS, facts=_permission_facts, playbook="environment", confidence=0.85,
    check=lambda scan, env: not_in_passing(PERMISSION_DENIED, scan))

RULES += [PERMISSION_DENIED]


# ---- a per-process limit of the host or container ------------------------------------------------------------
# vLLM opens many sockets and files (ZMQ, the API server, shared memory, safetensors shards) and starts many threads
# (tokenizers' and OpenMP's pools, one set per worker): a low `ulimit -n` fails with EMFILE, a low `ulimit -u` or a
# container's pids limit (docker --pids-limit, a Kubernetes pod limit) fails thread creation with EAGAIN.
LIMIT_PATTERNS = [r"^(?!.*fd limit errors like)(?=.*(?P<files>Too many open files))",  # (not vLLM's advisory)
                  r"(?P<threads>can't start new thread)",
                  r"(?P<threads>Thread creation failed: Resource temporarily unavailable)",
                  r"(?P<threads>pthread_create failed)",
                  r"(?P<threads>ThreadPoolBuildError \{ kind: IOError\(Os \{ code: 11)"]


def _limit_facts(m, line, scan) -> dict:
    if m.groupdict().get("files"):
        return {"limit": "open files", "advice": "raise the open-file limit: `ulimit -n 65536` in the shell that "
                "starts vLLM, `--ulimit nofile=65536:65536` for docker, LimitNOFILE= for a systemd unit"}
    return {"limit": "processes / threads", "advice": "raise the process limit (`ulimit -u`) or the container's "
            "pids limit (docker --pids-limit, the pod's pids limit), or cap the thread pools (OMP_NUM_THREADS=1, "
            "RAYON_NUM_THREADS, TOKENIZERS_PARALLELISM=false)"}



RESOURCE_LIMIT: Rule = Rule(
    signature="environment.resource_limit", category="environment",
    title="A per-process limit of the host or container was reached ({limit})",
    fix="The process hit its {limit} limit: {advice}.",
    patterns=LIMIT_PATTERNS, facts=_limit_facts, playbook="environment", confidence=0.8,
    check=lambda scan, env: not_in_passing(RESOURCE_LIMIT, scan))

RULES += [RESOURCE_LIMIT]
