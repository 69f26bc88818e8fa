"""vLLM's CUDA attention selector, asked of the installed vLLM's own source.

`select()` walks `CudaPlatform.get_valid_backends` of the environment's vllm/platforms/cuda.py with
source_eval: the priority list (`_get_backend_priorities` for this capability, MLA, kv dtype, heads),
then, backend by backend, the loop body vLLM runs: resolve the class from the registry enum and call its
`validate_configuration` (declared dtypes, kv-cache dtypes, head sizes, block sizes, is_mla/is_sparse,
sinks, `supports_compute_capability`, `supports_combination`). The answer is what vLLM would log:
the valid backends in priority order, and per rejected backend the reasons in its own words. A backend
whose check leans on something only a running process knows is reported undecided, with why.
"""

from __future__ import annotations

import ast
import shutil
from dataclasses import dataclass, field
from typing import Any, Callable

from triage.preflight.source_eval import (Builtin, Evaluator, Ext, Function, Instance, Klass, Namespace, Raised, Session,
                                          Undecided, World)


@dataclass
class Selection:
    valid: list[str] = field(default_factory=list)  # in vLLM's priority order; the first is chosen
    invalid: dict[str, list[str]] = field(default_factory=dict)  # backend -> vLLM's reasons
    undecided: dict[str, str] = field(default_factory=dict)  # backend -> what source reading could not answer
    order: list[str] = field(default_factory=list)  # every backend tried, in priority order
    fields: dict[str, Any] = field(default_factory=dict)  # the AttentionSelectorConfig vLLM would build
    files_read: int = 0
    error: str | None = None  # what vLLM itself would raise out of the selector (not a rejection)

    @property
    def chosen(self) -> str | None:
        return self.valid[0] if self.valid else None

    def message(self, device: str = "this GPU") -> str:
        """The reasons as vLLM's 'No valid attention backend found' error puts them."""
        inner = ", ".join(f"{b}: [{', '.join(r)}]" for b, r in self.invalid.items())
        return f"No valid attention backend found for {device}. Reasons: {{{inner}}}."


class SelectorUnreadable(Exception):
    """The environment has no vLLM selector this module can read."""


class _Facts:
    """What the walk asks of the machine and the launch; changed between questions, read when asked."""

    def __init__(self) -> None:
        self.cc: tuple[int, int] = (0, 0)
        self.device = "this GPU"
        self.hf = Namespace()
        self.model = Namespace(hf_text_config=self.hf, hf_config=self.hf, is_hybrid=False)
        self.cache = Namespace(cache_dtype="auto", mamba_ssm_cache_dtype="auto", mamba_cache_dtype="auto")
        # the launch's parallel layout at vLLM's defaults: no context parallelism
        parallel = Namespace(tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=1,
                             decode_context_parallel_size=1, prefill_context_parallel_size=1,
                             cp_kv_cache_interleave_size=1)
        self.vllm_config = Namespace(model_config=self.model, parallel_config=parallel, cache_config=self.cache)

    def set(self, cc, device, hf_config, kv_cache_dtype) -> None:
        self.cc, self.device = tuple(cc), device
        self.hf.__dict__.clear()
        self.hf.__dict__.update(hf_config or {})
        self.vllm_config.model_config = self.model if hf_config is not None else None
        self.cache.cache_dtype = kv_cache_dtype


