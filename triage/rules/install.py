"""How vLLM and its compiled parts were installed: ABI mismatches, missing extensions."""

from __future__ import annotations

import re

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule, next_row_text
from triage.rules.environment import (
    BUILD_SIGNS_RE,
    CPU_INTENT_RE,
    HPU_WORD_RE,
    _other_platform,
    build_explains_no_platform,
    native_windows,
)
from triage.rules.vendor import vendor


def _torch_cuda(scan) -> str | None:
    """torch's CUDA from the log: "+cu118" in its version, or collect-env's "CUDA used to build PyTorch"."""
    f = scan.facts
    for v in (f.get("torch_version"), (f.get("packages") or {}).get("torch")):
        m = re.search(r"\+cu(\d+)(\d)\b", str(v or ""))
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    if f.get("cuda_version"):
        return str(f["cuda_version"])
    for ln in scan.lines:  # a pip line or a path naming torch's build, or the PyTorch index it came from
        m = re.search(r"torch[-=](?:=)?[\d.]+\+cu(\d+)(\d)\b|download\.pytorch\.org/whl/(?:nightly/)?cu(\d+)(\d)\b",
                      ln.text)
        if m:
            major, minor = (m.group(1), m.group(2)) if m.group(1) else (m.group(3), m.group(4))
            return f"{major}.{minor}"
    return None


def _cuda_lib_facts(m, line, scan) -> dict:
    """A CUDA library of one major version is missing: does torch here come from another CUDA?"""
    lib = m.groupdict().get("lib") or ""
    # only these libraries carry the CUDA major version in their soname (cuDNN, cuFFT, cuRAND... do not)
    want = re.search(r"^lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink)\.so\.(\d+)", lib)
    want_major = want.group(1) if want else None
    have = _torch_cuda(scan)
    out: dict = {"lib_cuda_major": int(want_major) if want_major else None, "torch_cuda": have}
    who = "vLLM's compiled extension" if any("/vllm/" in f.file for e in scan.exceptions for f in e.frames) else \
        "A compiled extension"
    if want_major and have and have.split(".")[0] != want_major:
        out["cause"] = "wheel_torch_cuda_mismatch"
        out["advice"] = (f"{who} was built for CUDA {want_major} (it loads {lib}), but torch here is built for CUDA "
                         f"{have}: the vLLM wheel and torch come from different CUDA versions. Install the torch build "
                         f"this vLLM pins (CUDA {want_major}; a clean `pip install vllm==<version>` pulls it), or install "
                         f"the vLLM wheel built for CUDA {have}. Installing a CUDA {want_major} runtime beside a CUDA "
                         f"{have} torch does not fix the mismatch.")
    else:
        out["advice"] = (f"{who} needs {lib}, which is not on the library path: install the CUDA runtime packages the "
                         "wheel expects (pip nvidia-* packages come with torch's CUDA build), or use a vLLM wheel built "
                         "for the CUDA that torch here uses.")
    return out


# On native Windows vllm._C is missing because no Windows build exists: that is the platform rule's case.
VLLM_C_MISSING: Rule = Rule(
    signature="install.vllm_c_missing", category="install_mismatch",
    title="vLLM's compiled extension vllm._C cannot be imported",
    fix="Either Python imports the vllm source folder instead of the installed package (do not run from a "
        "vllm checkout), or the install is broken: reinstall vLLM (`pip install --force-reinstall vllm==<ver>`) "
        "or build it (`pip install -e .` with CUDA).",
    patterns=[r"No module named 'vllm\._C'", r"Failed to import from vllm\._C with ModuleNotFoundError",
              r"cannot import name '_C' from 'vllm'"],
    playbook="install-mismatch", confidence=0.99,
    check=lambda scan, env: None if native_windows(scan) else VLLM_C_MISSING.match_lines(scan))

