"""`triage preflight --host`: the machine probed over a real SSH server on loopback (asyncssh in-process),
the model's files read on that host."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import run_triage
from tests.fakes.ssh_lab import dead_port, host_env, lab, machines  # noqa: F401 (fixtures)

ROOT = Path(__file__).resolve().parent.parent
LLAMA_8B = ROOT / "tests" / "preflight" / "llama-3.1-8b" / "config.json"


def _hf_snapshot(home: Path, repo: str, weights: int) -> Path:
    """A repo in the Hugging Face cache layout, its weight file a symlink into blobs/ (as the Hub writes it)."""
    base = home / ".cache/huggingface/hub" / ("models--" + repo.replace("/", "--"))
    snap = base / "snapshots" / "0123abcd"
    snap.mkdir(parents=True)
    (base / "blobs").mkdir()
    shutil.copy(LLAMA_8B, snap / "config.json")
    blob = base / "blobs" / "deadbeef"
    with open(blob, "wb") as fh:
        fh.truncate(weights)
    (snap / "model.safetensors").symlink_to(blob)
    return snap


def _preflight(*args: str) -> tuple[int, dict]:
    p = run_triage("preflight", "--json", *args, timeout=120)
    return p.returncode, (json.loads(p.stdout) if p.stdout.strip() else {"stderr": p.stderr})


def test_the_host_machine_and_its_hf_cache_decide(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"))
    _hf_snapshot(lab.home, "meta-llama/Llama-3.1-8B", 16 << 30)  # 16 GiB of weights on a 15 GiB T4
    rc, out = _preflight("--host", f"tester@127.0.0.1:{srv.port}", "--",
                         "vllm", "serve", "meta-llama/Llama-3.1-8B")
    assert rc == 0, out
    assert out["input"]["model"].startswith(f"tester@127.0.0.1:{srv.port}:") and "snapshots/0123abcd" in out["input"]["model"]
    assert {g["name"] for g in out["environment"]["gpus"]} == {"Tesla T4"}
    cats = {d["category"] for d in out["diagnoses"]}
    assert "dtype_unsupported" in cats  # bf16 on compute capability 7.5
    assert "gpu_oom" in cats  # the weights, sized through the blob symlink, do not fit
    assert any("not read over SSH" in w for w in out.get("warnings", []))
    # the repo id reached the host as an argument of a fixed script, never spliced into its text
    assert any("models--$1/snapshots" in c and "meta-llama--Llama-3.1-8B" in c for c in srv.commands)


def test_an_absolute_folder_on_the_host(lab, machines, tmp_path):
    srv = lab.server(host_env(machines, "a", "rtxpro6000x8"))
    model = tmp_path / "llama"
    model.mkdir()
    shutil.copy(LLAMA_8B, model / "config.json")
    (model / "model.safetensors.index.json").write_text(json.dumps({"metadata": {"total_size": 16 << 30}}))
    rc, out = _preflight("--host", f"tester@127.0.0.1:{srv.port}", "--", "vllm", "serve", str(model),
                         "--tensor-parallel-size", "8")
    assert rc == 3, out  # 8 GPUs with 96 GB each: nothing stops this launch
    assert out["diagnoses"] == [] and len(out["environment"]["gpus"]) == 8


def test_a_model_the_host_does_not_have(lab, machines):
    srv = lab.server(host_env(machines, "a", "t4"))
    rc, out = _preflight("--host", f"tester@127.0.0.1:{srv.port}", "--", "vllm", "serve", "org/absent-model")
    assert any("neither an absolute folder on" in w for w in out.get("warnings", [])), out


def test_an_unreachable_host_is_one_line_and_exit_2(lab):
    p = run_triage("preflight", "--host", f"tester@127.0.0.1:{dead_port()}", "--", "vllm", "serve", "/m",
                   timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 2 and "Traceback" not in err
    assert err.startswith("triage preflight:") and len(err.strip().splitlines()) == 1
