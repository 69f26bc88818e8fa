"""Preflight's other readings of the installed vLLM against the release itself: the quantization methods
it knows and each one's minimum capability (read with `ast`) against QUANTIZATION_METHODS and the config
class's own `get_min_capability()`, and architecture support (read from the registry's text) against
`ModelRegistry.get_supported_archs()`, imported in the real wheel's environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import vllm_envs
from triage.preflight.machine import Machine
from triage.preflight.predict import QUANT_FILES, _min_capability_from_source, quant_methods

RELEASES = ["0.16.0", "0.25.1", "0.33.0"]
ARCHES = ["LlamaForCausalLM", "Qwen3ForCausalLM", "DeepseekV3ForCausalLM", "DeepseekV32ForCausalLM",
          "GlmMoeDsaForCausalLM", "Gemma3ForConditionalGeneration", "GptOssForCausalLM", "Qwen3NextForCausalLM",
          "NoSuchModelForCausalLM"]
ORACLE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import logging, types
import probe
sys.meta_path.insert(0, probe._CompiledVllmModules())
# compressed-tensors logs through loguru, which these environments do not install: a logger stands in
class _Loguru(logging.Logger):
    def enable(self, *a, **k): pass
    def disable(self, *a, **k): pass
    def add(self, *a, **k): return 0
    def remove(self, *a, **k): pass
    def bind(self, *a, **k): return self
    def opt(self, *a, **k): return self
sys.modules.setdefault("loguru", types.ModuleType("loguru"))
sys.modules["loguru"].logger = _Loguru("loguru")
from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS, get_quantization_config
from vllm.model_executor.models.registry import ModelRegistry
methods, arches = json.loads(sys.argv[2]), json.loads(sys.argv[3])
caps = {}
for m in methods:
    try:
        caps[m] = get_quantization_config(m).get_min_capability()
    except Exception as exc:  # a method this release does not have
        caps[m] = f"{type(exc).__name__}"
known = set(ModelRegistry.get_supported_archs())
print("STATIC " + json.dumps({"caps": caps, "arches": {a: a in known for a in arches},
                              "methods": sorted(QUANTIZATION_METHODS)}))
"""


def _oracle(version: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in vllm_envs.release_paths(version)))
    proc = subprocess.run([sys.executable, "-c", ORACLE, os.path.dirname(__file__), json.dumps(sorted(QUANT_FILES)),
                           json.dumps(ARCHES)], env=env, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("STATIC ")]
    assert lines, proc.stderr[-3000:]
    return json.loads(lines[-1][len("STATIC "):])


@pytest.mark.parametrize("version", RELEASES)
def test_quantization_capabilities_and_architectures_read_from_source(version):
    want = _oracle(version)
    m = Machine(site_dirs=[str(p) for p in vllm_envs.release_paths(version)])
    read = {meth: _min_capability_from_source(m, meth) for meth in QUANT_FILES}
    decided = {meth: cap for meth, cap in read.items() if cap is not None and isinstance(want["caps"][meth], int)}
    wrong = {meth: (cap, want["caps"][meth]) for meth, cap in decided.items() if cap != want["caps"][meth]}
    print(f"\nvLLM {version}: {len(decided) - len(wrong)}/{len(decided)} minimum capabilities read from source agree "
          f"(table for {sorted(set(read) - set(decided))})")
    assert not wrong, f"(read, vLLM's) {wrong}"
    assert len(decided) >= 5
    assert quant_methods(m) == set(want["methods"])
    registry = m.source("vllm/model_executor/models/registry.py") or ""
    for arch, known in want["arches"].items():
        assert (f'"{arch}"' in registry) == known, arch
