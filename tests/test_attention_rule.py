"""The attention-backend rule: both message forms, explicit selection, wrapped lines, reasons with
commas and brackets, and the backend-by-backend explanation."""

import pytest

from triage.diagnose import diagnose
from triage.logread import scan_text
from triage.rules.attention import parse_config, parse_reasons

OLD_FORM = (
    "ERROR 11-20 08:01:02 [core.py:700] ValueError: No valid attention backend found for cuda with head_size: 576, "
    "dtype: torch.float16, kv_cache_dtype: auto, block_size: 64, use_mla: True, has_sink: False, use_sparse: True. "
    "Reasons: {FLASH_ATTN_MLA: [sparse not supported, compute capability not supported], FLASHMLA: [sparse not "
    "supported, compute capability not supported], FLASHINFER_MLA: [sparse not supported, compute capability not "
    "supported, FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128], but got 192], TRITON_MLA: [sparse not "
    "supported], FLASHMLA_SPARSE: [dtype not supported, compute capability not supported]}.\n"
)


def test_old_form_parsed_into_facts():
    d = diagnose(scan_text(OLD_FORM))[0][0]
    f = d.facts
    assert (f["head_size"], f["dtype"], f["kv_cache_dtype"], f["block_size"]) == (576, "float16", "auto", 64)
    assert f["use_mla"] is True and f["use_sparse"] is True and f["has_sink"] is False
    assert f["rejected"]["FLASHINFER_MLA"] == [
        "sparse not supported", "compute capability not supported",
        "FlashInfer MLA kernel requires qk_nope_head_dim in [64, 128], but got 192"]
    assert f["rejected"]["FLASHMLA_SPARSE"] == ["dtype not supported", "compute capability not supported"]
    # FLASHMLA_SPARSE is bf16-only: the explanation says which dtype would be accepted.
    assert any(line.startswith("FLASHMLA_SPARSE:") and "bfloat16" in line for line in d.explanation)
    assert "with --dtype bfloat16" in f["would_work"]["FLASHMLA_SPARSE"]


def test_new_form_keeps_unknown_fields_as_strings():
    rest = ("AttentionSelectorConfig(head_size=512, dtype=torch.bfloat16, kv_cache_dtype=fp8_ds_mla, block_size=None, "
            "use_mla=True, has_sink=False, use_sparse=True, use_mm_prefix=False, attn_type=AttentionType.DECODER, "
            "use_per_head_quant_scales=False, use_pcp=False). Reasons: {FLASHINFER_MLA_SPARSE_SM120: [kv_cache_dtype not supported]}.")
    fields, reasons = parse_config(rest)
    assert fields["head_size"] == 512 and fields["block_size"] is None
    assert fields["kv_cache_dtype"] == "fp8_ds_mla" and fields["attn_type"] == "decoder"
    assert fields["use_pcp"] is False and fields["use_per_head_quant_scales"] is False
    assert parse_reasons(reasons) == {"FLASHINFER_MLA_SPARSE_SM120": ["kv_cache_dtype not supported"]}


def test_reason_with_comma_sentence_is_one_reason():
    r = parse_reasons("{FLASHMLA: [sparse not supported, vllm._flashmla_C is not available, likely was not compiled "
                      "due to insufficient nvcc version or a supported arch was not in the list of target arches to "
                      "compile for.], TRITON_MLA: [sparse not supported]}.")
    assert r["FLASHMLA"][1].startswith("vllm._flashmla_C is not available, likely was not compiled")
    assert len(r["FLASHMLA"]) == 2 and r["TRITON_MLA"] == ["sparse not supported"]


def test_selected_backend_not_valid():
    log = ("INFO 12-01 10:00:00 [cuda.py:300] Some attention backends are not valid for cuda with "
           "AttentionSelectorConfig(head_size=576, dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=None, "
           "use_mla=True, has_sink=False, use_sparse=True). Reasons: {FLASHINFER_MLA: [sparse not supported]}.\n"
           "ERROR 12-01 10:00:01 [core.py:700] ValueError: Selected backend AttentionBackendEnum.FLASHINFER_MLA is not "
           "valid for this configuration. Reason: ['sparse not supported', 'compute capability not supported']\n")
    d = diagnose(scan_text(log))[0][0]
    assert d.signature == "attention.selected_backend_invalid"
    assert d.facts["selected_backend"] == "FLASHINFER_MLA"
    assert d.facts["rejected"] == {"FLASHINFER_MLA": ["sparse not supported", "compute capability not supported"]}
    assert d.facts["use_sparse"] is True  # taken from the earlier 'Some attention backends' line
    assert d.fix.playbook == "attention-sparse-mla"


