"""`triage preflight [OPTIONS] -- vllm serve MODEL [ARGS...]`: will this launch fail here, and why?

Reads the command, the model's files (a local folder, the Hugging Face cache, a GGUF file) and the
machine (NVML, a saved `triage probe --json`, another host over SSH with --host, or
--gpu/--gpus/--cc/--gpu-mem-gib), and the installed
vLLM and transformers from the environment --python names (its files, never run). Prints the failures
vLLM would stop with, in the words of the diagnosis it would get, before weights are loaded.
Exit status: 0 a failure is predicted, 3 none is, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from triage.model import SCHEMA
from triage.preflight.launch import LaunchError, parse_launch
from triage.preflight.machine import Machine, given_gpus, probe_this_machine, read_environment, vllm_python
from triage.preflight.model import read_model
from triage.preflight.predict import predict
from triage.preflight.remote import RemoteProblem, fetch_model, machine_from_facts, probe_machine
from triage.sanitize import clean

USAGE_ERROR = 2
DEMO_DIR = os.path.join(os.path.dirname(os.path.dirname(__file__)), "demo")
DEMO_COMMAND = ["vllm", "serve", "/models/GLM-5-FP8", "--tensor-parallel-size", "8", "--max-model-len", "131072",
                "--gpu-memory-utilization", "0.92", "--trust-remote-code"]


def _snapshot_machine(path: str) -> Machine:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    facts = data["hosts"][0]["facts"] if isinstance(data, dict) and data.get("hosts") else data
    if not isinstance(facts, dict):
        raise ValueError("not a `triage probe --json` snapshot")
    return machine_from_facts(facts, f"snapshot {path}")


def main(argv: list[str]) -> int:
    if "--" in argv:
        at = argv.index("--")
        own, command = argv[:at], argv[at + 1:]
    else:
        own, command = argv, []
    p = argparse.ArgumentParser(prog="triage preflight", description="Predict whether `vllm serve` will fail here.",
                                usage="triage preflight [OPTIONS] -- vllm serve MODEL [ARGS...]")
    p.add_argument("--json", action="store_true", help="one JSON object (the report schema, predictions marked)")
    p.add_argument("--python", metavar="PY", help="the interpreter of vLLM's environment (read from its files)")
    p.add_argument("--snapshot", metavar="FILE", help="the machine from a saved `triage probe --json`")
    p.add_argument("--host", metavar="[USER@]HOST[:PORT]", help="predict for that machine over SSH: its GPUs and "
                   "vLLM (probed as `triage probe --host` does) and the model's files there")
    p.add_argument("--gpu", metavar="NAME", help="predict for this GPU instead of probing (with --cc, --gpu-mem-gib)")
    p.add_argument("--gpus", type=int, default=1, help="how many of them (with --gpu)")
    p.add_argument("--cc", metavar="X.Y", help="their compute capability (with --gpu)")
    p.add_argument("--gpu-mem-gib", type=float, help="their memory in GiB (with --gpu)")
    p.add_argument("--driver-cuda", metavar="X.Y", help="the CUDA version the driver runs, as nvidia-smi shows it "
                   "(with --gpu)")
    p.add_argument("--demo", action="store_true", help="GLM-5 (DSA) on 8x RTX PRO 6000: the flagship, predicted")
    try:
        args = p.parse_args(own)
    except SystemExit as exc:
        return 0 if exc.code == 0 else USAGE_ERROR
    try:
        if args.demo:
            command = command or DEMO_COMMAND
            machine = _snapshot_machine(os.path.join(DEMO_DIR, "snapshot_rtxpro6000.json"))
            machine.where = "the demo machine (8x RTX PRO 6000, vLLM 0.16 nightly)"
        elif args.snapshot:
            machine = _snapshot_machine(args.snapshot)
        elif args.host:
            machine = probe_machine(args.host, args.python)
        elif args.gpu:
            if not args.cc or not args.gpu_mem_gib:
                raise LaunchError("--gpu needs --cc and --gpu-mem-gib")
            machine = Machine(gpus=given_gpus(args.gpu, args.gpus, args.cc, args.gpu_mem_gib), where="the GPUs given")
            if args.driver_cuda:
                if not re.fullmatch(r"\d+\.\d+", args.driver_cuda):
                    raise LaunchError(f"--driver-cuda {args.driver_cuda!r} is not a version such as 12.8")
                machine.cuda_driver_version = args.driver_cuda
        else:
            machine = probe_this_machine()
        if not command:
            raise LaunchError("give the launch after --: triage preflight -- vllm serve MODEL ...")
        launch = parse_launch(command)
    except (LaunchError, RemoteProblem, OSError, ValueError, KeyError) as exc:
        print(f"triage preflight: {exc}", file=sys.stderr)
        return USAGE_ERROR
    python = args.python or (None if args.demo or args.snapshot or args.host else vllm_python())
    if python and not args.host:
        read_environment(machine, python)
    model = fetch_model(args.host, launch.model) if args.host else read_model(launch.model)
    if args.demo:
        with open(os.path.join(DEMO_DIR, "glm5_config.json"), encoding="utf-8") as fh:
            model.config, model.where, model.problem = json.load(fh), "the bundled demo config", None
    found: dict = {}
    diagnoses = predict(launch, model, machine, found)
    notes = [n for n in (model.problem,
                         None if machine.gpus else "no GPU found: GPU-dependent checks were skipped",
                         None if "vllm" in machine.packages else
                         "the installed vLLM is unknown (--python names its environment): release-dependent checks "
                         "assume any release",
                         f"{args.host}'s vLLM source is not read over SSH: the backend gates come from the capability "
                         "table for its release" if args.host and "vllm" in machine.packages else None) if n]
    if args.json:
        out = {"schema": SCHEMA, "predicted": True,
               "input": {"source": "preflight", "command": command, "model": model.where},
               "diagnoses": [d.to_json() for d in diagnoses],
               "environment": {"gpus": [{k: g.get(k) for k in ("name", "compute_capability", "memory_total_mib")}
                                        for g in machine.gpus],
                               **({"vllm_version": machine.packages["vllm"]} if "vllm" in machine.packages else {})},
               **({"preflight": found} if found else {}),
               **({"warnings": notes} if notes else {})}
        print(clean(json.dumps(out, indent=2)))
    else:
        _print(launch.model, machine, diagnoses, notes, found)
    return 0 if diagnoses else 3


def _print(model: str, machine: Machine, diagnoses: list, notes: list[str], found: dict) -> None:
    gpus = f"{len(machine.gpus)}x {machine.gpu_name}" if machine.gpus else "no GPU"
    print(clean(f"triage preflight: {model} on {machine.where} ({gpus}, vLLM {machine.packages.get('vllm', 'unknown')})"))
    if not diagnoses:
        print("No failure predicted: installation, parallelism, shared memory, model support, dtype, quantization, "
              "attention backend, KV-cache budget and chat template all pass.")
    if found.get("attention_backend"):
        print(clean(f"Attention backend vLLM will pick: {found['attention_backend']} (of "
                    f"{', '.join(found['attention_backends_valid'])}; {found['gates_from']})"))
    for i, d in enumerate(diagnoses):
        print(clean(f"\n{'WILL FAIL' if i == 0 else 'ALSO'}: {d.title}   [{d.category}, predicted]"))
        for e in d.evidence:
            print(clean(f"    {e.text}"))
        print(clean(f"  Fix: {d.fix.summary}"))
        if d.fix.playbook:
            print(f"  Playbook: {d.fix.playbook}")
    for n in notes:
        print(clean(f"note: {n}"))
