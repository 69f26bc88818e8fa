"""LoRA adapters vLLM cannot serve as trained, and n/best_of sampling requests it refuses.

What vLLM says, and where:
- MoE models. Before fused-MoE LoRA (vLLM 0.11.0 and older) LoRAModelManager refuses an adapter with expert
  weights: "For MoE models, vLLM currently does not support fused MoE LoRA inference. Please ensure that the loaded
  LoRA model does not contain expert weights." (pastes retype it in lower case). Since 0.11.1 the fused-MoE path
  asks the model class for its expert layout and a class that declares SupportsLoRA without it fails at start-up:
  "AttributeError: To support LoRA for MoE model, 'get_expert_mapping' must be implemented" (Gemma 4 MoE until
  vLLM added the hook): the architecture's LoRA support is missing in that release, not the launch arguments.
- The adapter path. WorkerLoRAManager._load_adapter turns a FileNotFoundError into "Loading lora <name> failed: No
  adapter found for <path>" (0.7+, LoRAAdapterNotFoundError in 2026 releases); older releases let the open() of
  "<path>/adapter_config.json" through ("No such file or directory: '.../adapter_config.json'"). Before 0.5.x the
  path had to be a local folder, and a Hugging Face repo id given as the path is looked up as a folder by later
  code paths too (vLLM #20612).
- RL frameworks that push LoRA tensors from the trainer's memory (verl, QeRL, TRL's colocate mode) give vLLM a
  placeholder path ("simon_lora_path", "/simon-stub-path") and patch vLLM's loader to take the tensors instead; when
  stock vLLM reads the placeholder from disk, the patch is not in effect: the installed vLLM is not the one the
  framework patches (or its replacement files were not copied in).
- vLLM 0.6-0.11 checks the tokens an adapter adds: "LoRA added vocab size 3 is greater than lora_extra_vocab_size
  0." (--lora-extra-vocab-size was removed in 0.12 with the added-vocabulary support).
- vllm-ascend's fused LoRA kernel sgmv_expand checks the adapter rank against each packed output slice of a
  sharded layer (`x.size(1) <= slice_size`): "RuntimeError: hidden in should be smaller than hidden out" at the
  dummy-LoRA warm-up when max_lora_rank exceeds the narrowest slice per tensor-parallel rank.
- SamplingParams and the engine front-end refuse n/best_of combinations: "best_of must be greater than or equal to
  n, got n=4 and best_of=2." (0.2-0.9), "best_of must be 1 when using greedy sampling.Got 2." (0.2-0.5), "n must be
  1 when using greedy sampling, got 4." (0.6+), "best_of must equal n to use output_kind=DELTA" (0.6-0.10, a
  streamed request), and the V1 engine's "vLLM V1 does not yet support best_of." (0.8-0.10). The other
  SamplingParams range checks are triage.rules.cmp_offline's.
- The model's generation_config.json fills the server's default sampling params ("Using default chat sampling
  params from model: {'top_k': 0, ...}"); Hugging Face writes top_k 0 for "disabled", which releases that take -1
  for it reject in every request that keeps the default ("top_k must be -1 (disable), or at least 1, got 0.").
  The INFO line alone is only a hint: current vLLM takes 0.

Harmless: LoRAModelManager warns "Regarding multimodal models, vLLM currently only supports adding LoRA to language
model, visual.blocks.31.mlp.up_proj will be ignored." and serves the rest of the adapter.
"""

from __future__ import annotations

from triage.rules.base import Rule

# the placeholder paths of the frameworks that load LoRA tensors from memory (verl, QeRL, TRL)
_STUB = r"/?simon[-_](?:lora|stub)[-_]path"
_PLACEHOLDER = r"['\"]?(?P<path>" + _STUB + ")"

