"""The fallback's own mechanisms, with every hand rule switched off: the area map (module paths of vLLM and its
libraries), how an import that fails is placed, and how a traceback's frames are weighed.

Wordings are those the raising code writes (Python's getpass, vLLM's connector factories and platform layer,
Python's import system), not one log's.
"""

from __future__ import annotations

import pytest

from triage import diagnose as dg
from triage.areas import UNPLACED, area_of, area_of_trace, category_for
from triage.catalogue.store import load as load_catalogue
from triage.exception_words import category_from_words
from triage.logread import scan_text
from triage.logread.traceback import Frame

SITE = "/usr/local/lib/python3.12/dist-packages"


def fallback_top(text: str):
    """The top diagnosis of `text` with only the harmless rules on: what triage says of a failure no rule knows."""
    saved = dg._RULES
    dg._RULES = [r for r in dg.rules() if r.harmless or r.wrapper]
    try:
        ds, _ = dg.diagnose(scan_text(text))
    finally:
        dg._RULES = saved
    return ds[0] if ds else None


# ---- the map covers vLLM's packages --------------------------------------------------------------

def test_every_vllm_module_is_placed_or_deliberately_left_out():
    cat = load_catalogue()
    if cat is None:
        pytest.skip("no mined catalogue")
    mods = sorted({m for m in cat.modules if m.startswith("vllm/")})
    unplaced = [m for m in mods if area_of(m) is None and not m.startswith(UNPLACED)]
    assert not unplaced, unplaced[:20]
    # and no stale entry: each deliberate gap still holds a module the map does not place
    stale = [u for u in UNPLACED if not any(m.startswith(u) and area_of(m) is None for m in mods)]
    assert not stale, stale


@pytest.mark.parametrize("path,category", [
    ("/usr/lib/python3.10/getpass.py", "environment"),
    (f"{SITE}/nixl/_api.py", "distributed"),
    (f"{SITE}/mooncake/engine.py", "distributed"),
    (f"{SITE}/lmcache/v1/cache_engine.py", "distributed"),
    (f"{SITE}/xgrammar/compiler.py", "engine_config"),
    (f"{SITE}/outlines/fsm/guide.py", "engine_config"),
    (f"{SITE}/outlines_core/fsm/json_schema.py", "engine_config"),
    (f"{SITE}/llguidance/hf.py", "engine_config"),
    (f"{SITE}/vllm/_ipex_ops.py", "kernel_library"),
    (f"{SITE}/vllm/model_executor/layers/fla/ops/chunk.py", "kernel_library"),
    (f"{SITE}/vllm/model_executor/layers/mamba/ops/ssd_combined.py", "kernel_library"),
    (f"{SITE}/vllm/triton_utils/importing.py", "triton_compile"),
    (f"{SITE}/vllm/v1/simple_kv_offload/manager.py", "kv_cache_memory"),
    (f"{SITE}/vllm/prompt_adapter/models.py", "engine_config"),
    (f"{SITE}/vllm/distributed/kv_transfer/kv_connector/factory.py", "engine_config"),
    (f"{SITE}/vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py", "distributed"),
    (f"{SITE}/vllm/platforms/cuda.py", "environment"),
])
def test_library_and_vllm_paths(path, category):
    assert area_of(path) == category


def test_code_ray_ships_to_its_workers_is_the_jobs_not_rays():
    shipped = ("/tmp/ray/session_2025-09-04_19-02-52_192985_111429/runtime_resources/working_dir_files/"
               "_ray_pkg_efc8b708aebb3d24/trinity/common/models/vllm_model.py")
    assert area_of(shipped) is None
    assert area_of(f"{SITE}/ray/_private/worker.py") == "distributed"
    assert area_of("/tmp/ray/session_1/runtime_resources/py_modules_files/_ray_pkg_ab/vllm/lora/models.py") \
        == "engine_config"


# ---- messages placed by the module that raises them (the catalogue) -------------------------------

def test_connector_factories_refuse_a_launch_setting():
    for module in ("vllm/distributed/kv_transfer/kv_connector/factory.py",
                   "vllm/distributed/ec_transfer/ec_connector/factory.py"):
        assert category_for(module, "Unsupported connector type: LMCacheConnector", "ValueError") == "engine_config"