RULES = [
    Rule(signature="install.undefined_symbol", category="install_mismatch",
         title="A compiled extension does not match the installed torch (undefined symbol in {lib})",
         fix="{lib} was built against another torch (or CUDA) than the one installed: reinstall vLLM in a clean "
             "environment so pip pulls the torch it was built for, or rebuild the extension against this torch.",
         patterns=[r"(?P<lib>[\w./-]*\.so(?:\.\d+)*): undefined symbol: (?P<symbol>\w+)",
                   r"undefined symbol: (?P<symbol>\w+)",
                   # a report retelling it in prose: "an `ImportError` related to an undefined symbol
                   # (`_ZN2at4cuda24getCurrentCUDABlasHandleEv`) in `vllm._C.abi3.so`" (a mangled C++ name only)
                   r"undefined symbol \(?[`'\"]?(?P<symbol>_Z\w+)[`'\"]?\)? (?:in|from) [`'\"]?(?P<lib>[\w./-]*\.so)\b"],
         playbook="install-mismatch", confidence=0.99),
    VLLM_C_MISSING,
    # The install guide's commands assume a current installer: an older uv (clap's wording) or pip (optparse's)
    # stops at the first option it does not know, before anything is installed.
    Rule(signature="install.installer_flag_unknown", category="install_mismatch",
         title="The installer does not know the option {flag}: it is older than the install command it was given",
         fix="{flag} belongs to a newer installer than the one that ran (uv added --torch-backend in 0.6 as a "
             "preview and made it stable in 0.7.14; vLLM's install guide assumes a current uv). Upgrade it and run "
             "the same command again: `uv self update` (or `pip install -U uv` where pip installed it), "
             "`python -m pip install -U pip` for pip. Or drop the option and choose the index by hand "
             "(`--extra-index-url https://download.pytorch.org/whl/cu128` instead of `--torch-backend`).",
         patterns=[r"error: unexpected argument '(?P<flag>--?[A-Za-z][\w-]*)' found",
                   r"^(?:ERROR: )?no such option: (?P<flag>--?[A-Za-z][\w-]*)"],
         # clap (uv) says "unexpected argument", optparse (pip) "no such option": the playbook upgrades that one
         facts=lambda m, line, scan: {"installer": "uv" if "unexpected argument" in m.group(0) else "pip"},
         playbook="install-resolve", confidence=0.8),
    Rule(signature="install.vllm_ops_missing", category="install_mismatch",
         title="vLLM's compiled ops do not match its Python code (op {op} missing)",
         fix="The Python files and the compiled _C extension come from different vLLM versions (a partial "
             "upgrade or a source checkout over a wheel): reinstall one consistent vLLM.",
         patterns=[r"'_OpNamespace' '_C' object has no attribute '(?P<op>\w+)'",
                   r"'_OpNamespace' '(?P<op>(?!_flashmla)\w+)' object has no attribute",
                   r"No such operator _C::(?P<op>\w+)"],
         playbook="install-mismatch", confidence=0.8),
    Rule(signature="install.torchvision_mismatch", category="install_mismatch",
         title="torch and torchvision do not match",
         fix="Install the torchvision release built for the installed torch (same CUDA), e.g. "
             "`pip install torchvision==<matching>` from the same index as torch.",
         patterns=[r"operator torchvision::nms does not exist",
                   r"Detected that PyTorch and torchvision were compiled with different CUDA (?:major )?versions",
                   r"torchvision.{0,40}(?:is not compatible|requires torch)"],
         playbook="install-mismatch", confidence=0.9),
    Rule(signature="install.cuda_runtime_lib_missing", category="install_mismatch",
         title="A CUDA library the build needs is missing ({lib})",
         fix="{advice}", facts=_cuda_lib_facts,
         # (not vLLM 0.4.x's pynccl_utils note "Failed to import NCCL library: libnccl.so.2: cannot open ...": that
         # import error is swallowed; distributed.pynccl_library_unloadable reads what followed it)
         patterns=[r"(?<!Failed to import NCCL library: )(?P<lib>lib(?:cudart|cublas|cublasLt|cudnn|nccl|cusparse|cufft|curand|nvrtc|nvJitLink)\S*\.so[\w.]*): cannot open shared object file",
                   # the same error retold in a title or prose without the loader's words ("fail at import with
                   # `ImportError: libcudart.so.13`")
                   r"ImportError: (?P<lib>lib(?:cudart|cublas|cublasLt|nvrtc|nvJitLink)\.so\.\d+)(?![\w.:])",
                   # vllm/distributed/device_communicators/cuda_wrapper.py finds no libcudart mapped in the process
                   r"(?P<lib>libcudart) is not loaded in the current process, try setting VLLM_CUDART_SO_PATH"],
         playbook="install-mismatch", confidence=0.9),
    # torch.utils.cpp_extension._check_cuda_version: building vLLM (or a kernel extension) from source with an
    # nvcc of another CUDA than the one torch was built with
    Rule(signature="install.build_cuda_mismatch", category="install_mismatch",
         title="Building from source: the CUDA toolkit ({found}) is not the CUDA torch was built with",
         fix="pip fell back to compiling vLLM (or an extension) from source, and torch's extension builder refuses an "
             "nvcc of another CUDA than torch's own. Install a prebuilt vLLM wheel for your CUDA instead (the release's "
             "+cuXXX wheel, with the torch it pins), or install the CUDA toolkit torch was built with and point "
             "CUDA_HOME at it before building.",
         patterns=[r"The detected CUDA version \((?P<found>[\d.]+)\) mismatches the version that was used to compile"],
         playbook="install-mismatch", confidence=0.9),
    Rule(signature="install.glibcxx", category="install_mismatch",
         title="The C++ runtime is older than a compiled extension needs ({what})",
         fix="An extension was built with a newer GCC than this system's libstdc++: install a newer libstdc++ "
             "(conda install -c conda-forge libstdcxx-ng) or use wheels built for this OS.",
         patterns=[r"version `(?P<what>GLIBCXX_[\d.]+|CXXABI_[\d.]+)' not found"],
         playbook="install-mismatch", confidence=0.9),
    # libc itself, unlike libstdc++, comes with the OS: no pip or conda package replaces it under a wheel
    Rule(signature="install.glibc_too_old", category="install_mismatch",
         title="The system's C library is older than a compiled extension needs ({what})",
         fix="A wheel here (often vLLM's own vllm._C) was built on a newer Linux than this one, and the OS's glibc "
             "(`ldd --version`) cannot be upgraded by pip or conda. Run vLLM in its container image "
             "(`docker run --gpus all vllm/vllm-openai ...`) or on a newer OS, install a release whose wheel targets "
             "an older glibc (the manylinux_2_NN tag in the wheel's file name is the glibc it needs), or build vLLM "
             "from source on this machine.",
         patterns=[r"version `(?P<what>GLIBC_[\d.]+)' not found"],
         playbook="install-mismatch", confidence=0.9),
    Rule(signature="install.numpy_abi", category="install_mismatch",
         title="A module compiled for NumPy 1.x is running under NumPy 2",
         fix="Pin numpy<2 in this environment or upgrade the package that was compiled against NumPy 1.x.",
         patterns=[r"A module that was compiled using NumPy 1\.x cannot be run in\s*NumPy 2",
                   r"numpy\.core\.multiarray failed to import",
                   # the explanation above has no error word; the traceback it precedes ends with this
                   r"AttributeError: _ARRAY_API not found"],
         playbook="install-mismatch", confidence=0.8),
    Rule(signature="install.torch_version_pin", category="install_mismatch",
         title="vLLM was built for another torch version ({want})",
         fix="Install the torch version this vLLM release pins (see `pip show vllm` Requires), ideally by "
             "reinstalling vLLM into a clean environment.",
         patterns=[r"vllm .{0,40} requires torch==(?P<want>[\w.+]+), but you have torch (?P<have>[\w.+]+)",
                   r"torch version mismatch.{0,80}"],
         playbook="install-mismatch", confidence=0.75),
]


# NumPy 2's banner: printed (not raised) before the import that fails; a paste often holds only it.
RULES += [
    Rule(signature="install.numpy_abi_banner", category="install_mismatch",
         title="A package compiled against NumPy 1.x is imported under NumPy 2",
         fix="Pin numpy<2 in this environment (`pip install 'numpy<2'`) or upgrade the package that was built "
             "against NumPy 1.x (the traceback under the banner names it).",
         patterns=[r"A module that was compiled using NumPy 1\.x cannot be run in",
                   r"modules must be compiled with NumPy 2\.0",
                   r"numpy\.dtype size changed, may indicate binary incompatibility"],
         # secondary: the error raised under the banner (install.numpy_abi) says the same, when present
         playbook="install-mismatch", confidence=0.8, secondary=True),
]

