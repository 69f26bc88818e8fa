"""Failures of vLLM's offline Python API, of `vllm bench`, and of vLLM's torch.compile cache.

SamplingParams checks its fields when it is built (`_verify_args`: "max_tokens must be at least 1, got 0.",
"top_p must be in (0, 1], got 1.5.", ...; later releases raise them as VLLMValidationError, a ValueError
with the same words). A caller that computes max_tokens as max_model_len minus the prompt (ms-swift, verl
agent loops) gets 0 or less once the prompt fills the context.

Code calling the Python API is written against one release: LLM.generate lost its `prompt_token_ids=`
keyword in 0.10.2 (the prompts now carry it: `{"prompt_token_ids": ids}`), and a caller that unpacks
something else than a dict into `SamplingParams(**...)` (lm-eval's VLM backend after its
modify_gen_kwargs change) fails in the caller's frame; code that reaches into the engine's internals
(llm.llm_engine.model_executor.driver_worker...) breaks when a release moves them (V1 runs the workers in
another process). All are versions that do not match, not settings.

`vllm bench serve` sends one test request first and raises "Initial test run failed - Please make sure
benchmark arguments are correctly specified. Error: <HTTP reason>" (Not Found: the --model name is not
what the server serves, or the endpoint path is wrong); its random dataset refuses a --random-input-len
that leaves no token once the tokenizer's special tokens are counted.

vLLM keeps compiled graphs in ~/.cache/vllm/torch_compile_cache (or compilation_config.cache_dir). A
previous compile that failed half-way leaves an artifact without its hash ("failed to get the hash of the
compiled graph" up to 0.9.0, "vLLM failed to compile the model. The most likely reason ... corrupted
compilation artifact" since), and a cached graph from another build or model shape fails when torch's
standalone_compile runs it (CacheCompiledArtifact). Clearing the cache shows or removes the real error.

vLLM starts its engine core and workers with multiprocessing's spawn method (forced once CUDA is initialised,
the default in V1 scripts): the child re-imports the main module, so a script that builds LLM(...) at top level
builds it again inside the child, whose proc.start() then refuses ("An attempt has been made to start a new
process before the current process has finished its bootstrapping phase"). A paste cut right after
proc.start() -> popen_spawn_*.py is that start failing; the message is mostly the bootstrapping one.
"""

from __future__ import annotations

from typing import Any

from triage.logread.scan import Scan
from triage.model import Diagnosis, Evidence, Fix
from triage.rules.base import Rule

_CLEAR_CACHE = ("Remove the compile cache (`rm -rf ~/.cache/vllm/torch_compile_cache`, or the cache_dir set in "
                "--compilation-config / under VLLM_CACHE_ROOT) and start again: a real compile error then shows "
                "itself. Instances sharing one cache directory should each get their own (VLLM_CACHE_ROOT), or set "
                "VLLM_DISABLE_COMPILE_CACHE=1; --enforce-eager skips compilation altogether.")


