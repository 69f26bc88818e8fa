"""How vLLM and its compiled parts were installed: ABI mismatches, missing extensions."""

from __future__ import annotations

import re

from triage.rules.base import Rule
from triage.rules.environment import native_windows


def _torch_cuda(scan) -> str | None:
    """torch's CUDA from the log: "+cu118" in its version, or collect-env's "CUDA used to build PyTorch"."""
    f = scan.facts
    for v in (f.get("torch_version"), (f.get("packages") or {}).get("torch")):
        m = re.search(r"\+cu(\d+)(\d)\b", str(v or ""))
        if m:
            return f"{m.group(1)}.{m.group(2)}"
    if f.get("cuda_version"):
        return str(f["cuda_version"])
    for ln in scan.lines:  # a pip line or a path in the traceback naming torch's build
        m = re.search(r"torch[-=](?:=)?[\d.]+\+cu(\d+)(\d)\b", ln.text)
        if m:
            return f"{m.group(1)}.{m.group(2)}"
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
                   r"undefined symbol: (?P<symbol>\w+)"],
         playbook="install-mismatch", confidence=0.99),
    VLLM_C_MISSING,
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
         patterns=[r"(?P<lib>lib(?:cudart|cublas|cublasLt|cudnn|nccl|cusparse|cufft|curand|nvrtc|nvJitLink)\S*\.so[\w.]*): cannot open shared object file",
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
         patterns=[r"version `(?P<what>GLIBCXX_[\d.]+|GLIBC_[\d.]+|CXXABI_[\d.]+)' not found"],
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