RULES += [
    Rule(signature="install.core_c_mismatch", category="install_mismatch",
         title="vLLM's compiled core (_core_C) was built for another torch than the one installed",
         fix="vLLM's wheel pins one torch version: reinstall vLLM into a clean environment so pip brings the torch "
             "it was built for (`pip install vllm==X` without installing torch afterwards), or use the "
             "vllm/vllm-openai image.",
         patterns=[r"Tried to instantiate class '_core_C\.\w+', but it does not exist"],
         playbook="install-mismatch", confidence=0.9),
]


# ---- package installers: pip's resolver, uv's solver, conda's -------------------------------------------
# What pip / uv / conda print when the environment cannot hold the versions a package pins. vLLM pins
# torch (and torchvision, xformers, flashinfer...) exactly, so this is how most version mismatches first
# show; the vllm-and-torch pair has a rule of its own above (install.torch_version_pin).

def _conflict_facts(m, line, scan) -> dict:
    """The pinning package and what it wants, from pip's "<pkg> <ver> requires <req>, but you have <have>"."""
    g = m.groupdict()
    out: dict = {}
    for ln in scan.lines:
        mm = PIP_REQUIRES_RE.search(ln.text)
        if mm:
            g = mm.groupdict()
            break
    if g.get("pkg") and g.get("req"):
        out["conflict"] = f"{g['pkg']} {g.get('ver') or ''} requires {g['req'].strip()}".replace("  ", " ")
        if g.get("have"):
            out["conflict"] += f", installed: {g['have'].strip()}"
    out["detail"] = out.get("conflict") or "the installer found no set of versions that satisfies every requirement"
    # Every conflict the installer listed, and whether one of them moves torch (vLLM's exact pin): the guided
    # fix (playbooks/install-resolve.yaml) shows the list and branches on torch.
    # (uv's lines without its tree drawing and its ", we can conclude that" tail)
    listed = [re.split(r",\s*we can conclude", re.sub(r"^[^\w]+", "", ln.text.strip()))[0]
              for ln in scan.lines if PIP_REQUIRES_RE.search(ln.text) or UV_DEPENDS_RE.search(ln.text)]
    if listed:
        out["conflicts"] = listed[:8]
        out["torch_pinned"] = any(re.search(r"\btorch(?:vision|audio)?\b", t) for t in listed)
    out.update(_installer_python(scan))
    return out


# uv's pubgrub report: "Because vllm==0.10.1 depends on torch==2.7.1 and you require torch==2.6.0, ..."
UV_DEPENDS_RE = lazy(r"Because \S+ depends on \S+ and (?:you|your project) requires? ")
# The installer skipped releases for the interpreter's Python (pip's Requires-Python note, uv's report).
PYTHON_REFUSED_RE = lazy(r"require a different python version|requires a different Python|"
                         r"current Python version \([\d.]+\) does not satisfy|requested Python version .{0,40}does not satisfy")
# The Python the installer worked for, as the log says it (uv's "Using Python 3.12.3 environment", a site-packages
# path, pip's "requires a different Python: 3.8.10 not in ...", uv's "current Python version (3.13.0)").
LOG_PYTHON_RE = lazy(r"Using C?Python (\d+\.\d+(?:\.\d+)?)|/python(3\.\d+)/site-packages|"
                     r"requires a different Python: (\d+\.\d+(?:\.\d+)?)|current Python version \((\d+\.\d+(?:\.\d+)?)\)")
# The requirement pip or uv names (pip's Requires-Python note names none; the error after it does).
NAMED_REQ_RE = lazy(r"(?:Could not find a version that satisfies the requirement|No matching distribution found for) "
                    r"(\S+)")


# The Python range a skipped release needs: pip's note lists "<version> Requires-Python <spec>" pairs; pip's
# per-package refusal says "not in '<spec>'"; uv says "does not satisfy Python<spec>".
PYTHON_RANGE_RE = lazy(r"(?P<ver>\d[\w.]*) Requires-Python (?P<spec>[<>=!~][^;]*)|"
                       r"Package '(?P<pkg>[^']+)' requires a different Python: [\d.]+ not in '(?P<spec2>[^']+)'|"
                       r"does not satisfy Python ?(?P<spec3>[<>=!~][^\s,]*(?:,[<>=!~][^\s,]*)*)")


def _installer_python(scan: Scan) -> dict:
    """What the log says of the interpreter the installer worked for: its Python, whether releases were
    skipped for it, and the Python range the skipped releases need."""
    out: dict = {}
    ranges: list[str] = []
    for ln in scan.lines:
        m = LOG_PYTHON_RE.search(ln.text)
        if m and "log_python" not in out:
            out["log_python"] = next(g for g in m.groups() if g)
        if PYTHON_REFUSED_RE.search(ln.text):
            out["python_refused"] = True
            for r in PYTHON_RANGE_RE.finditer(ln.text):
                if r.group("ver"):
                    ranges.append(f"{r.group('ver')} needs Python {r.group('spec').strip()}")
                elif r.group("pkg"):
                    ranges.append(f"{r.group('pkg')} needs Python {r.group('spec2').strip()}")
                else:
                    ranges.append(f"a release it considered needs Python {r.group('spec3')}")
    if ranges:
        out["python_ranges"] = list(dict.fromkeys(ranges))[-6:]  # the newest releases pip lists come last
    return out


def _no_match_facts(m, scan: Scan) -> dict:
    req = m.group("req")
    if not req:
        req = next((mm.group(1) for ln in scan.lines if (mm := NAMED_REQ_RE.search(ln.text))), None)
    # uv writes a requirement with its environment marker inside braces: torch{platform_machine == 'x86_64'}==2.6
    return {"req": re.sub(r"\{[^}]*\}", "", req or "a package").rstrip(",."), **_installer_python(scan)}


PIP_REQUIRES_RE = lazy(r"(?P<pkg>[A-Za-z][\w.\-]*(?:\[[\w,\-]+\])?) (?P<ver>\d[\w.+\-!]*) requires "
                       r"(?P<req>[^,]{1,120}), but you have (?P<have>[^,]{1,120}?) which is incompatible")

