"""Expert parallelism: EPLB on a model or quantization it does not cover, experts that do not split over the EP
ranks, DeepEP's all2all stalling, and MoE model code written against another vLLM's FusedMoE API.

- EPLB (--enable-eplb, 0.10+) rearranges experts through the model's MixtureOfExperts interface. A model that does
  not register its MoE layers (a multimodal wrapper around an MoE language model before vLLM unwrapped it, Mistral
  Large 3 / Small 4) reaches the first forward without the load view: "ValueError: enable_eplb=True requiere
  expert_load_view != None" (also logical_to_physical_map / logical_replica_count; vLLM's own spelling). Quantized
  MoE methods without EPLB support refuse it at construction: "EPLB is only supported for FP8 quantization for now."
  ("EPLB is not supported <Method>. ..." later), "EPLB not supported for `<Method>` yet."; vllm-ascend's adaptor
  raises "EPLB is not supported." for models it cannot register. ParallelConfig's checks: "num_redundant_experts
  should be used with EPLB.16." (the count glued on), "enable_expert_parallel must be True to use EPLB.",
  "EPLB requires tensor_parallel_size or data_parallel_size to be greater than 1", "Expert parallelism load
  balancing is only supported on CUDA devices now."
- The physical experts (logical + redundant) must split evenly over the EP ranks: "n_physical_experts=256 must be
  divisible by ep_size=3. Adjust num_redundant_experts." (DeepSeek-V4 MoE).
- DeepEP's dispatch waits on the host for the peers' token counts and gives up after its timeout: "RuntimeError:
  DeepEP error: CPU recv timeout" (intranode/internode dispatch), "DeepEP error: timeout (dispatch CPU)" (newer);
  its kernels print "DeepEP timeout for dispatch senders, rank ..." / "DeepEP timeout check failed: rank = ..." and
  trap. A peer that never arrived: a rank that crashed or hangs, an NVSHMEM/IBGDA transport that does not work
  between the nodes, or a bug of the combination (--enable-dbo with deepep_high_throughput hit an illegal memory
  access until vLLM fixed it).
- Model code outside vLLM's tree (a fork's branch, a plugin such as vllm-ascend, remote code) calls FusedMoE and
  the MoE quantization methods, whose signatures change between releases: "TypeError:
  FusedMoE.make_expert_params_mapping() missing 1 required positional argument: 'model'".
"""

from __future__ import annotations

from typing import Any

from triage.rules.base import Rule

_EPLB_FIX = ("EPLB (--enable-eplb) does not cover this run: {what}. Start without --enable-eplb (and without "
             "--eplb-config / --num-redundant-experts); EPLB needs --enable-expert-parallel, an MoE model whose vLLM "
             "implementation registers its experts (MixtureOfExperts; multimodal wrappers of an MoE language model "
             "only in newer vLLM) and an unquantized or FP8 MoE on CUDA. Upgrade vLLM (or vllm-ascend) if the release "
             "notes add EPLB for this model.")


def _eplb_what(m: Any, line: Any, scan: Any) -> dict[str, Any]:
    """vLLM's "enable_eplb=True requiere expert_load_view != None" said in words (its code, quoted, reads as an
    expression in a walk): the model never registered the EPLB state of its MoE layers."""
    state = m.groupdict().get("eplb_state")
    if state is None:
        return {}
    return {"what": f"the model's MoE layers never registered `{state}`, which EPLB needs"}


