"""c2's dev set (tests/logs/dev-c2/): engine configuration and memory in real thread logs, through the CLI, and
the mechanisms that name them, each on the other forms the raising code writes."""

from __future__ import annotations

import pytest

from tests.dev_sets import check, first, load, params, top

DEV, EXPECTED = load("dev-c2")

# Dev logs the rules do not get right yet (strict: a fix must remove the name from here).
KNOWN_MISSES: dict[str, str] = {}


@pytest.mark.parametrize("name", params(EXPECTED, KNOWN_MISSES))
def test_dev_log_through_cli(name):
    check(DEV, name, EXPECTED[name])


# ---- an engine keyword vLLM removed, relayed without a traceback ---------------------------------------------

@pytest.mark.parametrize("text, arg, said", [
    ("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'task'\n", "task", "runner"),
    ("TypeError: AsyncEngineArgs.__init__() got an unexpected keyword argument 'disable_log_requests'\n",
     "disable_log_requests", "enable-log-requests"),
    ("ERROR [address=0.0.0.0:1, pid=9] AsyncEngineArgs.__init__() got an unexpected keyword argument "
     "'engine_use_ray', elapsed time: 3 s\n", "engine_use_ray", "distributed-executor-backend"),
    ("报错 TypeError: LLM.__init__() got an unexpected keyword argument 'swap_space'。\n", "swap_space", "0.18"),
])
def test_removed_engine_keyword_is_a_release_mismatch(text, arg, said):
    d = first(text)
    assert (d.signature, d.category) == ("engine_args.kwarg_removed", "install_mismatch")
    assert d.facts["arg"] == arg and said in d.fix.summary


def test_an_engine_keyword_not_in_the_table_still_names_the_release_mismatch():
    d = first("TypeError: EngineArgs.__init__() got an unexpected keyword argument 'kv_offload_gb'\n")
    assert d.signature == "engine_args.kwarg_removed" and "other vLLM releases" in d.fix.summary


def test_another_class_refusing_a_keyword_is_not_claimed():
    d = top("TypeError: Trainer.__init__() got an unexpected keyword argument 'task'\n")
    assert d is None or d.signature != "engine_args.kwarg_removed"


# ---- Ray Serve LLM's own check of engine_kwargs ------------------------------------------------------------

def test_ray_serve_unknown_engine_argument_names_the_replacement():
    d = first("ValueError: Unknown engine argument: swap_space\n")
    assert (d.signature, d.category) == ("engine_args.ray_unknown_engine_argument", "engine_config")
    assert "0.18" in d.fix.summary and "LLMConfig" in d.fix.summary


# ---- a removed flag in a logged launch command, the argparse line not captured ------------------------------

@pytest.mark.parametrize("text", [
    "INFO Starting vLLM server: /var/lib/gpustack/bin/vllm_v0.10.0\n"
    "DEBUG Run vLLM with arguments: serve /models/Qwen3-4B --enable-reasoning --reasoning-parser=deepseek_r1\n",
    "image vllm/vllm-openai:v0.19.0\n$ vllm serve Qwen/Qwen3-32B --disable-log-requests --port 8000\n",
    "pip install vllm==0.13.0\npython -m vllm.entrypoints.openai.api_server --model BAAI/bge-m3 --task embed\n",
])
def test_removed_flag_in_the_command_with_a_release_past_its_removal(text):
    d = first(text)
    assert (d.signature, d.category) == ("engine_args.removed_flag_in_command", "engine_config")


@pytest.mark.parametrize("text", [
    # before the removal: the flag was still taken
    "vllm==0.9.2\nvllm serve Qwen/Qwen3-8B --enable-reasoning --reasoning-parser deepseek_r1\n",
    "vllm==0.11.0\nvllm serve Qwen/Qwen3-8B --disable-log-requests\n",
    # no release named: nothing to compare
    "vllm serve BAAI/bge-m3 --task embed\n",
    # vLLM printed what it parsed: the command was accepted
    "vLLM API server version 0.13.0\nvllm serve BAAI/bge-m3 --task embed\n"
    "INFO [utils.py:233] non-default args: {'model': 'BAAI/bge-m3'}\n",
])
def test_removed_flag_rule_stays_quiet_when_the_flag_was_accepted_or_unknowable(text):
    d = top(text)
    assert d is None or d.signature != "engine_args.removed_flag_in_command"