# The server came up after the installer's complaint: the conflict did not stop anything.
STARTED_RE = lazy(r"Application startup complete|Uvicorn running on|Starting vLLM API server|Avg prompt throughput")


def unless_started_after(rule: Rule, scan: Scan) -> Diagnosis | None:
    """The rule's match, unless the server came up after the last line it read: then that stopped nothing."""
    d = rule.match_lines(scan)
    if d is None:
        return None
    last = max(e.line for e in d.evidence)
    if any(ln.no > last and STARTED_RE.search(ln.text) for ln in scan.lines):
        return None
    return d


def _dependency_conflict(scan: Scan) -> Diagnosis | None:
    return unless_started_after(DEPENDENCY_CONFLICT, scan)


DEPENDENCY_CONFLICT: Rule = Rule(signature="install.dependency_conflict", category="install_mismatch",
         title="The installer reports conflicting package versions ({detail})",
         fix="Two packages pin versions that cannot coexist (vLLM pins torch and its companions exactly): install "
             "vLLM into a fresh virtual environment first and let it choose torch, then add the other packages "
             "without reinstalling torch; do not install packages vLLM bundles (vllm-flash-attn) separately; with "
             "a vendor image (NGC, vllm-ascend, ROCm) use the vLLM build made for that image.",
         facts=_conflict_facts,
         patterns=[str(PIP_REQUIRES_RE.pattern),
                   # pip's other report of the same (operations/check.py at install time, `pip check`)
                   r"(?P<pkg>[A-Za-z][\w.\-]*(?:\[[\w,\-]+\])?) (?P<ver>\d[\w.+\-!]*) requires (?P<req>.{1,120}?), which "
                   r"is not installed",
                   r"(?P<pkg>[A-Za-z][\w.\-]*) (?P<ver>\d[\w.+\-!]*) has requirement (?P<req>.{1,120}?), but you have "
                   r"(?P<have>.{1,120}?)\.?$",
                   # the same said in a ticket's prose, for vLLM's own pin: "vllm 0.25.1 requires openai 2.25"
                   r"\b(?P<pkg>vllm) (?P<ver>\d[\w.+\-]*) requires (?P<req>[A-Za-z][\w.\-]*(?:\[[\w,\-]+\])? ?"
                   r"(?:[<>=!~]=?)? ?\d[\w.*]*)\s*$",
                   # pip 20.3+ (src/pip/_internal/operations/check.py, resolution/resolvelib/factory.py)
                   r"pip's dependency resolver does not currently take into account all the packages that are installed",
                   r"Cannot install .{1,300} because these package versions have conflicting dependencies",
                   r"ResolutionImpossible",
                   # uv (its pubgrub report), conda and mamba
                   r"No solution found when resolving dependencies", r"your requirements are unsatisfiable",
                   r"we can conclude that .{1,300} (?:are|is) incompatible",
                   r"UnsatisfiableError: The following specifications were found", r"LibMambaUnsatisfiableError",
                   r"Could not solve for environment specs"],
         # secondary: pip prints the conflict and carries on; a failure after it is what stopped the launch
         playbook="install-resolve", confidence=0.7, secondary=True,
         check=lambda scan, env: _dependency_conflict(scan))

RULES += [
    DEPENDENCY_CONFLICT,
    Rule(signature="install.no_matching_distribution", category="install_mismatch",
         title="The installer cannot find {req} for this Python / platform / index",
         fix="No published build of {req} fits this interpreter and index: check the Python version (vLLM wheels "
             "need a Python its release supports, Linux x86_64/aarch64), the index URL (+cuXXX, ROCm, XPU and TPU "
             "builds live on their own indexes; dated nightly pins disappear from them), or pin a released version.",
         patterns=[r"Could not find a version that satisfies the requirement (?P<req>\S+)",
                   r"No matching distribution found for (?P<req>\S+)",
                   # uv: "Because there is no version of torch==2.6.0.dev... and ..."
                   r"Because there is no version of (?P<req>[^\s{]+(?:\{[^}]*\})?\S*)",
                   r"Because (?P<req>\S+) was not found in the package registry",
                   # pip: the release exists, but not for this interpreter (Requires-Python)
                   r"Package '(?P<req>[^']+)' requires a different Python",
                   r"Ignored the following versions that require a different python version(?P<req>)",
                   # a wheel for another OS / CPU / Python (pip), a release without a build for this platform (uv)
                   r"(?P<req>\S+\.whl) is not a supported wheel on this platform",
                   r"Distribution `(?P<req>[^`]+)` can't be installed because it doesn't have a source distribution or "
                   r"wheel for the current platform",
                   # conda
                   r"PackagesNotFoundError: The following packages are not available from current channels(?P<req>)"],
         # uv writes a requirement with its environment marker inside braces: torch{platform_machine == 'x86_64'}==2.6
         facts=lambda m, line, scan: _no_match_facts(m, scan),
         playbook="install-resolve", confidence=0.8),
]


