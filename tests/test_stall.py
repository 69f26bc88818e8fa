"""A start-up log that ends inside a step with no error: the step is named as a guess (triage.catalogue.stall)."""

from __future__ import annotations

import json
import subprocess
import sys

from triage.diagnose import diagnose
from triage.logread.scan import scan_text

HEAD = ("INFO 03-02 10:00:01 [__init__.py:239] Automatically detected platform cuda.\n"
        "INFO 03-02 10:00:03 [api_server.py:1034] vLLM API server version 0.8.5\n"
        "INFO 03-02 10:00:21 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='m'\n")
TP = ("(VllmWorker rank=0 pid=123) INFO 03-02 10:00:25 [utils.py:1055] Found nccl from library libnccl.so.2\n"
      "(VllmWorker rank=0 pid=123) INFO 03-02 10:00:25 [pynccl.py:69] vLLM is using nccl==2.21.5\n"
      "(VllmWorker rank=0 pid=123) INFO 03-02 10:00:26 [custom_all_reduce_utils.py:206] generating GPU P2P access "
      "cache in /root/.cache/vllm/gpu_p2p_access_cache_for_0,1,2,3.json\n")
LOADED = ("(VllmWorker rank=0 pid=123) INFO 03-02 10:00:30 [gpu_model_runner.py:1329] Starting to load model m...\n"
          "(VllmWorker rank=0 pid=123) INFO 03-02 10:01:30 [gpu_model_runner.py:1347] Model loading took 14.9 GiB "
          "and 58.1 seconds\n")


def _all(text: str):
    ds, _ = diagnose(scan_text(text))
    return ds


def test_a_tensor_parallel_start_up_that_stops_in_the_p2p_check_is_a_distributed_guess():
    (d,) = _all(HEAD + TP)
    assert (d.signature, d.category) == ("generic.stopped_during_startup", "distributed")
    assert d.confidence <= 0.3 and "NCCL_P2P_DISABLE=1" in d.fix.summary and "cut" in d.title
    assert "P2P access cache" in d.evidence[0].text  # the last thing vLLM printed
    # NCCL's own chatter after it does not move the stop
    (d,) = _all(HEAD + TP + "".join(f"node:123:456 [0] NCCL INFO Channel {i:02d}/02 : 0 1\n" for i in range(10)))
    assert d.category == "distributed"


def test_each_step_where_vllm_hangs_gets_its_own_category():
    (d,) = _all(HEAD + "INFO 03-02 10:00:30 [model_runner.py:1008] Starting to load model m...\n"
                "Loading safetensors checkpoint shards:  43% Completed | 16/37 [01:02<01:21,  3.88s/it]\n")
    assert d.category == "model_loading" and "free -g" in d.fix.summary
    (d,) = _all(HEAD + LOADED + "INFO 03-02 10:01:40 [backends.py:430] Dynamo bytecode transform time: 9.1 s\n")
    assert d.category == "triton_compile" and "--enforce-eager" in d.fix.summary
    (d,) = _all(HEAD + LOADED + "INFO 03-02 10:02:10 [gpu_worker.py:227] Available KV cache memory: 50.1 GiB\n"
                "Capturing CUDA graph shapes:  54%|█████▍    | 36/67 [00:05<00:04,  7.10it/s]\n")
    assert d.category == "cudagraph_capture"


def test_no_guess_once_the_step_ended_or_the_server_started_or_with_one_process():
    assert _all(HEAD + TP + LOADED) == []  # past the steps: nothing to say
    assert _all(HEAD + LOADED + "Capturing CUDA graph shapes: 100%|██████████| 67/67\n"
                "INFO 03-02 10:02:30 [gpu_model_runner.py:1686] Graph capturing finished in 21 secs, took 0.5 GiB\n") == []
    assert _all(HEAD + TP + "INFO 03-02 10:03:00 [launcher.py:28] Available routes are:\n") == []
    one = "INFO 03-02 10:00:25 [parallel_state.py:1004] rank 0 in world size 1 is assigned as DP rank 0, PP rank 0\n"
    assert _all(HEAD + one) == []
    # the stop is long before the end: the log went on with something else
    assert _all(HEAD + TP + "".join(f"some other line {i}\n" for i in range(60))) == []


def test_an_error_anywhere_wins_over_the_guess():
    ds = _all(HEAD + TP + "ERROR 03-02 10:09:00 [core.py:387] RuntimeError: NCCL error: unhandled system error\n")
    assert ds and all(d.signature != "generic.stopped_during_startup" for d in ds)


def test_through_the_cli_it_is_a_diagnosis_said_as_a_guess(tmp_path):
    log = tmp_path / "hang.log"
    log.write_text(HEAD + TP)
    out = subprocess.run([sys.executable, "-m", "triage", "--log", str(log), "--json", "--offline", "--no-probe"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    (d,) = json.loads(out.stdout)["diagnoses"]
    assert d["signature"] == "generic.stopped_during_startup" and d["confidence"] <= 0.5
