"""vLLM inside other projects' logs: notebook tracebacks, frameworks' frames as plumbing, and the failures of a
framework and a vLLM release that do not fit (triage/rules/downstream.py)."""

from __future__ import annotations

from triage.areas import area_of_frames
from triage.diagnose import diagnose
from triage.logread import scan_text
from tests.dev_sets import first as top

SITE = "/opt/conda/lib/python3.11/site-packages"




# --- a notebook (IPython) traceback cut before its message: its head named the exception type ---

NOTEBOOK_CUT = f"""---------------------------------------------------------------------------
OutOfMemoryError                          Traceback (most recent call last)
Cell In[7], line 3
      1 from vllm import LLM
----> 3 llm = LLM(model="Qwen/Qwen2.5-7B-Instruct")
File {SITE}/vllm/v1/worker/gpu_model_runner.py:2874, in GPUModelRunner._dummy_sampler_run(self, hidden_states)
   2873 try:
-> 2874     sampler_output = self.sampler(logits=logits, sampling_metadata=dummy_metadata)
"""


def test_notebook_head_type_names_a_cut_traceback():
    d = top(NOTEBOOK_CUT)
    assert d.category == "gpu_oom"
    assert d.facts["exception"] == "OutOfMemoryError"
    assert d.facts["phase"] == "sampler warm-up"  # IPython's "Class.method" frame read as the method
    assert d.confidence <= 0.6


def test_notebook_head_with_a_vague_type_decides_nothing_by_itself():
    scan = scan_text(NOTEBOOK_CUT.replace("OutOfMemoryError      ", "ValueError            "))
    assert [t.type for t in scan.cut_tracebacks] == ["ValueError"]
    diagnoses, _ = diagnose(scan)
    assert not any(d.facts.get("exception") == "ValueError" and "notebook" in d.title for d in diagnoses)


def test_plain_traceback_cut_keeps_no_type():
    scan = scan_text('Traceback (most recent call last):\n  File "/x/vllm/v1/worker/gpu_worker.py", line 3, in load_model\n')
    assert [t.type for t in scan.cut_tracebacks] == [""]


# --- frameworks' frames pass a failure through; their folders named ray/ are not Ray's code ---

def test_framework_ray_folders_are_plumbing():
    assert area_of_frames([f"{SITE}/openrlhf/trainer/ray/vllm_engine.py"]) is None
    assert area_of_frames(["/workspace/verl/verl/single_controller/ray/base.py"]) is None
    # the innermost vLLM frame below them decides
    hit = area_of_frames(["/workspace/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py",
                          f"{SITE}/vllm/model_executor/layers/quantization/awq.py"])
    assert hit is not None and hit[0] == "quantization"


def test_ray_itself_is_still_distributed():
    hit = area_of_frames([f"{SITE}/ray/_private/accelerators/nvidia_gpu.py"])
    assert hit is not None and hit[0] == "distributed"


# --- a framework calling a vLLM API the installed release does not have ---

def _tb(caller: str, vllm_frames: int, exc: str) -> str:
    lines = ["Traceback (most recent call last):", f'  File "{caller}", line 58, in init_process_group',
             "    return self.llm.collective_rpc("]
    # (distinct names: lines that differ only in their digits are read as one line repeated)
    for name in ("core", "engine", "executor", "worker", "runner")[:vllm_frames]:
        lines += [f'  File "{SITE}/vllm/v1/{name}/{name}_impl.py", line 120, in run_{name}', f"    out = self.{name}()"]
    return "\n".join(lines + [exc, ""])


def test_attribute_of_a_vllm_object_missing_at_a_frameworks_call():
    d = top(_tb(f"{SITE}/openrlhf/trainer/ray/vllm_engine.py", 1,
                "AttributeError: 'LLMEngine' object has no attribute 'model_executor'"))
    assert d.signature == "downstream.vllm_api_mismatch" and d.category == "install_mismatch"
    assert d.facts["framework"] == "openrlhf"