def _platform_build_mismatch(scan: Scan) -> Diagnosis | None:
    """vLLM found no platform, and the same log shows why: this vLLM build cannot run here."""
    hit = build_explains_no_platform(scan)
    if hit is None:
        return None
    failed, sign = hit
    t = sign.text
    if "package was not found" in t:
        what = "vLLM is imported without its package metadata (a source tree or a copied folder, not an installed package)"
        fix = ("vLLM reads its own installed version to pick the platform; here Python imports a vllm folder that pip "
               "never installed (a checkout on PYTHONPATH, a manual copy). Install vLLM as a package (`pip install vllm` "
               "or `pip install -e .` in the checkout, built for this machine's GPU) and run from outside the source tree.")
    elif "TPU device found" in t:
        what = "a TPU machine whose TPU stack (libtpu, torch_xla) this vLLM cannot use"
        fix = ("torch_xla sees the TPU but vLLM's TPU platform did not load: the libtpu / torch_xla (or tpu-inference) "
               "versions in the environment are not the ones this vLLM release pins (a newer nightly breaks it). "
               "Install the TPU requirements of the same vLLM release into a clean environment, or use the "
               "vllm/vllm-tpu image.")
    elif HPU_WORD_RE.search(t) and not BUILD_SIGNS_RE.search(t):
        what = "a Gaudi (HPU) machine without vLLM's Gaudi software"
        fix = ("vLLM recognises Gaudi from its software, not from the devices: the Habana PyTorch bridge "
               "(habana_frameworks) must import and, from vLLM 0.9 on, the vllm-gaudi plugin must be installed (for "
               "older releases, the HabanaAI vllm-fork installed as a package). Work inside the Intel Gaudi PyTorch "
               "container matching the driver (`hl-smi` shows its version), check `python -c 'import "
               "habana_frameworks.torch'`, then install vLLM for Gaudi as the vllm-gaudi docs say (the vllm-gaudi "
               "release with the vLLM it pins, or `pip install -e .` in the fork's checkout).")
    elif CPU_INTENT_RE.search(t) and not BUILD_SIGNS_RE.search(t):
        what = "a run meant for the CPU with a vLLM build that has no CPU backend"
        fix = ("vLLM picks its CPU backend only for a CPU build (its version carries +cpu); the PyPI wheel is a CUDA "
               "build, so without a GPU it finds no platform. Install the CPU build: the CPU wheel or image the docs' CPU "
               "installation page lists for this release, or build it in a vLLM checkout with "
               "`pip install -r requirements/cpu.txt` then `VLLM_TARGET_DEVICE=cpu pip install . --no-build-isolation`.")
    else:
        cuda_on_amd = vendor(scan) == "amd" and re.search(r"libcu|cuda", t, re.I) is not None
        what = ("a CUDA build of vLLM on an AMD (ROCm) machine" if cuda_on_amd
                else "vLLM's compiled extension cannot load on this machine")
        fix = ("The installed vLLM was built for another platform or CUDA than this machine has (its vllm._C fails to "
               "load, so no platform plugin accepts the machine): install the vLLM build for this hardware (the ROCm "
               "build or image on AMD GPUs, the XPU build on Intel, the CPU build without a GPU, the +cuXXX wheel "
               "matching torch's CUDA on NVIDIA) into a clean environment.")
    return Diagnosis(
        category="install_mismatch", signature="install.platform_build_mismatch",
        title=f"vLLM found no platform: {what}",
        confidence=0.92, evidence=[Evidence(sign.no, sign.shown), Evidence(failed.no, failed.shown)],
        facts={"detail": what}, fix=Fix(fix, "install-mismatch"), first_line=min(sign.no, failed.no))


PLATFORM_BUILD_MISMATCH: Rule = Rule(
    signature="install.platform_build_mismatch", category="install_mismatch",
    title="vLLM found no platform: this vLLM build cannot run here", fix="",
    playbook="install-mismatch", confidence=0.92, check=lambda scan, env: _platform_build_mismatch(scan))

RULES += [PLATFORM_BUILD_MISMATCH]


# ---- Python-level API mismatches: code written for another release of torch / numpy / vLLM ---------------
# "cannot import name", "module ... has no attribute", a missing submodule: the importing code and the
# installed package come from different releases (vLLM pins torch exactly; a plugin or a model's remote code
# is built for one vLLM release; NumPy 2 removed aliases). Kernel libraries are kernels.library_api_mismatch's.
# (triton: torch pins one triton release, and triton moves its internals between releases: "cannot import name
# 'AttrsDescriptor' / 'triton_key' from 'triton.compiler.compiler'")
API_MODULES = r"(?:torch|torchvision|torchaudio|xformers|numpy|vllm|pydantic|huggingface_hub|triton)"
# vLLM logs a failed import of its Triton MoE kernels and carries on without them (on other platforms always)
LOGGED_TRITON_KERNELS = "Failed to import Triton kernels"


def _api_facts(m, line, scan) -> dict:
    mod = m.group("mod")
    pkg = mod.split(".")[0]
    name = m.groupdict().get("name") or ""
    what = f"{mod}.{name}" if name else mod
    return {"what": what, "package": pkg}


# a paste that broke the message before "from" ("ImportError:\ncannot import name 'X'\nfrom vllm.a.b"): the
# module is on the next row, without its quotes
SPLIT_NAME_RE = lazy(r"cannot import name '(?P<name>\w+)'\s*$")
SPLIT_FROM_RE = lazy(rf"^from '?(?P<mod>{API_MODULES}(?:\.[\w.]+)?)'?(?:\s|\(|$)")


def _module_api_mismatch(scan: Scan) -> Diagnosis | None:
    d = MODULE_API_MISMATCH.match_lines(scan)
    if d is not None and not all(LOGGED_TRITON_KERNELS in e.text for e in d.evidence):
        return d
    for ln in scan.lines:
        m = SPLIT_NAME_RE.search(ln.text)
        f = SPLIT_FROM_RE.match(next_row_text(scan, ln.no)) if m else None
        if m and f and not re.match(r"vllm\.(?:_|vllm_flash_attn)", f.group("mod")):
            # the message as one line, so that the rule's first pattern reads it
            joined = re.search(MODULE_API_MISMATCH.patterns[0],
                               f"cannot import name '{m.group('name')}' from '{f.group('mod')}'")
            if joined:
                return MODULE_API_MISMATCH.diagnosis(scan, [(ln, joined)])
    return None


MODULE_API_MISMATCH: Rule = Rule(
    signature="install.module_api_mismatch", category="install_mismatch",
         title="The installed {package} does not have {what}: code and package come from different releases",
         fix="The code that imports {what} was written for another {package} release than the one installed: install "
             "the {package} version this vLLM release pins (reinstall vLLM into a clean environment and do not upgrade "
             "torch/numpy afterwards), and use plugins (vllm-ascend, LMCache, ...) built for the same vLLM release; "
             "after a partial upgrade, remove stale vllm files and reinstall.",
         patterns=[rf"cannot import name '(?P<name>\w+)' from '(?!vllm\.(?:_|vllm_flash_attn))(?P<mod>{API_MODULES}(?:\.[\w.]+)?)'",
                   rf"module '(?P<mod>{API_MODULES}(?:\.[\w.]+)?)' has no attribute '(?P<name>\w+)'",
                   # (vllm._C & co are compiled parts, vllm.vllm_flash_attn a kernel: other rules' cases)
                   r"No module named '(?P<mod>(?:torch|torchvision)\.[\w.]+|vllm\.(?!_|vllm_flash_attn)[\w.]+)'"],
         facts=_api_facts, playbook="install-mismatch", confidence=0.8,
         check=lambda scan, env: _module_api_mismatch(scan))