# ---- swap space per GPU of the tensor-parallel group ------------------------------------------------------

def test_too_large_swap_space_is_the_tp_size_and_swap_setting():
    d = first("ValueError: Too large swap space. 32.00 GiB out of the 31.26 GiB total CPU memory is allocated "
              "for the swap space.\n")
    assert (d.signature, d.category) == ("engine_args.swap_space_too_large", "engine_config")
    assert "--tensor-parallel-size" in d.fix.summary


def test_possibly_too_large_swap_space_is_only_a_warning():
    d = top("WARNING 07-07 00:42:34 [config.py:1632] Possibly too large swap space. 8.00 GiB out of the 19.53 GiB "
            "total CPU memory is allocated for the swap space.\n")
    assert d is None or d.signature != "engine_args.swap_space_too_large"


# ---- the multimodal limit in 0.6-0.8's wording -----------------------------------------------------------

@pytest.mark.parametrize("text", [
    "ValueError: You set image=2 (or defaulted to 1) in `--limit-mm-per-prompt`, but passed 3 image items in the "
    "same prompt.\n",
    "ValueError: [address=0.0.0.0:43315, pid=1] You set video=1 (or defaulted to 1) in '--limit-mm-per-prompt', "
    "but passed 2 video items in the same prompt.\n",
])
def test_old_limit_mm_per_prompt_wording(text):
    d = first(text)
    assert (d.signature, d.category) == ("config.mm_limit_exceeded", "engine_config")


# ---- free memory below the utilization, retold --------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "> `Free memory on cuda:0 (38.74/121.63 GiB) < desired utilization (0.35, 42.57 GiB)`\n",
    "ValueError: Free memory on device cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory "
    "utilization (0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.\n",
])
def test_free_memory_below_utilization_forms(text):
    d = first(text)
    assert (d.signature, d.category) == ("kv_cache.free_memory_below_utilization", "kv_cache_memory")


# ---- an unknown VLLM_* variable is a warning, not the failure ----------------------------------------------

def test_unknown_vllm_env_warning_alone_is_no_failure():
    d = top("WARNING 06-26 15:11:37 [envs.py:1830] Unknown vLLM environment variable detected: VLLM_USE_V1\n")
    assert d is None or d.confidence <= 0.5


# ---- vLLM's own argparse line: a removed flag names what replaced it -------------------------------------

@pytest.mark.parametrize("text, flag, said", [
    ("vllm: error: unrecognized arguments: --task embedding\n", "--task embedding", "--runner pooling"),
    ("crash on startup with `__main__.py: error: unrecognized arguments: --disable-log-requests`.\n",
     "--disable-log-requests", "0.12"),
    ("vllm: error: unrecognized arguments: --enable-reasoning --reasoning-parser deepseek_r1\n",
     "--enable-reasoning --reasoning-parser deepseek_r1", "--reasoning-parser <name>"),
])
def test_unrecognized_removed_flag_says_what_replaced_it(text, flag, said):
    d = first(text)
    assert d.signature == "config.unrecognized_argument" and d.facts["flag"] == flag
    assert said in d.fix.summary


# ---- Mamba state blocks below max_num_seqs, the message quoted from its middle -----------------------------

@pytest.mark.parametrize("text, seqs", [
    ("RuntimeError: Worker failed with error 'max_num_seqs (1024) exceeds available Mamba cache blocks (600). Each "
     "decode sequence requires one Mamba cache block, so CUDA graph capture cannot proceed.'\n", 1024),
    ("under the default max_num_seqs (256): `exceeds available Mamba cache blocks (95)... CUDA graph capture cannot "
     "proceed`.\n", "(the configured value)"),
])
def test_mamba_blocks_below_max_num_seqs_forms(text, seqs):
    d = first(text)
    assert (d.signature, d.category) == ("kv_cache.mamba_blocks_below_max_num_seqs", "kv_cache_memory")
    assert d.facts["max_num_seqs"] == seqs
