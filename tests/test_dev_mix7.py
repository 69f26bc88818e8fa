"""mix7's dev set (tests/logs/dev-mix7/): a sample of recent (June-September 2026) failure threads from vLLM and
the projects that run it, through the CLI, and the block-size mechanism it added, on the forms the raising code
writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix7")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
    "model_support--lvllm-minimax-m3-no-model-impl-block-size.log":
        "the thread's cause (the Lvllm fork has parsers but no MiniMax-M3 model implementation) is only in the "
        "reporter's prose; vLLM's own message is the general block-size disagreement, which "
        "attention.no_common_block_size names as attention_backend (its fix names the missing-implementation case)",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- select_common_block_size: no kernel block size every attention backend takes -------------------------

@pytest.mark.parametrize("text, size", [
    # vllm/v1/worker/utils.py before vllm-project/vllm#58557 (a trailing space after the period)
    ("ValueError: No common block size for 128. \n", "128"),
    ("(EngineCore pid=7) ERROR 09-10 09:44:03 [core.py:1202] ValueError: No common block size for 16. \n", "16"),
    # after #58557: each backend and the sizes it takes
    ("ValueError: No common block size for 96 (A: [MultipleOf(48)]; B: [64]).\n", "96"),
    ("ValueError: No common block size for 64 (FLASHMLA_SPARSE: [256]; DEEPSEEK_V4_INDEXER: [128, 256]).\n", "64"),
])
def test_no_common_block_size_is_the_attention_backends(text, size):
    d = first(text)
    assert (d.signature, d.category) == ("attention.no_common_block_size", "attention_backend")
    assert f"for {size} tokens" in d.title


def test_backends_listed_by_newer_vllm_reach_the_title():
    d = first("ValueError: No common block size for 96 (A: [MultipleOf(48)]; B: [64]).\n")
    assert "B: [64]" in d.title


def test_the_raise_line_quoted_in_a_traceback_is_not_a_size():
    d = top('    raise ValueError(f"No common block size for {kv_manager_block_size}. ")\n')
    assert d is None or d.signature != "attention.no_common_block_size"


# ---- a release gap the report states in its own words --------------------------------------------------------

@pytest.mark.parametrize("text, version", [
    ("but it imports `KVCacheSpecKind` from `vllm.v1.kv_cache_interface`, which only exists in **vLLM 0.23.0+**, "
     "so it cannot be imported on 0.20.1.\n", "0.23.0"),
    ("This error happens because the module is only present in vLLM 0.12.0 and above.\n", "0.12.0"),
    ("The standard weight sync calls `reload_weights(weights_iterator=...)`, but that kwarg only exists in "
     "vLLM >= 0.16. On older versions it fails.\n", "0.16"),
    ("`SharedFusedMoE` exists only in vllm 0.24 and later.\n", "0.24"),
])
def test_release_gap_stated_is_an_install_mismatch(text, version):
    d = first(text)
    assert (d.signature, d.category) == ("install.release_gap_stated", "install_mismatch")
    assert f"{version}+" in d.title


def test_a_release_gap_in_code_or_a_logger_line_is_no_statement():
    for text in ("INFO 09-01 10:00:00 [api.py:1] feature X is only available in vLLM 0.23 and above\n",
                 "    raise ImportError('only available in vllm 0.23+')\n"):
        d = top(text)
        assert d is None or d.signature != "install.release_gap_stated"


def test_a_ruled_out_gap_is_no_statement():
    d = top("The kwarg is not the problem: it no longer only exists in vLLM 0.16+.\n")
    assert d is None or d.signature != "install.release_gap_stated"


# ---- an attention backend's metadata without a field the shared attention code reads --------------------------

@pytest.mark.parametrize("text, cls, attr", [
    ("AttributeError: 'ROCMAiterMLASparseMetadata' object has no attribute 'num_decode_tokens'. "
     "Did you mean: 'num_actual_tokens'?\n", "ROCMAiterMLASparseMetadata", "num_decode_tokens"),
    ("(Worker_TP5 pid=27) ERROR 02-02 15:18:53 [multiproc_executor.py:852] AttributeError: "
     "'FlashMLASparseMetadata' object has no attribute 'num_decodes'\n", "FlashMLASparseMetadata", "num_decodes"),
    ("AttributeError: 'FlashAttentionMetadata' object has no attribute 'causal'\n", "FlashAttentionMetadata",
     "causal"),
])
def test_backend_metadata_missing_field_is_the_attention_backends(text, cls, attr):
    d = first(text)
    assert (d.signature, d.category) == ("attention.backend_metadata_missing_field", "attention_backend")
    assert cls in d.title and attr in d.title


@pytest.mark.parametrize("text", [
    # a hardware plugin's own metadata: the plugin and vLLM are releases apart
    "AttributeError: 'AscendMetadata' object has no attribute 'num_decode_tokens'\n",
    "AttributeError: 'AscendMLAMetadata' object has no attribute 'num_decodes'\n",
    # metadata of no attention backend
    "AttributeError: 'SamplingMetadata' object has no attribute 'top_k'\n",
    "AttributeError: 'SpecDecodeMetadata' object has no attribute 'cu_num_draft_tokens'\n",
])
def test_other_metadata_classes_are_not_an_attention_backend(text):
    d = top(text)
    assert d is None or d.signature != "attention.backend_metadata_missing_field"


# ---- two distributions shipping the same files, in the report's words ------------------------------------------

@pytest.mark.parametrize("text", [
    "# [BUG]: vllm-runtime:1.3.0-dev.1-cuda13 ships a self-inconsistent nvidia_cutlass_dsl (missing "
    "`increment_coord`) - `import cutlass` fails\n",
    "Fixed by the 4.6.0 bump, which moves the CuTe Python sources into a single wheel and removes the file "
    "collision.\n",
    "Two wheels that both ship the same file cute/core.py are installed.\n",
    "# import cutlass fails in the runtime image: nvidia_cutlass_dsl is self-inconsistent\n",
    "pip show -f lists two wheels (nvidia-cutlass-dsl and nvidia-cutlass-dsl-libs-base) that both ship the same "
    "file cute/core.py.\n",
])
def test_file_collision_stated_is_an_install_mismatch(text):
    d = first(text)
    assert (d.signature, d.category) == ("install.file_collision_stated", "install_mismatch")


def test_a_collision_ruled_out_or_in_a_logger_line_is_no_statement():
    for text in ("This is not a file collision: both wheels are the same release.\n",
                 "INFO 09-01 10:00:00 [hash.py:1] no file collision in the compile cache\n",
                 "The hash table has a self-inconsistent bucket count.\n"):
        d = top(text)
        assert d is None or d.signature != "install.file_collision_stated", text
