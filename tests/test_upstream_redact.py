"""Redaction: nothing private leaves the machine."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from triage.upstream.redact import local_identities, redact

IDS = ["alice", "gpu-node-17"]


def r(text):
    return redact(text, identities=IDS)


def test_tokens():
    for secret in ("ghp_" + "a" * 36, "github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "hf_" + "Z" * 34,
                   "sk-proj-abcdefghijklmnop1234", "AKIAABCDEFGHIJKLMNOP"):
        out = r(f"export X={secret} and {secret}")
        assert secret not in out and "<token>" in out
    assert r("Authorization: Bearer abcdef0123456789abcdef") == "Authorization: Bearer <token>"
    assert r("HF_TOKEN=s3cr3tvalue python x.py") == "HF_TOKEN=<token> python x.py"


def test_emails_ips_hosts_and_names():
    out = r("alice@example.com on gpu-node-17 (10.1.2.3:8000, fe80:0:0:0:1:2:3:4) node gpu-node-17.corp.example.com")
    assert "alice" not in out and "10.1.2.3" not in out and "fe80" not in out and "corp.example.com" not in out
    assert "<email>" in out and "<ip>" in out and "<host>" in out and "<name>" in out


def test_clock_times_and_wildcard_addresses_are_not_ips():
    line = "(Worker_TP0 pid=4188) ERROR 02-14 10:12:44 [multiproc_executor.py:751] serving on 0.0.0.0:8000 and ::1"
    assert r(line) == line
    assert r("peer 2001:db8::7 and fe80::1ff:fe23:4567:890a") == "peer <ip> and <ip>"


def test_paths():
    assert r("/home/alice/models/GLM-5/config.json") == "~/<path>"
    assert r("loading /data/models/acme-secret/DeepSeek-V3.2") == "loading <path>"
    # a traceback keeps what a maintainer needs
    assert (r('File "/home/alice/venv/lib/python3.12/site-packages/vllm/platforms/cuda.py", line 10')
            == 'File "<env>/site-packages/vllm/platforms/cuda.py", line 10')
    assert r("/usr/local/lib/python3.12/dist-packages/vllm/v1/worker.py") == "<env>/dist-packages/vllm/v1/worker.py"
    assert r("/root/.cache/huggingface") == "~/<path>"


def test_public_things_survive():
    text = ("see https://github.com/vllm-project/vllm/issues/31936 and vllm.v1.attention.backends.mla "
            "on RTX PRO 6000 with torch.bfloat16 and model.safetensors.index.json")
    assert r(text) == text


def test_private_urls_and_url_credentials():
    out = r("pip install --index-url https://bob:pw@pypi.internal.acme.io/simple vllm")
    assert "acme" not in out and "bob" not in out and "pw@" not in out


def test_extra_literals():
    assert "secret-project" not in redact("model secret-project loaded", extra=["secret-project"], identities=[])


def test_local_identities_include_the_host_name():
    import socket

    host = socket.gethostname().split(".")[0]
    ids = local_identities()
    if len(host) >= 3 and host not in ("localhost",):
        assert host in ids


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300), st.text(max_size=300))
def test_never_raises_and_tokens_never_survive(a, b):
    secret = "ghp_" + "Q" * 36
    out = redact(a + " " + secret + " " + b, identities=IDS)
    assert secret not in out
