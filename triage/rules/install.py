"""How vLLM and its compiled parts were installed: ABI mismatches, missing extensions."""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="install.undefined_symbol", category="install_mismatch",
         title="A compiled extension does not match the installed torch (undefined symbol in {lib})",
         fix="{lib} was built against another torch (or CUDA) than the one installed: reinstall vLLM in a clean "
             "environment so pip pulls the torch it was built for, or rebuild the extension against this torch.",
         patterns=[r"(?P<lib>[\w./-]*\.so(?:\.\d+)*): undefined symbol: (?P<symbol>\w+)",
                   r"undefined symbol: (?P<symbol>\w+)"],
         playbook="install-mismatch", confidence=0.99),
    Rule(signature="install.vllm_c_missing", category="install_mismatch",
         title="vLLM's compiled extension vllm._C cannot be imported",
         fix="Either Python imports the vllm source folder instead of the installed package (do not run from a "
             "vllm checkout), or the install is broken: reinstall vLLM (`pip install --force-reinstall vllm==<ver>`) "
             "or build it (`pip install -e .` with CUDA).",
         patterns=[r"No module named 'vllm\._C'", r"Failed to import from vllm\._C with ModuleNotFoundError",
                   r"cannot import name '_C' from 'vllm'"],
         playbook="install-mismatch", confidence=0.99),
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
         fix="The CUDA runtime libraries the wheel expects are not installed: install the matching nvidia-* "
             "packages (pip) or CUDA toolkit, or use a wheel built for the CUDA version you have.",
         patterns=[r"(?P<lib>lib(?:cudart|cublas|cublasLt|cudnn|nccl|cusparse|cufft|curand|nvrtc|nvJitLink)\S*\.so[\w.]*): cannot open shared object file"],
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
