"""Guided fixes that end on the step the failure at hand needs: real dev logs and rule fixtures walked through
`triage fix --log LOG --dry-run --offline --no-probe`, checked on the step the walk ends on (its title) and on
words that step must say. A wrong branch, or "report it" where a concrete step exists, is what these catch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from triage.commands import fix
from triage.logread import scan_text
from triage.rules.attention.explain import sparse_evidence

LOGS = Path(__file__).parent / "logs"
STEP_RE = re.compile(r"^\[\d+\] (?P<title>.+)$")


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("COLUMNS", "100")


def walk(log: str, capsys) -> tuple[str, str, str]:
    """(the last step's title, that step's text, the whole walk) of the dry run on a log under tests/logs/."""
    assert fix.main(["--log", str(LOGS / log), "--dry-run", "--offline", "--no-probe"]) == 0
    out = capsys.readouterr().out
    walked = out.split("\nOther steps of this playbook")[0]
    steps = [(i, m.group("title")) for i, line in enumerate(walked.splitlines()) for m in [STEP_RE.match(line)] if m]
    assert steps, out
    lines = walked.splitlines()
    last_at, title = steps[-1]
    body = " ".join(x.strip() for x in lines[last_at + 1:])
    return title, body, walked


def check_walk(capsys, log: str, title: str, says: tuple[str, ...] = (), never: tuple[str, ...] = ()) -> None:
    got, body, walked = walk(log, capsys)
    assert got == title, walked
    for s in says:
        assert s in body, (s, walked)
    for s in never:
        assert s not in walked, (s, walked)


# ---- sparse MLA: a sparse backend's own refusal never says use_sparse -----------------------------------------

@pytest.mark.parametrize("log,title,says", [
    ("attention.sparse_kv_layout_required.log", "Use the KV-cache dtype the backend takes",
     ("--kv-cache-dtype", "fp8_ds_mla")),
    ("attention.fp8_ds_mla_shape.log", "Keep the KV cache in bfloat16", ("--kv-cache-dtype auto", "pe_dim must be 64")),
    ("attention.sparse_mla_indexer_required.log", "The DSA indexer is missing on some layers", ("#46506",)),
    ("dev-bw/attention_backend--glm52-nvfp4-sm120-sparse-indexer-skip-layers.log",
     "A sparse backend without the indexer it needs", ("--attention-backend", "#46506")),
])
def test_sparse_mla_refusals_infer_sparse(log, title, says, capsys):
    check_walk(capsys, log, title, says, never=("Not a sparse MLA failure",))


def test_the_walk_says_what_sparse_was_inferred_from(capsys):
    _t, _b, walked = walk("attention.sparse_kv_layout_required.log", capsys)
    assert "triage read it from the backend FLASHINFER_MLA_SPARSE_SM120" in " ".join(walked.split())
    assert "GlmMoeDsaForCausalLM" in walked


@pytest.mark.parametrize("text,found", [
    ("INFO [model.py:547] Resolved architecture: DeepseekV32ForCausalLM\n", "architecture DeepseekV32ForCausalLM"),
    ("INFO non-default args: {'model': 'deepseek-ai/DeepSeek-V3.2-Exp', 'tensor_parallel_size': 8}\n", "DeepSeek-V3.2-Exp"),
    ("INFO non-default args: {'model': 'zai-org/GLM-5.1-FP8'}\n", "GLM-5.1-FP8"),
    ('  "index_topk": 2048,\n', "index_topk 2048"),
])
def test_sparse_evidence_reads_each_kind_of_evidence(text, found):
    got = sparse_evidence(scan_text(text))
    assert got.get("use_sparse") is True and found in got["sparse_inferred_from"], got


@pytest.mark.parametrize("text", [
    "INFO non-default args: {'model': 'deepseek-ai/DeepSeek-V3', 'tensor_parallel_size': 8}\n",
    "INFO non-default args: {'model': 'THUDM/glm-4-9b-chat'}\n",
    "INFO non-default args: {'model': 'zai-org/GLM-4.5V'}\n",
])
def test_sparse_evidence_leaves_dense_models_alone(text):
    assert sparse_evidence(scan_text(text)) == {}


# ---- cuda-driver: a failure that names its cause gets its own remedy, not "a build for this driver" ---------------

@pytest.mark.parametrize("log,title,says", [
    ("cuda.nvml_driver_mismatch.log", "Reload the driver", ("Reboot",)),
    ("cuda.system_not_initialized.log", "Start the NVIDIA fabric manager", ("nvidia-fabricmanager",)),
    ("dev-envi/cuda_driver--error802-fabric-manager-fragment.log", "Start the NVIDIA fabric manager",
     ("nvidia-fabricmanager",)),
    ("cuda.unknown_error_init.log", "CUDA cannot reach the driver", ("nvidia_uvm", "--gpus all")),
    ("dev-inst2/cuda_driver--docker-desktop-error500-named-symbol.log", "CUDA cannot reach the driver",
     ("nvidia-ctk",)),
    ("cuda.error_803_compat.log", "Make libcuda match the kernel driver", ("compat", "LD_LIBRARY_PATH")),
    ("dev-rt/cuda_driver--error803-warning-k8s-pod.log", "Make libcuda match the kernel driver", ("ldconfig",)),
    ("dev-inst2/cuda_driver--docker-804-forward-compat-driver525.log", "Forward compatibility needs a data-centre GPU",
     ("data-centre GPUs only",)),
    ("xpu.runtime_error.log", "The Intel GPU driver stack", ("level-zero",)),
    ("cuda.ptx_toolchain.log", "PTX from a newer toolchain", ("TRITON_PTXAS_PATH",)),
    # the driver older than the build keeps the build-or-driver choice
    ("cuda.driver_too_old.log", "A build for this driver", ("download.pytorch.org",)),
])
def test_cuda_driver_walks_to_the_remedy_its_failure_names(log, title, says, capsys):
    check_walk(capsys, log, title, says, never=() if "too_old" in log else ("A build for this driver",))


# ---- gpu-oom: each device its own tools and settings, no nvidia-smi or CUDA wording off CUDA ------------------

CUDA_ONLY = ("nvidia-smi", "CUDA ran out", "PYTORCH_CUDA_ALLOC_CONF", "No CUDA graphs")


@pytest.mark.parametrize("log,title,says", [
    ("oom.npu_out_of_memory.log", "The Ascend NPU ran out of memory", ("PYTORCH_NPU_ALLOC_CONF", "npu-smi")),
    ("dev-oom/gpu_oom--ascend-qwen3-next-npu-oom-prose.log", "The Ascend NPU ran out of memory",
     ("PYTORCH_NPU_ALLOC_CONF",)),
    ("xpu.out_of_memory.log", "The Intel GPU (XPU) ran out of memory",
     ("UR_L0_USE_RELAXED_ALLOCATION_LIMITS", "xpu-smi")),
    ("tpu.xla_resource_exhausted.log", "The TPU ran out of memory", ("--tensor-parallel-size",)),
    ("dev-tpu/gpu_oom--tpu-v5e-smem-compile-oom-16k-context.log", "The TPU ran out of memory",
     ("--max-num-batched-tokens",)),
    ("gpu.unified_memory_killed.log", "The machine's RAM is the GPU's memory", ("--gpu-memory-utilization",)),
    ("dev-rt/gpu_oom--rocm-hip-out-of-memory-apu.log", "The AMD GPU ran out of memory",
     ("PYTORCH_HIP_ALLOC_CONF", "amd-smi")),
    ("dev-core/rocm-lemonade-hip-oom-kv-alloc.log", "The AMD GPU ran out of memory", ("rocm-smi",)),
])
def test_out_of_memory_off_cuda_walks_the_devices_own_steps(log, title, says, capsys):
    check_walk(capsys, log, title, says, never=CUDA_ONLY)


def test_cuda_out_of_memory_keeps_the_cuda_walk(capsys):
    check_walk(capsys, "oom.cuda_out_of_memory--sampler-warmup.log", "What to do", ("--max-num-seqs 64",))


def test_sleep_mode_wake_up_walks_the_trainers_memory(capsys):
    # the colocated trainer holds the memory: warm-up flags (--max-num-seqs, --enforce-eager) do not touch it
    check_walk(capsys, "oom.sleep_mode_allocator.log", "The trainer still holds the GPU vLLM wakes up on",
               ("gpu_memory_utilization", "wake_up"), never=("--max-num-seqs", "--enforce-eager"))


# ---- model-loading: the Hub's rate limit and the download tools are no model-folder problem ------------------

@pytest.mark.parametrize("log,title,says", [
    ("model_loading.hub_rate_limited.log", "Fewer requests to the Hub",
     ("HF_TOKEN", "HF_HUB_OFFLINE=1", "hf download", "huggingface-cli download", "HF_HUB_ENABLE_HF_TRANSFER", "retry")),
    ("dev-mdl/model_loading--hf-429-cached-model-verl.log", "Fewer requests to the Hub", ("HF_HUB_OFFLINE=1",)),
    ("dev-m2/model_loading--vllm-xet-cas-429-crash.log", "Fewer requests to the Hub", ("HF_TOKEN",)),
    ("model_loading.hub_download_tool.log", "Fix the download tool, or download without it", ("hf_transfer",)),
    ("dev-m2/model_loading--torchforge-xet-cas-request-failed-retries.log",
     "Fix the download tool, or download without it", ("HF_HUB_DISABLE_XET=1",)),
])
def test_hub_rate_limits_and_download_tools_walk_their_own_steps(log, title, says, capsys):
    check_walk(capsys, log, title, says, never=("What is in the model folder?", "Point vLLM at the model"))


# ---- model-support: the gap the rule knows, before "report it" -----------------------------------------------

@pytest.mark.parametrize("log,title,says", [
    # transformers is the gap: its pin
    ("model_support.transformers_tokenizer_attr.log", "Pin the transformers this vLLM was made for",
     ("transformers<5", "pip show vllm")),
    ("dev-mix4/model_support--gemma4-transformers-5150-per-layer-head-dim.log",
     "Pin the transformers this vLLM was made for", ("transformers==5.14.1",)),
    # the model is newer than this vLLM: the release that has it
    ("model_support.vllm_older_than_model.log", "A newer release runs this model", ("0.11",)),
    ("dev-cn/model_support--minicpm-v45-vllm-0101-version-zh.log", "A newer release runs this model", ("v0.10.2",)),
    ("dev-cfg/model_support--glm41v-limit-mm-release-lacks-model.log", "A newer release runs this model",
     ("upgrade vLLM",)),
    # an architecture vLLM does not implement: the Transformers backend, a release that lists it, report last
    ("model_support.architecture_unsupported.log", "Run it through the Transformers backend, or a release that has it",
     ("--model-impl transformers", "Supported Models", "triage report")),
    ("dev-omni/model_support--paddleocr-vl-architecture-not-supported.log",
     "Run it through the Transformers backend, or a release that has it", ("--model-impl transformers",)),
    # a missing package or a pooling model: the rule's remedy
    ("dev-mm/model_support--whisper-docker-please-install-vllm-audio.log", "Install what is missing", ("vllm[audio]",)),
    ("pooling.model_without_pooler.log", "Serve it as a pooling model", ("--hf-overrides",)),
    ("model_support.mm_processor_failed.log", "What this failure needs", ("triage report",)),
])
def test_model_support_ends_on_the_gap_before_report_it(log, title, says, capsys):
    check_walk(capsys, log, title, says, never=("Not in a release yet",))


# ---- engine-config: the flag and the value the rule's facts hold, by the kind of change ----------------------

@pytest.mark.parametrize("log,title,says", [
    ("config.lora_rank.log", "Launch with --max-lora-rank 32", ("--max-lora-rank 32",)),
    ("config.batched_tokens_lt_max_len.log", "Launch with --max-num-batched-tokens 32768", ()),
    ("config.mm_item_exceeds_batched_tokens.log", "Launch with --max-num-batched-tokens 4096", ()),
    ("config.prefix_caching_unsupported.log", "Launch with --no-enable-prefix-caching", ()),
    ("engine_args.removed_flag_in_command.log", "Launch without --task", ("--runner",)),
    ("config.hybrid_kv_cache_disabled.log", "Launch without --disable-hybrid-kv-cache-manager", ()),
    ("config.mrv2_pooling_task_unsupported.log", "Set VLLM_USE_V2_MODEL_RUNNER=0 where vLLM starts", ()),
    ("config.prompt_too_long.log", "Change the request, not the server", ("--max-model-len", "keeps serving")),
    ("sampling.params_invalid.log", "Change the request, not the server", ()),
    # no flag in the table: the general step quotes the rule's own advice
    ("config.tool_choice_flags.log", "Check the argument", ("--enable-auto-tool-choice",)),
])
def test_engine_config_names_the_flag_and_value(log, title, says, capsys):
    check_walk(capsys, log, title, says)


def test_a_value_from_a_log_is_quoted_for_the_shell():
    from triage.playbooks.flagfix import change_facts

    got = change_facts("config.lora_rank", {"rank": "8; rm -rf ~"})
    assert got == {"refusal_kind": "set", "flag_change": "--max-lora-rank '8; rm -rf ~'"}
    got = change_facts("serving.model_not_served", {"name": "$(reboot)"})
    assert got["flag_change"] == "--served-model-name '$(reboot)'"
    assert change_facts("config.mm_item_exceeds_encoder_cache", {"item_tokens": "6042"})["flag_change"] == \
        "--max-num-batched-tokens 8192"
    # the value missing: no half-made command
    assert change_facts("config.lora_rank", {}) == {}
    assert change_facts("config.prompt_too_long", {}) == {"refusal_kind": "request"}


def test_every_signature_in_the_table_is_a_rule():
    from triage.playbooks.flagfix import CHANGES, REQUEST_SIDE
    from triage.rules import all_rules

    known = {r.signature for r in all_rules()} | {s for r in all_rules() for s in r.emits}
    assert not (set(CHANGES) | REQUEST_SIDE) - known, sorted((set(CHANGES) | REQUEST_SIDE) - known)
