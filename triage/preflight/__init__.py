"""Preflight: say before `vllm serve` runs whether it will fail on this machine, and why.

launch (the command line) + model (config.json, weight sizes, a GGUF header) + machine (GPUs, the
installed vLLM read from its files) -> predict (diagnoses in the report's vocabulary, marked predicted).
Nothing here imports torch or vLLM, loads weights or reaches the network.
"""