@pytest.mark.parametrize("module,message,kind,category", [
    ("vllm/platforms/interface.py", "Failed to import from vllm._C: ImportError('dlopen(...)')", "WARNING",
     "install_mismatch"),
    ("vllm/platforms/__init__.py", "The vLLM package was not found, so its version could not be inspected.",
     "WARNING", "install_mismatch"),
    ("vllm/platforms/rocm.py", "amdsmi did not return valid GCN arch", "RuntimeError", "unsupported_gpu"),
    ("vllm/platforms/cuda.py", "No valid attention backend found for cuda with head_size 80.", "ValueError",
     "attention_backend"),
    ("vllm/platforms/cpu.py", "MLA is not supported on CPU.", "NotImplementedError", "attention_backend"),
    ("vllm/platforms/interface.py", "Unsupported torch distributed backend: nccl", "RuntimeError", "distributed"),
    ("vllm/platforms/cuda.py", "CUDA_VISIBLE_DEVICES is set to empty string, which means GPU support is disabled.",
     "RuntimeError", "environment"),
    ("vllm/platforms/cuda.py", "Bfloat16 is only supported on GPUs with compute capability of at least 8.0.",
     "ValueError", "dtype_unsupported"),
])
def test_platform_layer_is_the_hosts_unless_its_words_say_more(module, message, kind, category):
    assert category_for(module, message, kind) == category


# ---- the user the process runs as ----------------------------------------------------------------

GETPWUID = """Traceback (most recent call last):
  File "{site}/torch/_inductor/runtime/cache_dir_utils.py", line 19, in default_cache_dir
    sanitized_username = re.sub(r'[\\\\/:*?"<>|]', "_", getpass.getuser())
  File "/usr/lib/python3.10/getpass.py", line 169, in getuser
    return pwd.getpwuid(os.getuid())[0]
KeyError: 'getpwuid(): uid not found: 1000'
"""
# Python 3.13's getuser wraps the lookup's KeyError: "raise OSError('No username set in the environment') from e"
GETPWUID_313 = GETPWUID.replace("line 169", "line 173") + """
The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "{site}/triton/runtime/cache.py", line 40, in default_cache_dir
    return os.path.join(Path.home(), ".triton", "cache")
  File "/usr/lib/python3.13/getpass.py", line 175, in getuser
    raise OSError('No username set in the environment') from e
OSError: No username set in the environment
"""


@pytest.mark.parametrize("log", [GETPWUID, GETPWUID_313])
def test_a_uid_without_passwd_entry_is_the_container_not_the_compiler(log):
    d = fallback_top(log.format(site=SITE))
    assert d is not None and d.category == "environment", (d and (d.category, d.title))


def test_getpwuid_words_decide_without_frames():
    assert category_from_words("KeyError", "'getpwuid(): uid not found: 1000'")[0] == "environment"


@pytest.mark.parametrize("value", ["MIG-74d68ce8-f74a-5408-a325-06b493f31c14", "GPU-2e782cfd-36f2-55ff-a7d5-c6734444be2b"])
def test_a_device_uuid_where_an_index_is_read_is_the_hosts_device_list(value):
    log = ("Traceback (most recent call last):\n"
           f'  File "{SITE}/vllm/platforms/cuda.py", line 60, in device_id_to_physical_device_id\n'
           "    return int(physical_device_id)\n"
           f"ValueError: invalid literal for int() with base 10: '{value}'\n")
    d = fallback_top(log)
    assert d is not None and d.category == "environment"


# ---- an import that fails: the missing module's package decides -----------------------------------

@pytest.mark.parametrize("message,category", [
    # vLLM's own FlashAttention build, its vendored kernels: the kernel library's build
    ("No module named 'vllm.vllm_flash_attn.layers'", "kernel_library"),
    ("cannot import name 'flash_attn_varlen_func' from 'vllm.vllm_flash_attn' (unknown location)", "kernel_library"),
    ("No module named 'vllm.third_party.flashmla'", "kernel_library"),
    # any other vLLM module: code written for another vLLM release (or a broken install)
    ("No module named 'vllm.entrypoints.openai.engine'", "install_mismatch"),
    ("cannot import name 'SamplerOutput' from 'vllm.sequence'", "install_mismatch"),
    # an optional package installed for a connector, pinned to vLLM's version
    ("No module named 'lmcache.experimental'", "install_mismatch"),
    ("No module named 'lmcache'", "install_mismatch"),
    # a package that is not one triage knows: the install
    ("cannot import name 'MambaCache' from 'mlx_lm.models.cache'", "install_mismatch"),
    ("No module named 'flashinfer.comm'", "kernel_library"),
])
def test_import_errors_are_placed_by_the_missing_module(message, category):
    assert category_from_words("ModuleNotFoundError", message)[0] == category


def test_an_import_error_quoted_in_prose_is_read_as_one():
    said = category_from_words("", 'Title: "ImportError: cannot import name \'MambaCache\' from \'mlx_lm.models.cache\'"')
    assert said is not None and said[0] == "install_mismatch"
    # the words "ImportError" alone (no module named) decide nothing
    assert category_from_words("", "we saw an ImportError earlier") is None


