"""Platforms and the packages around vLLM: what a non-CUDA start-up logs in passing, an AMD GPU amdsmi cannot
open, an Ascend driver missing from the container, a project's version check, and a library one package imports
that the installed release of another does not have.

- vllm._C is the CUDA/ROCm extension. On CUDA, vllm/platforms/cuda.py imports it at module load, so a broken
  vllm._C raises there. Every other platform (TPU, XPU, HPU, Neuron, CPU, Metal, out-of-tree plugins such as
  vllm-ascend) goes through Platform.import_kernels (platforms/interface.py, 0.10+), and older releases through
  _custom_ops.py, which only log "Failed to import from vllm._C: <exc>" / "... with <exc>" as a WARNING and go on:
  on those platforms the line is noise, not the failure, unless an op from torch.ops._C is later missing.
- amdsmi (vllm/platforms/rocm.py, and __init__.py's ROCm detection) reads the GPU through /dev/kfd and the
  /dev/dri render nodes; AmdSmiLibraryException "Error code: N | AMDSMI_STATUS_..." with NO_PERM, FILE_ERROR,
  DRM_ERROR, NOT_INIT, INIT_ERROR or DRIVER_NOT_LOADED means the process cannot open the device (a user without
  the render/video groups, a container without the device nodes, amdgpu not loaded), whatever the ImportError or
  platform error that follows it says.
- transformers' require_version (used by LlamaFactory, TRL and others to check their pins) raises "<req> is
  required for a normal functioning of this module, but found <pkg>==<ver>" or "The '<req>' distribution was not
  found and is required by this application": the installed release is outside the caller's range.
- libascend_hal.so is the Ascend driver's library (/usr/local/Ascend/driver/lib64): torch_npu cannot load without
  it, which in a container means the driver directory was not mounted (on a host: the driver is not installed).
- Python names the first missing part of a dotted import: "No module named 'pkg.sub'" proves pkg is installed
  and lacks sub, and "cannot import name 'X' from 'pkg.mod'" that pkg.mod exists without X: the importing package
  was written for another release of pkg (lmcache-vllm against LMCache, vllm-metal against mlx-lm). vLLM's own
  modules, torch & co, transformers, the kernel and quantization libraries have their own rules or areas.
"""

from __future__ import annotations

import re

from triage.areas import PACKAGES
from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, not_in_passing
from triage.rules.environment import _other_platform
from triage.rules.library_api import LIBRARY_API

# "Failed to import from vllm._C: ModuleNotFoundError(...)" (interface.py) / "... with ImportError(...)" (_custom_ops.py)
C_WARNING_RE = lazy(r"Failed to import from vllm\._C(?:_AVX\d+)?(?P<sep>:| with) (?P<exc>\w+)\((?P<msg>.*)")
# an op of torch.ops._C looked up later: then vllm._C was needed after all
C_NEEDED_RE = lazy(r"'_OpNamespace' '_C' object has no attribute|No such operator _C::|torch\.ops\._C\.\w+.{0,40}Error")
CPU_PLATFORM_RE = lazy(r"detected platform cpu\b|Platform plugin \w+ is activated", re.I)


def _vllm_c_optional(scan: Scan) -> Diagnosis | None:
    """The vllm._C warning lines, when they are a non-CUDA platform's optional import (harmless)."""
    hits = [(ln, m) for ln in scan.lines for m in [C_WARNING_RE.search(ln.text)] if m]
    if not hits or any(ln.level != "WARNING" for ln, _ in hits):
        return None
    if any(C_NEEDED_RE.search(ln.text) for ln in scan.lines):
        return None
    other = _other_platform(scan) is not None or any(CPU_PLATFORM_RE.search(ln.text) for ln in scan.lines)
    # the interface.py form is only reached off CUDA (cuda.py imports vllm._C itself); a broken ABI stays suspect
    interface_form = all(m.group("sep") == ":" and "undefined symbol" not in m.group("msg") for _, m in hits)
    if not (other or interface_form):
        return None
    return VLLM_C_OPTIONAL.diagnosis(scan, hits)


VLLM_C_OPTIONAL: Rule = Rule(
    signature="harmless.vllm_c_optional_import", category="", harmless=True,
    title="vllm._C (the CUDA/ROCm extension) is not loaded on this non-CUDA platform (a warning, harmless)",
    fix="", patterns=[r"Failed to import from vllm\._C"], check=lambda scan, env: _vllm_c_optional(scan))


AMDSMI_STATUS = r"AMDSMI_STATUS_(?:NO_PERM|FILE_ERROR|DRM_ERROR|NOT_INIT|INIT_ERROR|DRIVER_NOT_LOADED|NO_DRV)"