RULES += [MODULE_API_MISMATCH]


# ---- building from source: pip fell back to an sdist (no wheel for this Python/platform) and the build failed ---
KERNEL_PACKAGES = ("flash-attn", "flash_attn", "flashinfer", "deep_gemm", "deep-gemm", "flashmla")


def _build_facts(m, line, scan) -> dict:
    pkg = (m.groupdict().get("pkg") or "").strip("'\",.")
    if not pkg:
        for ln in scan.lines:
            mm = BUILD_PKG_RE.search(ln.text)
            if mm:
                pkg = mm.group("pkg").strip("'\",.")
                break
    return {"pkg": pkg or "a package", "pkg_suffix": f" ({pkg})" if pkg else ""}


BUILD_PKG_RE = lazy(r"(?:Failed building wheel for|Failed to build|Could not build wheels for|"
                    r"Building wheel for) (?P<pkg>[\w.\-]+)")


def _build_failed(scan: Scan) -> Diagnosis | None:
    d = BUILD_FAILED.match_lines(scan)
    if d is None:
        return None
    if any(k in str(d.facts.get("pkg", "")).lower() for k in KERNEL_PACKAGES):
        d.category = "kernel_library"  # a kernel library's own build: that area's playbook fits better
    return d


BUILD_FAILED: Rule = Rule(
    signature="install.build_failed", category="install_mismatch",
    title="Building a package from source failed{pkg_suffix}",
    fix="pip found no prebuilt wheel for this Python / platform / CUDA and compiled {pkg} from source, which failed: "
        "use a Python and platform the release publishes wheels for (vLLM: Linux x86_64/aarch64, its supported "
        "Python versions), install the prebuilt wheel for your CUDA from the project's index, or install the full "
        "toolchain the build needs (CUDA toolkit matching torch's CUDA with CUDA_HOME set, a supported GCC).",
    facts=_build_facts,
    patterns=[r"Failed building wheel for (?P<pkg>[\w.\-]+)", r"Could not build wheels for (?P<pkg>[\w.\-]+)",
              r"Failed to build (?P<pkg>[\w.\-]+)(?: [\w.\-]+)*\s*$",
              # torch.utils.cpp_extension's build of an extension
              r"Error compiling objects for extension(?P<pkg>)",
              # pip 24+ (its summary line), and each build step's own report (pip's and uv's "× ... did not run
              # successfully", the package named only by the step that builds it)
              r"Failed to build installable wheels for some pyproject\.toml based projects \(?(?P<pkg>[\w.\-]+)",
              r"Building (?:wheel|editable) for (?P<pkg>[\w.\-]+) \(pyproject\.toml\) did not run successfully",
              r"(?:Getting requirements to build (?:wheel|editable)|Preparing (?:editable )?metadata \(pyproject\.toml\)|"
              r"pip subprocess to install build dependencies) did not run successfully(?P<pkg>)",
              # uv: "Failed to build `vllm==0.8.5`", "Failed to download and build `vllm @ file:///...`"
              r"Failed to (?:download and )?build `(?P<pkg>[\w.\-]+)"],
    playbook="install-mismatch", confidence=0.7, check=lambda scan, env: _build_failed(scan))

RULES += [BUILD_FAILED]


# xFormers checks at import which torch its C++/CUDA extensions were built against (xformers/_cpp_lib.py) and
# warns, then every memory-efficient attention call fails: the same mismatch as an undefined symbol, said plainly.
RULES += [
    Rule(signature="install.extension_built_for_other_torch", category="install_mismatch",
         title="xFormers was built for another torch ({built}) than the one installed ({have})",
         fix="Install the xFormers release built for the installed torch (same torch and CUDA version; vLLM's "
             "requirements pin a matching pair), or reinstall vLLM into a clean environment so pip brings matching "
             "torch and xformers.",
         patterns=[r"xFormers can't load C\+\+/CUDA extensions\. xFormers was built for:\s*PyTorch (?P<built>\S+)"
                   r"(?: with CUDA \d+)? \(you have (?P<have>[^)]+)\)"],
         playbook="install-mismatch", confidence=0.75),
]


# ---- building from source without a usable CUDA toolkit ------------------------------------------------------
# pip compiles vLLM (or an extension) from source when no wheel fits; the build needs an nvcc, one new enough for
# the GPU. What each build step says when it has none: vLLM's setup.py (get_nvcc_cuda_version asserts CUDA_HOME),
# torch.utils.cpp_extension (_join_cuda_home; _get_cuda_arch_flags for an arch it does not know), CMake's CUDA
# language detection (CMakeDetermineCUDACompiler.cmake), nvcc itself, the shell. The same words at start-up (a JIT
# kernel build) are the kernel rules' case; here the log shows a package build.
TOOLCHAIN_PATTERNS = [r"AssertionError: CUDA_HOME is not set",
                      r"CUDA_HOME environment variable is not set",
                      r"CMake Error at \S*CMakeDetermineCUDACompiler\.cmake",
                      r"Failed to detect a default CUDA architecture",
                      r"No CMAKE_CUDA_COMPILER could be found",
                      r"nvcc not found at '[^']*'",
                      r"\bnvcc: (?:not found|command not found)",
                      r"error: command '\S*nvcc' failed",
                      # too old for the GPU: nvcc, torch's arch list
                      r"nvcc fatal\s*: Unsupported gpu architecture '(?P<arch>compute_\w+)'",
                      r"Unknown CUDA arch \((?P<arch>[\d.]+\+?\w*)\) or GPU not supported"]
