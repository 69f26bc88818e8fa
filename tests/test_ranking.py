"""The ranking of diagnoses (triage/diagnose.py): first real failure of a cascade first."""

from triage.diagnose import diagnose
from triage.logread import scan_text


def test_fallback_guess_does_not_demote_a_known_secondary():
    log = "\n".join([
        "(Worker_TP1 pid=12) ERROR 03-01 10:00:00 [multiproc_executor.py:751] Traceback (most recent call last):",
        '(Worker_TP1 pid=12) ERROR 03-01 10:00:00 [multiproc_executor.py:751]   File "/e/lib/python3.12/site-packages/vllm/distributed/parallel_state.py", line 1, in init',
        "(Worker_TP1 pid=12) ERROR 03-01 10:00:00 [multiproc_executor.py:751] torch.distributed.DistBackendError: NCCL error in: "
        "/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
        "(Worker_TP1 pid=12) ERROR 03-01 10:00:00 [multiproc_executor.py:751] Last error:",
        "(Worker_TP1 pid=12) ERROR 03-01 10:00:00 [multiproc_executor.py:751] Cuda failure 'peer mapping resources exhausted'",
    ]) + "\n"
    diagnoses, _ = diagnose(scan_text(log))
    assert diagnoses[0].category == "distributed"
    assert diagnoses[0].confidence >= 0.7
    assert all(d.confidence < diagnoses[0].confidence for d in diagnoses[1:])


def test_wrapper_only_log_gives_a_low_confidence_guess_not_the_wrapper():
    log = ("(EngineCore_DP0 pid=1) ERROR 03-01 10:00:00 [core.py:1] EngineCore failed to start.\n"
           "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
    diagnoses, _ = diagnose(scan_text(log))
    assert [d.signature for d in diagnoses] == ["generic.root_cause_missing"]
    assert diagnoses[0].confidence < 0.5 and diagnoses[0].evidence


def test_wrapper_quoting_the_worker_error_is_shown():
    log = ("RuntimeError: Worker failed with error 'Expected all tensors to be on the same device', please check the "
           "stack trace above for the root cause\n")
    d = diagnose(scan_text(log))[0][0]
    assert d.signature == "generic.root_cause_missing"
    assert d.facts["wrapped_error"] == "Expected all tensors to be on the same device"


def test_unknown_nccl_exception_is_guessed_distributed():
    d = diagnose(scan_text("RuntimeError: NCCL communicator init failed for a reason no rule knows\n"))[0][0]
    assert d.category == "distributed"