AMDSMI_DEVICE_ACCESS: Rule = Rule(
    signature="environment.amdsmi_device_access", category="environment",
    title="amdsmi cannot open the AMD GPU ({status})",
    fix="The process cannot read the GPU through /dev/kfd and /dev/dri/renderD*: add the user that runs vLLM to the "
        "render and video groups (`sudo usermod -aG render,video <user>`, then log in again), pass the devices into "
        "the container (`--device /dev/kfd --device /dev/dri --group-add video --group-add render`; for LXD/Incus add "
        "the GPU device and give the container user access to the render node), and check `amd-smi list` as that "
        "user; if amdgpu is not loaded (`lsmod | grep amdgpu`), install or load the driver first.",
    patterns=[rf"AmdSmiLibraryException:?\s*Error code:\s*(?P<code>\d+)\s*\|\s*(?P<status>{AMDSMI_STATUS})",
              # the exception prints its code on the next row: "Error code:\n\t14 | AMDSMI_STATUS_FILE_ERROR"
              rf"^\s*(?P<code>\d+)\s*\|\s*(?P<status>{AMDSMI_STATUS})\b",
              # that row under a collector that reads "10 | " as its own prefix (a compose-like service bar)
              rf"^(?P<status>{AMDSMI_STATUS}) - "],
    playbook="environment", confidence=0.9, check=lambda scan, env: not_in_passing(AMDSMI_DEVICE_ACCESS, scan))


# packages other rules own: vLLM and its pins (install.module_api_mismatch), transformers and remote code (model),
# the kernel libraries (kernels.library_api_mismatch), namespace roots whose "missing" child is a missing package,
# and the packages whose breakage names their own area (kernels, quantization, models, tokenizers, weights, Triton)
OWNED = frozenset({"vllm", "torch", "torchvision", "torchaudio", "xformers", "numpy", "pydantic", "huggingface_hub",
                   "transformers", "transformers_modules", "google", "nvidia", "azure", "mpl_toolkits"}) | \
    frozenset(LIBRARY_API) | frozenset(p for p, c in PACKAGES.items() if c not in ("install_mismatch", "distributed"))
SKEW_RES = [
    lazy(r"cannot import name '(?P<name>\w+)' from '(?P<mod>(?P<pkg>[A-Za-z]\w*)(?:\.\w+)+)'"),
    # a top-level module named with its installed file: a library, not the user's own package
    lazy(r"cannot import name '(?P<name>\w+)' from '(?P<mod>(?P<pkg>[A-Za-z]\w*))' \([^)]*[/\\](?:site|dist)-packages[/\\]"),
    # (a missing "_private" part is a compiled or generated file, not another release's API; Python names the
    # path up to the first part missing, so that part is the last: qwix._src.core is there, ragged_dot is not)
    lazy(r"No module named '(?P<mod>(?P<pkg>[A-Za-z]\w*)(?:\.\w+)*\.(?!_)\w+)'(?!;)"),
]
# a project's own folders: an import between them that fails is its own code, not another package's release
LOCAL_NAMES = frozenset({"models", "model", "utils", "src", "app", "lib", "common", "core", "modules", "tools",
                         "scripts", "data", "config", "configs", "tests", "test", "helpers", "main", "examples", "api",
                         "server", "client", "services", "service", "train", "training", "inference", "eval"})
PATH_RE = lazy(r"' \((?P<path>[^)]*)\)\s*$")
SITE_FRAME_RE = lazy(r"""File "[^"]*[/\\](?:site|dist)-packages[/\\](?P<pkg>[A-Za-z]\w*)""")
LOCAL_FRAME_RE = lazy(r"""File "[^"]*[/\\](?P<pkg>[A-Za-z]\w*)[/\\][\w.]+\.py\"""")


def _importer(scan: Scan, no: int, pkg: str) -> str | None:
    """The package whose frame runs the failing import: the last frame above the error in another package."""
    for ln in reversed([ln for ln in scan.lines if ln.no < no]):
        m = SITE_FRAME_RE.search(ln.text) or LOCAL_FRAME_RE.search(ln.text)
        if m:
            return m.group("pkg") if m.group("pkg") != pkg else None
    return None


def _local_package(scan: Scan, ln, pkg: str) -> bool:
    """pkg is the project's own source: the error names its file outside site-packages, or a frame runs it there."""
    p = PATH_RE.search(ln.text)
    if p and not re.search(r"[/\\](?:site|dist)-packages[/\\]", p.group("path")):
        return True
    frame = re.compile(r"File \"(?P<path>[^\"]*[/\\]" + re.escape(pkg) + r"[/\\][^\"]*)\"")
    return any((f := frame.search(x.text)) and not re.search(r"(?:site|dist)-packages", f.group("path"))
               for x in scan.lines)


