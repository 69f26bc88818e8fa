"""The catalogue of failure signatures: one module per area, each exporting RULES.

Adding a rule: declare it in the module of its area (or a new module listed in MODULES) and give
it a fixture log under tests/logs/ (tests/test_rules.py checks that every rule has one).
"""

from __future__ import annotations

import importlib

from triage.regexlit import save_derived
from triage.rules.base import Rule

MODULES = [
    "attention",
    "gpu",
    "cuda",
    "install",
    "kernels",
    "kernel_jit",
    "kernel_native",
    "cudagraph_frames",
    "memory",
    "distributed",
    "model",
    "config",
    "environment",
    "wrappers",
    "downstream",
    "kern_refusals",  # kern: kernels refusing this GPU's generation or the model's shapes
    # mdl: fetching from the Hub, tokenizers that do not fit (Mistral mode, parsers, a newer config), a cut traceback read by its call in progress
    "mdl_hub",
    "mdl_tokenizer",
    "mdl_cut_call",
    "mdl_weights",
    # run: timeouts between vLLM's processes, warm-up steps named by their frames
    "run_timeouts",
    "run_frames",
    # kern2: attention implementations that do not take vLLM's call
    "kern2_interfaces",
    # inst2: /dev/shm exhausted under torch's shared tensors or vLLM's shared-memory segments
    "inst2_shm",
    # mix2: releases that do not fit said by the tools around vLLM, zero visible devices, a cut undefined symbol
    "mix2_frameworks",
    "mix2_devices",
    "mix2_install_cut",
    # c2: engine arguments vLLM removed (relayed kwargs, Ray Serve's check, a launch command), swap space x TP
    "c2_engine_args",
    # q2: quantized kernels' capability gates, V0's spec-decode worker seen by a framework, a cut dtype check
    "q2_quant_spec",
    # k3: a FlashInfer JIT module built with a newer CUDA than the environment's
    "k3_toolchains",
    # d2: devices named by UUID (MIG), users without a passwd entry, Ray bring-up, NIXL/Mooncake KV transfer
    "d2_hosts",
    "d2_multinode",
    # p2: a non-CUDA platform's vllm._C warning, amdsmi without device access, a package against another's release
    "p2_platforms",
    # m2: a Qwen-VL checkpoint in transformers 4.52's layout read by an older vLLM
    "m2_vl_weights",
    # m2: gpt-oss's Harmony vocabulary fetched at run time (offline, or a cache another user owns)
    "m2_harmony",
    # m2: a --tokenizer-mode the installed vLLM does not register
    "m2_tokenizer_mode",
    # m2: weights downloaded through Xet storage (hf_xet) failing mid-transfer
    "m2_hub_xet",
    # m2: a --chat-template path that does not exist where vLLM runs
    "m2_chat_template_path",
    # m2: the Transformers backend's pipeline-parallel plan naming a nested module
    "m2_transformers_backend_pp",
    # mix3: serving wrappers calling vLLM's entrypoint internals, Dynamo's vLLM import, Triton's mma -> mma layout assert
    "mix3_wrappers",
    # mix4: Triton's @jit finding no def line in a kernel's source (vLLM 0.26's MiniMax-M3 kernels on Python 3.10)
    "mix4_triton_source",
    # i3: libraries around vLLM whose releases do not fit each other (kernels vs transformers, vLLM-Omni vs vLLM)
    "i3_versions",
    # s3: engine features refused at start-up (sleep mode per platform/process, Model Runner V2 pooling tasks)
    "s3_engine_refusals",
    # s3: a LoRA adapter applied to the draft model too (V0 speculative decoding)
    "s3_spec_decode",
    # mm: a modality's decoders (vllm[audio], decord, qwen-vl-utils) imported only when that input arrives
    "mm_media",
    # mm: a multimodal item larger than the encoder cache sized at start-up
    "mm_encoder",
    # ctr: containers and clusters (a Kubernetes Service's *_PORT variable, an HF cache the pod's user cannot write)
    "ctr_containers",
    # nm: newest model families: a Mistral tokenizer generation newer than mistral_common, LMCache refusing hybrid KV groups
    "nm_new_models",
    # rl: Unsloth's vLLM subprocess dying before ready, unsloth_zoo's ports of vLLM's LoRA managers gone stale
    "rl_frameworks",
    # rl: CUDA OOM inside vLLM's sleep-mode (CuMem) allocator, at wake_up beside a colocated trainer
    "rl_sleep_mode",
    # oom: out of device memory said by NCCL and torch_npu, failures a report states in its own words
    "oom_devices",
    "oom_stated",
    # amd: non-CUDA platforms' missing pieces (CPU ISA-gated ops, XPU free-memory query, ROCm kernels compiled out
    # for Radeon, first-generation Gaudi) and NumPy's removed aliases
    "amd_platforms",
    # api: one request refused or broken while serving (max_tokens over the context, tool_choice without tools, an
    # unserved model name, TRL's server routes, out-of-vocabulary prompt ids, tool-call parsing, the detokenizer,
    # structured-output grammars that fail to compile)
    "api_requests",
    # cn: the Chinese ecosystem's version gates (MiniCPM-V's version dispatch, the rope_scaling factor assert,
    # remote SentencePiece tokenizers under transformers 4.34+) and platforms (vllm-ascend 0.7's prefix-cache
    # refusal, ModelScope's download checksum)
    "cn_versions",
    "cn_platforms",
    # dist: the custom all-reduce's CUDA IPC, Ray's GCS out of reach, two ranks on one GPU, HCCL's bootstrap port,
    # Gloo timeouts, Mooncake KV transfers, ZMQ binding another host's address
    "dist_cluster",
    # pool: pooling tasks an architecture cannot serve (task/runner refused, a causal LM without a pooler)
    "pool_pooling",
    # pool: LoRA kernel limits (punica shapes, batched tokens, vocabulary), vLLM config fields a framework expects,
    # the sleep-mode allocator (missing extension, expandable segments)
    "pool_lora",
    # pool: a request naming a model the server does not serve (--served-model-name)
    "pool_served_name",
    # old: V0-era messages later releases reworded or dropped (pynccl without libnccl, the CPU swap space, quantized
    # weight widths, pipeline parallelism before it was served)
    "old_v0",
    # bw: Blackwell/Hopper kernel gates of the sparse-MLA and MLA models (SM12x sparse backends without an indexer,
    # FlashInfer MLA plan dtypes and TRT-LLM page size, Kimi-K3's fp8 prefill query, NVFP4 shuffle alignment,
    # CuTe DSL JIT failures, DeepGEMM below SM90)
    "bw_blackwell",
    # ver: release moves - transformers making a config attribute per-layer, the attention layer's newer forward
    # keywords, objects the V1 engine cannot pickle, the model-inspection subprocess killed by a native crash
    "ver_versions",
    # kvx: the KV cache beyond one GPU (KV-transfer connectors and the hybrid KV cache manager, CPU offloading's
    # /dev/shm region, NIXL's UCX, Mooncake's metadata server, LMCache's CPU buffer) and KV cache dtypes (fp8 in
    # FlashAttention, fp8_e5m2 with quantized checkpoints, TurboQuant on hybrid models)
    "kvx_kvcache",
    # tool: requests a server cannot serve (per-request logits processors, out-of-vocab or too many token ids, the
    # Responses API store, templates sent to Mistral tokenizers, an empty tools array), structured-output libraries
    # of another release
    "tool_requests",
    # tpu: platforms other than CUDA/ROCm (TPU meshes, head sizes and XLA memory exhaustion, tpu-inference's model
    # registry, Intel XPU's oneCCL collectives, platform quantization lists, the Neuron backend's architectures)
    "tpu_xla",
    "tpu_backends",
    # moe: MoE kernels and backends (a --moe-backend a quantization has no kernel for, quantized MoE schemes no
    # method serves, gpt-oss's triton_kernels, FlashInfer's CUTLASS fused MoE off Hopper/Blackwell)
    "moe_backends",
    # moe: expert parallelism (EPLB on models/quantizations it does not cover, experts not divisible over EP ranks,
    # DeepEP all2all timeouts, MoE model code against another vLLM's FusedMoE API)
    "moe_parallel",
    # cmp: the offline Python API and `vllm bench` (SamplingParams refusals, a caller written for another vLLM
    # release, the benchmark's test request and random dataset), vLLM's broken torch.compile cache artifacts
    "cmp_offline",
    # lora: LoRA adapters vLLM cannot serve as trained (MoE expert weights, models without the MoE expert mapping,
    # adapter paths, RL frameworks' in-memory placeholder paths, added tokens, vllm-ascend's rank limit) and
    # n/best_of requests it refuses
    "lora_adapters",
    # edge: consumer, workstation and edge machines (a SIGKILL on Jetson / DGX Spark unified memory, CUTLASS GEMM
    # status failures on SM12.x, TRL's vLLM server client in Unsloth and plain TRL runs)
    "edge_devices",
    # hyb: hybrid models' Mamba state cache (align mode and KV connectors, mamba block size, mode 'all' with
    # speculative decoding, the hybrid KV cache manager turned off), sliding window on only some layers
    "hyb_mamba",
    "hyb_window",
    # mix6: V0-era (0.3-0.6) failures as 2024's threads tell them (chat templates refusing roles, FlashInfer's guarded
    # import left None, the CPU backend's ISA check, an unsupported architecture stated in a title, the engine's
    # generate() keywords of another release)
    "mix6_v0_era",
    # mix5: FlashAttention-3's own CUDA check (xFormers' bundled copy, vllm-flash-attn, flash-attn's hopper build)
    "mix5_kernel_checks",
    # omni: generation beyond text through vLLM-Omni (a diffusion model's pipeline missing from the installed
    # diffusers, a TTS checkpoint without the speaker encoder voice cloning needs)
    "omni_media",
    # stk: vLLM inside serving stacks (a P/D recipe's decode TP below the prefill's, a container command `vllm` the
    # image does not have)
    "stk_stacks",
    # asc: vLLM on Ascend NPUs through vllm-ascend (CANN kernels and Triton-Ascend targets missing for the card,
    # aclnn dtype checks on quantized matmuls and bf16-less cards, ACL/TorchAir graph-mode limits, grouped top-k MoE
    # routing on a model without expert groups, the optional vllm_ascend_C import)
    "asc_npu",
    # msg: vLLM raise sites found by their message text (a second engine in one process, one KV-cache type in 0.7-0.9's
    # V1 runner, 0.11.1's local_world_size check under multi-node Ray, --engine-use-ray's one-GPU actor, the CPU
    # backend's MoE, --headless with a data-parallel rank, OpenTelemetry missing, prefix caching with sliding window)
    "msg_raise_sites",
    # dwn2: wrappers driving the engine (the sync LLMEngine's missing encode/generate, 0.8.0-0.8.1's V1 refusing
    # worker extensions, the V1 engine's missing internals retold in words)
    "dwn2_wrappers",
    # mdl2: a model type a platform plugin cannot run (vllm-metal's hybrid runtime without the model's state family)
    "mdl2_vendors",
    # pgs: pages outside the trackers (a quantization method without a kernel for a layer, a config.json without
    # architectures, Triton's Python stub killed by its container)
    "pgs_pages",
    # lib: the libraries under vLLM in their own words (a `ray` that is vLLM's vllm/ray subpackage or a local folder,
    # a token id past the tokenizer decoded to None, a fast tokenizer borrowed by two threads, transformers'
    # processor component check; Ray's dashboard and /dev/shm notes that are not failures)
    "lib_libraries",
    # mix7: the KV block size no attention backend of the model agrees on (select_common_block_size)
    "mix7_block_size",
    # mix7: an attention backend's metadata lacking a field the shared attention code reads
    "mix7_attn_meta",
    # mix7: a release gap the report states in its own words ("<name> only exists in vLLM 0.23.0+")
    "mix7_stated",
]


def all_rules() -> list[Rule]:
    rules: list[Rule] = []
    seen: set[str] = set()
    for name in MODULES:
        mod = importlib.import_module(f"triage.rules.{name}")
        for r in mod.RULES:
            if r.signature in seen:
                raise ValueError(f"duplicate rule signature {r.signature}")
            seen.add(r.signature)
            rules.append(r)
    save_derived()  # the patterns' literals, for the next run (triage.regexlit)
    return rules
