"""vLLM inside serving stacks (llm-d, NVIDIA Dynamo, production-stack's Helm chart, KServe): where the stack's own
launch of vLLM, not vLLM's arguments alone, is what fails.

Disaggregated prefill/decode: vLLM's NixlConnector maps each decode rank onto a slice of one prefill rank, so when a
decode instance registers a prefill instance it asserts the decode tensor-parallel size is not the smaller one
(`add_remote_agent`: `assert tp_ratio > 0, "Decode TP cannot be smaller than prefill TP"`, 0.9 and later, also in
the MoRIIO and vendor copies of the connector); Dynamo's patched vLLM 0.8.x says the same with the sizes ("Decode TP
cannot be smaller than prefill TP, got <decode> and <prefill>"), and the TPU path refuses any unequal pair
("TPU (pallas_v1) DOES NOT support heterogeneous TP yet."). The stack's recipe sets both sizes, so the fix is the
decode workers' --tensor-parallel-size.

A container whose command is `vllm` (production-stack's chart, llm-d's and KServe's templates run `vllm serve`) in
an image without vLLM's console script on PATH never starts vLLM at all: the OCI runtime refuses to create the
process (runc: `exec: "vllm": executable file not found in $PATH`; crun/podman: "executable file `vllm` not found in
$PATH"); a shell wrapper's "vllm: command not found" is install.dependency_missing. Images built before the CLI
(vLLM < 0.5), or with vLLM in a venv the image's PATH does not include, do this.
"""

from __future__ import annotations

from triage.rules.base import Rule

RULES = [
    Rule(signature="config.pd_decode_tp_below_prefill", category="engine_config",
         title="Disaggregated prefill/decode: the decode instance's tensor-parallel size is smaller than the prefill's",
         fix="vLLM's NIXL KV transfer needs the decode workers' --tensor-parallel-size to be at least the prefill "
             "workers' (each decode rank reads a slice of one prefill rank): raise the decode TP or lower the prefill "
             "TP in the stack's recipe (llm-d/Dynamo/production-stack values), keeping both dividing the KV heads; "
             "on TPU use equal sizes.",
         patterns=[r"Decode TP cannot be smaller than prefill TP(?:, got (?P<decode_tp>\d+) and (?P<prefill_tp>\d+))?",
                   r"\(pallas_v1\) DOES NOT support heterogeneous TP yet"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="install.container_vllm_command_missing", category="install_mismatch",
         title="The container's command `vllm` is not on the image's PATH: vLLM's CLI is not installed there",
         fix="The image the chart/recipe runs has no `vllm` executable: use an image that ships vLLM's CLI (a "
             "vllm/vllm-openai release, or the image tag the stack's docs pin), or change the command to the "
             "image's own entry point (`python3 -m vllm.entrypoints.openai.api_server ...`, or the full path of "
             "the venv's `vllm`); check with `docker run --rm --entrypoint sh <image> -c 'command -v vllm'`.",
         patterns=[r"\"vllm\": executable file not found in \$PATH",
                   r"executable file [`'\"]vllm[`'\"] not found in \$PATH"],
         playbook="install-mismatch", confidence=0.85),
]