def _package_api_skew(scan: Scan) -> Diagnosis | None:
    for ln in scan.lines:
        if ln.level in ("INFO", "WARNING", "DEBUG"):
            continue  # an optional import logged in passing
        for rx in SKEW_RES:
            m = rx.search(ln.text)
            if m is None or m.group("pkg") in OWNED:
                continue
            pkg, mod = m.group("pkg"), m.group("mod")
            if pkg in LOCAL_NAMES or _local_package(scan, ln, pkg):
                continue
            name = m.groupdict().get("name")
            what = f"{mod}.{name}" if name else mod
            importer = _importer(scan, ln.no, pkg)
            who = importer or "the code that imports it"
            return Diagnosis(
                category="install_mismatch", signature="install.package_api_skew",
                title=f"The installed {pkg} has no {what}: {who} was written for another {pkg} release",
                confidence=0.75, evidence=[Evidence(ln.no, ln.shown)],
                facts={"package": pkg, "what": what, "importer": importer},
                fix=Fix(f"{pkg} is installed, but not the release {who} expects ({what} was renamed, moved or removed "
                        f"between releases): install the {pkg} version {who} pins (its requirements or release notes; "
                        f"`pip show {pkg}` shows the one here), or the {who} release made for this {pkg}. A folder "
                        f"named {pkg} in the working directory can also shadow the package: run from elsewhere.",
                        "install-mismatch"),
                first_line=ln.no)
    return None


PACKAGE_API_SKEW: Rule = Rule(
    signature="install.package_api_skew", category="install_mismatch",
    title="A package imports a part of another package that its installed release does not have", fix="",
    patterns=[r"cannot import name", r"No module named"], playbook="install-mismatch", confidence=0.75,
    check=lambda scan, env: _package_api_skew(scan))

REQUIRE_RES = [
    lazy(r"(?P<req>[A-Za-z][\w.\-]*[<>=!~][^\s]*) is required for a normal functioning of this module, but "
         r"found (?P<pkg>[\w.\-]+)==(?P<have>[\w.+\-]*\w)"),
    lazy(r"The '(?P<req>(?P<pkg>[A-Za-z][\w.\-]*)[^']*)' distribution was not found and is required by"),
]


def _requirement_unmet(scan: Scan) -> Diagnosis | None:
    for ln in scan.lines:
        for rx in REQUIRE_RES:
            m = rx.search(ln.text)
            if m is None:
                continue
            pkg = m.group("pkg")
            if PACKAGES.get(pkg.replace("-", "_"), "install_mismatch") not in ("install_mismatch", "distributed"):
                continue  # transformers, tokenizers, kernel libraries: their areas say more
            have = m.groupdict().get("have")
            state = f"{pkg} {have} is installed" if have else f"{pkg} is not installed"
            return Diagnosis(
                category="install_mismatch", signature="install.version_requirement_unmet",
                title=f"The calling project requires {m.group('req')}, but {state}",
                confidence=0.85, evidence=[Evidence(ln.no, ln.shown)],
                facts={"package": pkg, "requirement": m.group("req"), "installed": have},
                fix=Fix(f"The project that runs {pkg} checks its version at import and supports only "
                        f"{m.group('req')}: install a {pkg} in that range (`pip install '{m.group('req')}'`), or "
                        f"upgrade the project to a release made for the {pkg} you need. Skipping the check (some "
                        "projects read DISABLE_VERSION_CHECK=1) only moves the failure to the first API that differs.",
                        "install-mismatch"),
                first_line=ln.no)
    return None


VERSION_REQUIREMENT_UNMET: Rule = Rule(
    signature="install.version_requirement_unmet", category="install_mismatch",
    title="The calling project requires another version of a package than the installed one", fix="",
    patterns=[r"is required for a normal functioning of this module", r"distribution was not found and is required"],
    playbook="install-mismatch", confidence=0.85, check=lambda scan, env: _requirement_unmet(scan))

ASCEND_DRIVER_MISSING: Rule = Rule(
    signature="environment.ascend_driver_missing", category="environment",
    title="The Ascend NPU driver is not visible to this process ({lib} cannot be loaded)",
    fix="torch_npu needs the host's Ascend driver libraries: in a container mount them read-only with the devices "
        "(`--device /dev/davinci0 --device /dev/davinci_manager --device /dev/devmm_svm --device /dev/hisi_hdc "
        "-v /usr/local/Ascend/driver:/usr/local/Ascend/driver -v /usr/local/dcmi:/usr/local/dcmi "
        "-v /usr/local/bin/npu-smi:/usr/local/bin/npu-smi`); on a host install the NPU driver and firmware and check "
        "`npu-smi info`, then source /usr/local/Ascend/ascend-toolkit/set_env.sh.",
    patterns=[r"(?P<lib>libascend_hal\.so|libdrvdsmi_host\.so)[^:\n]*: cannot open shared object file"],
    playbook="environment", confidence=0.9)

RULES = [VLLM_C_OPTIONAL, AMDSMI_DEVICE_ACCESS, PACKAGE_API_SKEW, VERSION_REQUIREMENT_UNMET, ASCEND_DRIVER_MISSING]
