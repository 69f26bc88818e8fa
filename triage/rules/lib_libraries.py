"""Failures the libraries under vLLM raise in their own words (Ray, Hugging Face tokenizers, transformers' processors).

- `import ray` that does not find Ray: vLLM 0.10+ ships its own `vllm/ray/` subpackage, so a script run from inside
  vLLM's package folder (a debugger started on api_server.py, a test script dropped next to vLLM's sources), or any
  `ray/` folder or `ray.py` in the working directory, shadows the library. vLLM's first Ray call then fails on an
  attribute the real package has: `ray.is_initialized()` (utils `is_in_ray_actor`, ray_utils, `vllm/ray/lazy_utils`)
  gives "module 'ray' has no attribute 'is_initialized'"; config.py's `from ray import is_initialized` (0.8-0.9)
  gives "cannot import name 'is_initialized' from 'ray' (unknown location)".
- A token id the tokenizer does not have: a model whose embedding (config.json `vocab_size`) is padded past the
  tokenizer, or a broken quantization sampling garbage, produces ids `convert_ids_to_tokens` maps to None; the Rust
  decoder refuses None ("argument 'tokens': 'NoneType' object cannot be converted to 'PyString'", 'Sequence' on
  other tokenizers builds). vLLM 0.4.0 started skipping ids past len(tokenizer) in the incremental detokenizer and
  0.5 replaced None tokens with '' everywhere.
- "Already borrowed": a Hugging Face fast tokenizer is a Rust object behind a RefCell; two threads changing and
  using its truncation/padding state at once (vLLM's API-side tokenizer thread and the multimodal processor, or
  /tokenize beside chat requests with truncate_prompt_tokens) make the second borrow fail. Newer vLLM gives the
  processor its own copy and pools the tokenizer.
- transformers' ProcessorMixin checks each component's class ("Received a X for argument image_processor, but a Y
  was expected", 4.46 to 5.x): a transformers release whose default components (fast image processors since 4.53)
  or vLLM's wrapped tokenizer classes the pinned vLLM does not expect.
- torch.compile's BackendCompilerFailed (torch 2.5-2.8) does not survive pickling, so a compile failure in a worker
  process or Ray actor reaches the engine as "__init__() missing 1 required positional argument: 'inner_exception'"
  (vLLM's multiproc executor, Ray's "Failed to unpickle serialized exception").
- Ray's own notes that are not failures: the dashboard modules it skips without the `ray[default]` extras, and the
  object store falling back to /tmp when /dev/shm is small (slower, nothing stops).
"""

from __future__ import annotations

from triage.rules.base import Rule

# Ray's top-level API, always there on the real package (a missing submodule attribute such as 'util' is Ray's own
# lazy import, not a shadowed package)
_RAY_API = ("is_initialized|init|remote|get|put|wait|kill|shutdown|nodes|get_gpu_ids|get_runtime_context"
            "|available_resources|cluster_resources|method|ObjectRef")

