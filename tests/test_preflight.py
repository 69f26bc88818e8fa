"""Preflight: predictions from a model's files and a machine's facts, before anything is launched."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from conftest import run_triage
from triage.preflight.launch import LaunchError, parse_launch
from triage.preflight.machine import Machine, given_gpus, read_environment
from triage.preflight.model import gguf_architecture, read_model
from triage.preflight.predict import predict

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
            "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
            "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}
DSV32 = {"architectures": ["DeepseekV32ForCausalLM"], "model_type": "deepseek_v32", "hidden_size": 7168,
         "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128, "kv_lora_rank": 512,
         "q_lora_rank": 1536, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
         "index_topk": 2048, "max_position_embeddings": 163840, "torch_dtype": "bfloat16"}


def _model_dir(tmp_path: Path, cfg: dict, weights_gib: float | None = None, name: str = "m") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(cfg))
    if weights_gib:
        (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": int(weights_gib * 2**30)}}))
    return d


def _predict(model_dir: Path, *flags: str, gpu=("NVIDIA A100-SXM4-80GB", 1, "8.0", 80.0), machine=None):
    launch = parse_launch(["vllm", "serve", str(model_dir), *flags])
    m = machine or Machine(gpus=given_gpus(gpu[0], gpu[1], gpu[2], gpu[3]))
    return predict(launch, read_model(launch.model), m)


def test_a_healthy_combination_predicts_nothing(tmp_path):
    assert _predict(_model_dir(tmp_path, LLAMA_8B, 15.0)) == []


def test_bf16_on_a_t4_is_predicted_with_its_fix(tmp_path):
    d = _predict(_model_dir(tmp_path, LLAMA_8B, 15.0), gpu=("Tesla T4", 1, "7.5", 15.0))
    cats = [x.category for x in d]
    assert "dtype_unsupported" in cats and "gpu_oom" in cats  # 15 GiB of weights in 0.9 x 15 GiB
    bf16 = next(x for x in d if x.category == "dtype_unsupported")
    assert "--dtype half" in bf16.fix.summary and bf16.facts["predicted"] is True


def test_tensor_parallel_that_does_not_divide_the_heads(tmp_path):
    d = _predict(_model_dir(tmp_path, LLAMA_8B, 15.0), "-tp", "3", gpu=("NVIDIA L4", 4, "8.9", 24.0))
    assert d[0].signature == "preflight.tp_heads_not_divisible" and "(32)" in d[0].title


def test_more_gpus_asked_for_than_there_are(tmp_path):
    d = _predict(_model_dir(tmp_path, LLAMA_8B, 15.0), "--tensor-parallel-size=8", gpu=("NVIDIA L4", 2, "8.9", 24.0))
    assert d[0].signature == "preflight.world_exceeds_gpus"


def test_kv_cache_budget_gives_the_largest_length_that_fits(tmp_path):
    cfg = dict(LLAMA_8B, max_position_embeddings=131072)
    d = _predict(_model_dir(tmp_path, cfg, 15.0), gpu=("NVIDIA L4", 1, "8.9", 24.0))
    kv = next(x for x in d if x.category == "kv_cache_memory")
    fits = kv.facts["largest_max_model_len"]
    assert 0 < fits < 131072 and f"at most {fits}" in kv.fix.summary
    # and at that length nothing is predicted
    assert _predict(_model_dir(tmp_path, cfg, 15.0, name="m2"), "--max-model-len", str(fits),
                    gpu=("NVIDIA L4", 1, "8.9", 24.0)) == []


def test_dsa_model_on_sm120_without_a_sparse_backend(tmp_path):
    m = Machine(gpus=given_gpus("NVIDIA RTX PRO 6000 Blackwell Server Edition", 8, "12.0", 96.0),
                packages={"vllm": "0.16.0"})
    d = _predict(_model_dir(tmp_path, DSV32), "-tp", "8", machine=m)
    att = next(x for x in d if x.category == "attention_backend")
    assert att.fix.playbook == "attention-sparse-mla" and att.facts["head_size"] == 576
    assert "added in 0.24.0" in " ".join(att.facts["rejected"]["FLASHINFER_MLA_SPARSE_SM120"])


def test_the_same_model_on_a_new_enough_vllm_with_the_right_cache_passes(tmp_path):
    m = Machine(gpus=given_gpus("NVIDIA RTX PRO 6000 Blackwell Server Edition", 8, "12.0", 96.0),
                packages={"vllm": "0.33.0"})
    d = _predict(_model_dir(tmp_path, DSV32), "-tp", "8", "--kv-cache-dtype", "fp8_ds_mla", machine=m)
    assert not [x for x in d if x.category == "attention_backend"]
    m.packages["triage-sparse-mla"] = "0.1.0"  # the bundled backend, for fp16 checkpoints on older vLLM
    d = _predict(_model_dir(tmp_path, dict(DSV32, torch_dtype="float16"), name="fp16"), "-tp", "8",
                 "--attention-backend", "CUSTOM", machine=m)
    assert not [x for x in d if x.category == "attention_backend"]


def _fake_env(tmp_path: Path, vllm: str, registry: str, quant: dict[str, int]) -> str:
    prefix = tmp_path / "venv"
    site = prefix / "lib" / "python3.12" / "site-packages"
    (site / f"vllm-{vllm}.dist-info").mkdir(parents=True)
    (site / f"vllm-{vllm}.dist-info" / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {vllm}\n\n")
    models = site / "vllm" / "model_executor" / "models"
    models.mkdir(parents=True)
    (models / "registry.py").write_text(registry)
    q = site / "vllm" / "model_executor" / "layers" / "quantization"
    q.mkdir(parents=True)
    for name, cap in quant.items():
        (q / f"{name}.py").write_text(f"class C:\n    @classmethod\n    def get_min_capability(cls) -> int:\n        return {cap}\n")
    (prefix / "bin").mkdir()
    py = prefix / "bin" / "python"
    py.write_text("#!/bin/sh\necho this interpreter must never run >&2\nexit 99\n")
    py.chmod(0o755)
    return str(py)


def test_the_installed_vllm_is_read_from_its_files_never_run(tmp_path):
    py = _fake_env(tmp_path, "0.8.5", '_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n', {"awq": 75})
    m = Machine(gpus=given_gpus("Tesla V100", 1, "7.0", 32.0))
    read_environment(m, py)
    assert m.packages["vllm"] == "0.8.5"
    qwen3 = dict(LLAMA_8B, architectures=["Qwen3ForCausalLM"], model_type="qwen3", torch_dtype="float16")
    d = _predict(_model_dir(tmp_path, qwen3, 15.0), machine=m)
    assert d[0].signature == "preflight.architecture_unsupported" and "Qwen3ForCausalLM" in d[0].title
    awq = dict(LLAMA_8B, torch_dtype="float16", quantization_config={"quant_method": "awq"})
    d = _predict(_model_dir(tmp_path, awq, 4.0, name="awq"), machine=m)
    q = next(x for x in d if x.category == "quantization")
    assert q.facts["min_capability"] == 75 and "installed vLLM's source" in q.evidence[0].text


def test_the_hugging_face_cache_layout(tmp_path, monkeypatch):
    snap = tmp_path / "hub" / "models--meta-llama--Llama-3.1-8B" / "snapshots" / "abc123"
    snap.mkdir(parents=True)
    (snap / "config.json").write_text(json.dumps(LLAMA_8B))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    m = read_model("meta-llama/Llama-3.1-8B")
    assert m.where == str(snap) and m.config["model_type"] == "llama"
    assert "nor in the Hugging Face cache" in read_model("someone/else").problem


def _gguf(path: Path, meta: list[tuple[str, int, object]], tensors: list[tuple[str, list[int], int]]) -> None:
    """A GGUF v3 file as llama.cpp writes it: header, key-values, tensor infos, aligned data."""
    def s(text: str) -> bytes:
        b = text.encode()
        return struct.pack("<Q", len(b)) + b
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta))
    for key, vtype, value in meta:
        out += s(key) + struct.pack("<I", vtype)
        if vtype == 8:
            out += s(value)
        elif vtype == 9:  # an array of strings (a vocabulary)
            out += struct.pack("<IQ", 8, len(value)) + b"".join(s(v) for v in value)
        else:
            out += struct.pack({4: "<I", 6: "<f", 10: "<Q"}[vtype], value)
    offset = 0
    for name, dims, ttype in tensors:
        out += s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", ttype, offset)
        offset += 32
    out += b"\0" * (-len(out) % 32) + b"\0" * offset  # a stand-in for the data section
    path.write_bytes(out)


def test_gguf_header_gives_architecture_shape_and_tensor_sizes(tmp_path):
    f = tmp_path / "model-Q4_K_M.gguf"
    meta = [("general.architecture", 8, "llama"), ("general.name", 8, "Llama 3.1 8B"),
            ("llama.block_count", 4, 32), ("llama.context_length", 4, 131072), ("llama.embedding_length", 4, 4096),
            ("llama.attention.head_count", 4, 32), ("llama.attention.head_count_kv", 4, 8),
            ("llama.rope.freq_base", 6, 500000.0), ("tokenizer.ggml.tokens", 9, [f"t{i}" for i in range(100)])]
    # token_embd in Q4_K (256 elements in 144 bytes), one attention weight in F16, a norm in F32
    tensors = [("token_embd.weight", [4096, 128256], 12), ("blk.0.attn_q.weight", [4096, 4096], 1),
               ("blk.0.attn_norm.weight", [4096], 0)]
    _gguf(f, meta, tensors)
    assert gguf_architecture(str(f)) == "llama"
    m = read_model(str(f))
    assert m.weight_bytes == 4096 * 128256 // 256 * 144 + 4096 * 4096 * 2 + 4096 * 4
    assert m.config["num_key_value_heads"] == 8 and m.config["max_position_embeddings"] == 131072
    # the GGUF's shape feeds the same checks: 131072 tokens of KV cache do not fit a 16 GiB T4
    d = _predict(f, gpu=("Tesla T4", 1, "7.5", 16.0))
    kv = next(x for x in d if x.category == "kv_cache_memory")
    assert kv.facts["kv_bytes_per_token"] == 32 * 2 * 8 * 128 * 2
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + struct.pack("<IQQ", 99, 0, 0))
    assert "version 99" in read_model(str(bad)).problem


@pytest.mark.parametrize("argv,err", [(["vllm", "serve"], "no model"), (["vllm", "serve", "m", "--max-model-len"], "needs a value"),
                                      (["vllm", "serve", "m", "-tp", "two"], "not a valid int")])
def test_launch_errors(argv, err):
    with pytest.raises(LaunchError, match=err):
        parse_launch(argv)


def test_launch_forms():
    a = parse_launch(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "x/y", "--dtype=half",
                      "-tp", "2", "--enforce-eager", "--some-new-flag", "v"])
    assert (a.model, a.dtype, a.tp) == ("x/y", "half", 2) and "--enforce-eager" in a.switches
    assert a.other == ["--some-new-flag", "v"]


def test_cli_demo_predicts_what_the_demo_log_is_diagnosed_with():
    r = run_triage("preflight", "--demo", "--json")
    assert r.returncode == 0, r.stderr
    pred = json.loads(r.stdout)
    assert pred["predicted"] is True and pred["diagnoses"][0]["category"] == "attention_backend"
    log = run_triage("--log", str(ROOT / "triage" / "demo" / "glm5_sm120.log"), "--json", "--offline", "--no-probe")
    assert json.loads(log.stdout)["diagnoses"][0]["category"] == pred["diagnoses"][0]["category"]


def test_cli_usage_error_is_one_line_and_exit_2(tmp_path):
    r = run_triage("preflight", "--gpu", "T4", "--", "vllm", "serve", str(tmp_path))
    assert r.returncode == 2 and r.stderr.decode().count("\n") == 1 and "Traceback" not in r.stderr.decode()


def test_cli_healthy_exits_3(tmp_path):
    d = _model_dir(tmp_path, LLAMA_8B, 15.0)
    r = run_triage("preflight", "--gpu", "NVIDIA A100-SXM4-80GB", "--cc", "8.0", "--gpu-mem-gib", "80", "--",
                   "vllm", "serve", str(d))
    assert r.returncode == 3, r.stdout + r.stderr
    assert b"No failure predicted" in r.stdout


def test_sliding_window_layers_hold_only_their_window(tmp_path):
    """Gemma 3: five layers in six attend to 1024 tokens; only the full-attention ones grow with the length."""
    cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 5376,
           "num_hidden_layers": 62, "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128,
           "sliding_window": 1024, "sliding_window_pattern": 6, "max_position_embeddings": 131072,
           "torch_dtype": "bfloat16"}
    assert _predict(_model_dir(tmp_path, cfg, 51.1), gpu=("NVIDIA H100 80GB HBM3", 1, "9.0", 80.0)) == []
    every = dict(cfg, sliding_window_pattern=None)  # the same cache counted as full on every layer
    d = _predict(_model_dir(tmp_path, every, 51.1, name="all-full"), gpu=("NVIDIA H100 80GB HBM3", 1, "9.0", 80.0))
    assert [x.category for x in d] == ["kv_cache_memory"] and d[0].facts["largest_max_model_len"] < 131072


def test_installation_driver_against_torch_cuda_and_torch_against_vllms_pin(tmp_path):
    """From metadata only: torch's +cu tag against the driver's CUDA (NVML), and the torch vLLM's METADATA
    pins against the torch installed; each predicted as the category its failure log is diagnosed with."""
    site = tmp_path / "venv" / "lib" / "python3.12" / "site-packages"
    for name, version, extra in (("vllm", "0.11.2", "Requires-Dist: torch==2.9.0\nRequires-Dist: torchaudio==2.9.0\n"),
                                 ("torch", "2.8.0+cu128", "")):
        info = site / f"{name}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{extra}\n")
    (tmp_path / "venv" / "bin").mkdir()
    py = tmp_path / "venv" / "bin" / "python"
    py.write_text("#!/bin/sh\nexit 99\n")
    m = Machine(gpus=given_gpus("NVIDIA L4", 1, "8.9", 24.0))
    read_environment(m, str(py))
    assert m.torch_pin == "2.9.0"
    m.cuda_driver_version = "12.4"
    d = _predict(_model_dir(tmp_path, LLAMA_8B, 15.0), machine=m)
    log_cat = json.loads(run_triage("--log", str(ROOT / "tests" / "logs" / "cuda.driver_too_old.log"), "--json",
                                    "--offline", "--no-probe").stdout)["diagnoses"][0]["category"]
    assert d[0].category == log_cat == "cuda_driver" and d[0].facts["torch_cuda_version"] == "12.8"
    m.cuda_driver_version = "12.8"
    d = _predict(_model_dir(tmp_path, LLAMA_8B, 15.0, name="m2"), machine=m)
    log_cat = json.loads(run_triage("--log", str(ROOT / "tests" / "logs" / "install.torch_version_pin.log"), "--json",
                                    "--offline", "--no-probe").stdout)["diagnoses"][0]["category"]
    assert d[0].category == log_cat == "install_mismatch" and d[0].facts == {
        "predicted": True, "want": "2.9.0", "have": "2.8.0+cu128"}


def test_a_quantization_method_this_vllm_does_not_know(tmp_path):
    py = _fake_env(tmp_path, "0.33.0", '_MODELS = {"LlamaForCausalLM": ("llama", "LlamaForCausalLM")}\n', {})
    q = tmp_path / "venv" / "lib" / "python3.12" / "site-packages" / "vllm" / "model_executor" / "layers" / "quantization"
    (q / "__init__.py").write_text('from typing import Literal\n\nQuantizationMethods = Literal[\n    "awq",\n    "fp8",\n]\n'
                                   'def get_quantization_config(quantization):\n    from .fp8 import Fp8Config\n'
                                   '    method_to_config = {"fp8": Fp8Config}\n    return method_to_config[quantization]\n')
    (q / "fp8.py").write_text("class Fp8Config:\n    @classmethod\n    def get_min_capability(cls) -> int:\n        return 75\n")
    m = Machine(gpus=given_gpus("NVIDIA L4", 1, "8.9", 24.0))
    read_environment(m, py)
    bnb = dict(LLAMA_8B, quantization_config={"quant_method": "bitsandbytes"})
    d = _predict(_model_dir(tmp_path, bnb, 5.0), machine=m)
    assert d[0].signature == "preflight.invalid_method" and d[0].title == "Invalid quantization method: bitsandbytes"
    log = run_triage("--log", str(ROOT / "tests" / "logs" / "quant.invalid_method.log"), "--json", "--offline", "--no-probe")
    assert json.loads(log.stdout)["diagnoses"][0]["category"] == d[0].category
    m.gpus = given_gpus("Tesla T4", 1, "7.0", 16.0)  # fp8's class here says 7.5: read through the method table
    d = _predict(_model_dir(tmp_path, dict(LLAMA_8B, torch_dtype="float16", quantization_config={"quant_method": "fp8"}),
                            5.0, name="fp8"), machine=m)
    assert d[0].category == "quantization" and d[0].facts["min_capability"] == 75