def test_sparse_on_sm120_names_the_gap_when_the_gpu_is_known():
    from triage.enrich import enrich
    from triage.rules.attention import RULES
    log = scan_text(OLD_FORM)
    env = {"compute_capability": "12.0", "vllm_version": "0.13.0"}
    d = RULES[0].run(log, env)
    assert d.facts["case"] == "sparse_mla_unsupported_gpu"
    assert "compute capability 12.0" in d.title
    enrich([d], env)
    assert d.facts["gpu_family"] == "SM12x"
    assert any("No sparse MLA attention backend exists for compute capability 12.0" in ln for ln in d.explanation)


def test_wrapped_message_is_joined():
    head = "(Worker_TP0 pid=7) ERROR 12-01 10:00:01 [multiproc_executor.py:751] "
    log = (head + "ValueError: No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576, "
           "dtype=torch.bfloat16, kv_cache_dtype=auto, block_size=None, use_mla=True, has_sink=False, use_sparse=True). "
           "Reasons: {FLASH_ATTN_MLA: [sparse not supported],\n" + head + " TRITON_MLA: [sparse not supported]}.\n")
    d = diagnose(scan_text(log))[0][0]
    assert set(d.facts["rejected"]) == {"FLASH_ATTN_MLA", "TRITON_MLA"}
    assert [e.line for e in d.evidence] == [1, 2]


# --- a selector dump wrapped across rows keeps its facts ------------------------------------------------

def _wrapped(style: str, width: int) -> str:
    """OLD_FORM's message cut into rows the ways real pastes show it."""
    import textwrap

    prefix, msg = OLD_FORM.rstrip("\n").split("] ", 1)
    if style == "indented":  # wrapped by hand / by an issue template: continuation rows indented
        rows = textwrap.wrap(msg, width, break_long_words=False, break_on_hyphens=False)
        return "\n".join([f"{prefix}] {rows[0]}"] + ["    " + r for r in rows[1:]]) + "\n"
    if style == "logger":  # each row printed with the log header (a multi-line message)
        rows = textwrap.wrap(msg, width, break_long_words=False, break_on_hyphens=False)
        return "\n".join(f"(EngineCore pid=7) {prefix}] {r}" for r in rows) + "\n"
    raise ValueError(style)



@pytest.mark.parametrize("style,width", [("indented", 60), ("indented", 100), ("logger", 70), ("logger", 120)])
def test_wrapped_dump_keeps_head_size_and_reasons(style, width):
    ds, _ = diagnose(scan_text(_wrapped(style, width)))
    d = ds[0]
    assert d.signature == "attention.no_valid_backend", [(x.signature, x.title) for x in ds]
    f = d.facts
    assert (f["head_size"], f["dtype"], f["block_size"]) == (576, "float16", 64)
    assert set(f["rejected"]) == {"FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "TRITON_MLA", "FLASHMLA_SPARSE"}
    assert f["rejected"]["FLASHMLA_SPARSE"] == ["dtype not supported", "compute capability not supported"]
    assert "head size None" not in "\n".join(d.explanation)


def test_wrapped_shared_memory_message_keeps_its_numbers():
    log = ("(Worker pid=3) ERROR 08-25 12:01:00 [multiproc_executor.py:1000] triton.runtime.errors.OutOfResources: "
           "out of resource: shared memory,\n"
           "(Worker pid=3) ERROR 08-25 12:01:00 [multiproc_executor.py:1000]   Required: 102400, Hardware limit: 101376.\n")
    d = diagnose(scan_text(log))[0][0]
    assert d.signature == "triton.out_of_shared_memory"
    assert (d.facts["shared_required"], d.facts["shared_limit"]) == (102400, 101376)
    assert "102400 > 101376" in d.title
