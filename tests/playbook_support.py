"""Shared fixtures of the playbook tests: recorded probe snapshots and diagnoses per case."""

from __future__ import annotations

import copy
from typing import Any

from triage.actions.sparse_mla import InstallResult
from triage.runner import LocalRunner, Result

# Environment facts as the probes record them: one small dict per machine.
SNAPSHOTS: dict[str, dict[str, Any]] = {
    "sm120-nightly": {
        "vllm_version": "0.16.0rc2.dev313+g662205d34",
        "vllm_install": {"kind": "nightly", "installer": "pip", "commit": "662205d34"},
        "model": "/models/GLM-5",
        "architecture": "GlmMoeDsaForCausalLM",
        "launch_args": {"--tensor-parallel-size": "8", "--max-model-len": "65536"},
        "python_prefix": "/root/ml-env",
        "python": {"executable": "/root/ml-env/bin/python", "version": "3.12.3"},
        "compute_capability": "12.0",
        "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "compute_capability": "12.0",
                  "memory_total_mib": 97887} for i in range(8)],
        "driver_version": "580.95.05",
        "cuda_driver_version": "13.0",
        "cuda_version": "12.9",
        "torch_version": "2.9.0+cu129",
        "packages": {"vllm": "0.16.0rc2.dev313+g662205d34", "torch": "2.9.0+cu129", "triton": "3.5.0",
                     "transformers": "4.57.1", "flashinfer-python": "0.5.2"},
        "patched_files": ["vllm/platforms/cuda.py", "vllm/v1/attention/backends/mla/common.py"],
        "os": {"name": "Linux", "release": "6.8.0"},
        "shm_bytes": 68719476736,
        "in_container": False,
    },
    "h100-release": {
        "vllm_version": "0.11.0",
        "vllm_install": {"kind": "release", "installer": "pip"},
        "model": "deepseek-ai/DeepSeek-V3.2-Exp",
        "python": {"executable": "/usr/bin/python3", "version": "3.12.3"},
        "compute_capability": "9.0",
        "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0", "memory_total_mib": 81559}
                 for i in range(8)],
        "driver_version": "550.54.15",
        "cuda_driver_version": "12.4",
        "cuda_version": "12.8",
        "torch_version": "2.8.0+cu128",
        "packages": {"vllm": "0.11.0", "torch": "2.8.0+cu128", "transformers": "4.56.0"},
        "patched_files": [],
        "shm_bytes": 67108864,
        "in_container": True,
    },
    "a100": {
        "vllm_version": "0.4.1",
        "vllm_install": {"kind": "release"},
        "model": "meta-llama/Llama-2-13b-chat-hf",
        "compute_capability": "8.0",
        "gpus": [{"name": "NVIDIA A100-SXM4-40GB", "compute_capability": "8.0", "memory_total_mib": 40960}] * 4,
        "driver_version": "470.82.01",
        "cuda_driver_version": "11.4",
        "cuda_version": "12.1",
        "torch_version": "2.2.1",
        "packages": {"vllm": "0.4.1", "torch": "2.2.1"},
    },
    "t4": {
        "vllm_version": "0.6.6",
        "model": "google/gemma-2-9b-it",
        "compute_capability": "7.5",
        "gpus": [{"name": "Tesla T4", "compute_capability": "7.5", "memory_total_mib": 15360}],
        "torch_version": "2.5.1",
        "packages": {"vllm": "0.6.6"},
        "in_container": True,
        "shm_bytes": 67108864,
    },
    "gb10": {
        "vllm_version": "0.13.0",
        "vllm_install": {"kind": "editable"},
        "compute_capability": "12.1",
        "gpus": [{"name": "NVIDIA GB10", "compute_capability": "12.1", "memory_total_mib": 122000}],
        "cuda_version": "12.6",
        "torch_version": "2.6.0",
    },
    "no-probe": {},
}

