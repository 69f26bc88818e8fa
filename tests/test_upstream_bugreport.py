"""`triage report`: the vLLM bug template, filled from the diagnosis, redacted."""

from __future__ import annotations

import sys
import types

import pytest

from triage.commands import bugreport
from triage.model import Evidence, UpstreamHit, Upgrade
from upstream_cases import SM120_LINE, sm120_report

IDS = ["alice", "gpu-node-17"]
PRIVATE_LINE = ("(EngineCore_DP0 pid=1576517) ERROR 12-07 17:00:35 [core.py:867] File "
                "\"/home/alice/venv/lib/python3.12/site-packages/vllm/platforms/cuda.py\", line 301, in get_attn_backend_cls")


def _report():
    rep = sm120_report(launch_args={"model": "/data/models/acme-secret/DeepSeek-V3.2", "tensor_parallel_size": 8,
                                    "trust_remote_code": True, "host": "gpu-node-17.corp.example.com",
                                    "api_key": "sk-live-abcdefghijklmnop1234"},
                       probed_host="gpu-node-17")
    rep.diagnoses[0].evidence.append(Evidence(400, PRIVATE_LINE))
    rep.upstream = [UpstreamHit.from_json(h) for h in [{"number": 31936, "title": "[Bug]: run deepseek v3.2 failed", "why": "same error, backend, GPU and model",
                     "url": "https://github.com/vllm-project/vllm/issues/31936", "state": "open", "kind": "issue", "score": 14.0},
                    {"number": 31085, "title": "NVFP4 MoE on SM120", "why": "same GPU; other subsystem: MoE kernels",
                     "url": "https://github.com/vllm-project/vllm/issues/31085", "state": "open", "kind": "issue", "score": -0.3}]]
    rep.upgrade = Upgrade("fixes", "0.26.0")
    return rep


def test_template_sections_and_content():
    rep = _report()
    text = bugreport.redact_report(bugreport.render(rep, tried=["--attention-backend TRITON_MLA"]), rep.environment,
                                   identities=IDS)
    first = text.splitlines()[0]
    assert first.startswith("Title: [Bug]: No attention backend can run sparse MLA (DSA) on this GPU")
    assert "RTX PRO 6000 Blackwell Server Edition, vLLM 0.13.0" in first
    for heading in ("### Your current environment", "<summary>The output of <code>python collect_env.py</code></summary>",
                    "### 🐛 Describe the bug", "### What was tried", "### Before submitting a new issue..."):
        assert heading in text
    assert "8x NVIDIA RTX PRO 6000 Blackwell Server Edition (compute capability 12.0)" in text
    assert "[pip3] flashinfer-python==0.5.3" in text
    assert "vllm/platforms/cuda.py" in text  # the patched files
    assert "No valid attention backend found for cuda with AttentionSelectorConfig(head_size=576" in text
    assert "| FLASHMLA_SPARSE | compute capability not supported |" in text
    assert "- --attention-backend TRITON_MLA" in text
    assert "Upgrade check: fixes (target 0.26.0)" in text
    assert "#31936" in text and "#31085" not in text  # the other-subsystem hit is not offered as related
    assert "--tensor-parallel-size 8" in text and "--trust-remote-code" in text


def test_nothing_private_survives():
    rep = _report()
    text = bugreport.redact_report(bugreport.render(rep), rep.environment, identities=IDS)
    for secret in ("alice", "gpu-node-17", "acme-secret", "/data/models", "corp.example.com", "sk-live"):
        assert secret not in text, secret
    assert "<local model: DeepseekV32ForCausalLM>" in text
    assert '"<env>/site-packages/vllm/platforms/cuda.py", line 301' in text


def _fake_pipeline(monkeypatch, fn):
    mod = types.ModuleType("triage.pipeline")
    mod.build_report = fn
    monkeypatch.setitem(sys.modules, "triage.pipeline", mod)


def test_main_writes_the_file(monkeypatch, tmp_path, capsys):
    seen = {}

    def build_report(source, *, offline=False, probe=True, host=None, python=None, snapshot=None):
        seen.update(source=source, offline=offline, probe=probe)
        return _report()

    _fake_pipeline(monkeypatch, build_report)
    out = tmp_path / "issue.md"
    assert bugreport.main(["--log", "vllm.log", "--out", str(out)]) == 0
    assert seen == {"source": "vllm.log", "offline": True, "probe": False}
    body = out.read_text()
    assert body.startswith("Title: [Bug]:") and "gpu-node-17" not in body
    assert "wrote" in capsys.readouterr().err


def test_main_input_error_is_one_line(monkeypatch, capsys):
    class InputError(Exception):
        pass

    def build_report(source, **kw):
        raise InputError(f"{source}: no such file")

    _fake_pipeline(monkeypatch, build_report)
    assert bugreport.main(["--log", "/nope.log"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "triage report: /nope.log: no such file"


def test_main_no_failure(monkeypatch, capsys):
    from triage.model import Report

    _fake_pipeline(monkeypatch, lambda source, **kw: Report(source=source, bytes=1, lines=1))
    assert bugreport.main(["--log", "ok.log"]) == 3
    assert "no failure" in capsys.readouterr().err


def test_usage_error():
    with pytest.raises(SystemExit) as exc:
        bugreport.main([])
    assert exc.value.code == 2


def test_with_the_real_pipeline(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TRIAGE_HOME", str(tmp_path / "home"))
    log = tmp_path / "vllm.log"
    log.write_text("INFO 12-29 15:20:01 [api_server.py:1] vLLM API server version 0.13.0\n" + SM120_LINE + "\n")
    assert bugreport.main(["--log", str(log)]) == 0
    text = capsys.readouterr().out
    assert "### 🐛 Describe the bug" in text and "No valid attention backend found" in text