class SourceSelector:
    """One installed vLLM's selector, read once and asked many times (modules load once, as in vLLM)."""

    def __init__(self, site_dirs: list[str], environ: dict[str, str] | None = None):
        self.facts = _Facts()
        w = World(site_dirs=list(site_dirs), environ=dict(environ or {}))
        f = self.facts
        w.intercepts.update({
            "vllm.config.get_current_vllm_config": Builtin(lambda: f.vllm_config, "get_current_vllm_config"),
            "importlib.util.find_spec": lambda name, *a: Ext("spec") if w.exists(str(name)) else None,
            "shutil.which": lambda name, *a, **k: (shutil.which(name) if name in w.on_path else None),
            "os.getenv": lambda k, d=None: w.environ.get(k, d),
            "os.environ": w.environ,
            "typing.TYPE_CHECKING": False,
            "torch.cuda.get_device_capability": lambda device=None: f.cc,
        })
        self.ev = Evaluator(w)
        self._ready: tuple[Klass, Klass, Klass] | None = None

    def _platform(self) -> tuple[Klass, Klass, Klass]:
        if self._ready:
            return self._ready
        ev, f = self.ev, self.facts
        cuda = ev.module("vllm.platforms.cuda")
        klass = next((v for n in ("NvmlCudaPlatform", "CudaPlatformBase", "CudaPlatform")
                      if isinstance(v := cuda.ns.get(n), Klass)), None)
        if klass is None:
            raise SelectorUnreadable("vllm/platforms/cuda.py has no CUDA platform class")
        devcap = ev.module("vllm.platforms.interface").ns.get("DeviceCapability")
        if not isinstance(devcap, Klass):
            raise SelectorUnreadable("no DeviceCapability in vllm/platforms/interface.py")
        answers: dict[str, Callable[..., Any]] = {
            "get_device_capability": lambda device_id=0: Instance(devcap, values=f.cc),
            "get_device_name": lambda device_id=0: f.device,
            "num_compute_units": lambda device_id=0: 132,
            "device_count": lambda: 1,
            "is_cuda": lambda: True, "is_rocm": lambda: False, "is_xpu": lambda: False, "is_cpu": lambda: False,
        }
        # the device queries answered here, everything else by the platform's own (class)methods
        ns: dict[str, Any] = {k: Builtin(v, k) for k, v in answers.items()}
        mocked = Klass("MockedCudaPlatform", klass.module, [klass], ns=ns)
        ev.world.intercepts["vllm.platforms.current_platform"] = Instance(mocked)
        cfg_k = ev.module("vllm.v1.attention.selector").ns.get("AttentionSelectorConfig")
        if not isinstance(cfg_k, Klass):
            raise SelectorUnreadable("no AttentionSelectorConfig in vllm/v1/attention/selector.py")
        self._ready = (mocked, devcap, cfg_k)
        return self._ready

    def select(self, cc: tuple[int, int], fields: dict[str, Any], *, num_heads: int | None = None,
               hf_config: dict[str, Any] | None = None, device: str = "this GPU",
               forced: str | None = None) -> Selection:
        """vLLM's answer for one attention layer. `fields` are AttentionSelectorConfig's (head_size, dtype as
        'bfloat16', kv_cache_dtype, block_size, use_mla, use_sparse, has_sink, ...); those this release does
        not have are dropped, as vLLM itself never sees them."""
        self.facts.set(cc, device, hf_config, str(fields.get("kv_cache_dtype") or "auto"))
        self.ev.steps = 0
        with Session(self.ev):
            try:
                return self._select(fields, num_heads, forced)
            except (Undecided, Raised) as exc:
                where = " <- ".join(getattr(exc, "trail", [])[:4])
                raise SelectorUnreadable(f"the selector itself: {exc}" + (f" (in {where})" if where else "")) from None

    def _select(self, fields, num_heads, forced) -> Selection:
        ev = self.ev
        klass, devcap, cfg_k = self._platform()
        cap = Instance(devcap, values=self.facts.cc)
        given = {k: v for k, v in fields.items() if k in cfg_k.fields}
        given["dtype"] = Ext(f"torch.{fields['dtype']}")
        cfg = ev.call(cfg_k, [], given)
        out = Selection(fields={k: (str(v) if isinstance(v, Ext) else v) for k, v in zip(cfg_k.fields, cfg.values)})
        gvb, owner = klass.lookup("get_valid_backends")
        if not isinstance(gvb, Function):
            raise SelectorUnreadable("no get_valid_backends on the CUDA platform")
        node = gvb.node
        if not isinstance(node, ast.FunctionDef):
            raise SelectorUnreadable("get_valid_backends is not a plain method")
        params = [a.arg for a in node.args.args]
        env: dict[str, Any] = {params[0]: klass, "\0self": klass, "\0class": owner}
        for p in params[1:]:
            env[p] = {"device_capability": cap, "attn_selector_config": cfg, "num_heads": num_heads}.get(p)
        loop = next((st for st in node.body if isinstance(st, ast.For)), None)
        if loop is None:
            raise SelectorUnreadable("get_valid_backends has no loop over the priorities")
        for st in node.body[:node.body.index(loop)]:
            ev._stmt(st, gvb.module, env)
        priorities = ev._iter(ev.expr(loop.iter, gvb.module, env))
        if forced:
            priorities = [(0, _member(ev, forced))]
        valid_name, invalid_name = _list_name(node), _dict_name(node)
        for item in priorities:
            backend = item[1] if isinstance(item, tuple) else item
            name = getattr(backend, "name", str(backend))
            out.order.append(name)
            scope = dict(env)
            scope[valid_name] = []
            scope[invalid_name] = {}
            ev.steps = 0  # the budget is per backend
            try:
                ev._assign(loop.target, item, gvb.module, scope)
                ev._block(loop.body, gvb.module, scope)
            except Undecided as exc:
                where = " <- ".join(getattr(exc, "trail", [])[:3])
                out.undecided[name] = f"{exc}" + (f" (in {where})" if where else "")
                continue
            except Raised as exc:  # nothing in vLLM's loop catches it: the selector itself fails
                out.error = f"{exc.kind}: {exc.message}"
                break
            if scope[valid_name]:
                out.valid.append(name)
            for v in scope[invalid_name].values():
                reasons = v[1] if isinstance(v, tuple) else v
                out.invalid[name] = [str(r) for r in reasons]
        out.files_read = ev.parse_count
        return out


def select(site_dirs: list[str], cc: tuple[int, int], fields: dict[str, Any], **kw: Any) -> Selection:
    environ = kw.pop("environ", None)
    return SourceSelector(site_dirs, environ).select(cc, fields, **kw)


def _member(ev: Evaluator, name: str):
    reg = ev.module("vllm.v1.attention.backends.registry")
    enum = reg.ns.get("AttentionBackendEnum")
    if not isinstance(enum, Klass) or name not in enum.members:
        raise SelectorUnreadable(f"{name} is not an attention backend of this vLLM")
    return enum.members[name]


def _list_name(fn: ast.FunctionDef) -> str:
    for st in fn.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and isinstance(st.value, ast.List):
            t = st.targets[0] if isinstance(st, ast.Assign) else st.target
            if isinstance(t, ast.Name):
                return t.id
    return "valid_backends_priorities"


def _dict_name(fn: ast.FunctionDef) -> str:
    for st in fn.body:
        if isinstance(st, (ast.Assign, ast.AnnAssign)) and isinstance(st.value, ast.Dict):
            t = st.targets[0] if isinstance(st, ast.Assign) else st.target
            if isinstance(t, ast.Name):
                return t.id
    return "invalid_reasons"
