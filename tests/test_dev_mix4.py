"""mix4's dev set (tests/logs/dev-mix4/): a sample of 2026 failures as reported on vLLM's tracker and the
projects that package it, through the CLI, and the mechanisms that name them, each on the forms the raising code
or the reporter writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-mix4")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a device OOM the report places in CUDA graph capture ---------------------------------------------------

@pytest.mark.parametrize("text", [
    # the phase on the line before the OOM (a wrapped paragraph)
    "the engine passes the\nKV-cache allocation check but then crashes during CUDA-graph capture with\n"
    "`torch.OutOfMemoryError`. Dropping to `0.97` boots and serves fine.\n",
    "The server hits CUDA OOM while capturing CUDA graphs on the H100.\n",
    "We get a CUDA out of memory error\nduring graph capture when max-num-seqs is 512.\n",
])
def test_oom_stated_in_graph_capture_is_cudagraph_capture(text):
    d = first(text)
    assert (d.signature, d.category) == ("cudagraph.oom_stated_in_report", "cudagraph_capture")


@pytest.mark.parametrize("text", [
    "The server hits CUDA OOM while profiling the model.\n",
    # capture finished and is not the step that ran out
    "Graph capture finished fine.\n\nThen a CUDA OOM occurs when 64 requests arrive.\n",
])
def test_oom_stated_elsewhere_stays_gpu_oom(text):
    d = first(text)
    assert (d.signature, d.category) == ("oom.stated_in_report", "gpu_oom")


def test_avoided_capture_oom_is_no_statement():
    d = top("Using --enforce-eager to avoid CUDA OOM during CUDA graph capture.\n")
    assert d is None or d.signature not in ("cudagraph.oom_stated_in_report", "oom.stated_in_report")


# ---- a kernel path refusing the spec-decode inputs ------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "NotImplementedError: XPU gdn_attention does not yet support 'spec_sequence_masks'.\n",
    "NotImplementedError: ROCm aiter MLA does not support speculative decoding\n",
])
def test_kernel_path_without_spec_inputs_is_speculative_decoding(text):
    d = first(text)
    assert (d.signature, d.category) == ("speculative.unsupported", "speculative_decoding")


# ---- Triton finding no def line in a kernel's source ----------------------------------------------------------

def test_triton_jit_frame_names_the_kernel_module():
    d = first('  File "/x/site-packages/vllm/models/minimax_m3/common/ops/sparse_attn.py", line 12, in <module>\n'
              '    @triton.jit\n'
              '  File "/x/site-packages/triton/runtime/jit.py", line 776, in __init__\n'
              "AttributeError: 'NoneType' object has no attribute 'start'\n")
    assert (d.signature, d.category) == ("triton.jit_source_unparsed", "triton_compile")
    assert d.facts["kernel_file"] == "vllm/models/minimax_m3/common/ops/sparse_attn.py"


def test_none_start_without_triton_is_not_claimed():
    d = top('  File "/app/parse.py", line 3, in get\n'
            "    return re.match(r'x', s).start()\n"
            "AttributeError: 'NoneType' object has no attribute 'start'\n")
    assert d is None or d.signature != "triton.jit_source_unparsed"


# ---- an undefined symbol retold in prose ------------------------------------------------------------------------

def test_undefined_symbol_in_prose_names_the_library():
    d = first("the container crashes with an `ImportError` related to an undefined symbol "
              "(`_ZN2at4cuda24getCurrentCUDABlasHandleEv`) in `vllm._C.abi3.so`.\n")
    assert (d.signature, d.category) == ("install.undefined_symbol", "install_mismatch")
    assert d.facts["lib"] == "vllm._C.abi3.so"


# ---- a per-layer attribute whose name wrapped to the next line ---------------------------------------------------

def test_per_layer_attribute_named_from_the_wrapped_message():
    d = first("transformers.integrations.heterogeneity.configuration_utils.AmbiguousGlobalPerLayerAttributeError:\n"
              "'head_dim' is a per-layer attribute and may vary across layers.\n")
    assert d.signature == "model_support.transformers_per_layer_attribute"
    assert d.facts["attr"] == "head_dim"
