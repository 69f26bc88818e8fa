"""The vLLM plugin's registration, against a stand-in of vLLM's registry code (see
sparse_mla_fake_vllm.py for the commits it mirrors). Each case runs in a fresh interpreter so that
a different `vllm` can be on the path each time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from sparse_mla_fake_vllm import make_fake_vllm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASS_PATH = "triage_sparse_mla.backend.TriageSparseMLABackend"

PROBE = textwrap.dedent(
    """
    import json, logging, sys
    records = []
    class H(logging.Handler):
        def emit(self, r):
            records.append(r.getMessage())
    logging.getLogger().addHandler(H()); logging.getLogger().setLevel(logging.DEBUG)
    from triage_sparse_mla import plugin
    first = plugin.register()
    second = plugin.register()
    res = {"first": first, "second": second, "logs": list(records),
           "torch": "torch" in sys.modules, "triton": "triton" in sys.modules}
    plugin._reset_for_tests()
    res["after_reset"] = plugin.register()
    reg = None
    for name in ("vllm.v1.attention.backends.registry", "vllm.attention.backends.registry"):
        try:
            reg = __import__(name, fromlist=["x"]); break
        except ImportError:
            pass
    if reg is not None:
        E = reg.AttentionBackendEnum
        res["overrides"] = {k.name: v for k, v in reg._ATTN_OVERRIDES.items()}
        res["custom_is"] = E.__members__["CUSTOM"].name
    print("RESULT" + json.dumps(res))
    """
)


def run_py(code: str, site: str | None, extra_env: dict[str, str] | None = None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, ROOT) if p)
    env.pop("VLLM_PLUGINS", None)
    env.update(extra_env or {})
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")][-1]
    return json.loads(line[len("RESULT"):])


@pytest.mark.parametrize("version,layout", [("0.20.1", "v1"), ("0.32.0rc1.dev5+g1234abc", "v1"),
                                            ("0.16.0rc2.dev313+g662205d34", "v1")])
def test_registers_custom_in_supported_versions(tmp_path, version, layout):
    make_fake_vllm(str(tmp_path), version, layout=layout)
    res = run_py(PROBE, str(tmp_path))
    assert res["first"] == "registered" and res["second"] == "registered"
    assert res["after_reset"] == "already registered"  # idempotent across repeated loads
    assert res["overrides"] == {"CUSTOM": CLASS_PATH}  # TORCH_SDPA untouched
    assert len(res["logs"]) == 1 and "--attention-backend CUSTOM" in res["logs"][0]
    assert not res["torch"] and not res["triton"], "register() must stay cheap: no torch/triton import"


@pytest.mark.parametrize(
    "version,custom,expect",
    [
        ("0.13.0", '""', "older than 0.16"),
        ("0.15.1", "None", "older than 0.16"),
        ("0.20.0", '""', "aliased"),  # in range by number, but the slot aliases TORCH_SDPA
        ("0.45.0", "None", "newer than the releases"),
        ("banana", "None", "cannot read the vLLM version"),
    ],
)
def test_gated_versions_log_one_line_and_do_nothing(tmp_path, version, custom, expect):
    make_fake_vllm(str(tmp_path), version, custom=custom)
    res = run_py(PROBE, str(tmp_path))
    assert res["first"].startswith("skipped") and expect in res["first"]
    assert res["overrides"] == {}
    assert len(res["logs"]) == 1 and expect in res["logs"][0]
    if custom == '""':
        assert res["custom_is"] == "TORCH_SDPA"  # Enum made it an alias: the bug being guarded


def test_no_vllm_installed(tmp_path):
    res = run_py(PROBE, str(tmp_path))
    assert res["first"] == "skipped: vLLM is not installed in this environment"
    assert len(res["logs"]) == 1


def test_vllm_without_forward_mqa_layer(tmp_path):
    make_fake_vllm(str(tmp_path), "0.16.0", mla_layer=False)
    res = run_py(PROBE, str(tmp_path))
    assert "forward_mqa" in res["first"] and res["overrides"] == {}


def test_does_not_replace_another_custom_backend(tmp_path):
    make_fake_vllm(str(tmp_path), "0.20.0")
    code = (
        "from vllm.v1.attention.backends.registry import register_backend, AttentionBackendEnum as E\n"
        "register_backend(E.CUSTOM, 'other.plugin.Backend')\n" + PROBE
    )
    res = run_py(code, str(tmp_path))
    assert "already holds other.plugin.Backend" in res["first"]
    assert res["overrides"] == {"CUSTOM": "other.plugin.Backend"}


BACKEND_PROBE = textwrap.dedent(
    """
    import json, torch
    from triage_sparse_mla import plugin
    assert plugin.register() == "registered"
    from vllm.v1.attention.backends.registry import AttentionBackendEnum as E
    from vllm.v1.attention.backend import CommonAttentionMetadata
    cls = E.CUSTOM.get_class()
    res = {"name": cls.get_name(), "lookup": E[cls.get_name()].name}

    class Cap:
        def __init__(self, major, minor): self.major, self.minor = major, minor

    def reasons(head=576, dtype=torch.bfloat16, kv="auto", block=64, mla=True, sparse=True, cap=(12, 0)):
        return cls.validate_configuration(head, dtype, kv, block, mla, False, sparse, False, False,
                                          Cap(*cap), "decoder")
    res["ok_sm120"] = reasons()
    res["ok_fp16_fp8"] = reasons(dtype=torch.float16, kv="fp8_ds_mla")
    res["nope512_fp8"] = reasons(head=512, kv="fp8_ds_mla")
    res["dense"] = reasons(sparse=False)
    res["sm75"] = reasons(cap=(7, 5))
    res["fp8_e4m3"] = reasons(kv="fp8_e4m3")
    res["block16"] = reasons(block=16)
    res["shape"] = list(cls.get_kv_cache_shape(10, 64, 1, 576, "fp8_ds_mla"))

    # Glue end to end on the CPU (Triton interpreter): builder -> converter -> kernel.
    from types import SimpleNamespace as NS
    from triage_sparse_mla.reference import sparse_mla_ref
    torch.manual_seed(0)
    B, nb, H, K = 64, 5, 16, 40
    cfg = NS(model_config=NS(hf_text_config=NS(index_topk=K)),
             scheduler_config=NS(max_num_batched_tokens=32))
    builder = cls.get_builder_cls()(NS(block_size=B), ["layer.0"], cfg, torch.device("cpu"))
    qsl = torch.tensor([0, 1, 4], dtype=torch.int32)  # request 0: 1 token (decode), request 1: 3 (prefill)
    table = torch.tensor([[3, 0], [1, 4]], dtype=torch.int32)
    cm = CommonAttentionMetadata(qsl, qsl, torch.tensor([70, 100]), 2, 4, 3, 100, table,
                                 torch.zeros(4, dtype=torch.int64))
    md = builder.build(0, cm)
    res["num_decode_tokens"] = md.num_decode_tokens
    res["req_ids"] = md.req_id_per_token.tolist()
    topk = torch.randint(0, 70, (32, K), dtype=torch.int32)
    topk[:, 30:] = -1
    impl = cls.get_impl_cls()(H, 576, 0.0625, 1, None, None, "auto", None, "decoder", None,
                              indexer=NS(topk_indices_buffer=topk), kv_lora_rank=512)
    cache = torch.randn(nb, B, 576).to(torch.bfloat16)
    ql = torch.randn(4, H, 512).to(torch.bfloat16); qp = torch.randn(4, H, 64).to(torch.bfloat16)
    out, lse = impl.forward_mqa((ql, qp), cache, md, None)
    # Expected: convert by hand, then the reference on the flat cache.
    glob = torch.full((4, K), -1, dtype=torch.int32)
    for t, r in enumerate([0, 1, 1, 1]):
        for j in range(K):
            p = int(topk[t, j])
            if p >= 0:
                glob[t, j] = int(table[r, p // B]) * B + p % B
    ref, _ = sparse_mla_ref(torch.cat([ql, qp], -1), cache.reshape(-1, 576), glob, 0.0625,
                            out_dtype=torch.float32)
    res["err"] = (out.float() - ref).abs().max().item()
    res["lse"] = lse
    print("RESULT" + json.dumps(res))
    """
)


def test_backend_class_through_the_registry(tmp_path):
    make_fake_vllm(str(tmp_path), "0.22.1")
    res = run_py(BACKEND_PROBE, str(tmp_path), {"TRITON_INTERPRET": "1"})
    assert res["name"] == "CUSTOM" and res["lookup"] == "CUSTOM"
    assert res["ok_sm120"] == [] and res["ok_fp16_fp8"] == []
    assert res["nope512_fp8"] == ["fp8_ds_mla needs head size 576"]
    assert res["dense"] == ["non-sparse not supported"]
    assert res["sm75"] == ["compute capability not supported"]
    assert res["fp8_e4m3"] == ["kv_cache_dtype not supported"]
    assert res["block16"] == ["block_size not supported"]
    assert res["shape"] == [10, 64, 656]
    assert res["num_decode_tokens"] == 4 and res["req_ids"] == [0, 1, 1, 1]
    assert res["err"] < 2e-2 and res["lse"] is None


def test_support_facts():
    from triage_sparse_mla import support

    assert support.vllm_supported("0.16.0")[0] and support.vllm_supported("0.33.9")[0]
    assert not support.vllm_supported("0.15.1")[0] and not support.vllm_supported("0.34.0")[0]
    assert support.parse_version("0.13.0+faa43dbf.nv26.01") == (0, 13, 0)
    assert support.indexer_note((9, 0)) is None and support.indexer_note((10, 0)) is None
    assert "DeepGEMM" in support.indexer_note((12, 0))
    assert support.LAUNCH_FLAG == "--attention-backend CUSTOM"
