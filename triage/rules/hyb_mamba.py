"""Hybrid models' state cache (Mamba/SSM, linear attention, Gated DeltaNet) beside the attention KV cache.

What vLLM raises, and why:
- With prefix caching on, hybrid models get mamba cache mode 'align' (or 'all' where the model declares
  SupportsMambaPrefixCaching). In 'align' mode the scheduler's _mamba_block_aligned_split (v1/core/sched/
  scheduler.py, 0.15 .. 0.22) asserts `num_external_computed_tokens == 0, "External KV connector is not verified
  yet"`: the first prefix hit a KV connector (LMCache, NIXL, the OffloadingConnector, SimpleCPUOffload) reports
  kills the engine. vllm#42554 removed the assert after 0.22.1.
- VllmConfig.validate_mamba_block_size (config/vllm.py, 0.11+) refuses `--mamba-block-size can only be set with
  --enable-prefix-caching` whenever mamba_block_size differs from max_model_len without prefix caching. Besides
  the flag itself, vLLM sets it on its own: Nemotron-Nano VL before vllm#27773, an MTP drafter whose
  max_model_len differs from the target's (hf_overrides with YaRN do not reach the drafter), the CPU platform
  turning prefix caching off for MLA + hybrid models (vllm#52008).
- In mamba_cache_mode 'all', MambaMixer2.conv_ssm_forward reads the cached states off chunk ends with a stride
  of mamba_block_size // chunk_size; an explicit --mamba-block-size that is not a multiple of the model's mamba
  chunk size walks past them and `ssm_state[cache_blocks_to_fill] = from_where` fails with `shape mismatch:
  value tensor of shape [0, ...]` (vllm#57266).
- Mode 'all' with speculative decoding: mamba_mixer2 asserts `block_idx_last_scheduled_token_prev_step_d is not
  None` when the previous step's index was not passed (vllm#39809, #46424), and Model Runner V2 (forced by the
  dspark drafter) asserts in CUDA-graph capture (vllm#52317); mode 'align' avoids both.
- Something that turns the hybrid KV cache manager off (--kv-events-config, a KV connector without HMA support,
  --disable-hybrid-kv-cache-manager) logs `Hybrid KV cache manager is disabled for this hybrid model`, and
  unify_hybrid_kv_cache_specs then cannot merge Mamba and attention specs (`... failed to convert the KV cache
  specs to one unified type`, config.hybrid_kv_cache_disabled); a paste cut inside that call is the same failure.
"""

from __future__ import annotations

from typing import Any

from triage.lazyre import lazy
from triage.logread.scan import Scan
from triage.model import Diagnosis
from triage.rules.base import Rule

SPEC_RE = lazy(r"speculative[_-]config|--speculative|spec(?:ulative)?[ -]decod|\bmtp\b|nemotron_h_mtp|dspark|"
               r"\beagle3?\b|num_speculative_tokens")
# mode 'all' named by the launch (non-default args), vLLM's own notice, or the reporter
MODE_ALL_RE = lazy(r"mamba[_-]cache[_-]mode\W{1,4}all\b|Mamba cache mode is set to 'all'")
# where a Mamba2 / hybrid state step runs: an AssertionError from these frames is the state bookkeeping
MAMBA_FRAMES_RE = lazy(r"mamba_mixer2?\.py|mamba_attn\.py|mamba_hybrid|gdn_attn\.py|conv_ssm_forward")
ASSERT_RE = lazy(r"\bAssertionError\b")
HMA_OFF_RE = lazy(r"Hybrid KV cache manager is disabled for this hybrid model|Turning off hybrid kv cache manager")
UNIFY_RE = lazy(r"unify_hybrid_kv_cache_specs")
KV_SHORT_RE = lazy(r"KV cache is needed, which is larger than the available|is larger than the maximum number of "
                   r"tokens that can be stored in KV cache")
SHAPE_ZERO_RE = lazy(r"shape mismatch: value tensor of shape \[0, [\d, ]+\] cannot be broadcast")
MAMBA_BLOCK_FLAG_RE = lazy(r"--mamba[_-]block[_-]size[= ]+(?P<size>\d+)|mamba_block_size\W{1,4}(?P<size2>\d+)")


def _mamba_block_size_facts(m: Any, line: Any, scan: Scan) -> dict[str, Any]:
    """Why the size was set when nobody passed it: an MTP drafter, a CPU platform."""
    text = scan.joined_text()
    facts: dict[str, Any] = {"drafter": bool(SPEC_RE.search(text))}
    if facts["drafter"]:
        facts["advice"] = ("With a speculative drafter this comes from the drafter's max_model_len differing from the "
                           "target's (an --hf-overrides YaRN/rope change does not reach the drafter): put the same "
                           "\"max_model_len\" inside --speculative-config, or turn prefix caching on.")
    else:
        facts["advice"] = ("Drop --mamba-block-size, or add --enable-prefix-caching; when you set neither, vLLM set it "
                           "itself for this model (Nemotron-Nano VL before v0.11.1, MLA + hybrid models on the CPU "
                           "backend): upgrade vLLM.")
    return facts


