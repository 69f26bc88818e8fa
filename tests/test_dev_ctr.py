"""ctr's dev set (tests/logs/dev-ctr/): real logs of vLLM in containers and clusters, through the CLI, and the
mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-ctr")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- a Kubernetes Service's <NAME>_PORT variable read as vLLM's own port ----------------------------------

@pytest.mark.parametrize("text, var, value", [
    # vllm/envs.py get_vllm_port (0.9+): a URI, and any other non-integer
    ("ValueError: VLLM_PORT 'tcp://10.0.0.7:8000' appears to be a URI. This may be caused by a Kubernetes service "
     "discovery issue,check the warning in: https://docs.vllm.ai/en/stable/serving/env_vars.html\n",
     "VLLM_PORT", "tcp://10.0.0.7:8000"),
    ("ValueError: VLLM_PORT 'eight-thousand' must be a valid integer\n", "VLLM_PORT", "eight-thousand"),
    # the Aphrodite fork's copy of the same check
    ("ValueError: APHRODITE_PORT 'tcp://10.1.2.3:2242' appears to be a URI. This may be caused by a Kubernetes "
     "service discovery issue.\n", "APHRODITE_PORT", "tcp://10.1.2.3:2242"),
])
def test_port_variable_not_a_number_is_the_pod_environment(text, var, value):
    d = first(text)
    assert (d.signature, d.category) == ("environment.service_env_port", "environment")
    assert (d.facts["var"], d.facts["value"]) == (var, value)


def test_old_int_parse_of_a_service_uri_names_the_variable_from_the_frame():
    d = first("    lambda: int(os.getenv('VLLM_PORT', '0'))\n"
              "ValueError: invalid literal for int() with base 10: 'tcp://10.100.120.175:80'\n")
    assert d.signature == "environment.service_env_port"
    assert d.facts["var"] == "VLLM_PORT" and "enableServiceLinks" in d.fix.summary


def test_an_int_parse_of_other_text_is_not_a_service_variable():
    d = top("ValueError: invalid literal for int() with base 10: 'auto'\n")
    assert d is None or d.signature != "environment.service_env_port"


# ---- the HF cache the container's user cannot create -------------------------------------------------------

@pytest.mark.parametrize("warning", [
    # transformers (utils/hub.py)
    "There was a problem when trying to write in your cache folder (/.cache/huggingface/hub). You should set the "
    "environment variable TRANSFORMERS_CACHE to a writable directory.",
    # diffusers
    "There was a problem when trying to write in your cache folder (/.cache/huggingface/diffusers). Please, ensure "
    "the directory exists and can be written to.",
])
def test_cache_warning_before_a_failure_names_the_cache(warning):
    # the traceback that follows is cut before its message (as pod logs and pastes often are)
    d = first(warning + "\nTraceback (most recent call last):\n"
              '  File "/usr/local/lib/python3.10/dist-packages/huggingface_hub/file_download.py", line 1371, in '
              "hf_hub_download\n    os.makedirs(os.path.dirname(blob_path), exist_ok=True)\n"
              '  File "/usr/lib/python3.10/os.py", line 215, in makedirs\n    makedirs(head, exist_ok=exist_ok)\n')
    assert (d.signature, d.category) == ("environment.hf_cache_not_writable", "environment")
    assert d.facts["path"].startswith("/.cache/huggingface/")


def test_cache_warning_alone_is_no_failure():
    d = top("There was a problem when trying to write in your cache folder (/.cache/huggingface/hub). You should "
            "set the environment variable TRANSFORMERS_CACHE to a writable directory.\n"
            "INFO 03-31 10:02:11 api_server.py:212] vLLM API server version 0.4.0\n")
    assert d is None or d.signature != "environment.hf_cache_not_writable"


# ---- a permission failure named without its message; a read-only mount ------------------------------------

@pytest.mark.parametrize("text", [
    "k8s deployment failure vllm OSError: PermissionError\n",
    "Deploying on an OpenShift 4.18 cluster fails with PermissionError.\n",
])
def test_permission_error_named_without_a_path_is_the_environment(text):
    d = first(text)
    assert (d.signature, d.category) == ("environment.permission_denied", "environment")


def test_a_permission_error_class_mentioned_in_code_is_not_claimed():
    d = top("    except PermissionError:\n        pass\n")
    assert d is None or d.signature != "environment.permission_denied"


def test_read_only_mount_says_so_and_how_to_mount_it():
    d = first("OSError: [Errno 30] Read-only file system: '/model-cache/models--meta-llama--Llama-3.1-8B-Instruct'\n")
    assert d.signature == "environment.permission_denied"
    assert "read-only" in d.title and "readOnly: false" in d.fix.summary


# ---- a port conflict stated in prose -----------------------------------------------------------------------

def test_port_conflict_in_a_title_is_a_port_in_use():
    d = first("Model instance startup failure due to port conflict with VLLM_PORT from another instance\n")
    assert (d.signature, d.category) == ("environment.port_in_use", "environment")


def test_advice_to_avoid_port_conflicts_is_no_failure():
    d = top("INFO 01-20 16:32:02 [utils.py:253] To avoid port conflicts, we pop a new port each time\n")
    assert d is None or d.signature != "environment.port_in_use"


def test_a_shell_that_may_not_execute_the_program_is_a_permission_failure():
    d = first("/bin/sh: 1: vllm: Permission denied\n")
    assert (d.signature, d.category) == ("environment.permission_denied", "environment")
    assert d.facts["path"] == "vllm"


# ---- CDI device names the runtime cannot resolve ------------------------------------------------------------

@pytest.mark.parametrize("text, device", [
    ("Error: setting up CDI devices: unresolvable CDI devices nvidia.com/gpu=all\n", "nvidia.com/gpu=all"),
    # docker 25+ / containerd with CDI enabled
    ("docker: Error response from daemon: CDI device injection failed: unresolvable CDI devices nvidia.com/gpu=0.\n",
     "nvidia.com/gpu=0"),
    # a spec generated before a driver update or a device change
    ('Error: setting up CDI devices: failed to inject devices: failed to stat CDI host device "/dev/dri/renderD129": '
     "no such file or directory\n", "/dev/dri/renderD129"),
])
def test_unresolvable_cdi_device_is_the_host_spec(text, device):
    d = first(text)
    assert (d.signature, d.category) == ("environment.cdi_unresolved", "environment")
    assert d.facts["device"] == device and "nvidia-ctk cdi generate" in d.fix.summary


# ---- the kubelet restarting a container whose probe failed --------------------------------------------------

@pytest.mark.parametrize("text, probe", [
    ("  Normal   Killing    9m   kubelet   Container vllm failed liveness probe, will be restarted\n", "liveness"),
    ("  Normal   Killing    4m   kubelet   Container vllm failed startup probe, will be restarted\n", "startup"),
    ('  Warning  Unhealthy  2m (x30 over 7m)  kubelet  Startup probe failed: Get "http://10.1.0.7:8000/health": '
     "dial tcp 10.1.0.7:8000: connect: connection refused\n", "startup"),
    ("  Warning  Unhealthy  25m (x3 over 25m)  kubelet  Liveness probe failed: HTTP probe failed with statuscode: 503\n",
     "liveness"),
])
def test_probe_restart_is_the_pod_spec(text, probe):
    d = first(text)
    assert (d.signature, d.category) == ("environment.probe_restart", "environment")
    assert d.facts["probe"] == probe


def test_a_readiness_probe_alone_restarts_nothing():
    d = top('  Warning  Unhealthy  9m (x9 over 11m)  kubelet  Readiness probe failed: Get "http://10.244.0.13:8000/health":'
            " dial tcp 10.244.0.13:8000: connect: connection refused\n")
    assert d is None or d.signature != "environment.probe_restart"


def test_the_containers_own_failure_outranks_the_probe_that_followed_it():
    d = first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of "
              "23.55 GiB of which 1.12 GiB is free.\n"
              "  Normal   Killing    9m   kubelet   Container vllm failed liveness probe, will be restarted\n")
    assert d.signature != "environment.probe_restart"


# ---- an image that could not be pulled; a pod the kubelet evicted -------------------------------------------

@pytest.mark.parametrize("text, image, why", [
    ('  Warning  Failed  3m  kubelet  Failed to pull image "vllm/vllm-openai:v9.9.9": rpc error: code = NotFound '
     'desc = failed to pull and unpack image "docker.io/vllm/vllm-openai:v9.9.9": failed to resolve reference '
     '"docker.io/vllm/vllm-openai:v9.9.9": docker.io/vllm/vllm-openai:v9.9.9: not found\n',
     "vllm/vllm-openai:v9.9.9", "no such image or tag"),
    ("docker: Error response from daemon: pull access denied for myorg/vllm-private, repository does not exist or "
     "may require 'docker login': denied: requested access to the resource is denied.\n",
     "myorg/vllm-private", "the registry refused the credentials"),
    ("docker: failed to register layer: write /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so: "
     "no space left on device.\n", "the image", "the disk ran out while unpacking the image"),
])
def test_image_pull_failure_names_the_image_and_why(text, image, why):
    d = first(text)
    assert (d.signature, d.category) == ("environment.image_pull_failed", "environment")
    assert (d.facts["image"], d.facts["why"]) == (image, why)


@pytest.mark.parametrize("text, resource", [
    ("Message: The node was low on resource: memory. Threshold quantity: 100Mi, available: 92Mi.\n", "memory"),
    ("  Warning  Evicted  1m  kubelet  Pod ephemeral local storage usage exceeds the total limit of containers 50Gi.\n",
     "ephemeral local storage"),
    ('  Warning  Evicted  1m  kubelet  Container vllm exceeded its local ephemeral storage limit "50Gi".\n',
     "local ephemeral storage"),
])
def test_eviction_names_the_resource(text, resource):
    d = first(text)
    assert (d.signature, d.category) == ("environment.pod_evicted", "environment")
    assert d.facts["resource"] == resource


def test_sagemaker_ping_check_names_the_variant_and_ranks_below_vllms_own_failure():
    line = ("UnexpectedStatusException: Error hosting endpoint e1: Failed. Reason: The primary container for production "
            "variant AllTraffic did not pass the ping health check. Please check CloudWatch logs for this endpoint..\n")
    d = first(line)
    assert (d.signature, d.facts["variant"]) == ("environment.sagemaker_ping_failed", "AllTraffic")
    d = first("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n" + line)
    assert d.signature != "environment.sagemaker_ping_failed"
