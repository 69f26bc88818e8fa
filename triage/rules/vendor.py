"""Whose GPU the log comes from: AMD (ROCm/HIP) or NVIDIA (CUDA). Explanations quote each vendor's own limits."""

from __future__ import annotations

from triage.logread.scan import Scan

AMD_SIGNS = ("detected platform rocm", "ROCm", "rocm", "HIP error", "hipError", "gfx90", "gfx94", "gfx95", "gfx11",
             "AMD Instinct", "MI300", "MI250", "MI325", "MI355", "/opt/rocm", "amdsmi")
NVIDIA_SIGNS = ("detected platform cuda", "NVIDIA", "CUDA used to build PyTorch: 1", "nvidia-smi", "+cu1")


def vendor(scan: Scan) -> str | None:
    """'amd', 'nvidia', or None when the log does not say."""
    f = scan.facts
    names = " ".join(str(g.get("name", "")) for g in f.get("gpus") or [] if isinstance(g, dict))
    probe = [names, str(f.get("torch_version") or ""), str((f.get("packages") or {}).get("torch") or "")]
    amd = nvidia = 0
    for t in probe + [ln.text for ln in scan.lines[:4000]]:
        if any(s in t for s in AMD_SIGNS):
            amd += 1
        elif any(s in t for s in NVIDIA_SIGNS):
            nvidia += 1
    if amd and amd >= nvidia:
        return "amd"
    if nvidia:
        return "nvidia"
    return None