def test_a_quoted_import_error_line_is_not_overruled_by_the_word_model():
    log = ('"Failed to import from vllm._C" and "ImportError: cannot import name \'MambaCache\' from '
           '\'mlx_lm.models.cache\'"\n\nWhen I ran vllm serve, the errors in the title were output.\n')
    d = fallback_top(log)
    assert d is not None and d.category == "install_mismatch", (d and (d.category, d.signature))


# ---- frames: an import chain names no subsystem ---------------------------------------------------

IMPORT_CHAIN = [Frame(f"{SITE}/vllm/entrypoints/cli/main.py", 3, "<module>"),
                Frame(f"{SITE}/vllm/engine/arg_utils.py", 35, "<module>"),
                Frame(f"{SITE}/vllm/attention/__init__.py", 4, "<module>")]


def test_import_chain_frames_do_not_place_a_failure():
    assert area_of_trace(IMPORT_CHAIN) is None
    called = IMPORT_CHAIN[:-1] + [Frame(f"{SITE}/vllm/attention/selector.py", 90, "get_attn_backend")]
    assert area_of_trace(called) == ("attention_backend", called[-1].file)


def test_a_traceback_cut_inside_imports_is_a_guess_at_the_install():
    log = ("Traceback (most recent call last):\n"
           '  File "<frozen runpy>", line 198, in _run_module_as_main\n'
           f'  File "{SITE}/vllm/entrypoints/cli/__init__.py", line 3, in <module>\n'
           "    from vllm.entrypoints.cli.benchmark.latency import BenchmarkLatencySubcommand\n"
           f'  File "{SITE}/vllm/engine/arg_utils.py", line 35, in <module>\n'
           "    from vllm.attention.backends.registry import AttentionBackendEnum\n"
           f'  File "{SITE}/vllm/attention/__init__.py", line 4, in <module>\n'
           "    from vllm.attention.backends.abstract import (\n")
    d = fallback_top(log)
    assert d is not None and d.category != "attention_backend"
    if d.signature == "catalogue.cut_traceback" and d.category == "install_mismatch":
        assert d.confidence <= 0.3 and d.facts["category_decided"] is False


# ---- error lines: the C++ library that logged one, and which line of a ticket is the error --------------

def test_a_cpp_librarys_glog_line_is_placed_by_its_source_file():
    from triage.areas import area_of_native

    assert area_of_native("E0911 06:19:37.204734  3746 rdma_transport.cpp:426] RdmaTransport: No available RNIC") \
        == ("distributed", "rdma_transport.cpp")
    assert area_of_native("W0613 08:28:11.555796    7053 ucx_utils.cpp:43] Unexpected UCX error: Endpoint timeout")[0] \
        == "distributed"
    assert area_of_native("", "raylet_client.cc:199")[0] == "distributed"  # Ray's form, read by logread
    assert area_of_native("", "multiproc_executor.py:751") is None  # a Python logger's source: the map's business
    assert area_of_native("E0911 06:19:37.204743  3746 model_loader.cpp:234] Failed to") is None


def test_a_later_error_line_that_names_its_subsystem_wins_over_a_tickets_prose():
    log = ("I run on a machine whose IB card is disabled, which leads to the error shown below.\n\n```\n"
           "I0911 06:19:37.181130  3746 transfer_engine.cpp:146] Transfer Engine RPC using P2P handshake\n"
           "E0911 06:19:37.204720  3746 rdma_context.cpp:70] Failed to open device mlx5_3 on port  with GID 0\n"
           "E0911 06:19:37.204737  3746 rdma_transport.cpp:60] RdmaTransport: cannot initialize RDMA resources\n"
           "```\n")
    d = fallback_top(log)
    assert d is not None and d.category == "distributed" and d.signature == "generic.error_line"
    assert "rdma_context.cpp" in d.facts["category_guessed_from"]


def test_a_shared_library_it_may_not_read_is_the_hosts_not_a_missing_one():
    msg = ("python3: error while loading shared libraries: /root/.local/share/uv/python/cpython-3.12.9/lib/"
           "libpython3.12.so.1.0: cannot open shared object file: Permission denied")
    assert category_from_words("", msg)[0] == "environment"
    assert category_from_words("", msg.replace("Permission denied", "No such file or directory"))[0] \
        == "install_mismatch"


# ---- words that say more than the generic words after them (as the hand rules categorise them) ----------