RULES = [
    Rule(signature="moe.eplb_unsupported", category="engine_config",
         title="EPLB cannot run with this model or configuration ({what})",
         fix=_EPLB_FIX, facts=_eplb_what,
         patterns=[r"(?P<what>enable_eplb=True requiere (?P<eplb_state>expert_load_view|logical_to_physical_map|"
                   r"logical_replica_count) != None)",
                   r"(?P<what>EPLB is only supported for FP8 quantization)",
                   r"(?P<what>EPLB (?:is )?not supported (?:for )?`?\w+`?)(?: yet)?\.",
                   r"(?P<what>EPLB is not supported)\.",
                   r"(?P<what>enable_expert_parallel must be True to use EPLB)",
                   r"(?P<what>EPLB requires tensor_parallel_size or data_parallel_size to be greater than 1)",
                   r"(?P<what>Expert parallelism load balancing is only supported on CUDA devices)",
                   r"(?P<what>no loaded model implements the MixtureOfExperts interface)"],
         playbook="engine-config", confidence=0.85),
    Rule(signature="moe.redundant_experts_without_eplb", category="engine_config",
         title="Redundant experts were set without EPLB ({count} redundant experts, --enable-eplb missing)",
         fix="--num-redundant-experts (eplb_config.num_redundant_experts) only works with expert-parallel load "
             "balancing: add --enable-eplb (with --enable-expert-parallel), or drop the redundant experts.",
         patterns=[r"num_redundant_experts should be used with EPLB\.?(?P<count>\d+)",
                   r"num_redundant_experts is set to (?P<count>\d+) but EPLB is not enabled"],
         playbook="engine-config", confidence=0.9),
    Rule(signature="moe.experts_not_divisible_by_ep", category="engine_config",
         title="{experts} physical experts do not split evenly over {ep} expert-parallel ranks",
         fix="With --enable-expert-parallel every EP rank (TP x DP x PCP) holds the same number of experts: choose "
             "tensor/data parallel sizes whose product divides the expert count, or set "
             "--eplb-config.num_redundant_experts so that experts + redundant experts is a multiple of {ep}.",
         patterns=[r"n_physical_experts=(?P<experts>\d+) must be divisible by ep_size=(?P<ep>\d+)"],
         playbook="engine-config", confidence=0.88),
    Rule(signature="moe.deepep_timeout", category="distributed",
         title="DeepEP's expert all2all timed out waiting for other ranks ({what})",
         fix="A DeepEP dispatch/combine waited for tokens another EP rank never sent. Look first for a rank that "
             "crashed or hangs (its own log), then check the transport: DeepEP's tests (tests/test_intranode.py, "
             "test_internode.py, test_low_latency.py) on the same nodes, NVSHMEM with IBGDA and nvidia_peermem / "
             "gdrcopy across nodes. --enable-dbo with deepep_high_throughput failed this way until vLLM fixed it "
             "(upgrade, or drop --enable-dbo); --all2all-backend allgather_reducescatter tells a transport problem "
             "from a model one.",
         patterns=[r"DeepEP error: (?P<what>CPU recv timeout|timeout \([\w ]{1,40}\))",
                   r"(?P<what>DeepEP timeout (?:for [\w ]{1,40}|check failed))",
                   r"(?P<what>DeepEP (?:RDMA|NVL)[\w -]{0,40} timeout)"],
         playbook="distributed", confidence=0.8),
    Rule(signature="moe.fused_moe_interface_mismatch", category="install_mismatch",
         title="MoE model code calls vLLM's {cls}.{method}() as another vLLM release defined it ({what})",
         fix="The code calling {cls}.{method}() was written for another vLLM release than the one installed: a model "
             "from a fork or branch, remote code, or a platform plugin (vllm-ascend, ...) built for a different "
             "vLLM. Use the vLLM release that code targets (or the plugin built for your vLLM), or update the model "
             "code to the current FusedMoE API.",
         patterns=[r"TypeError: (?:[\w.]+\.)?(?P<cls>\w*MoE\w*)\.(?P<method>\w+)\(\) (?P<what>missing \d+ required "
                   r"(?:positional |keyword-only )?arguments?: [^\n]{1,120}|got an unexpected keyword argument '\w+'|"
                   r"got multiple values for (?:keyword )?argument '\w+'|takes (?:from \d+ to )?\d+ positional "
                   r"arguments? but \d+ (?:were|was) given)"],
         playbook="install-mismatch", confidence=0.75),
]