# One diagnosis per category (plus variants), with the facts the rules extract.
DIAGNOSES: dict[str, dict[str, Any]] = {
    "attention_backend": {
        "category": "attention_backend", "signature": "attention.no_valid_backend",
        "title": "No valid attention backend for sparse MLA on this GPU",
        "facts": {"head_size": 576, "dtype": "torch.bfloat16", "kv_cache_dtype": "auto", "block_size": None,
                  "use_mla": True, "use_sparse": True, "has_sink": False,
                  "rejected": {"FLASH_ATTN_MLA": ["sparse not supported", "compute capability not supported"],
                               "TRITON_MLA": ["sparse not supported"],
                               "FLASHMLA_SPARSE": ["compute capability not supported"]}},
        "fix": {"summary": "install the bundled sparse MLA backend", "playbook": "attention-sparse-mla"},
    },
    "attention_dense": {
        "category": "attention_backend", "signature": "attention.no_valid_backend",
        "title": "No valid attention backend",
        "facts": {"head_size": 576, "dtype": "torch.bfloat16", "kv_cache_dtype": "fp8_e4m3", "use_mla": True,
                  "use_sparse": False, "rejected": {"TRITON_MLA": ["kv_cache_dtype not supported"]}},
        "fix": {"summary": "", "playbook": None},
    },
    "unsupported_gpu": {"category": "unsupported_gpu", "signature": "gpu.no_kernel_image", "facts": {}},
    "dtype_unsupported": {"category": "dtype_unsupported", "signature": "dtype.bf16_before_ampere",
                          "facts": {"dtype": "bfloat16"}},
    "quantization": {"category": "quantization", "signature": "quant.min_capability",
                     "facts": {"quantization": "fp8", "min_capability": "8.9"}},
    "cuda_driver": {"category": "cuda_driver", "signature": "cuda.driver_too_old", "facts": {}},
    "install_mismatch": {"category": "install_mismatch", "signature": "install.undefined_symbol", "facts": {}},
    "kernel_library": {"category": "kernel_library", "signature": "kernels.flashinfer_version_mismatch",
                       "facts": {"library": "flashinfer"}},
    "triton_compile": {"category": "triton_compile", "signature": "triton.out_of_shared_memory",
                       "facts": {"shared_required": 131072, "shared_limit": 101376}},
    "kv_cache_memory": {"category": "kv_cache_memory", "signature": "kv_cache.max_len_exceeds_capacity",
                        "facts": {"max_model_len": 32768, "kv_capacity_tokens": 10000}},
    "gpu_oom": {"category": "gpu_oom", "signature": "oom.cuda_out_of_memory", "facts": {"phase": "loading weights"}},
    "gpu_oom_warmup": {"category": "gpu_oom", "signature": "oom.cuda_out_of_memory",
                       "facts": {"phase": "profiling the sampler (warm-up)"}},
    "cudagraph_capture": {"category": "cudagraph_capture", "signature": "cudagraph.capture_failed", "facts": {}},
    "distributed": {"category": "distributed", "signature": "distributed.nccl_error", "facts": {}},
    "distributed_shm": {"category": "distributed", "signature": "distributed.nccl_shm", "facts": {}},
    "distributed_setup": {"category": "distributed", "signature": "distributed.ray_missing", "facts": {},
                          "fix": {"summary": "Install Ray into vLLM's environment.", "playbook": "distributed"}},
    "model_support": {"category": "model_support", "signature": "model_support.architecture_unsupported",
                      "facts": {"architecture": "Qwen3ForCausalLM"}},
    "model_loading": {"category": "model_loading", "signature": "model_loading.gguf_unsupported", "facts": {}},
    "model_loading_auth": {"category": "model_loading", "signature": "model_loading.gated_or_auth",
                           "facts": {"model": "meta-llama/Llama-3.1-8B-Instruct"}},
    "model_loading_offline": {"category": "model_loading", "signature": "model_loading.hub_unreachable", "facts": {}},
    "model_loading_missing": {"category": "model_loading", "signature": "model_loading.files_missing",
                              "facts": {"model": "/models/qwen"}},
    "model_loading_not_found": {"category": "model_loading", "signature": "model_loading.model_not_found", "facts": {}},
    "model_loading_mismatch": {"category": "model_loading", "signature": "model_loading.weight_mismatch", "facts": {}},
    "model_loading_corrupt": {"category": "model_loading", "signature": "model_loading.corrupt_weights", "facts": {}},
    "model_loading_disk": {"category": "model_loading", "signature": "model_loading.disk_full", "facts": {}},
    "model_support_remote_code": {"category": "model_support", "signature": "model_support.trust_remote_code",
                                  "facts": {}},
    "model_support_removed": {"category": "model_support", "signature": "model_support.architecture_removed",
                              "facts": {"advice": "vLLM removed Phi3SmallForCausalLM after v0.9.2."}},
    "model_support_pin": {"category": "model_support", "signature": "model_support.layer_types_mismatch", "facts": {}},
    "tokenizer_chat_template": {"category": "tokenizer_chat_template", "signature": "tokenizer.chat_template_missing",
                                "facts": {}},
    "speculative_decoding": {"category": "speculative_decoding", "signature": "speculative.draft_mismatch", "facts": {}},
    "speculative_pp": {"category": "speculative_decoding", "signature": "speculative.pipeline_parallel_unsupported",
                       "facts": {}},
    "speculative_draft_arch": {"category": "speculative_decoding",
                               "signature": "speculative.draft_architecture_unsupported", "facts": {}},
    "attention_kernel": {"category": "attention_backend", "signature": "attention.flash_attn_kernel_refused",
                         "facts": {"advice": "Use another attention backend."}},
    "attention_cascade": {"category": "attention_backend", "signature": "attention.backend_feature_unsupported",
                          "facts": {"backend_words": "Cascade attention", "advice": "Launch with --disable-cascade-attn."}},
    "speculative_runner": {"category": "speculative_decoding", "signature": "speculative.model_runner_unsupported",
                           "facts": {"advice": "Unset VLLM_USE_V2_MODEL_RUNNER."}},
    "tokenizer_template": {"category": "tokenizer_chat_template", "signature": "tokenizer.template_error", "facts": {}},
    "tokenizer_load": {"category": "tokenizer_chat_template", "signature": "tokenizer.load_failed",
                       "facts": {"advice": "Launch with --trust-remote-code."}},
    "engine_config": {"category": "engine_config", "signature": "config.tp_heads_not_divisible",
                      "facts": {"num_attention_heads": 52, "tensor_parallel_size": 3, "suggested_tp": 4}},
    "environment": {"category": "environment", "signature": "environment.no_gpu_visible", "facts": {}},
    "environment_port": {"category": "environment", "signature": "environment.port_in_use", "facts": {"port": 8000}},
    "engine_config_flag": {"category": "engine_config", "signature": "config.unrecognized_argument",
                           "facts": {"flag": "--enable-reasoning"}},
    "engine_config_value": {"category": "engine_config", "signature": "config.argument_invalid",
                            "facts": {"flag": "--max-model-len", "advice": "--max-model-len takes a whole number."}},
    "engine_config_mm": {"category": "engine_config", "signature": "config.mm_option_text_only", "facts": {}},
    "engine_config_maxlen": {"category": "engine_config", "signature": "config.max_model_len_too_large",
                             "facts": {"max_model_len": 262144, "max_position_embeddings": 131072}},
    # install-resolve: one case per branch (os/python here stand in for the probe when a snapshot has none)
    "install_resolve_python": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                               "facts": {"req": "vllm==0.11.0", "python_refused": True, "log_python": "3.13.1",
                                         "python_ranges": ["0.9.2 needs Python <3.13,>=3.9"]}},
    "install_resolve_macos": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                              "facts": {"req": "vllm", "os": {"name": "Darwin", "arch": "arm64"}}},
    "install_resolve_arm": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                            "facts": {"req": "vllm==0.9.2", "os": {"name": "Ubuntu 22.04.4 LTS", "arch": "aarch64"}}},
    "install_resolve_wheel": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                              "facts": {"req": "vllm-0.6.3-cp38-abi3-manylinux1_x86_64.whl"}},
    "install_resolve_variant": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                                "facts": {"req": "torch==2.6.0.dev20241216+cpu"}},
    "install_resolve_release": {"category": "install_mismatch", "signature": "install.no_matching_distribution",
                                "facts": {"req": "vllm==0.3.3"}},
    "install_resolve_torch": {"category": "install_mismatch", "signature": "install.dependency_conflict",
                              "facts": {"detail": "xformers 0.0.30 requires torch==2.7.0, installed: torch 2.5.1",
                                        "conflicts": ["xformers 0.0.30 requires torch==2.7.0, but you have torch 2.5.1"],
                                        "torch_pinned": True, "log_python": "3.10"}},
    "install_resolve_pins": {"category": "install_mismatch", "signature": "install.dependency_conflict",
                             "facts": {"detail": "trl 0.12.0 requires transformers<4.47, installed: transformers 4.53.0",
                                       "torch_pinned": False}},
    "install_resolve_uv": {"category": "install_mismatch", "signature": "install.installer_flag_unknown",
                           "facts": {"flag": "--torch-backend", "installer": "uv"}},
    "install_resolve_pip_backend": {"category": "install_mismatch", "signature": "install.installer_flag_unknown",
                                    "facts": {"flag": "--torch-backend", "installer": "pip"}},
    "install_resolve_pip": {"category": "install_mismatch", "signature": "install.installer_flag_unknown",
                            "facts": {"flag": "--group", "installer": "pip"}},
}


