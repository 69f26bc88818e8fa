"""triage.lazyre: a pattern's needles (checked before it is compiled or run) must never hide a match."""

import importlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from conftest import SHARED

from triage.lazyre import LazyPattern, lazy
from triage.logread.normalize import parse

TESTS = Path(__file__).parent
MODULES = ["triage.logread.normalize", "triage.logread.traceback", "triage.logread.extract",
           "triage.upstream.redact", "triage.upstream.facets", "triage.upstream.query"]


# Lines the fixture logs lack, so that every pattern meets at least one text it matches.
SAMPLES = [
    "PyTorch version: 2.9.0+cu128", "Python version: 3.12.3 (main, Aug 14 2025)", "  Python version : 3.12",
    "Nvidia driver version: 575.57.08", "| NVIDIA-SMI 575.57.08  Driver Version: 575.57.08  CUDA Version: 12.9 |",
    "CUDA used to build PyTorch: 12.8", "OS: Ubuntu 24.04.1 LTS (x86_64)", "[pip3] torch==2.9.0",
    "[conda] numpy                     1.26.4", "[pip] vllm 0.11.0", "vLLM Version: 0.11.0",
    "Initializing a V1 LLM engine (v0.10.1) with config", "Starting vLLM version 0.11.0 ...",
    "   version 0.16.1rc1.dev265+gd106bf39f", "Model architectures ['Qwen3ForCausalLM'] are not supported",
    "PretrainedConfig(architectures=['GlmMoeDsaForCausalLM'], ...)",
    "capability DeviceCapability(major=12, minor=0) is not supported",
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1234)", "Current capability: 120",
    "export X=ghp_" + "a" * 36, "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "hf_" + "Z" * 34,
    "sk-proj-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP", "xoxb-1234567890-abc", "eyJhbGciOiJI.eyJzdWIiOiIx.SflKxwRJSMeKKF2",
    "Authorization: Bearer abcdef0123456789abcdef", "HF_TOKEN=s3cr3tvalue python x.py", "api_key: 'x'",
    "alice@example.com on gpu-node-17 (10.1.2.3:8000, fe80:0:0:0:1:2:3:4) node gpu-node-17.corp.example.com",
    "peer 2001:db8::7 and fe80::1ff:fe23:4567:890a", "/root/.cache/huggingface", "/home/alice/x",
    "DeepSeek-V4 and DeepSeek V3.2 and DeepseekV32ForCausalLM", "Kimi-K2 / Moonlight", "Qwen3-235B and Qwen2.5",
    "Llama-3.1", "Mixtral-8x7B", "gpt-oss-120b", "MiniMax-M2", "gemma-3", "GLM-4.5 and glm5", "DeepSeek-R1", "DeepSeek-V2",
    "RTX PRO 6000 Blackwell on a DGX Spark", "deep_gemm failed", "triton compile failed: ptxas", "FlashMLA",
    "flashinfer JIT", "AssertionError: x", "repo:vllm-project/vllm (SM120 OR Blackwell) NOT cpu", "backend FLASHINFER_MLA_SPARSE failed",
    "https://bob:pw@pypi.internal.acme.io/simple", r"C:\Users\me\venv\Lib\site-packages\vllm\x.py",
]


def _patterns():
    for name in MODULES:
        mod = importlib.import_module(name)
        for attr, value in vars(mod).items():
            items = value if isinstance(value, list) else [value]
            for item in items:
                for x in (item if isinstance(item, tuple) else (item,)):
                    if isinstance(x, LazyPattern) and x.needles:
                        yield f"{name}.{attr}", x


def _texts():
    texts = set()
    for p in (TESTS / "logs").rglob("*.log"):
        for i, raw in enumerate(p.read_bytes().splitlines(), 1):
            ln = parse(i, raw)
            texts.update((ln.text, ln.shown, ln.text.strip()))
    for row in (SHARED / "dev-cases" / "cases.jsonl").read_text().splitlines():
        log = json.loads(row).get("log") or ""
        for i, raw in enumerate(log.splitlines(), 1):
            ln = parse(i, raw)
            texts.update((ln.text, ln.shown, ln.text.strip()))
    texts.update(SAMPLES)
    return texts


def test_needles_never_hide_a_match():
    texts = _texts()
    for where, lp in _patterns():
        rx = re.compile(lp.pattern, lp.flags)
        hits = [t for t in texts if rx.search(t)]
        assert hits, f"{where}: no test text matches {lp.pattern!r}; add one to SAMPLES"
        for t in hits:
            assert not lp.cannot_match(t), (where, lp.pattern, t)


def test_no_needle_answers_without_compiling():
    lp = lazy(r"hf_[A-Za-z0-9]{20,}", needles=("hf_",))
    assert lp.search("nothing here") is None and lp.sub("x", "plain") == "plain"
    assert lp.findall("plain") == [] and list(lp.finditer("plain")) == [] and lp.subn("x", "a") == ("a", 0)
    assert lp._rx is None  # never compiled
    assert lp.sub("<t>", "key hf_" + "a" * 24) == "key <t>"


@pytest.mark.parametrize("text", ["MY_TOKEN=abc", "my_token=abc", "\u212aEY_TOKEN=1", "\u017fecret: x", "Secret=1"])
def test_case_insensitive_needles_match_as_the_regex(text):
    lp = lazy(r"(?i)\b(?:[A-Z_]*(?:TOKEN|SECRET))\s*[=:]", needles=("token", "secret"))
    assert (lp.search(text) is not None) == (re.search(lp.pattern, text) is not None)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(["FLASH_ATTN", "_MLA", "_SPARSE", "FLASHINFER", "X", " ", ",", "é", "[", "TORCH_SDPA",
                                 "ROCM_AITER_FA", "1"]), max_size=12))
def test_backends_in_is_the_regex(parts):
    from triage.upstream.facets import BACKEND_RE, backends_in

    text = "".join(parts)
    assert backends_in(text) == set(re.findall(BACKEND_RE.pattern, text))
