"""Each failure walks a playbook whose steps speak of its cause: a rule names the playbook that claims its
signature, and a category's playbook does not tell another failure's story (found by surveying `triage fix
--dry-run` over every fixture log)."""

from __future__ import annotations

import pytest

from triage.commands import fix
from triage.playbooks.load import load_library
from triage.playbooks.wording import leaks
from triage.rules import all_rules

LIB = load_library(include_user=False)


@pytest.fixture(autouse=True)
def _home(tmp_path, monkeypatch):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))


def dry_run(name, capsys):
    assert fix.main(["--log", f"tests/logs/{name}", "--dry-run", "--offline", "--no-probe"]) == 0
    out = capsys.readouterr().out
    assert not leaks(out), leaks(out)
    return out, out.split("\nOther steps of this playbook")[0]


# Rules that named a playbook other than the one that claims their signature (found by the same survey).
@pytest.mark.parametrize("name,pid,step", [
    ("environment.port_in_use.log", "environment-port-in-use", None),
    ("environment.port_in_use--zmq.log", "environment-port-in-use", None),
    ("distributed.nccl_shm.log", "distributed-shm", "How big is /dev/shm? (read-only)"),
    ("distributed.bus_error_shm.log", "distributed-shm", "How big is /dev/shm? (read-only)"),
    ("distributed.shm_exhausted.log", "distributed-shm", "How big is /dev/shm? (read-only)"),
])
def test_a_rule_names_the_playbook_that_claims_its_signature(name, pid, step, capsys):
    out, walked = dry_run(name, capsys)
    assert f"(playbook {pid};" in walked and "NCCL_P2P_DISABLE" not in walked and "--playbook" not in walked
    assert step is None or f"] {step}\n" in walked


def test_every_signature_a_playbook_claims_is_walked_by_it():
    """A rule that names a playbook names the one that lists its signature (when one does; a playbook with a
    `when`, such as the sparse MLA one, claims its signatures only for some facts)."""
    claimed = {sig: pb.id for pb in LIB.playbooks.values() if pb.when is None for sig in pb.signatures}
    wrong = {r.signature: (r.playbook, claimed[r.signature]) for r in all_rules()
             if r.playbook and r.signature in claimed and r.playbook != claimed[r.signature]}
    assert not wrong, wrong


@pytest.mark.parametrize("name,step", [
    ("triton.out_of_shared_memory.log", "Out of shared memory"),
    ("compile.cache_artifact_corrupted.log", "Remove the compile cache and start again"),
    ("triton.inductor_failed.log", "A kernel this Triton cannot build or run here"),
    ("triton.llvm_failed.log", "A kernel this Triton cannot build or run here"),
    ("triton.launch_failed.log", "A kernel this Triton cannot build or run here"),
])
def test_triton_compile_speaks_of_shared_memory_only_when_it_ran_out(name, step, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook triton-compile;" in walked and f"] {step}\n" in walked
    assert ("] Out of shared memory\n" in walked) == (step == "Out of shared memory")
    assert ("~99 KB" in walked) == (step == "Out of shared memory")


@pytest.mark.parametrize("name,step,advice", [
    ("environment.hf_cache_not_writable.log", "Change the host or container setup", "HF_HOME=/data/huggingface"),
    ("environment.host_oom_killed.log", "Change the host or container setup", "dmesg | grep -i oom"),
    ("environment.image_pull_failed.log", "Change the host or container setup", None),
    ("environment.no_gpu_visible.log", "The driver sees GPUs; vLLM did not", "CUDA_VISIBLE_DEVICES"),
    ("environment.zero_visible_devices.log", "The driver sees GPUs; vLLM did not", "CUDA_VISIBLE_DEVICES"),
])
def test_environment_asks_nvidia_smi_only_when_gpus_are_not_visible(name, step, advice, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook environment;" in walked and f"] {step}\n" in walked
    assert ("nvidia-smi -L" in walked) == (step == "The driver sees GPUs; vLLM did not")
    assert advice is None or advice in " ".join(walked.split())


def test_a_general_step_quotes_the_rules_advice(capsys):
    """install-mismatch's general path (NumPy 2 here) says the rule's fix, not the compiled-extension story."""
    _out, walked = dry_run("install.numpy_abi.log", capsys)
    assert "Pin numpy<2 in this environment" in " ".join(walked.split())


@pytest.mark.parametrize("name,p2p", [
    ("distributed.nccl_error.log", True),
    ("distributed.collective_timeout.log", True),
    ("distributed.ray_missing.log", False),
    ("distributed.spawn_main_guard.log", False),
    ("distributed.zmq_bind_foreign_address.log", False),
    ("distributed.nixl_unavailable.log", False),
])
def test_distributed_offers_the_peer_to_peer_test_only_for_nccl_between_gpus(name, p2p, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook distributed;" in walked
    assert ("NCCL_P2P_DISABLE" in walked) == p2p
    assert ("] Fix how the processes are set up\n" in walked) == (not p2p)


@pytest.mark.parametrize("name,step", [
    ("tokenizer.token_id_out_of_vocab.log", "What the tokenizer or template needs"),
    ("tokenizer.harmony_vocab_unavailable.log", "What the tokenizer or template needs"),
    ("tokenizer.cut_in_tokenizer.log", "What the tokenizer or template needs"),
    ("tokenizer.chat_template_missing.log", None),
])
def test_tokenizer_sends_to_another_tokenizer_only_when_it_did_not_load(name, step, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook tokenizer-chat-template;" in walked
    assert step is None or f"] {step}\n" in walked
    assert "] Point vLLM at the tokenizer\n" not in walked


@pytest.mark.parametrize("name,gpu", [
    ("quant.min_capability.log", True),
    ("quant.package_missing.log", False),
    ("quant.config_file_missing.log", False),
    ("quant.invalid_method.log", False),
])
def test_quantization_offers_another_checkpoint_only_when_the_gpu_lacks_kernels(name, gpu, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook quantization;" in walked
    assert ("] Use a checkpoint this GPU can run\n" in walked) == gpu
    assert ("] What the quantized checkpoint needs here\n" in walked) == (not gpu)


@pytest.mark.parametrize("name,jit", [
    ("kernels.jit_compile_error.log", True),
    ("kernels.jit_toolchain_missing.log", True),
    ("kernels.flashinfer_crashed.log", False),
    ("kernels.illegal_memory_access.log", False),
    ("kernels.package_missing.log", False),
])
def test_kernel_library_checks_nvcc_only_for_a_kernel_compiled_on_first_use(name, jit, capsys):
    _out, walked = dry_run(name, capsys)
    assert "(playbook kernel-library;" in walked
    assert ("$ nvcc --version" in walked) == jit
    assert ("] What the kernel library needs\n" in walked) == (not jit)
