"""A multimodal item larger than the encoder cache vLLM sized at start-up: the request is refused.

The V1 engine stores every image/audio/video item's encoder output in an encoder cache whose size it fixes at
start-up from the profiled largest item and --max-num-batched-tokens (encoder_cache_size = max of the two). An item
that needs more embeddings than that was never schedulable (the scheduler retried it forever, #26223); since the
early rejection (vLLM PR #33110, input_processor._validate_model_input) the request fails with HTTP 400: "The
decoder prompt contains a(n) image item with length 6042, which exceeds the pre-allocated encoder cache size 4800."
(later "with 6042 embedding tokens"). The server stays up; its launch budget is what is too small for the inputs
(or the inputs too large for it). The message's own advice (--limit-mm-per-prompt) only helps where the model's
profiled item size follows the limit's size hints; the budget itself is --max-num-batched-tokens.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="config.mm_item_exceeds_encoder_cache", category="engine_config",
         title="One {modality} item ({item_tokens} embeddings) exceeds the encoder cache vLLM sized at start-up "
               "({cache_size})",
         fix="vLLM sizes its encoder cache once, from the largest item it profiled and --max-num-batched-tokens, and "
             "refuses a request with a larger item: restart with `--max-num-batched-tokens {item_tokens}` or more "
             "(rounded up, e.g. to a power of two), or make the items smaller (lower max_pixels / fps / frames in "
             "--mm-processor-kwargs or per request, shorter audio). Size hints in --limit-mm-per-prompt (e.g. "
             "'{{\"image\": {{\"count\": 1, \"width\": 2048, \"height\": 2048}}}}') raise the profiled item size on "
             "releases that read them.",
         patterns=[r"contains a\(n\) (?P<modality>\w+) item with (?:length (?P<item_tokens>\d+)|(?P<item_tokens2>\d+) "
                   r"embedding tokens), which exceeds the pre-allocated encoder cache size (?P<cache_size>\d+)"],
         facts=lambda m, line, scan: {"item_tokens": int(m.group("item_tokens") or m.group("item_tokens2"))},
         playbook="engine-config", confidence=0.85),
]
