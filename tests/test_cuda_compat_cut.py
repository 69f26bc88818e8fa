"""CUDA's Error 803/804 (compat libraries, forward compatibility) read when the message is cut short, as a ticket
title or a terminal row cuts it: the walk then reaches its own remedy instead of a generic guess."""

from __future__ import annotations

import pytest

from triage import diagnose as dg
from triage.logread.scan import scan_text


@pytest.mark.parametrize("line", [
    "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
    "NumCudaDevices() that might have already set an error? Error 804: forward compatibility was att",
    "RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before calling "
    "NumCudaDevices() that might have already set an error? Error 803: system has unsupported display dri",
])
def test_cut_compat_error(line: str) -> None:
    ds, _ = dg.diagnose(scan_text(line + "\n"))
    assert ds and ds[0].signature == "cuda.error_803_compat"


def test_other_cuda_errors_stay_apart() -> None:
    ds, _ = dg.diagnose(scan_text("RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not "
                                  "yet initialized\n"))
    assert ds and ds[0].signature != "cuda.error_803_compat"
