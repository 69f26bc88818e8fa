"""vLLM driven by a trainer, an evaluation harness or an inference wrapper (ms-swift, OpenRLHF, TRL, axolotl):
failures the wrapper's way of driving the engine brings, as its users paste them in its tracker.

- The synchronous engine (vllm.LLMEngine, V0's and V1's alike) has never had `encode()` or `generate()`: those
  are the asynchronous engine's (AsyncLLMEngine / V1 AsyncLLM); the sync engine takes `add_request(...,
  PoolingParams/SamplingParams)` and `step()`. A wrapper that calls `engine.encode(...)` on the engine it built
  synchronously (ms-swift's seq_cls inference with vLLM) fails whatever the release: it needs its async engine.
- vLLM 0.8.0-0.8.1's V1 oracle (EngineArgs._is_v1_supported_oracle) refused `--worker-cls` and
  `--worker-extension-cls`: "VLLM_USE_V1=1 is not supported with --worker-extension-cls." when VLLM_USE_V1=1 is
  set, else the warning "... is not supported by the V1 Engine. Falling back to V0." RL frameworks (OpenRLHF,
  TRL, verl) pass a worker extension for weight sync and want V1: 0.8.2+ takes it. The warning alone is a
  working V0 start, so only the raise, or the words quoted without "Falling back" (a title), are this failure.
- A report that retells the V1 engine's missing internals in words ("error claiming model_executor does not
  exist") is api.engine_internals_moved's failure without its AttributeError line.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="api.sync_engine_async_method", category="engine_config",
         title="The code calls {attr}() on vLLM's synchronous LLMEngine, which only the async engine has",
         fix="vLLM's synchronous LLMEngine has no {attr}() in any release (it takes add_request(...) and step()); "
             "{attr}() is AsyncLLMEngine's / AsyncLLM's. Run the wrapper with its async engine (ms-swift: "
             "`--vllm_use_async_engine true`, automatic in ms-swift releases after PR #7301), or call the "
             "offline API (`LLM(...).encode/embed/classify/generate`) instead of the engine directly.",
         patterns=[r"'LLMEngine' object has no attribute '(?P<attr>encode|generate)'"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="install.v1_worker_extension_unsupported", category="install_mismatch",
         title="This vLLM's V1 engine does not take {feature} (added to V1 in 0.8.2)",
         fix="vLLM 0.8.0-0.8.1 run a custom worker class or worker extension only on the V0 engine. The RL "
             "framework passing it (OpenRLHF, TRL, verl weight sync) expects V1: install vLLM 0.8.2 or later "
             "(the release the framework pins, e.g. `pip install vllm==0.8.2`), or unset VLLM_USE_V1 to let it "
             "fall back to V0 where the framework still supports that.",
         patterns=[r"VLLM_USE_V1=1 is not supported with (?P<feature>--worker(?:-extension)?-cls)",
                   # the fallback warning quoted without its "Falling back to V0." (a title): a healthy V0 start
                   # prints the whole sentence on one line
                   r"(?P<feature>worker(?:-extension)?-cls) is not supported by the V1 Engine\.?\s*$"],
         playbook="install-mismatch", confidence=0.8),
    Rule(signature="api.engine_internals_moved_told", category="install_mismatch", stated=True,
         title="The calling code reaches into vLLM engine internals this release does not have ({attr}), as the "
               "report tells it",
         fix="The V1 engine (default from vLLM 0.8) runs the workers in another process, so "
             "llm.llm_engine.{attr} is gone (V1 keeps model_executor only with VLLM_ENABLE_V1_MULTIPROCESSING=0). "
             "Install the vLLM release the calling project pins, or a release of "
             "the project made for this vLLM; on vLLM 0.8-0.10, VLLM_USE_V1=0 brings "
             "back the V0 engine.",
         patterns=[r"\b(?P<attr>model_executor|driver_worker)`? (?:does not|doesn'?t|do not|don'?t) exist"],
         playbook="install-mismatch", confidence=0.6),
]
