"""An attention backend whose implementation does not take the call vLLM makes to it.

vLLM builds each layer's attention implementation (`<Backend>Impl`, its `MetadataBuilder`, the MLA common
classes) with keyword arguments that change between releases (sinks, q_pad_num_heads, kv_sharing_target_layer_name,
...). A backend left behind by a refactor, or one from an out-of-tree platform plugin built for another vLLM
release, fails there with Python's own call errors, which name the class and the method:
"MLACommonImpl.__init__() got multiple values for keyword argument 'q_pad_num_heads'", "... got an unexpected
keyword argument 'sinks'", "... missing 1 required positional argument: ...", "Can't instantiate abstract class
FooAttentionImpl ...". The class decides: an attention implementation is the attention backend's; other
classes' call errors are left to the fallback. An unexpected keyword on an Impl's __init__ alone is read first
as a feature the backend lacks (attention.backend_refused).
"""

from __future__ import annotations

from triage.rules.base import Rule

# an attention implementation's class (module-qualified or not): its name says attention, its suffix says role
_CLS = (r"(?:[\w.]+\.)?(?P<cls>\w*(?:Attn|Attention|MLA|FlashInfer|FlashMLA|SDPA|Sdpa)\w*"
        r"(?:Impl|Backend|MetadataBuilder|Metadata))")
_CALL = (r"got an unexpected keyword argument '\w+'|got multiple values for (?:keyword )?argument '\w+'|"
         r"missing \d+ required (?:positional |keyword-only )?arguments?: [^\n]{1,120}|"
         r"takes (?:from \d+ to )?\d+ positional arguments? but \d+ (?:were|was) given")

RULES = [
    Rule(signature="attention.impl_interface_mismatch", category="attention_backend",
         title="The attention backend's {cls} does not take the call vLLM makes ({what})",
         fix="vLLM called {cls}.{method}() with arguments that implementation does not take: that backend is out of "
             "step with this vLLM (left behind by a refactor in this release, or an out-of-tree platform / backend "
             "plugin built for another vLLM release). Pick another backend with --attention-backend (or unset a forced "
             "VLLM_ATTENTION_BACKEND), or install the plugin / vLLM release pair that match; report it upstream if "
             "the backend is vLLM's own.",
         patterns=[rf"TypeError: {_CLS}\.(?P<method>\w+)\(\) (?P<what>{_CALL})",
                   rf"TypeError: Can't instantiate abstract class {_CLS}(?P<what> with(?:out an implementation for)? "
                   rf"abstract methods? [^\n]{{1,120}})"],
         # below attention.backend_refused (0.7), which reads an unexpected keyword as a feature the backend lacks
         playbook="attention-backend", confidence=0.65),
]
