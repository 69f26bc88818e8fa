"""Preflight's attention-backend prediction against vLLM's own selector, release by release.

For a grid of layer shapes (head sizes, MLA, DSA sparse MLA, sinks, sliding window), dtypes, kv-cache
dtypes, block sizes and compute capabilities, the real wheel's `CudaPlatform.get_valid_backends` runs
with the device capability mocked (selector_oracle.py), and preflight reads the same release's files
(triage.preflight.selector, which never imports vLLM). Both must name the same valid backends in the
same order and the same reasons, word for word, for every backend they turn away.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_envs
from triage.preflight.selector import SelectorUnreadable, SourceSelector

HERE = Path(__file__).resolve().parent
RELEASES = ["0.16.0", "0.25.1", "0.28.0", "0.33.0"]
CAPABILITIES = [[8, 0], [8, 9], [9, 0], [10, 0], [12, 0]]
MLA_CONFIG = {"kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
# (label, selector fields, heads per GPU, the model config the backends may consult)
SHAPES = [
    ("llama-128", {"head_size": 128}, 32, {}),
    ("gemma-256", {"head_size": 256}, 8, {}),
    ("phi-80", {"head_size": 80}, 32, {}),
    ("gpt-oss-64-sinks", {"head_size": 64, "has_sink": True}, 64, {}),
    ("gemma-sliding", {"head_size": 128, "has_sliding_window": True}, 16, {}),
    ("deepseek-v3-mla", {"head_size": 576, "use_mla": True}, 16, MLA_CONFIG),
    ("deepseek-v3.2-dsa", {"head_size": 576, "use_mla": True, "use_sparse": True}, 128,
     dict(MLA_CONFIG, index_topk=2048)),
    ("glm-5-dsa-tp8", {"head_size": 576, "use_mla": True, "use_sparse": True}, 8,
     dict(MLA_CONFIG, index_topk=2048, qk_nope_head_dim=192)),
]


def grid() -> list[dict]:
    cases = []
    for label, shape, heads, hf in SHAPES:
        kvs = ["auto", "fp8"] + (["fp8_ds_mla"] if shape.get("use_sparse") else [])
        for cap in CAPABILITIES:
            for dtype in ("float16", "bfloat16"):
                for kv in kvs:
                    for block in (None, 16, 64):
                        sel = {"head_size": 0, "dtype": dtype, "kv_cache_dtype": kv, "block_size": block, **shape}
                        cases.append({"label": label, "capability": cap, "selector": sel, "num_heads": heads,
                                      "hf_config": hf})
    return cases


def release_env(version: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(str(p) for p in vllm_envs.release_paths(version))
    env.pop("VLLM_PLUGINS", None)
    return env


def oracle(version: str, cases: list[dict]) -> list[dict]:
    proc = subprocess.run([sys.executable, str(HERE / "selector_oracle.py")], input=json.dumps(cases),
                          env=release_env(version), capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("ORACLE ")]
    assert lines, f"the oracle printed nothing (rc {proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(lines[-1][len("ORACLE "):])


_SELECTORS: dict[str, SourceSelector] = {}


def predicted(version: str, case: dict) -> dict:
    if version not in _SELECTORS:  # one per release, as vLLM imports its modules once per process
        sites = [str(p) for p in vllm_envs.release_paths(version)] + [vllm_envs.outer_site_packages()]
        _SELECTORS[version] = SourceSelector(sites)
    try:
        s = _SELECTORS[version].select(tuple(case["capability"]), case["selector"], num_heads=case["num_heads"],
                                       hf_config=case["hf_config"])
    except SelectorUnreadable as exc:
        return {"unreadable": str(exc)}
    if s.error:
        return {"error": s.error}
    out = {"valid": s.valid, "invalid": s.invalid}
    if s.undecided:
        out["undecided"] = s.undecided
    return out


def _same(want: dict, got: dict) -> bool:
    if "error" in want or "error" in got:
        return want.get("error", "").split(":")[0] == got.get("error", "").split(":")[0]
    return got == want


@pytest.mark.parametrize("version", RELEASES)
def test_backend_prediction_agrees_with_vllms_selector(version):
    cases = grid()
    want = oracle(version, cases)
    assert len(want) == len(cases)
    # the grid asks real questions: several backends win somewhere, and some layers have none
    chosen = {w["valid"][0] for w in want if w.get("valid")}
    assert len(chosen) >= 5 and any(w.get("valid") == [] for w in want), chosen
    bad = []
    for case, w in zip(cases, want):
        g = predicted(version, case)
        if not _same(w, g):
            bad.append((case, w, g))
    agree = len(cases) - len(bad)
    print(f"\nvLLM {version}: preflight agrees with vLLM's selector on {agree}/{len(cases)} cases "
          f"({100 * agree / len(cases):.1f}%)")
    detail = "\n".join(f"{c['label']} cc{c['capability']} {c['selector']}\n  vLLM:      {w}\n  preflight: {g}"
                       for c, w, g in bad[:8])
    assert not bad, f"vLLM {version}: {len(bad)} of {len(cases)} cases disagree:\n{detail}"