@pytest.mark.parametrize("message,category", [
    ("CUDA error: operation not permitted when stream is capturing\nCUDA kernel errors might be asynchronously "
     "reported at some other API call, so the stacktrace below might be incorrect.\nCompile with "
     "`TORCH_USE_CUDA_DSA` to enable device-side assertions.", "cudagraph_capture"),
    ("HIP error: invalid device function\nCompile with `TORCH_USE_HIP_DSA` to enable device-side assertions.",
     "unsupported_gpu"),
    ("CUDA error: the provided PTX was compiled with an unsupported toolchain.", "cuda_driver"),
    ("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a driver "
     "from http://www.nvidia.com/Download/index.aspx", "environment"),
    ("Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your Tesla T4 GPU has compute "
     "capability 7.5. You can use float16 instead by explicitly setting the`dtype` flag in CLI, for example: "
     "--dtype=half.", "dtype_unsupported"),
    ("No compiled cutlass_scaled_mm for a compute capability less than CUDA device capability: 75",
     "quantization"),
    ("No compiled get_cutlass_moe_mm_data: no cutlass_scaled_mm kernel for CUDA device capability: 120.",
     "quantization"),
])
def test_specific_words_before_generic_ones(message, category):
    assert category_from_words("RuntimeError", message)[0] == category


def test_tritons_fp8_type_check_is_the_dtype_not_the_compiler():
    for ty in ("fp8e4nv", "fp8e4b15"):
        assert category_for("triton/language/semantic.py", f"{ty} data type is not supported on CUDA arch < 89",
                            "AssertionError") == "dtype_unsupported"
    assert category_for("triton/language/semantic.py", "Cannot broadcast, rank mismatch: 2, 3", "ValueError") \
        == "triton_compile"


@pytest.mark.parametrize("message,category", [
    # a framework reaching into vLLM's engine of another release (OpenRLHF, unsloth-zoo on vLLM's V1 engine)
    ("'LLMEngine' object has no attribute 'model_executor'", "install_mismatch"),
    ("'AsyncEngineArgs' object has no attribute 'disable_log_requests'", "install_mismatch"),
    ("'VllmConfig' object has no attribute 'speculative_config'", "install_mismatch"),
    # vLLM reading a model's config, tokenizer or processor from another transformers
    ("'Qwen3VLMoeConfig' object has no attribute 'vocab_size'", "model_support"),
    ("'Qwen2TokenizerFast' object has no attribute 'all_special_tokens_extended'", "model_support"),
    ("'Qwen2VLImageProcessor' object has no attribute 'merge_size'", "model_support"),
])
def test_a_missing_attribute_is_placed_by_whose_object_it_is(message, category):
    assert category_from_words("AttributeError", message)[0] == category


def test_a_missing_attribute_of_any_other_object_decides_nothing():
    assert category_from_words("AttributeError", "'NoneType' object has no attribute 'shape'") is None
    assert category_from_words("AttributeError", "'Tensor' object has no attribute 'weight_scale'")[0] == "quantization"


@pytest.mark.parametrize("message,category", [
    ("AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'", "install_mismatch"),
    ("EngineArgs.__init__() got an unexpected keyword argument 'task'", "install_mismatch"),
    ("LLM.generate() got an unexpected keyword argument 'prompt_token_ids'", "install_mismatch"),
    ("SamplingParams.__init__() missing 1 required positional argument: 'n'", "install_mismatch"),
    ("vllm.model_executor.layers.attention.mla_attention.MLACommonImpl.__init__() got multiple values for keyword "
     "argument 'q_pad_num_heads'", "attention_backend"),
    ("vllm.model_executor.layers.quantization.fp8.Fp8LinearMethod.apply() takes 3 positional arguments but 4 were "
     "given", "quantization"),
])
def test_a_call_that_does_not_fit_is_placed_by_its_callee(message, category):
    assert category_from_words("TypeError", message)[0] == category


def test_a_call_mismatch_with_no_known_callee_decides_nothing():
    assert category_from_words("TypeError", "__init__() got an unexpected keyword argument 'limit_mm_per_prompt'") \
        is None
    assert category_from_words("TypeError", "foo.bar.Baz.run() takes 2 positional arguments but 3 were given") is None


def test_a_call_mismatch_with_no_known_callee_hints_at_versions_not_at_a_launch_argument():
    # "argument" is among the words that hint at a launch setting; a call's signature is not one
    said = category_from_words("TypeError", "FusedMoE.make_expert_params_mapping() missing 1 required positional "
                               "argument: 'model'", weak=True)
    assert said[0] == "install_mismatch" and "signature" in said[1]
    assert category_from_words("ValueError", "invalid argument --max-num-seqs", weak=True)[0] == "engine_config"


def test_a_loader_refusing_an_architecture_is_model_support():
    # vllm/model_executor/model_loader/neuron.py (0.5-0.8) and the TPU loaders list what they do run
    msg = ("Model architectures ['OPTForCausalLM'] are not supported on Neuron for now. Supported architectures: "
           "['LlamaForCausalLM', 'MistralForCausalLM']")
    assert category_for("vllm/model_executor/model_loader/neuron.py", msg, "ValueError") == "model_support"