def snapshot(name: str) -> dict[str, Any]:
    return copy.deepcopy(SNAPSHOTS[name])


def diagnosis(name: str) -> dict[str, Any]:
    return copy.deepcopy(DIAGNOSES[name])


class NoRunRunner:
    """A runner that fails the test if anything is run (dry-run must not run commands)."""

    where = "this machine"

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def run(self, argv, *, timeout=60.0, input=None, env=None) -> Result:  # noqa: A002
        self.calls.append(list(argv))
        raise AssertionError(f"dry run ran a command: {argv}")


class ElsewhereRunner(LocalRunner):
    """Runs commands on this machine but calls itself another host, so the remote code paths
    (cat / sh -c 'cat > "$1"' / rm through the runner) run for real."""

    def __init__(self, where: str = "gpu-a"):
        self.where = where


def upstream_unknown(_facts):
    return {"verdict": "unknown", "why": "offline"}


def upstream_fixes(version: str):
    def lookup(_facts):
        return {"verdict": "fixes", "target_version": version, "evidence": "test capability table"}

    return lookup


class FakeSparseMlaModule:
    """Stands in for triage.actions.sparse_mla (no real vLLM to install into here): installs
    a marker file into the target environment's site-packages through the runner, records it with the
    transcript protocol (backup before, change with an undo argv after) as the real installer does."""

    def __init__(self) -> None:
        self.calls = 0

    def preview(self, *, runner, python):
        return [f"install triage_sparse_mla into {python} on {runner.where}"]

    def apply(self, *, runner, python, recorder, dry_run=False):
        self.calls += 1
        res = runner.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], timeout=60)
        recorder.command([python, "-c", "..."], res, runner.where)
        if not res.ok:
            return InstallResult(False, res.stderr.strip())
        marker = res.stdout.strip() + "/triage_sparse_mla_fake.pth"
        recorder.backup(marker, runner)
        res = runner.run([python, "-c", "import sys; open(sys.argv[1], 'w').write('# fake plugin\\n')", marker], timeout=60)
        recorder.command(["write", marker], res, runner.where)
        recorder.change(f"installed triage_sparse_mla into {python}", [python, "-c", "import os, sys; os.remove(sys.argv[1])", marker])
        return InstallResult(True, "installed triage_sparse_mla (fake)", "--attention-backend CUSTOM")


def fake_actions(module=None):
    from triage.playbooks.actions import SparseMla, default_actions

    actions = default_actions()
    mod = module or FakeSparseMlaModule()
    actions["sparse-mla"] = SparseMla(installer=mod)
    return actions