def _chunk_misaligned(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    """An empty state slice written in a Mamba2 layer: the cached-state stride left the chunk ends."""
    text = scan.joined_text()
    if not MAMBA_FRAMES_RE.search(text) and "ssm_state[" not in text:
        return None
    ln = next((x for x in scan.lines if SHAPE_ZERO_RE.search(x.text)), None)
    if ln is None:
        return None
    size = MAMBA_BLOCK_FLAG_RE.search(text)
    facts = {"mamba_block_size": int(size.group("size") or size.group("size2"))} if size else {}
    return MAMBA_CHUNK_MISALIGNED.diagnosis(scan, [(ln, SHAPE_ZERO_RE.search(ln.text))], facts=facts,
                                            confidence=0.9 if size else 0.75)


def _mode_all_spec(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    said = MODE_ALL_SPEC.match_lines(scan)
    if said is not None:
        return said
    # a bare AssertionError in a launch that combines mode 'all' with a drafter
    text = scan.joined_text()
    if not (MODE_ALL_RE.search(text) and SPEC_RE.search(text)):
        return None
    ln = next((x for x in scan.lines if ASSERT_RE.search(x.text)), None)
    if ln is None:
        return None
    # the launch's mode 'all' first: it is the cause; the assert is where it showed
    mode = next(x for x in scan.lines if MODE_ALL_RE.search(x.text))
    hits = [(mode, MODE_ALL_RE.search(mode.text)), (ln, ASSERT_RE.search(ln.text))]
    return MODE_ALL_SPEC.diagnosis(scan, sorted(hits, key=lambda h: h[0].no), confidence=0.85)


def _hma_off_unify_cut(scan: Scan, env: dict[str, Any]) -> Diagnosis | None:
    off = next((ln for ln in scan.lines if HMA_OFF_RE.search(ln.text)), None)
    if off is None:
        return None
    if any(KV_SHORT_RE.search(ln.text) for ln in scan.lines):
        return None  # the KV budget, not the unification (kv_cache.hma_disabled_by_connector)
    cut = next((ln for ln in scan.lines if ln.no > off.no and UNIFY_RE.search(ln.text)), None)
    if cut is None:
        return None
    # the failing call first: the notice before it is a WARNING line, which alone would lower the confidence
    return HMA_OFF_UNIFY_CUT.diagnosis(scan, [(cut, UNIFY_RE.search(cut.text)), (off, HMA_OFF_RE.search(off.text))])


MAMBA_CHUNK_MISALIGNED = Rule(
    signature="hyb.mamba_block_chunk_misaligned", category="engine_config",
    title="The Mamba block size is not a multiple of the model's mamba chunk size (prefix caching's cached states "
          "are read past their end)",
    fix="An explicit --mamba-block-size must be a multiple of the model's mamba chunk size (config.json "
        "`mamba_chunk_size` / `chunk_size`, often 128 or 256) for prefix caching in mamba cache mode 'all': drop "
        "--mamba-block-size (vLLM derives an aligned one), set it to a multiple of the chunk size, or use "
        "--mamba-cache-mode align. The engine stays dead after this error: restart it.",
    check=_chunk_misaligned, playbook="engine-config", confidence=0.9)

MODE_ALL_SPEC = Rule(
    signature="hyb.mamba_cache_all_spec_decode", category="speculative_decoding",
    title="Speculative decoding with mamba cache mode 'all' (prefix caching of a hybrid model) lost the previous "
          "step's state index",
    fix="Mamba prefix caching in mode 'all' does not keep the state bookkeeping speculative decoding needs in this "
        "vLLM: launch with --mamba-cache-mode align (prefix caching still works), or without --enable-prefix-caching, "
        "or upgrade vLLM (Model Runner V1 fixed in vllm#41233; the dspark drafter's Model Runner V2 path is "
        "vllm#52317).",
    patterns=[r"assert block_idx_last_scheduled_token_prev_step_d is not None",
              r"prev_last_scheduled_idx (?:is )?(?:never|not) (?:passed|forwarded)"],
    check=_mode_all_spec, playbook="speculative-decoding", confidence=0.9)

HMA_OFF_UNIFY_CUT = Rule(
    signature="hyb.hma_off_unify_cut", category="engine_config",
    title="The hybrid KV cache manager was turned off for a hybrid (Mamba + attention) model, whose KV specs cannot "
          "then be unified",
    fix="A Mamba/linear-attention hybrid needs the hybrid KV cache manager: drop what turns it off "
        "(--disable-hybrid-kv-cache-manager, --kv-events-config on releases that disable it for KV events, a KV "
        "connector without HMA support), or upgrade vLLM to a release that keeps it on for that feature "
        "(vllm#36388, #38237).",
    check=_hma_off_unify_cut, playbook="engine-config", confidence=0.85)

RULES = [
    Rule(signature="hyb.mamba_align_external_kv", category="engine_config",
         title="A KV connector's prefix hit reached a hybrid model in mamba cache mode 'align', which this vLLM "
               "refuses (External KV connector is not verified yet)",
         fix="vLLM up to 0.22.x asserts that no external (connector / CPU-offload) tokens reach a Mamba-hybrid model "
             "in 'align' mode, so the first cache hit kills the engine: upgrade vLLM (the assert was removed by "
             "vllm#42554, after 0.22.1), or serve without the KV connector / --kv-offloading-size, or with "
             "--no-enable-prefix-caching (mamba cache mode then becomes 'none').",
         patterns=[r"External KV connector is not verified yet",
                   r"assert num_external_computed_tokens == 0"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="hyb.mamba_block_size_without_prefix_caching", category="engine_config",
         title="A Mamba block size is set while prefix caching is off",
         fix="{advice}",
         patterns=[r"--mamba-block-size can only be set with --enable-prefix-caching"],
         facts=_mamba_block_size_facts, playbook="engine-config", confidence=0.9),
    MAMBA_CHUNK_MISALIGNED,
    MODE_ALL_SPEC,
    HMA_OFF_UNIFY_CUT,
]
