"""dist's dev set (tests/logs/dev-dist/): multi-GPU and multi-node failures from real threads, through the CLI,
and the mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-dist")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {
}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- the custom all-reduce's CUDA IPC (csrc/custom_all_reduce.cuh CUDACHECK) ----------------------------------

@pytest.mark.parametrize("text, err", [
    ("Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:336 'invalid argument'\n", "invalid argument"),
    # before 0.4.1 the macro printed no "Cuda error"
    ("Failed: /home/runner/work/vllm/vllm/csrc/custom_all_reduce.cuh:310 'invalid argument'\n", "invalid argument"),
    ("Failed: Cuda error /home/my/vllm/csrc/custom_all_reduce.cuh:417 'resource already mapped'\n",
     "resource already mapped"),
    # quoted in a title without the "Failed: " the macro prints first
    ("Cuda error /workspace/csrc/custom_all_reduce.cuh:143 'invalid resource handle'\n", "invalid resource handle"),
    ("Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'\n", "invalid argument"),
])
def test_custom_all_reduce_cuda_error(text, err):
    d = first(text)
    assert (d.signature, d.category, d.facts["cuda_error"]) == ("distributed.custom_ar_cuda_ipc", "distributed", err)
    assert "--disable-custom-all-reduce" in d.fix.summary


def test_custom_all_reduce_with_expandable_segments_names_the_allocator():
    d = first("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True vllm serve Qwen/Qwen3-0.6B -dp 2 -tp 2\n"
              "Failed: Cuda error custom_all_reduce.cuh:455 'invalid argument'\n")
    assert "expandable_segments" in d.fix.summary


def test_custom_all_reduce_disabled_warning_is_no_failure():
    d = top("(VllmWorkerProcess pid=191) WARNING 02-22 22:09:01 custom_all_reduce.py:136] Custom allreduce is "
            "disabled because it's not supported on more than two PCIe-only GPUs. To silence this warning, specify "
            "disable_custom_all_reduce=True explicitly.\n")
    assert d is None or d.confidence <= 0.5


# ---- Ray's GCS out of reach (gcs_rpc_client.h, gcs_client.cc, node.py) --------------------------------------

@pytest.mark.parametrize("text", [
    "[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address "
    "10.0.0.4:6379 within 5 seconds.\n"
    "[2025-07-23 10:06:19,681 W 51000 51000] gcs_client.cc:183: Failed to get cluster ID from GCS server: TimedOut: "
    "Timed out while waiting for GCS to become available.\n",
    "[2023-10-25 14:21:15,950 E 30712 30890] gcs_rpc_client.h:552: Failed to connect to GCS within 60 seconds. GCS "
    "may have been killed. It's either GCS is terminated by `ray stop` or is killed unexpectedly.\n",
    "2022-03-30 17:22:35,502 WARNING node.py:1465 -- Unable to connect to GCS at 127.0.0.1:6379. Check that (1) Ray "
    "GCS with matching version started successfully at the specified address, and (2) there is no firewall setting "
    "preventing access.\n",
])
def test_ray_gcs_unreachable(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.ray_gcs_unreachable", "distributed")


def test_ray_gcs_empty_head_address_says_the_variable_is_empty():
    d = first("+ ray start --address=:6379 --num-gpus 8 --block\n"
              "[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address :6379 "
              "within 5 seconds.\n")
    assert "empty" in d.title and "MASTER_ADDR" in d.fix.summary


def test_ray_gcs_retry_that_got_through_is_no_failure():
    d = top("[2025-07-23 10:05:49,679 W 51000 51000] gcs_rpc_client.h:151: Failed to connect to GCS at address "
            "10.0.0.4:6379 within 5 seconds.\n"
            "2025-07-23 10:05:52,002\tINFO worker.py:1642 -- Connected to Ray cluster. View the dashboard at "
            "127.0.0.1:8265\n")
    assert d is None or d.signature != "distributed.ray_gcs_unreachable"


# ---- two ranks on one GPU (NCCL init.cc) ---------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Duplicate GPU detected : rank 9 and rank 1 both on CUDA device 34000\n",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, invalid "
    "usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.20.5\nncclInvalidUsage: This usually reflects invalid "
    "usage of NCCL library.\nLast error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 10\n",
    "gpu-03:29880:30398 [0] init.cc:497 NCCL WARN Duplicate GPU detected : rank 2 and rank 0 both on CUDA device 1000\n",
    "it causes `Duplicate GPU detected : rank 0 and rank 1 both on CUDA device 69000`\n",
])
def test_duplicate_gpu(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.duplicate_gpu", "distributed")


# ---- HCCL's bootstrap port (CANN EJ0003) ---------------------------------------------------------------------

@pytest.mark.parametrize("text, port", [
    ("EJ0003: [PID: 159] 2025-03-26-17:01:02.816.428 Failed to bind the IP port. Reason: The IP address and port "
     "have been bound already.\n", None),
    ("[PID: 3354790] 2026-04-28-16:56:52.897.463 Communication_Error_Bind_IP_Port(EJ0003): Failed to bind the IP port. "
     "Reason: The IP address and port have been bound already.\n", None),
    ("        host nic listen start failed, port[60000], return[11][FUNC:StartListenSocket][FILE:network_manager.cc]"
     "[LINE:1163]\n", "60000"),
])
def test_hccl_port_in_use(text, port):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.hccl_port_in_use", "distributed")
    assert (f"port {port}" in d.title) == bool(port)
    assert "HCCL_HOST_SOCKET_PORT_RANGE" in d.fix.summary


# ---- Gloo's buffer timeout (gloo/transport/tcp/unbound_buffer.cc) --------------------------------------------

@pytest.mark.parametrize("text", [
    "RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 1800000ms "
    "for recv operation to complete\n",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:136] Timed out waiting 600000ms for send "
    "operation to complete\n",
    "gloo/transport/tcp/unbound_buffer.cc:78 Timed out waiting 1800000ms for recv operation to complete\n",
])
def test_gloo_timeout(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.gloo_timeout", "distributed")


def test_gloo_connection_failure_stays_gloo_failed():
    d = first("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
              "[10.0.0.7]:36271\n")
    assert d.signature == "distributed.gloo_failed"


def test_ipv4_mapped_address_warning_is_no_rendezvous_failure():
    # c10d tries the IPv4-mapped IPv6 form first; errno 97 there is passing
    d = top("[W522 10:55:42.118324511 socket.cpp:764] [c10d] The client socket has failed to connect to "
            "[::ffff:10.0.0.12]:46127 (errno: 97 - Address family not supported by protocol).\n")
    assert d is None or d.signature != "distributed.master_port"


# ---- Mooncake KV transfers (vLLM's and vllm-ascend's mooncake connectors) ------------------------------------

@pytest.mark.parametrize("text", [
    "(EngineCore_DP0 pid=5704) ERROR 01-06 06:43:02 [mooncake_connector.py:419] Mooncake transfer failed for request "
    "cmpl-118b93ed-0\n",
    "(EngineCore_DP0 pid=284) ERROR 11-04 02:14:59 [mooncake_connector.py:1021] Mooncake transfer failed for request. "
    "remote_request_id=cmpl-7c2f9a41-0, ret=-1.\n",
    "RuntimeError: Mooncake transfer failed, ret: -1\n",
    "(Worker_DP0_EP0 pid=335952) ERROR 06-08 14:45:44 [mooncake_hybrid_connector.py:551] Mooncake transfer failed for "
    "request chatcmpl-270f82b6\n",
])
def test_mooncake_transfer_failed(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.mooncake_transfer_failed", "distributed")


def test_mooncake_peer_and_ascend_advice():
    d = first("E20260106 06:43:02.966198  5793 ascend_direct_transport.cpp:581] Failed to connect to segment: "
              "172.17.0.16:16584\n"
              "(EngineCore_DP0 pid=5704) ERROR 01-06 06:43:02 [mooncake_connector.py:419] Mooncake transfer failed for "
              "request cmpl-1\n")
    assert "172.17.0.16:16584" in d.title and "use_ascend_direct" in d.fix.summary


def test_mooncake_engine_init_failure_is_not_a_transfer():
    d = first("E0910 06:19:37.204734  3746 rdma_transport.cpp:426] RdmaTransport: No available RNIC\n"
              "RuntimeError: Mooncake Transfer Engine initialization failed.\n")
    assert d.signature == "distributed.rdma_no_nic"


# ---- a ZMQ socket bound to another host's address -------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "zmq.error.ZMQError: Cannot assign requested address (addr='tcp://172.17.0.5:34762')\n",
    "(EngineCore_DP0 pid=90) zmq.error.ZMQError: Cannot assign requested address (addr='tcp://10.99.48.128:13345')\n",
])
def test_zmq_bind_foreign_address(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.zmq_bind_foreign_address", "distributed")


# ---- wordings added to older rules ------------------------------------------------------------------------------

def test_eaddrinuse_named_in_a_title_is_the_rendezvous_port():
    d = first("# Multiple vLLM instances on the same node may choose the same distributed init port and fail with "
              "EADDRINUSE\n")
    assert (d.signature, d.category) == ("distributed.master_port", "distributed")


def test_ray_channel_class_quoted_without_traceback_is_compiled_graphs():
    d = first("AttributeError: '_TorchTensorAcceleratorChannel' object has no attribute '_accelerator_group'. "
              "Did you mean: '_accelerator_group_id'?\n")
    assert (d.signature, d.category) == ("distributed.ray_compiled_graph", "distributed")


def test_custom_all_reduce_error_inside_graph_capture_stays_the_capture_rule():
    d = first("Capturing CUDA graphs (decode, FULL): 100%|██████████| 2/2 [00:00<00:00,  6.11it/s]\n"
              "Failed: Cuda error /workspace/csrc/custom_all_reduce.cuh:164 'invalid argument'\n")
    assert d.signature == "cudagraph.error_during_capture"


def test_a_report_of_hanging_at_the_placement_group_is_ray_gpus():
    d = first("  - vLLM starts with --tensor-parallel-size 2 but only has 1 GPU\n"
              "  - vLLM hangs with log: Waiting for creating a placement group...\n")
    assert (d.signature, d.category) == ("distributed.ray_gpus", "distributed")
