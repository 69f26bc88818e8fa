from __future__ import annotations

import pytest

from triage.playbooks.edits import EditError, set_env, set_flag

SH = """#!/bin/bash
export CUDA_VISIBLE_DEVICES=0,1
vllm serve /models/GLM-5 \\
  --tensor-parallel-size 8 \\
  --max-model-len 65536
"""

COMPOSE_LIST = """services:
  vllm:
    image: vllm/vllm-openai
    command: ["--model", "/models/x", "--max-model-len", "65536"]
"""

COMPOSE_BLOCK = """services:
  vllm:
    image: vllm/vllm-openai
    environment:
      - HF_HOME=/cache
    command:
      - --model
      - /models/x
      - --max-model-len
      - "65536"
"""


def test_shell_replace_insert_and_switch():
    assert "--max-model-len 32768\n" in set_flag(SH, "--max-model-len", "32768", compose=False)
    assert "vllm serve --attention-backend CUSTOM /models/GLM-5" in set_flag(SH, "--attention-backend", "CUSTOM", compose=False)
    assert "vllm serve --enforce-eager /models" in set_flag(SH, "--enforce-eager", None, compose=False)
    assert set_flag("vllm serve m --enforce-eager\n", "--enforce-eager", None, compose=False) == "vllm serve m --enforce-eager\n"
    assert "--max-model-len=4096" in set_flag("vllm serve m --max-model-len=8192\n", "--max-model-len", "4096", compose=False)
    # --max-model-len must not match a longer flag
    assert "--max-model-len-x 1" in set_flag("vllm serve m --max-model-len-x 1\n", "--max-model-len", "2", compose=False)


def test_shell_refuses_ambiguity():
    with pytest.raises(EditError):
        set_flag("vllm serve a\nvllm serve b\n", "--port", "1", compose=False)
    with pytest.raises(EditError):
        set_flag("vllm serve a --port 1 --port 2\n", "--port", "3", compose=False)
    with pytest.raises(EditError):
        set_flag("python train.py\n", "--port", "3", compose=False)


def test_compose_forms():
    assert '"--max-model-len", "4096"' in set_flag(COMPOSE_LIST, "--max-model-len", "4096", compose=True)
    assert 'command: ["--attention-backend", "CUSTOM", "--model"' in set_flag(COMPOSE_LIST, "--attention-backend", "CUSTOM", compose=True)
    out = set_flag(COMPOSE_BLOCK, "--max-model-len", "4096", compose=True)
    assert '- --max-model-len\n      - "4096"' in out
    out = set_flag(COMPOSE_BLOCK, "--attention-backend", "CUSTOM", compose=True)
    assert "command:\n      - --attention-backend\n      - \"CUSTOM\"\n      - --model" in out
    assert "--port 8001 --model" in set_flag("services:\n  v:\n    command: --model x\n", "--port", "8001", compose=True)


def test_env_edits():
    assert "export CUDA_VISIBLE_DEVICES=0\n" in set_env(SH, "CUDA_VISIBLE_DEVICES", "0", compose=False)
    assert "export NCCL_P2P_DISABLE=1\nvllm serve" in set_env(SH, "NCCL_P2P_DISABLE", "1", compose=False)
    assert "export X='a b'\n" in set_env(SH, "X", "a b", compose=False)
    assert "FOO=2 vllm serve m" in set_env("FOO=1 vllm serve m\n", "FOO", "2", compose=False)
    assert "      - NCCL_P2P_DISABLE=1\n      - HF_HOME" in set_env(COMPOSE_BLOCK, "NCCL_P2P_DISABLE", "1", compose=True)
    assert "      - HF_HOME=/data\n" in set_env(COMPOSE_BLOCK, "HF_HOME", "/data", compose=True)
    out = set_env(COMPOSE_LIST, "NCCL_P2P_DISABLE", "1", compose=True)
    assert '    environment:\n      NCCL_P2P_DISABLE: "1"\n    command:' in out
    with pytest.raises(EditError):
        set_env(SH, "not a name", "1", compose=False)
