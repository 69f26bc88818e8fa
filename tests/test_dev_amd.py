"""amd's dev set (tests/logs/dev-amd/): real logs from vLLM on platforms other than NVIDIA CUDA (ROCm, TPU, XPU,
Gaudi, CPU, Ascend) and from platform detection failing, through the CLI; and the mechanisms that name them, each
on the other wordings the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-amd")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- the CPU backend's ISA-gated ops (csrc/cpu/torch_bindings.cpp) ------------------------------------------

@pytest.mark.parametrize("text", [
    "AttributeError: '_OpNamespace' '_C' object has no attribute 'create_onednn_scaled_mm_handler'\n",
    "ERROR 09-12 08:41:31 [core.py:700] AttributeError: '_OpNamespace' '_C' object has no attribute 'onednn_scaled_mm'\n",
    "RuntimeError: No such operator _C::onednn_scaled_mm\n",
    # an op CUDA builds have too: the CPU backend only when the log says so
    "INFO 09-12 08:41:17 [__init__.py:241] Automatically detected platform cpu.\n"
    "AttributeError: '_OpNamespace' '_C' object has no attribute 'dynamic_scaled_int8_quant'\n",
])
def test_cpu_w8a8_op_missing_is_the_cpus_instruction_set(text):
    d = first(text)
    assert (d.signature, d.category) == ("quant.cpu_w8a8_isa", "quantization")


def test_int8_quant_op_missing_without_the_cpu_backend_stays_an_install_mismatch():
    d = first("AttributeError: '_OpNamespace' '_C' object has no attribute 'static_scaled_int8_quant'\n")
    assert d.signature != "quant.cpu_w8a8_isa" and d.category == "install_mismatch"


@pytest.mark.parametrize("op", ["init_shm_manager", "shm_allreduce", "shm_all_gather", "join_shm_manager"])
def test_cpu_shm_op_missing_is_tensor_parallel_on_a_cpu_without_it(op):
    d = first(f"AttributeError: '_OpNamespace' '_C' object has no attribute '{op}'\n")
    assert (d.signature, d.category) == ("distributed.cpu_shm_isa", "distributed")


def test_cpu_shm_op_missing_told_in_prose():
    d = first("init_shm_manager is not implemented when NOT AVX512_FOUND, which makes it impossible to use tensor "
              "parallel on non-avx512 CPUs\n")
    assert (d.signature, d.category) == ("distributed.cpu_shm_isa", "distributed")


def test_another_op_not_implemented_in_prose_is_not_the_shm_rule():
    d = top("NotImplementedError: fused_moe is not implemented for this platform\n")
    assert d is None or d.signature != "distributed.cpu_shm_isa"


def test_another_missing_op_stays_mixed_vllm_versions():
    d = first("AttributeError: '_OpNamespace' '_C' object has no attribute 'silu_and_mul'\n")
    assert d.signature == "install.vllm_ops_missing"


# ---- torch.xpu.mem_get_info on Intel client / integrated GPUs -----------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: The device (Intel(R) Graphics [0x64a0]) doesn't support querying the available free memory. "
    "You can file an issue at https://github.com/pytorch/pytorch/issues to help us prioritize its implementation.\n",
    "RuntimeError: The device (Intel(R) Arc(TM) Graphics) doesn't support querying the available free memory.\n",
    "RuntimeError: The device does not have the ext_intel_free_memory aspect\n",
    '[Bug]: Intel Arc 140T GPU XPU backend fails with "doesn\'t support querying the available free memory" error\n',
])
def test_xpu_free_memory_query_unsupported(text):
    d = first(text)
    assert (d.signature, d.category) == ("xpu.free_memory_query_unsupported", "unsupported_gpu")


# ---- ROCm kernels whose body is compiled out for a Radeon GPU (UNREACHABLE_CODE) ----------------------------

@pytest.mark.parametrize("text, kernel", [
    ("/app/vllm/build/temp.linux-x86_64-cpython-312/csrc/rocm/skinny_gemms.hip:497: void wvSplitK_hf_sml_(const int,"
     " const int, const scalar_t *, const scalar_t *__restrict, scalar_t *, const int, const int) [scalar_t = "
     "__hip_bfloat16, THRDS = 64, YTILE = 2, WvPrGrp = 16, A_CHUNK = 8, UNRL = 2, N = 2]: Device-side assertion "
     "`false' failed.\n", "wvSplitK_hf_sml_"),
    ("/vllm/build/temp.linux-x86_64-cpython-310/csrc/rocm/skinny_gemms.hip:160: void LLGemm1_kernel(const int, const "
     "int, const c10::Half *, const c10::Half *, c10::Half *) : Device-side assertion `false' failed.\n",
     "LLGemm1_kernel"),
    ("/vllm/build/temp.linux-x86_64-cpython-312/csrc/rocm/attention.hip:1402: void "
     "paged_attention_ll4mi_QKV_mfma16_kernel(const scalar_t *, const cache_t *, const cache_t *, const int, const "
     "float, const int *, const int *, const int, const float *, const int, const int, const int, float *, float *, "
     "scalar_t *, OUTT *, int, const float *, const float *) [scalar_t = _Float16, cache_t = _Float16]: Device-side "
     "assertion `false' failed.\n", "paged_attention_ll4mi_QKV_mfma16_kernel"),
])
def test_rocm_kernel_compiled_out_for_this_gpu(text, kernel):
    d = first(text)
    assert (d.signature, d.category) == ("gpu.rocm_kernel_arch_compiled_out", "unsupported_gpu")
    assert d.facts["kernel"] == kernel


def test_a_device_assertion_in_another_kernel_is_not_the_rocm_arch_rule():
    d = top("/pytorch/aten/src/ATen/native/hip/Indexing.hip:1237: indexSelectSmallIndex: Device-side assertion "
            "`srcIndex < srcSelectDimSize' failed.\n")
    assert d is None or d.signature != "gpu.rocm_kernel_arch_compiled_out"


# ---- first-generation Gaudi ------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "[Bug]: vLLM OpenAI API Server Fails to Run on Gaudi 1\n"
    "ERROR 02-04 12:35:23 engine.py:387] [Rank:0] FATAL ERROR :: MODULE:PT_LAZY Error, ValidateSyncInputTensors "
    "tensor_data is empty.\n",
    "Running on a Gaudi1 server (HL-205):\n"
    "RuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure].\n",
])
def test_gaudi1_is_not_supported(text):
    d = first(text)
    assert (d.signature, d.category) == ("gpu.gaudi1_unsupported", "unsupported_gpu")


@pytest.mark.parametrize("text", [
    # the Gaudi software version, not the device generation
    "vllm 0.6.4.post2+Gaudi-1.19.0\nRuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure].\n",
    "Gaudi 1.20.0 docker image on Gaudi 2\nRuntimeError: Graph compile failed. synStatus=synStatus 26 [Generic failure].\n",
])
def test_a_gaudi_software_version_is_no_gaudi1(text):
    d = top(text)
    assert d is None or d.signature != "gpu.gaudi1_unsupported"


def test_gaudi1_named_without_a_failure_is_nothing():
    d = top("INFO 02-04 12:34:57 __init__.py:192] Automatically detected platform hpu.\nTested on Gaudi 1 and Gaudi 2.\n")
    assert d is None or d.signature != "gpu.gaudi1_unsupported"


# ---- platform detection on a Gaudi machine: software, never the devices ----------------------------------

@pytest.mark.parametrize("text", [
    "[Bug]: RuntimeError: Failed to infer device type on Gaudi 3 System\n",
    "Running vllm serve on our HPU node:\nRuntimeError: Failed to infer device type\n",
    "INFO 02-23 00:50:03 __init__.py:187] No platform detected, vLLM is running on UnspecifiedPlatform\n"
    "docker run -it --runtime=habana -e HABANA_VISIBLE_DEVICES=all vllm-hpu-env\n"
    "RuntimeError: Device string must not be empty\n",
])
def test_no_platform_on_gaudi_is_missing_gaudi_software(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.platform_build_mismatch", "install_mismatch")
    assert "Gaudi" in d.title


def test_no_platform_on_gaudi_is_not_read_as_a_broken_vllm_c():
    d = first("vllm serve on a Gaudi 3 node:\n"
              "WARNING 01-27 11:10:30 [interface.py:222] Failed to import from vllm._C: "
              "ModuleNotFoundError(\"No module named 'vllm._C'\")\n"
              "INFO 01-27 11:10:30 [__init__.py:243] No platform detected, vLLM is running on UnspecifiedPlatform\n"
              "RuntimeError: Failed to infer device type\n")
    assert d.signature == "install.platform_build_mismatch" and "Gaudi" in d.title


def test_no_platform_in_a_plain_container_stays_no_gpu_visible():
    d = first("INFO 11-27 07:19:27 api_server.py:194] Started engine process with PID 16\n"
              "RuntimeError: Failed to infer device type\n")
    assert (d.signature, d.category) == ("environment.no_gpu_visible", "environment")


# ---- NumPy's removed aliases ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, attr", [
    ("AttributeError: `np.float_` was removed in the NumPy 2.0 release. Use `np.float64` instead.\n", "float_"),
    ("AttributeError: `np.NaN` was removed in the NumPy 2.0 release. Use `np.nan` instead.\n", "NaN"),
    ("AttributeError: module 'numpy' has no attribute 'float'.\n`np.float` was a deprecated alias for the builtin "
     "`float`. To avoid this error in existing code, use `float` by itself.\n", "float"),
    ("[Bug]: vllm serve run failed, numpy AttributeError: `np.float_` removed\n", "float_"),
])
def test_numpy_removed_alias_is_code_for_an_older_numpy(text, attr):
    d = first(text)
    assert (d.signature, d.category) == ("install.numpy_removed_alias", "install_mismatch")
    assert d.facts["attr"] == attr


# ---- a missing module below a private package is another release of that package ------------------------

def test_missing_module_under_a_private_package_is_api_skew():
    d = first("Qwen2.5-VL-7B-Instruct: No module named 'qwix._src.core.ragged_dot'\n")
    assert (d.signature, d.category) == ("install.package_api_skew", "install_mismatch")
    assert d.facts["package"] == "qwix"


def test_a_missing_private_module_is_not_api_skew():
    d = top("ModuleNotFoundError: No module named 'somepkg.ops._C'\n")
    assert d is None or d.signature != "install.package_api_skew"


# ---- ROCm AITER MLA's head count, FP4 before gfx950, attention a platform does not implement ---------------

@pytest.mark.parametrize("text, heads", [
    ("ERROR 11-22 04:37:16 [multiproc_executor.py:597] AssertionError: Aiter MLA only supports 16 or 128 number of "
     "heads.\nERROR 11-22 04:37:16 [multiproc_executor.py:597] Provided 32 number of heads.\n", "32"),
    ("[rank0]: AssertionError: nhead=32 not supported\n", "32"),
    ("AITER MLA kernels don't support Kimi K2.5 `TP8` yet (num_head=8) and that it only supports "
     '`"16 or 128 number of heads."`\n', "8"),
])
def test_aiter_mla_head_count(text, heads):
    d = first(text)
    assert (d.signature, d.category) == ("attention.aiter_mla_num_heads", "attention_backend")
    assert d.facts["heads"] == heads


@pytest.mark.parametrize("text, fmt, arch", [
    ("RuntimeError: MXFP4 quantization is not supported on gfx942\n", "MXFP4", "gfx942"),
    ("ValueError: FP4 is not supported on gfx90a\n", "FP4", "gfx90a"),
])
def test_fp4_before_gfx950(text, fmt, arch):
    d = first(text)
    assert (d.signature, d.category) == ("quant.fp4_needs_gfx950", "quantization")
    assert (d.facts["fmt"], d.facts["arch"]) == (fmt, arch)


def test_fp4_on_gfx950_itself_is_not_this_rule():
    d = top("RuntimeError: MXFP4 quantization is not supported on gfx950 with this AITER build\n")
    assert d is None or d.signature != "quant.fp4_needs_gfx950"


@pytest.mark.parametrize("text, platform", [
    ("NotImplementedError: Sparse Attention is not supported on HPU.\n", "HPU"),
    ("NotImplementedError: Encoder-only attention is not supported on TPU\n", "TPU"),
])
def test_attention_a_platform_does_not_implement(text, platform):
    d = first(text)
    assert (d.signature, d.category) == ("attention.platform_feature_unsupported", "attention_backend")
    assert d.facts["platform"] == platform


# ---- ROCm platform detection under WSL2 (amdsmi cannot initialise there) -----------------------------------

def test_rocm_under_wsl2_without_a_platform():
    d = first("Python platform: Linux-5.15.167.4-microsoft-standard-WSL2-x86_64-with-glibc2.35\n"
              "GPU models and configuration: AMD Radeon RX 7900 XT (gfx1100)\n"
              "INFO 11-26 10:21:44 __init__.py:187] No platform detected, vLLM is running on UnspecifiedPlatform\n"
              "RuntimeError: Failed to infer device type\n")
    assert (d.signature, d.category) == ("environment.rocm_wsl_detection", "environment")


def test_nvidia_under_wsl2_is_not_the_rocm_rule():
    d = first("Python platform: Linux-5.15.167.4-microsoft-standard-WSL2-x86_64-with-glibc2.35\n"
              "GPU models and configuration: GPU 0: NVIDIA GeForce RTX 4090\n"
              "RuntimeError: Failed to infer device type\n")
    assert d.signature != "environment.rocm_wsl_detection"


def test_rocm_on_native_linux_is_not_the_wsl_rule():
    d = first("INFO 04-09 10:00:01 [rocm.py:38] ROCm platform is not available because: amdsmi init failed\n"
              "GPU models and configuration: AMD Radeon RX 7900 XTX (gfx1100)\n"
              "RuntimeError: Failed to infer device type\n")
    assert d.signature != "environment.rocm_wsl_detection"


# ---- vLLM's extensions against another torch, told in words ------------------------------------------------

@pytest.mark.parametrize("text", [
    "vLLM serve fails on MI300X (gfx942 / TheRock 7.13 & 7.14 nightly): _C ABI mismatch — get_cuda_view_from_cpu_tensor"
    " / undefined HIP symbols\n",
    "the compiled _C / _rocm_C extensions fail to import with undefined HIP/c10 symbols\n",
    "The vLLM resolved for the managed runtime is ABI-incompatible with that runtime's torch\n",
])
def test_extension_abi_mismatch_in_words(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.extension_abi_prose", "install_mismatch")


def test_the_loaders_undefined_symbol_stays_its_own_rule():
    d = first("ImportError: /opt/venv/lib/python3.12/site-packages/vllm/_C.abi3.so: undefined symbol: "
              "_ZN3c103hip19getCurrentHIPStreamEa\n")
    assert d.signature == "install.undefined_symbol"
