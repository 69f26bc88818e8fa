"""Right in substance: real failures whose cause and working fix are settled in a public thread.

tests/logs/substance/<category>--<name>.log rebuilds a thread's failure with its exact error strings and
numbers; expected.yaml records the thread, the settled cause and the fix that worked, and what the
diagnosis must say: the words that name the cause, the remedy that must come first in the fix, and the
claims the thread refutes. A right category alone does not pass.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from triage.diagnose import diagnose
from triage.enrich import enrich
from triage.logread import scan_path, scan_text
from triage.model import CATEGORIES
from triage.pipeline import environment_from_log

HERE = Path(__file__).parent / "logs" / "substance"
EXPECTED: dict[str, dict] = yaml.safe_load((HERE / "expected.yaml").read_text())


def test_every_log_has_its_thread():
    assert {p.name for p in HERE.glob("*.log")} == set(EXPECTED)
    for name, e in EXPECTED.items():
        assert e["category"] in CATEGORIES and name.split("--", 1)[0] == e["category"], name
        assert e["source"].startswith("https://") and e["root_cause"] and e["working_fix"], name
        assert e["cause"] and e["fix_first"], name


def _top(name: str):
    scan = scan_path(str(HERE / name))
    diagnoses, _ = diagnose(scan)
    enrich(diagnoses, environment_from_log(scan))
    return diagnoses


@pytest.mark.parametrize("name", sorted(EXPECTED), ids=sorted(EXPECTED))
def test_cause_and_first_fix(name):
    e = EXPECTED[name]
    diagnoses = _top(name)
    assert diagnoses, name
    d = diagnoses[0]
    assert (d.category, d.signature) == (e["category"], e["signature"]), [(x.signature, x.title) for x in diagnoses[:3]]
    said = "\n".join([d.title, *d.explanation, d.fix.summary])
    for words in e["cause"]:
        assert words in said, (words, said)
    fix = d.fix.summary
    assert e["fix_first"] in fix, (e["fix_first"], fix)
    first = fix.index(e["fix_first"])
    for alt in e.get("after") or []:
        assert alt in fix and fix.index(alt) > first, (alt, fix)
    for words in e.get("also") or []:
        assert words in said, (words, said)
    for claim in e.get("not") or []:
        assert claim not in said, (claim, said)
    # the same verdict from the in-memory path (Python selection instead of grep)
    d2, _ = diagnose(scan_text((HERE / name).read_bytes()))
    assert d2 and d2[0].signature == d.signature


# --- message-level checks, in the wordings of vLLM and its libraries (read from their source) -----------------

def _one(text: str):
    ds, _ = diagnose(scan_text(text))
    assert ds, text
    return ds[0]


def test_invalid_choice_names_the_closest_value_in_newer_argparse_format():
    # Python >= 3.12.8 prints the choices without quotes
    d = _one("vllm serve: error: argument --kv-cache-dtype: invalid choice: 'fp8_e4m3fn' "
             "(choose from auto, bfloat16, fp8, fp8_ds_mla, fp8_e4m3, fp8_e5m2, fp8_inc)\n")
    assert d.signature == "config.invalid_choice"
    assert d.facts["closest"] == "fp8_e4m3" and "--kv-cache-dtype fp8_e4m3" in d.fix.summary
    d = _one("vllm serve: error: argument --dtype: invalid choice: 'bf16' (choose from 'auto', 'half', 'float16', "
             "'bfloat16', 'float', 'float32')\n")
    assert d.facts["closest"] == "bfloat16" and d.fix.summary.startswith("--dtype exists")


def test_unknown_flag_is_still_unknown():
    d = _one("vllm serve: error: unrecognized arguments: --enable-reasoning\n")
    assert d.signature == "config.unrecognized_argument" and "removed" in d.fix.summary


def test_rocm_build_without_the_gfx_target():
    d = _one("INFO 05-01 10:00:00 [__init__.py:235] Automatically detected platform rocm.\n"
             "RuntimeError: HIP error: invalid device function\n"
             "HIP kernel errors might be asynchronously reported at some other API call\n")
    assert d.signature == "gpu.no_kernel_image"
    assert "PYTORCH_ROCM_ARCH" in d.fix.summary and "TORCH_CUDA_ARCH_LIST" not in d.fix.summary


def test_newer_gpu_than_the_check_is_a_build_gap():
    d = _one("INFO 03-01 10:00:00 [cuda.py:1] Found GPU0 NVIDIA GeForce RTX 5090 which is of cuda capability 12.0.\n"
             "ERROR 03-01 10:00:01 [core.py:1] RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert d.facts.get("cause") == "build_gap", (d.signature, d.title, d.fix.summary)
    assert "build gap, not a GPU limitation" in d.fix.summary and "needs a newer GPU" not in d.fix.summary


def test_old_gpu_below_the_check_is_too_old():
    d = _one("INFO 03-01 10:00:00 [cuda.py:1] Found GPU0 Tesla T4 which is of cuda capability 7.5.\n"
             "ERROR 03-01 10:00:01 [core.py:1] RuntimeError: FlashAttention only supports Ampere GPUs or newer.\n")
    assert d.facts.get("cause") == "gpu_too_old" and "newer GPU" in d.fix.summary


def test_backend_from_the_environment_is_the_users_choice():
    d = _one("$ VLLM_ATTENTION_BACKEND=FLASHINFER vllm serve google/gemma-4-31b-it\n"
             "(APIServer pid=1) INFO 04-24 16:44:00 [utils.py:233] non-default args: {'model_tag': 'google/gemma-4-31b-it'}\n"
             "(EngineCore pid=274) ERROR 04-24 16:45:02 [core.py:1108] ValueError: Selected backend "
             "AttentionBackendEnum.FLASHINFER is not valid for this configuration. Reason: ['head_size not supported']\n")
    assert d.facts["chosen_by"] == "user" and "VLLM_ATTENTION_BACKEND=FLASHINFER" in d.fix.summary
    assert "drop the override" in d.fix.summary


def test_phase_is_the_specific_function_not_the_innermost_dummy_run():
    from triage.rules.budget import phase_of

    assert phase_of(["compile_or_warm_up_model", "capture_model", "_capture_cudagraphs", "_dummy_run"]) == \
        "CUDA graph capture"
    assert phase_of(["determine_available_memory", "profile_run", "_dummy_run", "forward"]) == "memory profiling"
    assert phase_of(["profile_run", "_dummy_sampler_run", "sample"]) == "sampler warm-up"
    assert phase_of(["load_model", "load_weights", "weight_loader"]) == "weight loading"
    assert phase_of([], "CUDA out of memory occurred when warming up sampler with 256 dummy requests") == \
        "sampler warm-up"


def test_a_block_size_vllm_chose_is_not_blamed_on_the_launch():
    d = _one("(APIServer pid=1) INFO 12-07 09:38:02 [utils.py:253] non-default args: {'model_tag': 'm', 'model': 'm'}\n"
             "ERROR 11-20 08:01:02 [core.py:700] ValueError: No valid attention backend found for cuda with "
             "head_size: 128, dtype: torch.bfloat16, kv_cache_dtype: auto, block_size: 128, use_mla: False, "
             "has_sink: False, use_sparse: False. Reasons: {FLASH_ATTN: [block_size not supported], "
             "TRITON_ATTN: [compute capability not supported]}.\n")
    assert d.signature == "attention.no_valid_backend"
    assert d.facts.get("block_size_chosen_by") == "vllm"
    assert any("was not set by this launch" in ln for ln in d.explanation)


def test_missing_cuda12_runtime_under_a_cuda11_torch_is_a_wheel_mismatch():
    d = _one("PyTorch version: 2.1.0+cu118\nCUDA used to build PyTorch: 11.8\nTraceback (most recent call last):\n"
             '  File "/usr/local/lib/python3.10/dist-packages/vllm/utils.py", line 8, in <module>\n'
             "    from vllm import cuda_utils\n"
             "ImportError: libcudart.so.12: cannot open shared object file: No such file or directory\n")
    assert d.signature == "install.cuda_runtime_lib_missing" and d.facts["cause"] == "wheel_torch_cuda_mismatch"
    fix = d.fix.summary
    assert "built for CUDA 12" in fix and "CUDA 11.8" in fix
    assert fix.index("Install the torch build this vLLM pins") < fix.index("vLLM wheel built for CUDA 11.8")
    # a library whose soname does not carry the CUDA major (cuDNN 9) is not read as a CUDA version
    d = _one("ImportError: libcudnn.so.9: cannot open shared object file: No such file or directory\n")
    assert d.facts.get("cause") is None and "CUDA 9" not in d.fix.summary


def test_torch_from_a_cuda_index_url_is_read_as_its_cuda():
    d = _one("$ pip install torch==2.8.0 --index-url https://download.pytorch.org/whl/cu129\n"
             "Traceback (most recent call last):\n"
             '  File "/usr/local/lib/python3.12/dist-packages/vllm/_custom_ops.py", line 8, in <module>\n'
             "    import vllm._C\n"
             "ImportError: libcudart.so.13: cannot open shared object file: No such file or directory\n")
    assert d.signature == "install.cuda_runtime_lib_missing" and d.facts["torch_cuda"] == "12.9"
    assert d.facts["cause"] == "wheel_torch_cuda_mismatch"


def test_an_old_glibc_is_not_called_a_cpp_runtime():
    d = _one("ImportError: /lib64/libc.so.6: version `GLIBC_2.32' not found (required by "
             "/opt/venv/lib/python3.10/site-packages/vllm/_C.abi3.so)\n")
    assert d.signature == "install.glibc_too_old" and "libstdc++" not in d.fix.summary
    d = _one("ImportError: /usr/lib/x86_64-linux-gnu/libstdc++.so.6: version `GLIBCXX_3.4.30' not found\n")
    assert d.signature == "install.glibcxx"
