"""d2's dev set (tests/logs/dev-d2/): distributed and runtime failures from real threads, through the CLI, and the
mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top
from triage.logread import scan_text

DEV, EXPECTED = load("dev-d2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a device named by UUID where vLLM casts CUDA_VISIBLE_DEVICES entries to int ---------------------------

@pytest.mark.parametrize("text, kind", [
    ("ValueError: invalid literal for int() with base 10: 'MIG-74d68ce8-f74a-5408-a325-06b493f31c14'\n", "MIG"),
    # drivers before R470 named MIG instances MIG-GPU-<uuid>/<gi>/<ci>
    ("ValueError: invalid literal for int() with base 10: 'MIG-GPU-5c89852c-d268-c3f3-1b07-005d5ae1dc3f/7/0'\n",
     "MIG"),
    # a whole GPU named by UUID (device plugins that set CUDA_VISIBLE_DEVICES to UUIDs)
    ("(RayWorkerWrapper pid=586) ValueError: invalid literal for int() with base 10: "
     "'GPU-d38e6300-de5a-ae7b-585f-d6f65b3d442a'\n", "GPU"),
])
def test_device_named_by_uuid_is_the_environment(text, kind):
    d = first(text)
    assert (d.signature, d.category) == ("environment.device_uuid_index", "environment")
    assert kind in d.title


def test_another_invalid_literal_is_not_a_device_uuid():
    d = top("ValueError: invalid literal for int() with base 10: 'auto'\n")
    assert d is None or d.signature != "environment.device_uuid_index"


# ---- a user ID without a passwd entry (torch's cache folder is named after getpass.getuser()) -------------

@pytest.mark.parametrize("text", [
    "KeyError: 'getpwuid(): uid not found: 1000'\n",
    "(VllmWorker rank=0 pid=212) KeyError: 'getpwuid(): uid not found: 1000790000'\n",
    # Python 3.13's getpass wraps the KeyError
    "OSError: No username set in the environment\n",
])
def test_uid_without_passwd_is_the_environment(text):
    d = first(text)
    assert (d.signature, d.category) == ("environment.uid_without_passwd", "environment")


# ---- multi-node-serving.sh / ray_init.sh bringing up the Ray cluster ---------------------------------------

@pytest.mark.parametrize("text, step", [
    ("Error: Missing argument --ray_address\n", "--ray_address"),
    ("Error: Missing argument --ray_cluster_size\n", "--ray_cluster_size"),
    ("Waiting until the ray worker is active...\nRay worker starts timeout, head address: vllm-0.vllm:6379\n",
     "vllm-0.vllm:6379"),
    ("Wait for all ray workers to be active. 1/2 is active\nWaiting for all ray workers to be active timed out.\n",
     "never saw"),
])
def test_ray_cluster_bringup_names_the_step(text, step):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.ray_cluster_bringup", "distributed")
    assert step in d.title


def test_ray_progress_lines_alone_are_no_failure():
    d = top("Wait for all ray workers to be active. 1/2 is active\n"
            "All ray workers are active and the ray cluster is initialized successfully.\n")
    assert d is None or d.signature != "distributed.ray_cluster_bringup"


# ---- Ray's core worker failing to register with the raylet ---------------------------------------------------

@pytest.mark.parametrize("text", [
    # Ray 2.x core_worker.cc
    "[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker "
    "01000000ffffffffffffffffffffffffffffffffffffffffffffffff to Raylet. IOError: [RayletClient] Unable to register "
    "worker with raylet. No such file or directory\n",
    # Ray 2.4x core_worker_process.cc
    "[2026-03-03 21:12:46,736 E 46008 46008] core_worker_process.cc:232: Failed to register worker to Raylet: "
    "IOError: Failed to read data from the socket: End of file worker_id=01000000ffffffffffffffffffffffffffffffffff\n",
])
def test_raylet_registration_is_distributed(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.ray_worker_register", "distributed")


@pytest.mark.parametrize("line, phrase", [
    ("E0911 06:19:37.204734  3746 rdma_transport.cpp:426] RdmaTransport: No available RNIC", "No available RNIC"),
    ("[2025-02-19 13:33:40,672 E 15244 15244] core_worker.cc:496: Failed to register worker to Raylet: TimedOut: "
     "register timed out", "to Raylet"),
    ("Ray worker starts timeout, head address: vllm-0.vllm:6379", "head address"),
    ("Waiting for all ray workers to be active timed out.", "timed out"),
])
def test_causes_without_an_error_word_are_selected_in_a_log(line, phrase):
    # a log with its own timestamps is read through PREFILTER, not whole: these lines carry no error word
    noise = "".join(f"2025-09-11 06:19:{i % 60:02d},100\tINFO worker.py:1654 -- step {i}\n" for i in range(60))
    assert any(phrase in ln.text for ln in scan_text(noise + line + "\n").lines)


# ---- NIXL's handshake reaching another engine (the side-channel host) ----------------------------------------

@pytest.mark.parametrize("text", [
    # 0.9-0.10: "Expected X,received Y." (no space)
    "ERROR 07-01 10:00:00 [nixl_connector.py:540] RuntimeError: Remote NIXL agent engine ID mismatch. Expected "
    "9690d2d6-a66f-4fd8-905c-fd03dce5655f,received 495b4444-8935-4ada-a9d7-fe915b9c9595.\n",
    # plugins' copies: "Expected X, received Y."
    "RuntimeError: Remote NIXL agent engine ID mismatch. Expected abc_dp1, received def_dp1.\n",
])
def test_nixl_engine_mismatch_is_the_side_channel(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.nixl_engine_mismatch", "distributed")
    assert "VLLM_NIXL_SIDE_CHANNEL_HOST" in d.fix.summary


# ---- Mooncake's RDMA transport finding no NIC ------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "E0115 05:20:19.945191   309 rdma_transport.cpp:662] RdmaTransport: No available RNIC\n",
    "E0115 05:20:19.945197   309 rdma_transport.cpp:106] RdmaTransport: cannot initialize RDMA resources\n",
])
def test_mooncake_without_rnic_is_distributed(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.rdma_no_nic", "distributed")


# ---- a bus error said with the shared memory in one line -------------------------------------------------------

@pytest.mark.parametrize("text", [
    "bus error, insufficient shared memory (shm)\n",
    "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n",
])
def test_bus_error_with_shm_is_distributed(text):
    d = first(text)
    assert d.category == "distributed"


# ---- NCCL's bootstrap finding no interface (NCCL_SOCKET_IFNAME) ------------------------------------------------

@pytest.mark.parametrize("text", [
    "gpu-node-7:4102:4102 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found\n",
    "[rank0]: ncclInternalError: Internal check failed.\n[rank0]: Last error:\n"
    "[rank0]: Bootstrap : no socket interface found\n",
    # NCCL_COMM_ID given: the root's listening side
    "node1:77:77 [0] NCCL WARN NET/Socket : No usable listening interface found\n",
    # the wording proposed for NCCL_SOCKET_IFNAME naming no interface (NVIDIA/nccl#1837)
    "NCCL WARN Bootstrap : no NCCL_SOCKET_IFNAME interface found\n",
])
def test_nccl_without_an_interface_names_socket_ifname(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.nccl_no_interface", "distributed")


# ---- /dev/shm said to be full in a title or prose ----------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "[Bug]: DP=16 nodes eventually run out of /dev/shm space due to NCCL and crashloop\n",
    "the pod's /dev/shm is full after a few restarts\n",
])
def test_dev_shm_full_in_prose_is_shared_memory(text):
    d = first(text)
    assert (d.signature, d.category) == ("distributed.nccl_shm", "distributed")


# ---- Ray's version check of a process joining a cluster --------------------------------------------------------

def test_ray_version_mismatch_names_both_versions():
    d = first("RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.43.0\n    Python: 3.11.10\n"
              "This process on node 10.18.215.196 was started with:\n    Ray: 2.44.1\n    Python: 3.11.10\n")
    assert (d.signature, d.category) == ("distributed.ray_version_mismatch", "distributed")
    assert "2.43.0" in d.title and "2.44.1" in d.title


def test_ray_version_mismatch_as_a_warning_line():
    # check_version_info(raise_on_mismatch=False) logs the same message
    d = first("2025-04-02 16:56:49,790\tWARNING utils.py:1560 -- Version mismatch: The cluster was started with:\n"
              "    Ray: 2.9.3\n    Python: 3.10.12\n")
    assert d.signature == "distributed.ray_version_mismatch"


def test_a_bare_version_mismatch_without_ray_is_not_rays():
    d = top("flashinfer build check\nRuntimeError: Version mismatch\n")
    assert d is None or d.signature != "distributed.ray_version_mismatch"


# ---- an exception inside Ray Compiled Graphs' channels -----------------------------------------------------------

def test_exception_in_a_compiled_graph_channel_frame():
    d = first('Traceback (most recent call last):\n'
              '  File "/usr/local/lib/python3.12/dist-packages/ray/dag/compiled_dag_node.py", line 2510, in execute\n'
              '    self._execute_until(idx)\n'
              '  File "/usr/local/lib/python3.12/dist-packages/ray/experimental/channel/shared_memory_channel.py", '
              'line 611, in write\n'
              '    raise ValueError("size of serialized data exceeds the buffer")\n'
              'ValueError: size of serialized data exceeds the buffer\n')
    assert (d.signature, d.category) == ("distributed.ray_compiled_graph", "distributed")
    assert "shared_memory_channel.py" in d.title


def test_a_traceback_passing_through_ray_elsewhere_is_not_compiled_graphs():
    d = top('Traceback (most recent call last):\n'
            '  File "/usr/local/lib/python3.12/dist-packages/ray/experimental/channel/common.py", line 90, in read\n'
            '    return self._read()\n'
            '  File "/usr/local/lib/python3.12/dist-packages/vllm/worker/worker.py", line 200, in execute\n'
            '    x = self.model(x)\n'
            'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n')
    assert d is None or d.signature != "distributed.ray_compiled_graph"


# ---- a KV connector name the installed vLLM does not register ---------------------------------------------------

@pytest.mark.parametrize("text, hint", [
    ("ValueError: Unsupported connector type: LMCacheConnector\n", "LMCacheConnectorV1"),
    # a V0-only vLLM (0.8) asked for a V1 connector
    ("ERROR 05-13 08:41:45 [engine.py:598] Unsupported connector type: LMCacheConnectorV1\n", "upgrade vLLM"),
    ("ValueError: Unsupported connector type: MyStoreConnector\n", "kv_connector_module_path"),
])
def test_unknown_kv_connector_is_the_config(text, hint):
    d = first(text)
    assert (d.signature, d.category) == ("engine_config.kv_connector_unknown", "engine_config")
    assert hint in d.fix.summary


def test_another_projects_unsupported_connector_is_not_a_kv_connector():
    d = top("ValueError: Unsupported connector type: UcmNfsStore\n")
    assert d is None or d.signature != "engine_config.kv_connector_unknown"


def test_a_channel_timeout_stays_a_wait_on_the_workers():
    d = first('Traceback (most recent call last):\n'
              '  File "/usr/local/lib/python3.12/dist-packages/ray/experimental/channel/shared_memory_channel.py", '
              'line 455, in read\n'
              '    ret = self._worker.get_objects(...)\n'
              'ray.exceptions.RayChannelTimeoutError: System error: Timed out waiting for object available to read.\n')
    assert d.signature != "distributed.ray_compiled_graph"


def test_ray_version_rows_are_selected_in_a_log():
    # in a log with vLLM's own headers only PREFILTER's lines (and the one after each) are read
    text = ("INFO 04-02 16:56:44 [api_server.py:1034] vLLM API server version 0.7.2\n"
            + "".join(f"INFO 04-02 16:56:{i:02d} [loggers.py:80] step {i}\n" for i in range(50))
            + "RuntimeError: Version mismatch: The cluster was started with:\n    Ray: 2.43.0\n    Python: 3.11.10\n"
              "This process on node 192.168.50.13 was started with:\n    Ray: 2.44.1\n    Python: 3.11.10\n")
    d = first(text)
    assert d.signature == "distributed.ray_version_mismatch"
    assert "2.43.0" in d.title and "2.44.1" in d.title


def test_nccl_warning_quoted_in_prose_ends_at_its_backtick():
    d = first("   2. NCCL WARN:`transport/p2p.cc:298 NCCL WARN Cuda failure 'invalid argument'`. "
              "https://github.com/NVIDIA/nccl/blob/v2.26.2-1/src/transport/p2p.cc#L249-L299\n")
    assert d.signature == "distributed.nccl_error"
    assert d.title == "NCCL communication failed (Cuda failure 'invalid argument')"


def test_raylet_registration_without_a_reason_still_reads():
    d = first("[2024-06-13 16:11:51,588 E 13261 13261] core_worker.cc:228: Failed to register worker to Raylet.\n")
    assert d.signature == "distributed.ray_worker_register"
    assert "()" not in d.title