RULES = [
    Rule(signature="lora.moe_expert_weights_unsupported", category="engine_config",
         title="This vLLM cannot apply LoRA to the MoE experts, and the adapter has expert weights",
         fix="vLLM 0.11.0 and older serve LoRA on an MoE model's attention and dense layers only: retrain the "
             "adapter without the expert projections in target_modules (attention only), merge the adapter into the "
             "base weights (peft merge_and_unload) and serve the merged model, or upgrade vLLM to 0.11.1+ (fused-MoE "
             "LoRA).",
         patterns=[r"(?i)does not support fused MoE LoRA inference",
                   r"(?i)ensure that the loaded LoRA model does not contain expert weights"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="lora.moe_expert_mapping_missing", category="model_support",
         title="vLLM's code for this MoE model lacks the expert mapping LoRA needs (get_expert_mapping)",
         fix="The model class declares LoRA support but does not implement get_expert_mapping, which vLLM's fused-MoE "
             "LoRA path calls: upgrade vLLM to a release that implements it for this architecture, or serve without "
             "--enable-lora (merge the adapter into the weights first).",
         patterns=[r"To support LoRA for MoE model, 'get_expert_mapping' must be implemented"],
         playbook="model-support", confidence=0.9),
    Rule(signature="lora.inmemory_placeholder_path", category="install_mismatch",
         title="vLLM looked for the LoRA placeholder path {path} on disk: the framework's in-memory LoRA patch is "
               "not in effect",
         fix="The RL framework (verl, QeRL, TRL colocate) hands vLLM the adapter tensors from memory and passes "
             "{path} only as a stub; stock vLLM reading it from disk means its patch of vLLM's LoRA loader did not "
             "apply: install the vLLM version the framework supports (its requirements / docs), copy in the "
             "replacement files it ships if it has any (QeRL's vllm_replacement), and keep the engine mode it "
             "patches (VLLM_USE_V1 as the framework expects).",
         patterns=[r"No adapter found for " + _PLACEHOLDER,
                   r"No such file or directory: '(?P<path>/?simon[-_](?:lora|stub)[-_]path)[^']*'",
                   r"FileNotFoundError.{0,40}(?:placeholder )?'(?P<path>/?simon[-_](?:lora|stub)[-_]path)'"],
         playbook="install-mismatch", confidence=0.92),
    Rule(signature="lora.adapter_not_found", category="engine_config",
         title="vLLM found no LoRA adapter{at_path}",
         fix="The adapter path must be a folder with adapter_config.json and the adapter weights, visible to the "
             "vLLM process (mounted into the container): check --lora-modules name=path (or the LoRARequest / "
             "load_lora_adapter lora_path); give a local folder, not a Hugging Face repo id (download it first: "
             "`huggingface-cli download <repo> --local-dir <dir>`).",
         # the folder itself, or a quoted file in it; never the in-memory placeholder (the rule above)
         patterns=[r"Loading lora \S+ failed: No adapter found for (?!['\"]?" + _STUB + r")['\"]?(?P<path>[^\s'\"]+)",
                   # the message quoted without its path ("...failed: No adapter found")
                   r"Loading lora \S+ failed: No adapter found(?! for)(?P<path>)",
                   r"No such file or directory: '(?P<path>[^']*?)/?adapter_config\.json'",
                   # a report's own words: the adapter_config.json lookup that fails
                   r"`?(?P<path>[^\s`]*?)/?adapter_config\.json`? (?:and )?(?:fails|failed|is not found|was not found)"],
         facts=lambda m, line, scan: {"at_path": f" at {m.group('path')}" if m.group("path") else ""},
         playbook="engine-config", confidence=0.9),
    Rule(signature="lora.added_vocab_over_limit", category="engine_config",
         title="The LoRA adapter adds {added} tokens, more than --lora-extra-vocab-size {limit}",
         fix="The adapter was trained with added tokens (resized embeddings), so pass --lora-extra-vocab-size {added} "
             "or more (vLLM 0.6-0.11 take 256 or 512), or merge the adapter and its tokenizer into the base model and "
             "serve the merged weights (vLLM 0.12+ no longer serves adapters that add tokens).",
         patterns=[r"LoRA added vocab size (?P<added>\d+) is greater than lora_extra_vocab_size (?P<limit>\d+)"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="lora.ascend_rank_over_slice", category="engine_config",
         title="vllm-ascend's LoRA kernel (sgmv_expand) refuses a rank wider than a sharded layer's output slice",
         fix="On Ascend the LoRA rank must not exceed the narrowest packed output slice of any LoRA layer per "
             "tensor-parallel rank (hybrid models' GDN in_proj_ba slices can be 8 wide at TP=2): lower the adapter "
             "rank and --max-lora-rank (8 passes), use a smaller --tensor-parallel-size, or upgrade vllm-ascend.",
         patterns=[r"hidden in should be smaller than hidden out"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="sampling.best_of_refused", category="engine_config",
         title="vLLM refuses the request's n/best_of combination ({detail})",
         fix="best_of is gone from V1 and never combines with streaming or greedy sampling: drop best_of from the "
             "request (n alone returns n samples), use temperature > 0 when n > 1, and keep best_of >= n on the "
             "releases that still take it.",
         patterns=[r"(?P<detail>best_of must be greater than or equal to n)",
                   r"(?P<detail>best_of must be 1 when using greedy sampling)",
                   r"(?P<detail>n must be 1 when using greedy sampling)",
                   r"(?P<detail>best_of must equal n to use output_kind=DELTA)",
                   r"(?P<detail>vLLM V1 does not (?:yet )?support best_of)"],
         playbook="engine-config", confidence=0.85),
    # a hint, below the harmless threshold: the line is routine on releases that take top_k 0
    Rule(signature="sampling.generation_config_top_k_zero", category="engine_config",
         title="The model's generation config makes top_k 0 a default sampling parameter, which releases that "
               "want -1 for 'disabled' refuse",
         fix="vLLM before the change that reads top_k 0 as 'disabled' rejects every request that keeps this default "
             "(\"top_k must be -1 (disable), or at least 1, got 0.\"): relaunch with `--generation-config vllm`, "
             "send top_k -1 in the requests, or upgrade vLLM.",
         patterns=[r"Using default (?:chat |completion )?sampling params from model: \{[^}]*'top_k': 0\b"],
         playbook="engine-config", confidence=0.45),
]

# LoRAModelManager skips the vision tower's LoRA weights of a multimodal model and serves the rest of the adapter.
HARMLESS = [
    Rule(signature="harmless.lora_multimodal_tower_ignored", category="", harmless=True,
         title="vLLM ignores the adapter's LoRA weights outside the language model (it serves the rest; harmless)",
         fix="", patterns=[r"vLLM currently only supports adding LoRA to language model, \S+ will be ignored"]),
]

RULES += HARMLESS