def test_unexpected_keyword_from_a_framework_in_a_checkout():
    d = top(_tb("/root/verl/verl/workers/rollout/vllm_rollout/vllm_rollout_spmd.py", 2,
                "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'worker_extension_cls'"))
    assert d.signature == "downstream.vllm_api_mismatch" and d.facts["framework"] == "verl"


def test_no_api_mismatch_deep_inside_vllm_or_from_a_users_script_or_on_none():
    deep = _tb(f"{SITE}/openrlhf/trainer/ray/vllm_engine.py", 5,
               "AttributeError: 'LLMEngine' object has no attribute 'model_executor'")
    script = _tb("/home/me/run.py", 1, "TypeError: EngineArgs.__init__() got an unexpected keyword argument 'foo'")
    none = _tb(f"{SITE}/openrlhf/trainer/ray/vllm_engine.py", 1,
               "AttributeError: 'NoneType' object has no attribute 'model_executor'")
    for text in (deep, script, none):
        diagnoses, _ = diagnose(scan_text(text))
        assert all(d.signature != "downstream.vllm_api_mismatch" for d in diagnoses), text


# --- a framework's guarded `from vllm import ...` that failed ---

def test_vllm_name_undefined_means_vllm_did_not_import():
    d = top("NameError: name 'SamplingParams' is not defined\n")
    assert d.signature == "downstream.vllm_import_failed" and d.category == "install_mismatch"


def test_other_undefined_names_are_not_vllm():
    diagnoses, _ = diagnose(scan_text("NameError: name 'tokenizer' is not defined\n"))
    assert all(d.signature != "downstream.vllm_import_failed" for d in diagnoses)


# --- the loggers of projects that drive vLLM: their prefixes peeled, the level and source kept ---

def test_lm_eval_and_transformers_style_prefixes_are_peeled():
    from triage.logread.normalize import parse

    ln = parse(1, "2024-06-10:18:05:24,757 ERROR    [vllm_causallms.py:120] ValueError: bad")
    assert (ln.level, ln.src, ln.text) == ("ERROR", "vllm_causallms.py:120", "ValueError: bad")
    ln = parse(1, "[WARNING|logging.py:329] 2025-03-10 21:43:12,326 >> It looks like you are trying")
    assert (ln.level, ln.src, ln.text) == ("WARNING", "logging.py:329", "It looks like you are trying")


def test_an_exception_behind_a_frameworks_logger_is_read():
    scan = scan_text("[INFO|configuration_utils.py:697] 2025-03-10 21:43:12,326 >> loading configuration file\n"
                     "[ERROR|vllm_engine.py:88] 2025-03-10 21:43:13,326 >> NameError: name 'LLM' is not defined\n")
    assert [e.type for e in scan.exceptions] == ["NameError"]
    assert top_of(scan).signature == "downstream.vllm_import_failed"


def top_of(scan):
    diagnoses, _ = diagnose(scan)
    assert diagnoses
    return diagnoses[0]


def test_hydras_job_failure_line_is_a_wrapper_not_a_cause():
    # verl / OpenRLHF under Hydra end with "Error executing job ..." around the real failure: it must never
    # be the diagnosis, whether the cause is in the log (named) or was cut from the paste (no cause claimed)
    from triage.diagnose import diagnose
    from triage.logread import scan_text
    from triage.rules.wrappers import is_wrapper

    head = "Error executing job with overrides: ['algorithm.adv_estimator=grpo', 'actor_rollout_ref.rollout.name=vllm']\n"
    tail = "\nSet the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n"
    assert is_wrapper(head) and is_wrapper(tail)
    cause = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
             "stored in KV cache (21024). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
             "when initializing the engine.\n")
    ds, _ = diagnose(scan_text((head + cause + tail).encode()))
    assert ds[0].category == "kv_cache_memory"
    ds, _ = diagnose(scan_text((head + tail).encode()))
    assert not ds or "Error executing job" not in ds[0].title
