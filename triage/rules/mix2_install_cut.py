"""An undefined symbol quoted with the symbol cut off.

People paste the failing import as `flash_attn_2_cuda....so: undefined symbol:` (the mangled name dropped as
noise, or cut by a narrow terminal). The library and the words are enough: the dynamic loader says this only
when an extension was built against another build of the libraries it links (torch, most often), the same
cause as install.undefined_symbol with its name.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="install.undefined_symbol_cut", category="install_mismatch",
         title="A compiled extension does not match the installed torch ({lib}: undefined symbol)",
         fix="{lib} was built against another torch (or CUDA) than the one installed (installing another package "
             "often swaps torch under it): reinstall it for this torch (for flash-attn, a wheel matching the torch "
             "and CUDA versions, or `pip install flash-attn --no-build-isolation`), or pin torch back.",
         patterns=[r"(?P<lib>[\w./-]*\.so(?:\.\d+)*): undefined symbol:?\s*(?:$|[`'\"]|\s+(?:error|when|while|after))"],
         playbook="install-mismatch", confidence=0.85),
]
