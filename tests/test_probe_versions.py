"""triage.versions.decode_vllm_version: every version form vLLM's build produces."""

import pytest

from triage.versions import cuda_from_tag, decode_vllm_version


@pytest.mark.parametrize("s,kind,base,dev,after,commit,cuda", [
    ("0.11.0", "release", "0.11.0", None, None, None, None),
    ("v0.10.1.1", "release", "0.10.1.1", None, None, None, None),
    ("0.11.0+cu126", "release", "0.11.0", None, None, None, "12.6"),
    ("0.16.0rc2", "rc", "0.16.0rc2", None, None, None, None),
    ("0.16.0rc2.dev313+g662205d34", "nightly", "0.16.0rc2", 313, "v0.16.0rc1", "662205d34", None),
    ("0.11.1rc6.dev16+g933cdea44.cu129", "nightly", "0.11.1rc6", 16, "v0.11.1rc5", "933cdea44", "12.9"),
    ("0.16.1rc1.dev265+gd106bf39f", "nightly", "0.16.1rc1", 265, "v0.16.1rc0", "d106bf39f", None),
    ("0.7.1.dev44+gbd2107e3.d20250131", "dev", "0.7.1", 44, "v0.7.0", "bd2107e3", None),
    ("0.1.dev20051+g487ecf187", "dev", "0.1", 20051, None, "487ecf187", None),
    ("0.13.0+faa43dbf.nv26.01", "ngc", "0.13.0", None, None, "faa43dbf", None),
    ("0.11.0+precompiled", "local", "0.11.0", None, None, None, None),
])
def test_decode_forms(s, kind, base, dev, after, commit, cuda):
    d = decode_vllm_version(s)
    assert (d["kind"], d["base"], d["dev_commits"], d["after_tag"], d["commit"], d["cuda"]) == (
        kind, base, dev, after, commit, cuda)
    assert d["summary"]


def test_decode_details():
    d = decode_vllm_version("0.7.1.dev44+gbd2107e3.d20250131")
    assert d["dirty_date"] == "2025-01-31" and "uncommitted" in d["summary"]
    assert decode_vllm_version("0.13.0+faa43dbf.nv26.01")["ngc_release"] == "26.01"
    assert decode_vllm_version("0.11.0+precompiled")["precompiled"] is True
    assert decode_vllm_version("0.9.2+cpu")["platform"] == "cpu"
    n = decode_vllm_version("0.16.0rc2.dev313+g662205d34")
    assert "313 commits after v0.16.0rc1" in n["summary"] and "662205d34" in n["summary"]


@pytest.mark.parametrize("s", ["", "garbage", "0.x", "dev"])
def test_decode_odd(s):
    d = decode_vllm_version(s)
    assert d["kind"] in ("unknown", "dev")


def test_cuda_from_tag():
    assert cuda_from_tag("cu129") == "12.9"
    assert cuda_from_tag("cu130") == "13.0"
    assert cuda_from_tag("cu118") == "11.8"
    assert cuda_from_tag("rocm6") is None
