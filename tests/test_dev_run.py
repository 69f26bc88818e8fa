"""Distributed, GPU OOM, KV-cache budget, CUDA-graph capture and engine-config failures as real users paste
them (tests/logs/dev-run/, through the CLI), and the mechanisms that name them, one case per form."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-run")
# Dev logs the rules do not get right yet, with the reason.
KNOWN_MISSES: dict[str, str] = {
    # the cause (V0 has no data parallelism) is in the launch command the thread shows, not in this fragment:
    # alone it says only that 1 of 8 ranks reached torch's rendezvous, which is named (distributed) as that
    "engine_config--v0-data-parallel-clients-timeout.log": "V0 data parallelism: the cause is not in the fragment",
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- waits between vLLM's processes that ran out, every release's wording ------------------------------

@pytest.mark.parametrize("text,signature", [
    # 0.9-0.16: the two literal pieces joined without a space
    ("TimeoutError: Timed out waiting for engines to sendinitial message on input socket.",
     "distributed.engine_startup_timeout"),
    # 0.25+: names the environment variable
    ("TimeoutError: Timed out waiting for engine core processes to start. This is often caused by slow weight loading "
     "for large models. Waited 600s (configured by VLLM_ENGINE_READY_TIMEOUT_S).", "distributed.engine_startup_timeout"),
    # the paste stops at the raise's source line
    ('  File "/x/vllm/v1/engine/core_client.py", line 496, in __init__\n'
     '    raise TimeoutError("Timed out waiting for engines to send"', "distributed.engine_startup_timeout"),
    ("TimeoutError: RPC call to execute_model timed out.", "distributed.worker_rpc_timeout"),
    ("torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 2/4 clients joined.",
     "distributed.rendezvous_timeout"),
    ("RuntimeError: ('Barrier timed out after %f seconds', 600.0)", "distributed.barrier_timeout"),
    ("RuntimeError: Barrier departure timed out after 300.00 seconds", "distributed.barrier_timeout"),
    ("ray.exceptions.RayChannelTimeoutError: System error: If the execution is expected to take a long time, increase "
     "RAY_CGRAPH_get_timeout which is currently 10 seconds.", "distributed.ray_timeout"),
])
def test_waits_that_ran_out_are_named(text, signature):
    d = first(text + "\n")
    assert (d.category, d.signature) == ("distributed", signature), (d.signature, d.title)


def test_a_wait_names_the_failure_on_the_other_side_second():
    # the engine core's own error, then the front-end's timeout: the error is the cause
    d = first("(EngineCore_DP0 pid=1) ERROR 01-02 03:04:05 [core.py:708] torch.OutOfMemoryError: CUDA out of memory. "
              "Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.\n"
              "(APIServer pid=2) TimeoutError: Timed out waiting for engines to sendinitial message on input socket.\n")
    assert d.category == "gpu_oom", (d.signature, d.title)


@pytest.mark.parametrize("frames,expected", [
    # Ray's get through vLLM's wrapper, Ray's plumbing below it
    (["/vllm/vllm/v1/executor/ray_utils.py", "result", "/x/ray/_private/auto_init_hook.py", "auto_init_wrapper",
      "/x/ray/_private/client_mode_hook.py", "wrapper"], "distributed"),
    # a compiled-graph channel
    (["/x/ray/experimental/channel/shared_memory_channel.py", "read"], "distributed"),
])
def test_a_traceback_cut_while_the_engine_waits_on_workers(frames, expected):
    text = "".join(f'  File "{frames[i]}", line 10, in {frames[i + 1]}\n    x = y()\n' for i in range(0, len(frames), 2))
    d = first("Traceback (most recent call last):\n" + text)
    assert d.category == expected and d.confidence <= 0.5, (d.signature, d.title)


def test_a_cut_traceback_elsewhere_is_not_a_wait():
    d = top('Traceback (most recent call last):\n  File "/x/vllm/model_executor/models/llama.py", line 10, in forward\n'
            '    x = y()\n')
    assert d is None or d.signature != "distributed.waiting_on_workers"


# ---- a collective inside CUDA-graph capture ------------------------------------------------------------

def _capture_refusal(last_file: str) -> str:
    return ("Traceback (most recent call last):\n"
            f'  File "{last_file}", line 2867, in all_reduce\n    work = group.allreduce([tensor], opts)\n'
            "RuntimeError: CUDA error: operation not permitted when stream is capturing\n")


def test_collective_refused_by_capture_is_distributed_and_says_windows():
    d = first(_capture_refusal(r"F:\venv\Lib\site-packages\torch\distributed\distributed_c10d.py"))
    assert d.signature == "distributed.collective_in_capture" and d.facts["windows"] is True
    d = first(_capture_refusal("/usr/lib/python3/site-packages/torch/distributed/distributed_c10d.py"))
    assert d.signature == "distributed.collective_in_capture" and d.facts["windows"] is False


def test_capture_refusal_in_model_code_stays_capture():
    d = first("Traceback (most recent call last):\n"
              '  File "/x/vllm/model_executor/models/qwen3.py", line 20, in forward\n    y = x.item()\n'
              "RuntimeError: CUDA error: operation not permitted when stream is capturing\n")
    assert d.category == "cudagraph_capture", (d.signature, d.title)


# ---- the sampler's warm-up, named by its frames ----------------------------------------------------------

WARMUP = ('Traceback (most recent call last):\n'
          '  File "/x/vllm/v1/worker/gpu_worker.py", line 507, in compile_or_warm_up_model\n'
          '    self.model_runner._dummy_sampler_run(hidden_states=last_hidden_states)\n'
          '  File "/x/torch/utils/_contextlib.py", line 120, in decorate_context\n'
          '    return func(*args, **kwargs)\n')


def test_traceback_cut_in_sampler_warmup_is_likely_oom():
    d = first(WARMUP)
    assert (d.category, d.signature) == ("gpu_oom", "oom.warmup_step_cut") and d.facts["step"] == "_dummy_sampler_run"


def test_sampler_warmup_with_a_library_inside_is_the_library():
    d = top(WARMUP + '  File "/x/flashinfer/sampling.py", line 981, in top_k_top_p_sampling_from_logits\n'
                     '    probs = torch.softmax(masked_logits, dim=-1)\n')
    assert d is None or d.signature != "oom.warmup_step_cut"


# ---- read forms -------------------------------------------------------------------------------------------

def test_google_cloud_logging_prefix_is_peeled():
    d = first("INFO 2025-11-19T20:16:36.096Z [resource.labels.containerName: vllm] (EngineCore_DP0 pid=270) ERROR "
              "11-19 12:16:36 [core.py:842] ValueError: LoRA rank 64 is greater than max_lora_rank 16.\n")
    assert d.category == "engine_config" and "resource.labels" not in d.title, d.title


def test_oom_report_is_not_taken_for_graph_capture():
    # torch's OOM message always mentions "private pools (e.g., CUDA Graphs)"
    d = first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 150.00 MiB. GPU 2 has a total capacity of "
              "23.52 GiB of which 11.69 MiB is free. Of the allocated memory 21.00 GiB is allocated by PyTorch, with "
              "39.88 MiB allocated in private pools (e.g., CUDA Graphs), and 54.91 MiB is reserved by PyTorch\n")
    assert d.category == "gpu_oom" and "graph" not in d.title.lower(), d.title


def test_shared_memory_broadcast_wait_alone_is_not_a_failure():
    d = top("DEBUG 07-04 17:35:10 [shm_broadcast.py:456] No available shared memory broadcast block found in 60 "
            "second.\n")
    assert d is None or d.confidence <= 0.5


# ---- LoRA settings and Gloo's transport, named by their own words ---------------------------------------

@pytest.mark.parametrize("text,setting", [
    ("ValueError: max_cpu_loras (4) must be >= max_loras (8)", "max_cpu_loras"),  # 0.6-0.10 config.py
    ("ValueError: max_loras (4) must be less than or equal to max_cpu_loras (2)", "max_loras"),
    ("ValueError: max_lora_rank (48) must be one of (1, 8, 16, 32, 64, 128, 256, 320, 512).", "max_lora_rank"),
    ("ValueError: V1 LoRA does not support long LoRA, please use V0.", "long LoRA"),
    ("RuntimeError: No free lora slots", "No free lora slots"),
])
def test_lora_settings_refused(text, setting):
    d = first(text + "\n")
    assert (d.category, d.signature) == ("engine_config", "config.lora_settings_invalid"), (d.signature, d.title)
    assert d.facts["setting"] == setting


def test_gloo_transport_errors():
    d = first("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
              "[10.0.0.7]:36271\n")
    assert d.signature == "distributed.gloo_failed" and d.facts["detail"] == "Connection closed by peer", d.facts
    # a buffer's timeout has a rule of its own (dist_cluster): a peer that stopped answering
    d = first("RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting "
              "1800000ms for recv operation to complete\n")
    assert (d.signature, d.category) == ("distributed.gloo_timeout", "distributed")


@pytest.mark.parametrize("text,signature", [
    # --reasoning-parser: the CLI's check (0.9-0.16), the manager's lookups (0.10, 0.25+)
    ("KeyError: 'invalid reasoning parser: qwen (chose from { deepseek_r1,qwen3 })'", "config.reasoning_parser_unknown"),
    ("KeyError: \"reasoning helper: 'qwen' not found in reasoning_parsers\"", "config.reasoning_parser_unknown"),
    ("KeyError: \"Reasoning parser 'qwen3x' not found. Available parsers: ['deepseek_r1', 'qwen3']\"",
     "config.reasoning_parser_unknown"),
    ("KeyError: \"Tool parser 'foo' not found.\"", "config.tool_parser_unknown"),
    # torch c10d's warning per address it tried to bind, the rendezvous port taken
    ("[W socket.cpp:464] [c10d] The server socket has failed to bind to [::]:29500 (errno: 98 - Address already in "
     "use).", "distributed.master_port"),
    # out of memory in the driver API's words
    ("RuntimeError: CUDA driver error: out of memory", "oom.cuda_out_of_memory"),
    ("RuntimeError: Triton Error [CUDA]: out of memory", "oom.cuda_out_of_memory"),
])
def test_more_forms_of_known_failures(text, signature):
    d = first(text + "\n")
    assert d.signature == signature, (d.signature, d.title)


def test_rendezvous_client_warning_alone_is_not_a_failure():
    d = top("[W socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: 99 - "
            "Cannot assign requested address).\n")
    assert d is None or d.confidence <= 0.5


FAULT = ('Traceback (most recent call last):\n'
         '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 4530, in _capture_cudagraphs\n    self._dummy_run(\n'
         '  File "/x/vllm/model_executor/models/qwen3_moe.py", line 512, in forward\n    h = self.model(x)\n')


def test_fault_inside_capture_is_capture():
    d = first(FAULT + "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
    assert d.signature == "cudagraph.fault_during_capture", (d.signature, d.title)


def test_fault_inside_a_library_during_capture_is_the_library():
    d = first(FAULT + '  File "/x/flashinfer/decode.py", line 1200, in run\n    self._cached_module.run(\n'
              "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n")
    assert d.signature != "cudagraph.fault_during_capture", (d.signature, d.title)


def test_fault_outside_capture_is_a_kernel():
    d = first('Traceback (most recent call last):\n'
              '  File "/x/vllm/v1/worker/gpu_model_runner.py", line 2412, in execute_model\n    out = self.model(x)\n'
              "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert d.category == "kernel_library", (d.signature, d.title)