# a package build in progress: pip/uv's build steps, setuptools, CMake (vLLM's setup.py drives a CMake build)
BUILD_CONTEXT_RE = lazy(r"Building wheel for|Getting requirements to build|Installing build dependencies|"
                        r"Preparing metadata|Building editable for|pip-build-env|pip-install-|setup\.py|"
                        r"CMake Error|CMakeLists\.txt|running build_ext|pyproject\.toml|vLLM Install|"
                        r"CMAKE_CUDA_COMPILER|CMakeDetermine|AssertionError: CUDA_HOME is not set")


def _toolchain_facts(m, line, scan) -> dict:
    arch = m.groupdict().get("arch")
    if arch:
        return {"problem": f"this CUDA toolkit cannot compile for the GPU's architecture ({arch})",
                "advice": "The nvcc (or torch) used by the build predates this GPU: newer GPUs need a newer CUDA "
                          "toolkit (SM 10.x/12.x, Blackwell: CUDA 12.8 or newer) and a torch built for it. Install "
                          "such a toolkit and point CUDA_HOME at it, or limit the build to the GPUs you have "
                          "(TORCH_CUDA_ARCH_LIST) - better, install the prebuilt wheel for this GPU."}
    return {"problem": "the CUDA toolkit (nvcc) is not found",
            "advice": "Prefer a prebuilt wheel (a Python and platform the release publishes wheels for, the +cuXXX "
                      "wheel matching torch's CUDA, or VLLM_USE_PRECOMPILED=1 for a checkout); to build, install the "
                      "CUDA toolkit of torch's CUDA version and export CUDA_HOME=/usr/local/cuda-X.Y with "
                      "$CUDA_HOME/bin on PATH. Building for another target (ROCm, CPU, TPU, a vendor plugin) needs "
                      "VLLM_TARGET_DEVICE set to it, not CUDA."}


def _build_toolchain(scan: Scan) -> Diagnosis | None:
    d = BUILD_TOOLCHAIN.match_lines(scan)
    if d is None or not any(BUILD_CONTEXT_RE.search(ln.text) for ln in scan.lines):
        return None
    built = next((m.group("pkg") for ln in scan.lines for m in [BUILD_PKG_RE.search(ln.text)] if m), "")
    if any(k in built.lower() for k in KERNEL_PACKAGES):
        d.category = "kernel_library"
    return d


BUILD_TOOLCHAIN: Rule = Rule(
    signature="install.build_toolchain", category="install_mismatch",
    title="Building from source failed: {problem}",
    fix="pip is compiling vLLM (or an extension) from source, which needs a suitable nvcc. {advice}",
    patterns=TOOLCHAIN_PATTERNS, facts=_toolchain_facts, playbook="install-mismatch", confidence=0.9,
    check=lambda scan, env: _build_toolchain(scan))

RULES += [BUILD_TOOLCHAIN]


# ---- a traceback of vLLM's own import, cut before its error -----------------------------------------------
# Every frame is a module being imported (`<module>`, importlib's plumbing, vllm/__init__.py's lazy __getattr__):
# vLLM died while Python loaded it, before any engine code ran. What fails there is the installation (a compiled
# extension built for another torch, torch/torchvision from different builds, a dependency missing or of another
# release); native Windows is the platform rule's case.
IMPORT_FRAMES = {"<module>", "import_module", "_gcd_import", "_find_and_load", "_find_and_load_unlocked",
                 "_load_unlocked", "exec_module", "_call_with_frames_removed", "__getattr__"}
VLLM_FILE_RE = lazy(r"(?:^|/)vllm/")


def _import_cut(scan: Scan) -> Diagnosis | None:
    if native_windows(scan):
        return None
    for tb in scan.cut_tracebacks:
        frames = tb.frames
        # (a line cut mid-word leaves "<module" without its ">")
        if len(frames) < 2 or any(f.func not in IMPORT_FRAMES and f.func != "<module" for f in frames):
            continue
        ours = [f for f in frames if VLLM_FILE_RE.search(f.file.replace("\\", "/"))]
        if len(ours) < 2:
            continue
        last = ours[-1]
        deepest = frames[-1].file.replace("\\", "/").rsplit("/vllm/", 1)[-1]
        if "transformers" in deepest or "transformers_utils" in last.file:
            continue  # a transformers release vLLM cannot import from is the model-support rules' case
        module = re.sub(r"\.py$", "", last.file.replace("\\", "/").rsplit("/vllm/", 1)[-1]).replace("/", ".")
        return Diagnosis(
            category="install_mismatch", signature="install.import_failed_cut",
            title=f"vLLM failed while Python imported it (in vllm.{module}); the error message is cut off",
            confidence=0.55, evidence=[Evidence(tb.line.no, tb.line.shown)],
            facts={"raised_at": f"{last.file}:{last.line}", "phase": "import",
                   "category_guessed_from": "import-time traceback frames (the exception line is cut)"},
            fix=Fix("vLLM died while being imported, before any model or engine code ran; that is almost always the "
                    "installation: a compiled extension built for another torch (undefined symbol), torch and "
                    "torchvision from different builds, a dependency missing or of another release. Run "
                    "`python -c 'import vllm'` in the same environment to see the error, and reinstall vLLM into a "
                    "clean environment with the torch it pins (do not upgrade torch afterwards).", "install-mismatch"),
            first_line=tb.line.no)
    return None


IMPORT_FAILED_CUT: Rule = Rule(
    signature="install.import_failed_cut", category="install_mismatch",
    title="vLLM failed while Python imported it; the error message is cut off", fix="",
    playbook="install-mismatch", confidence=0.55, check=lambda scan, env: _import_cut(scan))

RULES += [IMPORT_FAILED_CUT]



# ---- torch without CUDA on a GPU machine ----------------------------------------------------------------------
# torch.cuda._lazy_init raises "Torch not compiled with CUDA enabled" only when torch was built without CUDA (the
# CPU wheel PyPI serves on some platforms, a CPU index, a dependency that pulled torch+cpu back in). vLLM's platform
# detection found the GPU through NVML, so the GPU is there; torch is the wrong build. On a TPU / XPU / NPU
# machine the same words mean a CUDA-only code path (environment.unsupported_platform), on native Windows the
# platform itself.
CPU_TORCH_RE = lazy(r"torch[-= ]=?=?\s*\d[\w.]*\+cpu\b|PyTorch version\s*:\s*\S+\+cpu\b|"
                    r"CUDA used to build PyTorch\s*:\s*(?:None|Could not collect)")