RULES = [
    Rule(signature="install.ray_module_shadowed", category="install_mismatch",
         title="The `ray` module Python imports is not the Ray library (it has no '{attr}')",
         fix="Something named `ray` earlier on sys.path hides Ray: vLLM's own `vllm/ray/` subpackage when the script or "
             "the working directory is inside vLLM's package folder, or a local `ray/` folder or `ray.py`. Start vLLM "
             "from another directory, check `python -c \"import ray; print(ray.__file__)\"` points into site-packages, "
             "and `pip install ray` if Ray is not installed at all.",
         patterns=[rf"module 'ray' has no attribute '(?P<attr>{_RAY_API})'",
                   rf"cannot import name '(?P<attr>{_RAY_API})' from 'ray' \((?:unknown location|[^)]*/vllm/ray/[^)]*"
                   r"|[^)]*ray\.py)\)"],
         playbook="install-mismatch", confidence=0.85),
    Rule(signature="tokenizer.generated_id_not_in_tokenizer", category="tokenizer_chat_template",
         title="The model produced a token id its tokenizer does not have (the tokenizer decoded it to no text)",
         fix="The model's vocabulary (config.json `vocab_size`, often padded or grown by fine-tuning) is larger than "
             "the tokenizer's, or a broken quantization samples garbage ids. Upgrade vLLM (0.5+ decodes ids past the "
             "tokenizer as empty text), make tokenizer and model agree (`len(tokenizer)` vs `vocab_size`; save the "
             "tokenizer with the fine-tuned model), and if the output is only '!!!!' try another quantization or dtype.",
         patterns=[r"argument 'tokens': 'NoneType' object cannot be converted to '(?:PyString|Sequence|str)'"],
         playbook="tokenizer-chat-template", confidence=0.85),
    Rule(signature="tokenizer.fast_tokenizer_already_borrowed", category="tokenizer_chat_template",
         title="One Hugging Face fast tokenizer was used by two threads at once (RuntimeError: Already borrowed)",
         fix="Concurrent requests share vLLM's Rust-backed tokenizer; one changing its truncation/padding (the "
             "multimodal processor, truncate_prompt_tokens, /tokenize) while another encodes fails. Upgrade vLLM "
             "(newer releases give the processor its own tokenizer copy and pool the tokenizer); until then avoid "
             "truncate_prompt_tokens beside concurrent /tokenize calls or lower the request concurrency.",
         patterns=[r"RuntimeError: Already (?:mutably )?borrowed",
                   r"^Already (?:mutably )?borrowed$"],
         playbook="tokenizer-chat-template", confidence=0.8),
    Rule(signature="model_support.processor_component_type", category="model_support",
         title="transformers' processor refused the {arg} it was given ({got}; it expects {want})",
         fix="The installed transformers and this vLLM disagree on the processor's component classes (transformers "
             "4.53+ loads fast image processors by default; vLLM wraps the tokenizer in its own class): install the "
             "transformers version your vLLM release pins (`pip install 'transformers==X'` from its requirements) or "
             "upgrade vLLM to a release that supports this transformers.",
         patterns=[r"Received a (?P<got>\w+) for argument (?P<arg>\w+), but an? (?P<want>.+?) was expected"],
         playbook="model-support", confidence=0.8),
    # torch 2.5-2.8's BackendCompilerFailed cannot be unpickled (its __init__ needs the inner exception): a compile
    # failure in a vLLM worker process or a Ray actor arrives as this TypeError instead of its message (vLLM #15592)
    Rule(signature="triton.inductor_failed_unpicklable", category="triton_compile",
         title="torch.compile failed in a worker, and its error could not be sent back (BackendCompilerFailed "
               "does not unpickle)",
         fix="The real compile error is in the worker's own traceback (a VllmWorker / Ray actor line above, or its "
             "log file): confirm with --enforce-eager (or -O0), then fix what it names (a C compiler or Python "
             "headers missing, torch and triton not the versions this vLLM pins); newer torch passes the message on.",
         patterns=[r"(?:BackendCompilerFailed\.)?__init__\(\) missing \d required positional arguments?: "
                   r"'inner_exception'"],
         # secondary: the worker's own compile error, when the log has it, is the diagnosis
         playbook="triton-compile", confidence=0.75, secondary=True),
    Rule(signature="harmless.ray_dashboard_optional_modules", category="", harmless=True,
         title="Ray skipped optional dashboard modules (ray installed without the [default] extras)",
         fix="Only the dashboard is affected; `pip install 'ray[default]'` if you need it.",
         patterns=[r"cannot be loaded because we cannot import all dependencies\. Install this module using "
                   r"`pip install 'ray\[default\]'`"]),
    Rule(signature="harmless.ray_object_store_tmp", category="", harmless=True,
         title="Ray's object store uses /tmp because /dev/shm is small (slower, not a failure)",
         fix="Give the container more shared memory (`--shm-size` / `--ipc=host`) to silence it.",
         patterns=[r"The object store is using /tmp instead(?: of /dev/shm)?"]),
]