def _with_vllm(rule_sig: str):
    """Match only where the text is about vLLM (its name, or the SamplingParams the call passes): other
    libraries have an `LLM.generate` too (litgpt's takes max_new_tokens, no sampling params)."""
    def check(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
        joined = scan.joined_text().lower()
        if "vllm" not in joined and "sampling_params" not in joined and "samplingparams" not in joined:
            return None
        return BY_SIG[rule_sig].match_lines(scan)
    return check


RULES = [
    Rule(signature="sampling.max_tokens_below_one", category="engine_config",
         title="SamplingParams refused max_tokens={value}: no room is left for the completion",
         fix="max_tokens must be at least 1. A caller that sets it to max_model_len minus the prompt length gets 0 "
             "or less when the prompt already fills the context: raise --max-model-len (max_model_len=), shorten or "
             "truncate the prompts (the framework's max_length / max_prompt_length), or lower the requested "
             "completion length.",
         patterns=[r"max_tokens must be at least 1, got (?P<value>-?\d+)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="sampling.params_invalid", category="engine_config",
         title="SamplingParams refused {param}",
         fix="Pass a value in the range the message names (temperature >= 0, 0 < top_p <= 1, top_k -1/0 or >= 1, "
             "0 <= min_p <= 1, penalties in [-2, 2], repetition_penalty > 0, n >= 1); the generation config of the "
             "calling framework (generation_config.json, task config, request body) is where it usually comes from.",
         patterns=[r"\b(?P<param>temperature|logprobs|prompt_logprobs) must be non-negative, got",
                   r"\b(?P<param>top_p) must be in \(0,\s*1\], got",
                   r"\b(?P<param>top_k) must be (?:-1|0) \(disable\),? or at least 1, got",
                   r"\b(?P<param>min_p) must be in \[0,\s*1\], got",
                   r"\b(?P<param>n) must be at least 1, got",
                   r"\b(?P<param>(?:presence|frequency)_penalty) must be in \[-2,\s*2\], got",
                   r"\b(?P<param>repetition_penalty) must be (?:greater than zero|in \(0,\s*2\]), got",
                   r"\b(?P<param>min_tokens) must be (?:greater than or equal to 0|less than or equal to max_tokens)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="api.caller_vllm_release_mismatch", category="install_mismatch",
         title="The code calling vLLM's Python API was written for another vLLM release ({what})",
         fix="Install the vLLM release the calling project pins (its requirements / extras, e.g. `pip install "
             "'<project>[vllm]'`), or update the project. vLLM 0.10.2 removed LLM.generate(prompt_token_ids=...): "
             "pass the ids in the prompts instead (`llm.generate([{\"prompt_token_ids\": ids}], params)` or "
             "TokensPrompt). A SamplingParams(**x) that gets a tuple is the caller's own API change: pin the caller "
             "(lm-eval[api]==0.4.9.2 for its VLM backend).",
         check=_with_vllm("api.caller_vllm_release_mismatch"),
         patterns=[r"(?P<what>SamplingParams\(\) argument after \*\* must be a mapping, not \w+)",
                   r"(?P<what>\bLLM\.(?:generate|encode|embed|chat|score|classify|beam_search)\(\) got an unexpected "
                   r"keyword argument '\w+')",
                   r"(?P<what>\bSamplingParams\.__init__\(\) got an unexpected keyword argument '\w+')"],
         playbook="install-mismatch", confidence=0.75),
    Rule(signature="api.engine_internals_moved", category="install_mismatch",
         title="The calling code reaches into vLLM engine internals this release does not have ({obj}.{attr})",
         fix="The code was written against another vLLM's internals: the V0 engine held the workers in-process "
             "(llm.llm_engine.driver_worker up to 0.3, llm_engine.model_executor.driver_worker after), while the V1 "
             "engine (default from 0.8, the only one from 0.11) runs them in another process. Install the vLLM "
             "release the project pins, or use the public API: llm.collective_rpc(...) / llm.apply_model(fn) "
             "(with VLLM_ENABLE_V1_MULTIPROCESSING=0 to keep the model in this process); on 0.8-0.10, "
             "VLLM_USE_V1=0 brings back the V0 engine.",
         patterns=[r"'(?P<obj>LLMEngine|LLM|AsyncLLMEngine|AsyncLLM|_AsyncLLMEngine)' object has no attribute "
                   r"'(?P<attr>model_executor|driver_worker|workers|model_runner|engine_core|collective_rpc|"
                   r"apply_model)'"],
         # below downstream.vllm_api_mismatch when a framework's frame makes the call (it names the framework)
         playbook="install-mismatch", confidence=0.7),
    Rule(signature="bench.initial_test_failed", category="engine_config",
         title="vllm bench's first test request failed ({error})",
         fix="The server answered the benchmark's test request with an error. Not Found: the --model the benchmark "
             "sends is not a name the server serves (compare `curl http://HOST:PORT/v1/models`; pass that id, or "
             "the server's --served-model-name, as --model and keep --tokenizer for the tokenizer path) or "
             "--endpoint / --backend do not match the server (/v1/completions vs /v1/chat/completions). Bad "
             "Request: the server's own log says which request field it refused.",
         patterns=[r"Initial test run failed - Please make sure benchmark\s*arguments are\s*correctly specified\."
                   r"\s*Error:\s*(?P<error>[^\n]*)"],
         playbook="engine-config", confidence=0.7),
    Rule(signature="bench.random_input_len_too_small", category="engine_config",
         title="vllm bench's random dataset has no input token left (--random-input-len too small)",
         fix="The tokenizer adds special tokens that --random-input-len must exceed: increase --random-input-len "
             "(and/or --random-prefix-len) or lower --random-range-ratio.",
         patterns=[r"--random-input-len is too small"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="compile.cache_artifact_corrupted", category="triton_compile",
         title="vLLM's torch.compile cache holds a broken artifact (a previous compile failed, or another build's)",
         fix=_CLEAR_CACHE + " With torch <= 2.7.1, TORCHINDUCTOR_FORCE_DISABLE_CACHES=1 alone causes it: unset it.",
         patterns=[r"vLLM failed to compile the model\. The most likely reason for this is that a previous",
                   r"failed to get the hash of the compiled graph",
                   # torch's standalone_compile running a graph vLLM loaded from its cache (AOT / standalone)
                   r"\bCacheCompiledArtifact\._compiled_fn\b"],
         playbook="triton-compile", confidence=0.75),
]


# ---- a traceback cut where vLLM starts a process with spawn ---------------------------------------------------
SPAWN_POPEN = ("/multiprocessing/popen_spawn_posix.py", "/multiprocessing/popen_spawn_win32.py")
VLLM_STARTERS = ("/vllm/v1/engine/utils.py", "/vllm/v1/engine/core_client.py", "/vllm/v1/executor/",
                 "/vllm/executor/", "/vllm/entrypoints/llm.py", "/vllm/v1/utils.py")


def _cut_in_spawn_start(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    for tb in scan.cut_tracebacks:
        files = ["/" + f.file.replace("\\", "/").lstrip("/") for f in tb.frames]
        if not files or not any(files[-1].endswith(p) for p in SPAWN_POPEN):
            continue
        if not any(any(v in f for v in VLLM_STARTERS) for f in files):
            continue
        return Diagnosis(
            category="distributed", signature="distributed.spawn_start_cut",
            title="Starting a vLLM process with spawn failed (traceback cut in popen_spawn); most often the "
                  "script lacks an `if __name__ == '__main__':` guard",
            confidence=0.55, evidence=[Evidence(tb.line.no, tb.line.shown)],
            facts={"category_guessed_from": "traceback frames (the exception line is cut)",
                   "raised_at": files[-1].rsplit("/", 1)[-1]},
            fix=Fix("vLLM starts its engine and workers with the spawn method, which re-imports the main module: put "
                    "the code that builds LLM(...) under `if __name__ == '__main__':` (a `def main()` called from "
                    "there). If the message turns out to be a pickling error, the object handed to the new process "
                    "cannot be pickled. Paste the whole output to see the message.", "distributed"),
            first_line=tb.line.no)
    return None


RULES += [
    Rule(signature="distributed.spawn_start_cut", category="distributed",
         title="Starting a vLLM process with spawn failed", fix="", check=_cut_in_spawn_start,
         confidence=0.55, playbook="distributed"),
]
BY_SIG = {r.signature: r for r in RULES}