def _torch_without_cuda(scan: Scan) -> Diagnosis | None:
    d = TORCH_WITHOUT_CUDA.match_lines(scan)
    if d is None or _other_platform(scan) is not None or native_windows(scan):
        return None
    sign = next((ln for ln in scan.lines if CPU_TORCH_RE.search(ln.text)), None)
    if sign is not None:
        d.evidence.append(Evidence(sign.no, sign.shown))
        d.title = "torch here is a CPU-only build (no CUDA), on a machine vLLM runs with CUDA"
    return d


TORCH_WITHOUT_CUDA: Rule = Rule(
    signature="install.torch_without_cuda", category="install_mismatch",
    title="torch here was built without CUDA (a CPU-only torch), so vLLM cannot use the GPU",
    fix="The installed torch is a CPU build: reinstall the CUDA build vLLM pins, from the CUDA index "
        "(`pip install --force-reinstall torch==<the version vllm requires> --index-url "
        "https://download.pytorch.org/whl/cu128`, or reinstall vllm in a fresh environment so it brings its own "
        "torch; with uv, `uv pip install vllm --torch-backend=auto`), and check that no later install pulled "
        "torch+cpu back in (`python -c 'import torch; print(torch.__version__, torch.version.cuda)'`).",
    patterns=[r"Torch not compiled with CUDA enabled"], playbook="install-mismatch", confidence=0.9,
    check=lambda scan, env: _torch_without_cuda(scan))

RULES += [TORCH_WITHOUT_CUDA]


# ---- a package vLLM itself requires is not installed ---------------------------------------------------------
# vLLM's Requires-Dist (the wheel METADATA of every release, 0.6-0.33), by import name. Missing one means a partial
# install (pip --no-deps, a source checkout on PYTHONPATH, an image with a layer left out), not the model or the
# feature. Kernel libraries, triton, transformers, the tokenizer stack, ray, gguf and compressed-tensors keep their
# own areas' rules (a feature that needs them, not vLLM's import).
VLLM_DEPENDENCIES = frozenset({
    "aiohttp", "anthropic", "blake3", "cachetools", "cbor2", "cloudpickle", "cpuinfo", "cv2", "depyf", "diskcache",
    "einops", "fastapi", "filelock", "grpc", "ijson", "importlib_metadata", "jsonschema", "lark", "llguidance",
    "lmformatenforcer", "mcp", "msgspec", "multidict", "numba", "numpy", "openai", "openai_harmony", "opentelemetry",
    "orjson", "outlines", "outlines_core", "partial_json_parser", "PIL", "prometheus_client",
    "prometheus_fastapi_instrumentator", "psutil", "pybase64", "pydantic", "pynvml", "pythonjsonlogger", "regex",
    "requests", "safetensors", "scipy", "setproctitle", "six", "starlette", "torch", "tqdm", "typing_extensions",
    "uvicorn", "watchfiles", "xgrammar", "yaml", "zmq"})
MISSING_MODULE_RE = lazy(r"No module named '?(?P<mod>[\w.]+)'?(?P<rest>;[^\n]*)?")
VLLM_NOT_INSTALLED_RE = lazy(r"(?:^|\s)vllm: (?:command )?not found|No module named '?vllm'?(?:\)|\s*$)|"
                             r"from partially initialized module 'vllm' \(most likely due to a circular import\) "
                             r"\((?P<shadow>[^)]*?vllm\.py)\)|No module named 'vllm\.[\w.]+'; 'vllm' is not a package")


def _dependency_missing(scan: Scan) -> Diagnosis | None:
    for ln in scan.lines:
        if ln.level in ("INFO", "WARNING", "DEBUG"):
            continue  # an optional import logged in passing
        m = VLLM_NOT_INSTALLED_RE.search(ln.text)
        if m:
            shadowed = m.group("shadow") or "is not a package" in ln.text
            what = ("a file or folder named vllm (vllm.py, a vllm checkout) in the working directory or on PYTHONPATH "
                    "hides the installed vLLM" if shadowed else "vLLM is not installed in the Python environment that runs it")
            fix = ("Rename the local vllm.py (and delete its __pycache__) or start from another directory, so that "
                   "`import vllm` finds the installed package." if shadowed else
                   "Activate the environment where vLLM is installed (`which python vllm`; a container's or a "
                   "service's PATH may point elsewhere), or install it there (`pip install vllm` / `uv pip install "
                   "vllm`).")
            return _missing(ln, "vllm", what, fix)
        m = MISSING_MODULE_RE.search(ln.text)
        # the package itself (a missing submodule is another release's API: install.module_api_mismatch), raised
        # (not torch's "Failed to initialize NumPy" warning in a build environment)
        if m and not m.group("rest") and (m.group("mod") in VLLM_DEPENDENCIES or m.group("mod") == "google.protobuf") \
                and "Failed to initialize NumPy" not in ln.text:
            mod = m.group("mod")
            return _missing(ln, mod, f"vLLM's required package {mod.split('.')[0]} is not installed (a partial install)",
                            "A package every vLLM release installs with it is missing: the environment was installed "
                            "with --no-deps, from a source checkout without its requirements, or a later install "
                            "removed it. Reinstall vLLM with its dependencies (`pip install vllm==<version>`, or "
                            "`pip install -r requirements/common.txt` in a checkout) and do not mix environments.")
    return None


def _missing(ln, mod: str, what: str, fix: str) -> Diagnosis:
    return Diagnosis(category="install_mismatch", signature="install.dependency_missing",
                     title=f"Python cannot import {mod}: {what}", confidence=0.85,
                     evidence=[Evidence(ln.no, ln.shown)], facts={"module": mod, "detail": what},
                     fix=Fix(fix, "install-mismatch"), first_line=ln.no)


DEPENDENCY_MISSING: Rule = Rule(
    signature="install.dependency_missing", category="install_mismatch",
    title="Python cannot import a package vLLM needs", fix="", patterns=[r"No module named", r"vllm: (?:command )?not found"],
    playbook="install-mismatch", confidence=0.85, check=lambda scan, env: _dependency_missing(scan))

RULES += [DEPENDENCY_MISSING]
