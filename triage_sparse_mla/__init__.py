"""triage_sparse_mla: a sparse MLA (DSA) attention backend for vLLM, in Triton.

For GPUs without FlashMLA-sparse (SM120/SM121, SM80/86/89): DeepSeek-V3.2, GLM-5. Installed into
vLLM's environment as a `vllm.general_plugins` plugin (triage_sparse_mla.plugin:register) and
selected with `--attention-backend CUSTOM`.

Importing this package is cheap: torch and triton load only when the kernel is first used, because
vLLM loads general plugins in every process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:  # pragma: no cover
    from .kernel import sparse_mla_fwd as sparse_mla_fwd


def __getattr__(name: str) -> Any:
    if name == "sparse_mla_fwd":
        from .kernel import sparse_mla_fwd

        return sparse_mla_fwd
    if name == "sparse_mla_ref":
        from .reference import sparse_mla_ref

        return sparse_mla_ref
    raise AttributeError(f"module 'triage_sparse_mla' has no attribute {name!r}")


__all__ = ["sparse_mla_fwd", "sparse_mla_ref", "__version__"]
