"""A small evaluator of an installed package's own Python source, parsed with `ast` and never imported.

Preflight asks vLLM's questions (which attention backends accept this layer, and why the others do
not) the way vLLM answers them, by walking the very functions and classes that decide, from the files
of the environment that would run `vllm serve`. Only the pure part of that code is followed: constants,
comparisons, branches, calls between functions and classes of the package, enums and named tuples.
What belongs to the machine is answered by `World` (the device capability, which packages exist, the
model's config); anything else (a CUDA call, an unknown library function) stops the walk with
`Undecided`, and the caller falls back to its own table for that question.

Nothing evaluated here can touch the machine: no builtin that opens, imports, executes or reaches
the network is reachable, and every walk has a step budget.
"""

from __future__ import annotations

import ast
import functools
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

MAX_SOURCE = 4 << 20
# The standard library and torch (vLLM cannot be installed without it): present, never read.
ALWAYS_THERE = frozenset(sys.stdlib_module_names) | {"torch", "typing_extensions"}
STEP_BUDGET = 400_000


class Undecided(Exception):
    """The source asks something only the running program could answer."""

    trail: list[str]  # the functions it was asked in, innermost first

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.trail = []


class Raised(Exception):
    """An exception the evaluated code raised (catchable by its own `except`)."""

    def __init__(self, kind: str, message: str = ""):
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind
        self.message = message


class _Return(Exception):
    def __init__(self, value):
        self.value = value


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# Exception names an `except X` of the evaluated code catches, by what was raised.
_CATCHES = {"ImportError": {"ImportError", "ModuleNotFoundError"}, "ModuleNotFoundError": {"ImportError", "ModuleNotFoundError"}}


def _matches(raised: str, wanted: str) -> bool:
    if wanted in ("Exception", "BaseException"):
        return True
    return wanted == raised or wanted in _CATCHES.get(raised, ())


class Ext:
    """Something from outside the evaluated package (torch.bfloat16, typing.Any): comparable by name."""

    __slots__ = ("path",)

    def __init__(self, path: str):
        self.path = path

    def __eq__(self, other):
        return isinstance(other, Ext) and other.path == self.path

    def __hash__(self):
        return hash(self.path)

    def __str__(self):
        return self.path

    __repr__ = __str__


class Module:
    def __init__(self, name: str, tree: ast.Module | None, ns: dict[str, Any] | None = None):
        self.name = name
        self.tree = tree
        self.ns: dict[str, Any] = ns if ns is not None else {"__name__": name}
        self.lazy: dict[str, Callable[[], Any]] = {}


@dataclass(eq=False)
class Function:
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    module: Module
    scope: dict[str, Any] | None = None  # the enclosing function's locals, for closures
    owner: "Klass | None" = None
    kind: str = "function"  # function | classmethod | staticmethod | property


@dataclass(eq=False)
class Klass:
    name: str
    module: Module
    bases: list[Any]
    ns: dict[str, Any] = field(default_factory=dict)
    fields: list[str] = field(default_factory=list)  # NamedTuple fields, in order
    defaults: dict[str, Any] = field(default_factory=dict)
    is_enum: bool = False
    is_namedtuple: bool = False
    is_dataclass: bool = False
    members: dict[str, "EnumMember"] = field(default_factory=dict)

    def mro(self) -> list["Klass"]:
        out: list[Klass] = [self]
        for b in self.bases:
            if isinstance(b, Klass):
                out += [k for k in b.mro() if k not in out]
        return out

    def lookup(self, name: str, after: "Klass | None" = None) -> tuple[Any, "Klass | None"]:
        chain = self.mro()
        if after is not None and after in chain:
            chain = chain[chain.index(after) + 1:]
        for k in chain:
            if name in k.ns:
                return k.ns[name], k
        return _MISSING, None

    def subclass_of(self, other: "Klass") -> bool:
        return other in self.mro()

    def __repr__(self):
        return f"<class {self.module.name}.{self.name}>"


@dataclass(eq=False)
class Instance:
    klass: Klass
    attrs: dict[str, Any] = field(default_factory=dict)
    values: tuple | None = None  # a NamedTuple's fields
    overrides: dict[str, Callable[..., Any]] = field(default_factory=dict)


@dataclass(eq=False)
class EnumMember:
    klass: Klass
    name: str
    value: Any

    def __repr__(self):
        return f"{self.klass.name}.{self.name}"


@dataclass(eq=False)
class Bound:
    func: Any
    receiver: Any  # the instance or class `self`/`cls` is bound to


@dataclass(eq=False)
class Builtin:
    fn: Callable[..., Any]
    name: str


@dataclass(eq=False)
class Super:
    klass: Klass
    receiver: Any


@dataclass(frozen=True)
class LiteralType:
    """typing.Literal[...]: its values are what typing.get_args answers."""

    values: tuple


class Namespace:
    """A plain object with attributes (a model's hf_config, a fake VllmConfig)."""

    def __init__(self, **attrs: Any):
        self.__dict__.update(attrs)

    def __getattr__(self, name: str) -> Any:  # only reached for a missing attribute
        raise AttributeError(name)

    def __setattr__(self, name: str, value: Any) -> None:
        self.__dict__[name] = value


_MISSING = object()


def _fmt(value: Any, spec: str = "") -> str:
    if isinstance(value, Raised):
        return value.message
    if isinstance(value, EnumMember):
        return f"{value.klass.name}.{value.name}"
    if isinstance(value, Instance) and value.values is not None:
        inner = ", ".join(f"{f}={_fmt(v)}" for f, v in zip(value.klass.fields, value.values))
        return f"{value.klass.name}({inner})"
    if isinstance(value, (Instance, Klass, Function, Bound, Module)):
        raise Undecided("formats an object")
    return format(value, spec) if spec else str(value)


@dataclass
class World:
    """What only the machine knows, answered without running anything."""

    site_dirs: list[str]
    intercepts: dict[str, Any] = field(default_factory=dict)  # "module.name" -> value
    environ: dict[str, str] = field(default_factory=dict)
    on_path: set[str] = field(default_factory=set)  # executables `shutil.which` finds

    def module_file(self, name: str) -> str | None:
        return _cached_module_file(tuple(self.site_dirs), name)

    def exists(self, name: str) -> bool:
        return _cached_exists(tuple(self.site_dirs), name)


@functools.lru_cache(maxsize=8192)
def _cached_module_file(site_dirs: tuple[str, ...], name: str) -> str | None:
    rel = name.replace(".", os.sep)
    for site in site_dirs:
        for cand in (os.path.join(site, rel + ".py"), os.path.join(site, rel, "__init__.py")):
            if os.path.isfile(cand):
                return cand
    return None


@functools.lru_cache(maxsize=8192)
def _cached_exists(site_dirs: tuple[str, ...], name: str) -> bool:
    """A module a real import would find: a source file, a package folder or a compiled extension."""
    if _cached_module_file(site_dirs, name):
        return True
    rel = name.replace(".", os.sep)
    for site in site_dirs:
        if os.path.isdir(os.path.join(site, rel)):
            return True
        folder, base = os.path.split(os.path.join(site, rel))
        try:
            if any(f.startswith(base + ".") and f.endswith((".so", ".pyd")) for f in os.listdir(folder)):
                return True
        except OSError:
            continue
    return False


_TREES: dict[tuple[str, float, int], ast.Module] = {}


def _parse(path: str) -> ast.Module:
    """A source file's tree; parsed once per process (trees are never changed by the walk)."""
    try:
        st = os.stat(path)
        key = (path, st.st_mtime, st.st_size)
        if key in _TREES:
            return _TREES[key]
        if st.st_size > MAX_SOURCE:
            raise Undecided(f"{path} is too big to read")
        with open(path, encoding="utf-8", errors="replace") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError) as exc:
        raise Undecided(f"cannot read {path}: {exc}") from None
    if len(_TREES) > 512:
        _TREES.clear()
    _TREES[key] = tree
    return tree


class Evaluator:
    def __init__(self, world: World, package: str = "vllm"):
        self.world = world
        self.package = package
        self.modules: dict[str, Module | None] = {}
        self.failed: dict[str, Raised] = {}
        self.steps = 0
        self.parse_count = 0
        world.intercepts.setdefault("importlib.import_module", lambda name, *a: self._import_module(name, lazy=False))
        world.intercepts.setdefault("typing.get_args", lambda t: t.values if isinstance(t, LiteralType) else ())
        for fn in ("join", "dirname", "basename", "exists", "isfile", "isdir", "abspath"):
            world.intercepts.setdefault(f"os.path.{fn}", _strings_only(getattr(os.path, fn)))

    # -- modules ---------------------------------------------------------------------------------

    def _own(self, name: str) -> bool:
        return name == self.package or name.startswith(self.package + ".")

    def module(self, name: str) -> Module:
        """The package's module `name`, its top level run (imports checked, calls deferred)."""
        if name in self.failed:
            raise self.failed[name]
        if name in self.modules:
            mod = self.modules[name]
            if mod is None:
                raise Raised("ModuleNotFoundError", f"No module named '{name}'")
            return mod
        path = self.world.module_file(name)
        if path is None:
            if self.world.exists(name):  # a compiled extension: present, opaque
                mod = Module(name, None)
                self.modules[name] = mod
                return mod
            self.modules[name] = None
            raise Raised("ModuleNotFoundError", f"No module named '{name}'")
        tree = _parse(path)
        self.parse_count += 1
        mod = Module(name, tree)
        mod.ns["__file__"] = path
        self.modules[name] = mod
        try:
            self._toplevel(tree.body, mod, mod.ns)
        except Raised as exc:
            del self.modules[name]
            self.failed[name] = exc  # a failed import fails again, with the same error, each time it is tried
            raise
        return mod

    def _toplevel(self, body: list[ast.stmt], mod: Module, ns: dict[str, Any], klass: Klass | None = None) -> None:
        """A module or class body: definitions and imports now, calls when first needed."""
        for st in body:
            if isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
                ns[st.name] = self._function(st, mod, None, klass)
            elif isinstance(st, ast.ClassDef):
                ns[st.name] = self._class(st, mod, ns)
            elif isinstance(st, (ast.Import, ast.ImportFrom)):
                self._import(st, mod, ns, lazy=True)
            elif isinstance(st, ast.If) and _is_type_checking(st.test):
                self._toplevel(st.orelse, mod, ns, klass)
            elif isinstance(st, (ast.Assign, ast.AnnAssign)) and st.value is not None:
                targets = st.targets if isinstance(st, ast.Assign) else [st.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
                if (klass is not None and (klass.is_namedtuple or klass.is_dataclass) and isinstance(st, ast.AnnAssign)
                        and names and not _is_classvar(st.annotation)):
                    klass.fields.append(names[0])
                    klass.defaults[names[0]] = self._field_default(st.value, mod, ns)
                    continue
                if len(names) != len(targets):
                    continue
                for n in names:
                    ns.pop(n, None)
                    mod.lazy[self._key(klass, n)] = self._deferred(st.value, mod, ns)
                    ns[n] = _LAZY
            elif isinstance(st, ast.AnnAssign) and klass is not None and (klass.is_namedtuple or klass.is_dataclass):
                if isinstance(st.target, ast.Name) and not _is_classvar(st.annotation):
                    klass.fields.append(st.target.id)
            elif isinstance(st, (ast.If, ast.Try)) and klass is None:
                block = _LazyBlock(self, st, mod, ns)  # run when one of its names is first needed
                for n in block.names:
                    block.before[n] = ns.get(n, _MISSING)
                    ns[n] = block
            elif isinstance(st, (ast.If, ast.Try)):
                try:
                    self._block([st], mod, ns, top=True)
                except (Undecided, Raised):
                    for n in _bound_names(st):
                        if n not in ns:
                            ns[n] = _Poison(f"{mod.name}.{n} is set by code preflight does not run")
            # expressions, with, for...: side effects of importing, not needed to answer

    def _key(self, klass: Klass | None, name: str) -> str:
        return f"{klass.name}.{name}" if klass else name

    def _deferred(self, node: ast.expr, mod: Module, ns: dict[str, Any]) -> Callable[[], Any]:
        done: list[Any] = []

        def get():
            if not done:
                done.append(self.expr(node, mod, ns))
            return done[0]

        return get

    def _field_default(self, node: ast.expr, mod: Module, ns: dict[str, Any]) -> Callable[[], Any]:
        """A dataclass field's default: the value, or field(default=...) / field(default_factory=...)."""
        if isinstance(node, ast.Call) and _names_of(node.func)[-1:] == ["field"]:
            for kw in node.keywords:
                if kw.arg == "default":
                    return self._deferred(kw.value, mod, ns)
                if kw.arg == "default_factory":
                    factory = self._deferred(kw.value, mod, ns)
                    return lambda: self.call(factory(), [], {})
            raise Undecided("a dataclass field without a default")
        return self._deferred(node, mod, ns)

    def _function(self, st, mod: Module, scope, klass: Klass | None) -> Function:
        kind = "function"
        for d in st.decorator_list:
            name = d.id if isinstance(d, ast.Name) else (d.attr if isinstance(d, ast.Attribute) else "")
            if name in ("classmethod", "staticmethod", "property"):
                kind = name
        return Function(st, mod, scope, klass, kind)

    def _class(self, st: ast.ClassDef, mod: Module, ns: dict[str, Any]) -> Klass:
        bases = []
        for b in st.bases:
            try:
                bases.append(self.expr(b, mod, ns))
            except (Undecided, Raised):
                bases.append(Ext("unknown"))
        k = Klass(st.name, mod, bases)
        k.is_dataclass = any(_names_of(d.func if isinstance(d, ast.Call) else d)[-1:] == ["dataclass"]
                             for d in st.decorator_list) or any(isinstance(b, Klass) and b.is_dataclass for b in bases)
        if k.is_dataclass:
            for b in bases:
                if isinstance(b, Klass) and b.is_dataclass:
                    k.fields += [f for f in b.fields if f not in k.fields]
                    k.defaults.update(b.defaults)
        base_names = [getattr(b, "path", getattr(b, "name", "")) for b in bases]
        k.is_namedtuple = any(str(n).endswith("NamedTuple") for n in base_names)
        k.is_enum = any(str(n).split(".")[-1] in ("Enum", "IntEnum", "StrEnum") for n in base_names) or any(
            isinstance(b, Klass) and b.is_enum for b in bases)
        self._toplevel(st.body, mod, k.ns, k)
        # class attributes are deferred per class: resolve them in the class namespace
        for n, v in list(k.ns.items()):
            if v is _LAZY:
                getter = mod.lazy.pop(self._key(k, n))
                k.ns[n] = _Thunk(getter)
        if k.is_enum:
            for n, v in list(k.ns.items()):
                if isinstance(v, _Thunk) and not n.startswith("_"):
                    k.members[n] = EnumMember(k, n, v)
        return k

    def _import(self, st, mod: Module, ns: dict[str, Any], lazy: bool) -> None:
        if isinstance(st, ast.Import):
            for a in st.names:
                top = a.name.split(".")[0]
                if a.asname:
                    ns[a.asname] = self._import_module(a.name, lazy)
                else:
                    self._import_module(a.name, lazy)
                    ns[top] = self._import_module(top, lazy)
            return
        base = st.module or ""
        if st.level:
            parts = mod.name.split(".")
            is_pkg = (mod.ns.get("__file__") or "").endswith("__init__.py")
            parts = parts[: len(parts) - st.level + (1 if is_pkg else 0)]
            base = ".".join(parts + ([st.module] if st.module else []))
        for a in st.names:
            if a.name == "*":
                continue
            ns[a.asname or a.name] = self._import_name(base, a.name, lazy)

    def _import_module(self, name: str, lazy: bool) -> Any:
        if not self._own(name):
            if name.split(".")[0] in ALWAYS_THERE:
                return Ext(name)
            if not self.world.exists(name):
                raise Raised("ModuleNotFoundError", f"No module named '{name}'")
            return Ext(name)
        if lazy:
            if not self.world.exists(name):
                raise Raised("ModuleNotFoundError", f"No module named '{name}'")
            return _LazyModule(self, name)
        return self.module(name)

    def _import_name(self, base: str, name: str, lazy: bool) -> Any:
        key = f"{base}.{name}"
        if key in self.world.intercepts:
            return self.world.intercepts[key]
        if not self._own(base):
            if base.split(".")[0] in ALWAYS_THERE:
                return Ext(key)
            if not self.world.exists(base):
                parts = base.split(".")
                first = next(".".join(parts[:i]) for i in range(1, len(parts) + 1) if not self.world.exists(".".join(parts[:i])))
                raise Raised("ModuleNotFoundError", f"No module named '{first}'")
            path = self.world.module_file(base)
            if path is not None and not self.world.exists(key):
                try:
                    with open(path, encoding="utf-8", errors="replace") as fh:
                        text = fh.read(MAX_SOURCE)
                except OSError:
                    text = ""
                if not re.search(rf"\b{re.escape(name)}\b", text):
                    raise Raised("ImportError", f"cannot import name '{name}' from '{base}' ({path})")
            return Ext(key)
        if self.world.module_file(key) or (self.world.exists(key) and not self.world.module_file(base)):
            return _LazyModule(self, key) if lazy else self.module(key)
        if lazy:
            return _LazyName(self, base, name)
        return self.attr(self.module(base), name)

    # -- statements ------------------------------------------------------------------------------

    def _tick(self) -> None:
        self.steps += 1
        if self.steps > STEP_BUDGET:
            raise Undecided("the walk took too many steps")

    def _block(self, body: list[ast.stmt], mod: Module, env: dict[str, Any], top: bool = False) -> None:
        for st in body:
            self._stmt(st, mod, env, top)

    def _stmt(self, st: ast.stmt, mod: Module, env: dict[str, Any], top: bool = False) -> None:
        self._tick()
        if isinstance(st, ast.Return):
            raise _Return(self.expr(st.value, mod, env) if st.value is not None else None)
        if isinstance(st, ast.If):
            if _is_type_checking(st.test):
                self._block(st.orelse, mod, env, top)
            else:
                self._block(st.body if self.truth(self.expr(st.test, mod, env)) else st.orelse, mod, env, top)
        elif isinstance(st, ast.Assign):
            value = self.expr(st.value, mod, env)
            for t in st.targets:
                self._assign(t, value, mod, env)
        elif isinstance(st, ast.AnnAssign):
            if st.value is not None:
                self._assign(st.target, self.expr(st.value, mod, env), mod, env)
        elif isinstance(st, ast.AugAssign):
            cur = self.expr(_load(st.target), mod, env)
            self._assign(st.target, self._binop(st.op, cur, self.expr(st.value, mod, env)), mod, env)
        elif isinstance(st, ast.Expr):
            if isinstance(st.value, ast.Constant):
                return
            try:
                self.expr(st.value, mod, env)
            except Undecided:
                if not _is_logging(st.value):
                    raise  # logging and warnings may be skipped; any other call may change what follows
        elif isinstance(st, (ast.For, ast.AsyncFor)):
            broke = False
            for item in self._iter(self.expr(st.iter, mod, env)):
                self._assign(st.target, item, mod, env)
                try:
                    self._block(st.body, mod, env)
                except _Break:
                    broke = True
                    break
                except _Continue:
                    continue
            if not broke:
                self._block(st.orelse, mod, env)
        elif isinstance(st, ast.While):
            while self.truth(self.expr(st.test, mod, env)):
                self._tick()
                try:
                    self._block(st.body, mod, env)
                except _Break:
                    break
                except _Continue:
                    continue
        elif isinstance(st, ast.Break):
            raise _Break()
        elif isinstance(st, ast.Continue):
            raise _Continue()
        elif isinstance(st, ast.Pass):
            return
        elif isinstance(st, ast.Try):
            try:
                self._block(st.body, mod, env, top)
            except Raised as exc:
                for h in st.handlers:
                    if h.type is None or any(_matches(exc.kind, n) for n in _names_of(h.type)):
                        if h.name:
                            env[h.name] = exc
                        self._block(h.body, mod, env, top)
                        break
                else:
                    raise
            else:
                self._block(st.orelse, mod, env, top)
            finally:
                self._block(st.finalbody, mod, env, top)
        elif isinstance(st, ast.Raise):
            if st.exc is None:
                raise Raised("Exception")
            kind, msg = "Exception", ""
            node = st.exc
            if isinstance(node, ast.Call):
                kind = _names_of(node.func)[0] if _names_of(node.func) else "Exception"
                if node.args:
                    try:
                        msg = str(self.expr(node.args[0], mod, env))
                    except Undecided:
                        msg = ""
            elif isinstance(node, ast.Name):
                kind = node.id
            raise Raised(kind, msg)
        elif isinstance(st, ast.Assert):
            if not self.truth(self.expr(st.test, mod, env)):
                raise Raised("AssertionError")
        elif isinstance(st, (ast.Import, ast.ImportFrom)):
            self._import(st, mod, env, lazy=False)
        elif isinstance(st, (ast.FunctionDef, ast.AsyncFunctionDef)):
            env[st.name] = self._function(st, mod, env, None)
        elif isinstance(st, ast.ClassDef):
            env[st.name] = self._class(st, mod, env)
        elif isinstance(st, (ast.Global, ast.Nonlocal)):
            raise Undecided("global state")
        else:
            raise Undecided(f"{type(st).__name__} statement")

    def _assign(self, target: ast.expr, value: Any, mod: Module, env: dict[str, Any]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            items = list(self._iter(value))
            if len(items) != len(target.elts):
                raise Raised("ValueError", "unpack")
            for t, v in zip(target.elts, items):
                self._assign(t, v, mod, env)
        elif isinstance(target, ast.Attribute):
            obj = self.expr(target.value, mod, env)
            if isinstance(obj, Instance):
                obj.attrs[target.attr] = value
            else:
                raise Undecided("sets an attribute of something outside")
        elif isinstance(target, ast.Subscript):
            obj = self.expr(target.value, mod, env)
            if isinstance(obj, (dict, list)):
                obj[self.expr(target.slice, mod, env)] = value
            else:
                raise Undecided("item assignment")
        else:
            raise Undecided("assignment target")

    # -- expressions -----------------------------------------------------------------------------

    def truth(self, v: Any) -> bool:
        if isinstance(v, (Ext, _Poison)):
            raise Undecided(f"the truth of {v}")
        if isinstance(v, Instance) and v.values is None:
            return True
        if isinstance(v, Instance):
            return bool(v.values)
        return bool(v)

    def _iter(self, v: Any):
        if isinstance(v, Instance) and v.values is not None:
            return list(v.values)
        if isinstance(v, Klass) and v.is_enum:
            return list(v.members.values())
        if isinstance(v, (list, tuple, set, frozenset, dict, str, range)):
            return list(v)
        raise Undecided("iterates over something outside")

    def expr(self, node: ast.expr, mod: Module, env: dict[str, Any]) -> Any:
        self._tick()
        m = getattr(self, "_e_" + type(node).__name__, None)
        if m is None:
            raise Undecided(f"{type(node).__name__} expression")
        return m(node, mod, env)

    def _e_Constant(self, n, mod, env):
        return n.value

    def _e_Name(self, n, mod, env):
        return self.name(n.id, mod, env)

    def name(self, ident: str, mod: Module, env: dict[str, Any]) -> Any:
        scope: dict[str, Any] | None = env
        while scope is not None:
            if ident in scope:
                return self._resolve(scope, ident, mod)
            scope = scope.get("\0outer")
        if ident in mod.ns:
            return self._resolve(mod.ns, ident, mod)
        if ident in BUILTINS:
            return BUILTINS[ident]
        raise Undecided(f"name {ident}")

    def _resolve(self, ns: dict[str, Any], ident: str, mod: Module) -> Any:
        try:
            return self._resolve1(ns, ident, mod)
        except Undecided as u:
            u.trail = u.trail + [f"{mod.name}.{ident}"]
            raise

    def _resolve1(self, ns: dict[str, Any], ident: str, mod: Module) -> Any:
        v = ns[ident]
        if isinstance(v, _LazyBlock):
            v.run()
            if ident not in ns:
                raise Raised("NameError", ident)
            return self._resolve1(ns, ident, mod)
        if v is _LAZY:
            v = mod.lazy[ident]()
            ns[ident] = v
        elif isinstance(v, _Thunk):
            v = v.get()
            ns[ident] = v
        elif isinstance(v, (_LazyName, _LazyModule)):
            v = v.get()
            ns[ident] = v
        if isinstance(v, _Poison):
            raise Undecided(v.why)
        return v

    def _e_Attribute(self, n, mod, env):
        return self.attr(self.expr(n.value, mod, env), n.attr)

    def attr(self, obj: Any, name: str) -> Any:
        if isinstance(obj, (_LazyModule, _LazyName)):
            obj = obj.get()
        if isinstance(obj, Module):
            key = f"{obj.name}.{name}"
            if key in self.world.intercepts:
                return self.world.intercepts[key]
            if name in obj.ns:
                return self._resolve(obj.ns, name, obj)
            if self.world.exists(key):
                return self.module(key)
            hook = obj.ns.get("__getattr__")
            if isinstance(hook, Function):  # a module-level __getattr__ (vllm.envs)
                return self.call(hook, [name], {})
            if obj.tree is None:
                return Ext(key)  # a compiled extension's attribute
            raise Raised("AttributeError", f"module {obj.name} has no attribute {name}")
        if isinstance(obj, Ext):
            key = f"{obj.path}.{name}"
            if key in self.world.intercepts:
                return self.world.intercepts[key]
            return Ext(key)
        if isinstance(obj, Klass):
            if name == "__name__":
                return obj.name
            if obj.is_enum and name in obj.members:
                return obj.members[name]
            v, owner = obj.lookup(name)
            if v is _MISSING:
                if name == "_fields" and obj.is_namedtuple:
                    return tuple(obj.fields)
                raise Undecided(f"{obj.name}.{name}")
            return self._bind(self._unthunk(v, owner, name), obj, owner)
        if isinstance(obj, Instance):
            if name in obj.overrides:
                return Builtin(obj.overrides[name], name)
            if name in obj.attrs:
                return obj.attrs[name]
            if obj.values is not None and name in obj.klass.fields:
                return obj.values[obj.klass.fields.index(name)]
            if obj.values is not None and name == "_asdict":
                values = obj.values
                return Builtin(lambda: dict(zip(obj.klass.fields, values)), "_asdict")
            if name == "__class__":
                return obj.klass
            v, owner = obj.klass.lookup(name)
            if v is _MISSING:
                raise Undecided(f"{obj.klass.name}().{name}")
            v = self._unthunk(v, owner, name)
            if isinstance(v, Function):
                if v.kind == "property":
                    return self.call(v, [obj], {})
                if v.kind == "staticmethod":
                    return v
                if v.kind == "classmethod":
                    return Bound(v, obj.klass)
                return Bound(v, obj)
            return v
        if isinstance(obj, EnumMember):
            if name == "name":
                return obj.name
            if name == "value":
                return self._unthunk(obj.value, obj.klass, obj.name)
            v, owner = obj.klass.lookup(name)
            v = self._unthunk(v, owner, name)
            if isinstance(v, Function):
                return Bound(v, obj) if v.kind == "function" else Bound(v, obj.klass)
            raise Undecided(f"{obj}.{name}")
        if isinstance(obj, Super):
            return self._super_lookup(obj, name)[0]
        if isinstance(obj, Namespace):
            if name in obj.__dict__:
                return obj.__dict__[name]
            raise Raised("AttributeError", name)
        if isinstance(obj, Raised):
            if name == "args":
                return (obj.message,)
        if isinstance(obj, dict) and name in ("get", "items", "keys", "values", "update", "setdefault", "pop", "copy"):
            return Builtin(getattr(obj, name), name)
        if isinstance(obj, (list, set)) and name in ("append", "extend", "insert", "add", "pop", "remove", "discard"):
            return Builtin(getattr(obj, name), name)
        if isinstance(obj, (list, tuple, str, set, frozenset)) and name in SAFE_METHODS:
            return Builtin(getattr(obj, name), name)
        if isinstance(obj, int) and name in ("bit_length",):
            return Builtin(getattr(obj, name), name)
        raise Undecided(f"attribute {name} of {type(obj).__name__}")

    def _super_lookup(self, sup: Super, name: str):
        recv = sup.receiver
        klass = recv if isinstance(recv, Klass) else recv.klass
        v, owner = klass.lookup(name, after=sup.klass)
        if v is _MISSING:
            raise Undecided(f"super().{name}")
        v = self._unthunk(v, owner, name)
        return self._bind(v, recv, owner), owner

    def _unthunk(self, v, owner, name):
        if isinstance(v, _Thunk):
            v = v.get()
            if owner is not None:
                owner.ns[name] = v
        return v

    def _bind(self, v: Any, receiver: Any, owner) -> Any:
        if isinstance(v, Function):
            if v.kind == "classmethod":
                return Bound(v, receiver if isinstance(receiver, Klass) else receiver.klass)
            if v.kind == "function" and isinstance(receiver, Instance):
                return Bound(v, receiver)
        return v

    def _e_Call(self, n, mod, env):
        func_node = n.func
        if isinstance(func_node, ast.Name) and func_node.id == "super" and not n.args:
            owner = env.get("\0class")
            recv = env.get("\0self")
            if owner is None or recv is None:
                raise Undecided("super() outside a method")
            return Super(owner, recv)
        f = self.expr(func_node, mod, env)
        args: list[Any] = []
        for a in n.args:
            if isinstance(a, ast.Starred):
                args.extend(self._iter(self.expr(a.value, mod, env)))
            else:
                args.append(self.expr(a, mod, env))
        kwargs: dict[str, Any] = {}
        for k in n.keywords:
            v = self.expr(k.value, mod, env)
            if k.arg is None:
                if not isinstance(v, dict):
                    raise Undecided("** of something outside")
                kwargs.update(v)
            else:
                kwargs[k.arg] = v
        return self.call(f, args, kwargs)

    def call(self, f: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        self._tick()
        if isinstance(f, Builtin):
            try:
                return f.fn(*args, **kwargs)
            except (Undecided, Raised, _Return):
                raise
            except Exception as exc:  # noqa: BLE001 - the evaluated code's own TypeError etc.
                raise Raised(type(exc).__name__, str(exc)) from None
        if isinstance(f, Bound):
            if isinstance(f.func, Builtin):
                return self.call(f.func, args, kwargs)
            return self._invoke(f.func, [f.receiver, *args], kwargs, f.receiver)
        if isinstance(f, Function):
            return self._invoke(f, args, kwargs, None)
        if isinstance(f, Klass):
            return self._construct(f, args, kwargs)
        if isinstance(f, Ext):
            key = f.path
            if key in self.world.intercepts and callable(self.world.intercepts[key]):
                return self.world.intercepts[key](*args, **kwargs)
            raise Undecided(f"calls {f.path}()")
        if callable(f) and not isinstance(f, type):
            return f(*args, **kwargs)
        raise Undecided(f"calls {type(f).__name__}")

    def _construct(self, k: Klass, args, kwargs) -> Any:
        if k.is_namedtuple:
            vals = list(args)
            for name in k.fields[len(vals):]:
                if name in kwargs:
                    vals.append(kwargs.pop(name))
                elif name in k.defaults:
                    vals.append(k.defaults[name]())
                else:
                    raise Raised("TypeError", f"missing {name}")
            if kwargs:
                raise Raised("TypeError", f"unexpected {sorted(kwargs)}")
            return Instance(k, values=tuple(vals))
        if k.is_enum:
            for m in k.members.values():
                if self._unthunk(m.value, k, m.name) == (args[0] if args else None):
                    return m
            raise Raised("ValueError", f"{args!r} is not a valid {k.name}")
        inst = Instance(k)
        init, owner = k.lookup("__init__")
        if k.is_dataclass and not (isinstance(init, Function) and owner is k):
            vals = list(args)
            if len(vals) > len(k.fields):
                raise Raised("TypeError", "too many arguments")
            for name in k.fields:
                if vals:
                    inst.attrs[name] = vals.pop(0)
                elif name in kwargs:
                    inst.attrs[name] = kwargs.pop(name)
                elif name in k.defaults:
                    inst.attrs[name] = k.defaults[name]()
                else:
                    raise Raised("TypeError", f"missing {name}")
            if kwargs:
                raise Raised("TypeError", f"unexpected {sorted(kwargs)}")
            post, powner = k.lookup("__post_init__")
            if isinstance(post, Function):
                self._invoke(post, [inst], {}, inst, powner)
            return inst
        if isinstance(init, Function):
            self._invoke(init, [inst, *args], kwargs, inst, owner)
        elif args or kwargs:
            raise Undecided(f"constructs {k.name} without a readable __init__")
        return inst

    def _invoke(self, f: Function, args: list[Any], kwargs: dict[str, Any], receiver: Any, owner=None) -> Any:
        node = f.node
        env: dict[str, Any] = {"\0outer": f.scope} if f.scope is not None else {}
        if receiver is not None:
            env["\0self"] = receiver
            env["\0class"] = owner or f.owner
        self._bind_args(node.args, args, kwargs, f.module, env)
        if isinstance(node, ast.Lambda):
            return self.expr(node.body, f.module, env)
        try:
            self._block(node.body, f.module, env)
        except _Return as r:
            return r.value
        except Undecided as u:
            u.trail = u.trail + [f"{f.module.name}.{getattr(node, 'name', 'lambda')}"]
            raise
        return None

    def _bind_args(self, a: ast.arguments, args: list[Any], kwargs: dict[str, Any], mod: Module, env: dict[str, Any]) -> None:
        positional = [*a.posonlyargs, *a.args]
        defaults = dict(zip([p.arg for p in positional[len(positional) - len(a.defaults):]], a.defaults))
        kwargs = dict(kwargs)
        for i, p in enumerate(positional):
            if i < len(args):
                env[p.arg] = args[i]
            elif p.arg in kwargs:
                env[p.arg] = kwargs.pop(p.arg)
            elif p.arg in defaults:
                env[p.arg] = self.expr(defaults[p.arg], mod, {})
            else:
                raise Raised("TypeError", f"missing argument {p.arg}")
        extra = args[len(positional):]
        if a.vararg:
            env[a.vararg.arg] = tuple(extra)
        elif extra:
            raise Raised("TypeError", "too many positional arguments")
        for p, d in zip(a.kwonlyargs, a.kw_defaults):
            if p.arg in kwargs:
                env[p.arg] = kwargs.pop(p.arg)
            elif d is not None:
                env[p.arg] = self.expr(d, mod, {})
            else:
                raise Raised("TypeError", f"missing keyword {p.arg}")
        if a.kwarg:
            env[a.kwarg.arg] = kwargs
        elif kwargs:
            raise Raised("TypeError", f"unexpected keyword arguments {sorted(kwargs)}")

    def _e_Compare(self, n, mod, env):
        left = self.expr(n.left, mod, env)
        for op, rn in zip(n.ops, n.comparators):
            right = self.expr(rn, mod, env)
            if not self._compare(op, left, right):
                return False
            left = right
        return True

    def _compare(self, op: ast.cmpop, a: Any, b: Any) -> bool:
        if isinstance(op, ast.Is):
            return a is b or (a is None and b is None)
        if isinstance(op, ast.IsNot):
            return a is not b
        if isinstance(op, (ast.In, ast.NotIn)):
            if isinstance(b, Klass) and b.is_enum:
                b = list(b.members.values())
            if isinstance(b, Instance) and b.values is not None:
                b = b.values
            if not isinstance(b, (list, tuple, set, frozenset, dict, str)):
                raise Undecided("membership in something outside")
            found = any(self._eq(a, x) for x in b) if not isinstance(b, str) else a in b
            return found if isinstance(op, ast.In) else not found
        dunder = {ast.Eq: "__eq__", ast.NotEq: "__ne__", ast.Lt: "__lt__", ast.LtE: "__le__", ast.Gt: "__gt__",
                  ast.GtE: "__ge__"}[type(op)]
        if isinstance(a, Instance):
            f, owner = a.klass.lookup(dunder)
            if isinstance(f, Function):
                r = self._invoke(f, [a, b], {}, a, owner)
                if r is not NotImplemented:
                    return self.truth(r)
            if a.values is not None:
                b2 = b.values if isinstance(b, Instance) and b.values is not None else b
                return _PYCMP[dunder](a.values, b2)
            if dunder in ("__eq__", "__ne__"):
                return self._eq(a, b) == (dunder == "__eq__")
            raise Undecided(f"compares {a.klass.name}")
        if dunder in ("__eq__", "__ne__"):
            return self._eq(a, b) == (dunder == "__eq__")
        if isinstance(a, (Ext, EnumMember, Klass)) or isinstance(b, (Ext, EnumMember, Klass, Instance)):
            raise Undecided("orders objects from outside")
        try:
            return _PYCMP[dunder](a, b)
        except TypeError as exc:
            raise Raised("TypeError", str(exc)) from None

    def _eq(self, a: Any, b: Any) -> bool:
        if isinstance(a, Instance) and isinstance(b, Instance) and a.klass is b.klass and a.klass.is_dataclass:
            return all(self._eq(a.attrs.get(f), b.attrs.get(f)) for f in a.klass.fields)
        if isinstance(a, Instance) or isinstance(b, Instance):
            if isinstance(a, Instance) and a.values is not None and isinstance(b, Instance) and b.values is not None:
                return a.values == b.values
            return a is b
        if isinstance(a, EnumMember) or isinstance(b, EnumMember):
            if isinstance(a, EnumMember) and isinstance(b, str):
                return a.klass.lookup("__eq__")[0] is not _MISSING and self._unthunk(a.value, a.klass, a.name) == b
            return a is b
        if isinstance(a, Ext) != isinstance(b, Ext):
            if isinstance(a, (Ext)) and isinstance(b, (str, int, type(None))) or isinstance(b, Ext) and isinstance(a, (str, int, type(None))):
                return False
            raise Undecided("compares an outside object")
        return a == b

    def _e_BoolOp(self, n, mod, env):
        if isinstance(n.op, ast.And):
            v: Any = True
            for x in n.values:
                v = self.expr(x, mod, env)
                if not self.truth(v):
                    return v
            return v
        v = False
        for x in n.values:
            v = self.expr(x, mod, env)
            if self.truth(v):
                return v
        return v

    def _e_UnaryOp(self, n, mod, env):
        v = self.expr(n.operand, mod, env)
        if isinstance(n.op, ast.Not):
            return not self.truth(v)
        if not isinstance(v, (int, float)):
            raise Undecided("arithmetic on an object")
        return {ast.USub: lambda x: -x, ast.UAdd: lambda x: +x, ast.Invert: lambda x: ~x}[type(n.op)](v)

    def _e_BinOp(self, n, mod, env):
        return self._binop(n.op, self.expr(n.left, mod, env), self.expr(n.right, mod, env))

    def _binop(self, op, a, b):
        if isinstance(op, ast.BitOr) and (isinstance(a, (Ext, Klass)) or a is None):
            return Ext("typing.Union")  # an annotation such as `int | None`
        ok = (int, float, str, list, tuple, bool, set, frozenset, dict)
        if not isinstance(a, ok) or not isinstance(b, ok):
            raise Undecided("arithmetic on objects")
        ops = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
               ast.Div: lambda x, y: x / y, ast.FloorDiv: lambda x, y: x // y, ast.Mod: lambda x, y: x % y,
               ast.Pow: lambda x, y: x ** y, ast.BitOr: lambda x, y: x | y, ast.BitAnd: lambda x, y: x & y,
               ast.LShift: lambda x, y: x << y, ast.RShift: lambda x, y: x >> y}
        if isinstance(op, ast.Mod) and isinstance(a, str):
            raise Undecided("%-formatting")
        if isinstance(op, ast.Pow) and isinstance(b, int) and b > 64:
            raise Undecided("big power")
        if isinstance(op, ast.Mult) and (isinstance(a, (str, list, tuple)) or isinstance(b, (str, list, tuple))):
            if (a if isinstance(a, int) else b) > 10_000:
                raise Undecided("big repetition")
        try:
            return ops[type(op)](a, b)
        except (TypeError, ZeroDivisionError, KeyError) as exc:
            raise Raised(type(exc).__name__, str(exc)) from None

    def _e_IfExp(self, n, mod, env):
        return self.expr(n.body if self.truth(self.expr(n.test, mod, env)) else n.orelse, mod, env)

    def _elts(self, elts, mod, env) -> list[Any]:
        out: list[Any] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self._iter(self.expr(e.value, mod, env)))
            else:
                out.append(self.expr(e, mod, env))
        return out

    def _e_List(self, n, mod, env):
        return self._elts(n.elts, mod, env)

    def _e_Tuple(self, n, mod, env):
        return tuple(self._elts(n.elts, mod, env))

    def _e_Set(self, n, mod, env):
        items = self._elts(n.elts, mod, env)
        try:
            return set(items)
        except TypeError:
            raise Undecided("a set of objects") from None

    def _e_Dict(self, n, mod, env):
        out = {}
        for k, v in zip(n.keys, n.values):
            if k is None:
                out.update(self.expr(v, mod, env))
            else:
                out[self.expr(k, mod, env)] = self.expr(v, mod, env)
        return out

    def _e_JoinedStr(self, n, mod, env):
        parts = []
        for v in n.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            else:
                spec = self.expr(v.format_spec, mod, env) if v.format_spec is not None else ""
                val = self.expr(v.value, mod, env)
                if v.conversion == ord("r"):
                    val = repr(val) if isinstance(val, (str, int, float, type(None), list, tuple)) else _fmt(val)
                parts.append(_fmt(val, spec))
        return "".join(parts)

    def _e_Subscript(self, n, mod, env):
        obj = self.expr(n.value, mod, env)
        if isinstance(obj, Ext) and obj.path.split(".")[-1] == "Literal":
            args = self.expr(n.slice, mod, env)
            return LiteralType(args if isinstance(args, tuple) else (args,))
        if isinstance(obj, (Ext, Klass)):
            return obj  # a type annotation: list[int], ClassVar[...]
        key = self.expr(n.slice, mod, env)
        if isinstance(obj, Instance) and obj.values is not None:
            obj = obj.values
        if not isinstance(obj, (list, tuple, dict, str)):
            raise Undecided("subscript of an object")
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError) as exc:
            raise Raised(type(exc).__name__, str(exc)) from None

    def _e_Slice(self, n, mod, env):
        g = lambda x: self.expr(x, mod, env) if x is not None else None  # noqa: E731
        return slice(g(n.lower), g(n.upper), g(n.step))

    def _e_Lambda(self, n, mod, env):
        return Function(n, mod, env)

    def _comp(self, n, mod, env, make):
        out: list[Any] = []
        scope = {"\0outer": env}

        def walk(i: int):
            if i == len(n.generators):
                out.append(make(scope))
                return
            g = n.generators[i]
            for item in self._iter(self.expr(g.iter, mod, scope)):
                self._assign(g.target, item, mod, scope)
                if all(self.truth(self.expr(c, mod, scope)) for c in g.ifs):
                    walk(i + 1)

        walk(0)
        return out

    def _e_ListComp(self, n, mod, env):
        return self._comp(n, mod, env, lambda s: self.expr(n.elt, mod, s))

    _e_GeneratorExp = _e_ListComp

    def _e_SetComp(self, n, mod, env):
        return set(self._comp(n, mod, env, lambda s: self.expr(n.elt, mod, s)))

    def _e_DictComp(self, n, mod, env):
        return dict(self._comp(n, mod, env, lambda s: (self.expr(n.key, mod, s), self.expr(n.value, mod, s))))

    def _e_NamedExpr(self, n, mod, env):
        v = self.expr(n.value, mod, env)
        env[n.target.id] = v
        return v

    def _e_Starred(self, n, mod, env):
        raise Undecided("starred expression")


class _Thunk:
    def __init__(self, get):
        self.get = get


class _LazyBlock:
    """A module-level if/try, run once when a name it binds is first read (as importing would have run it)."""

    def __init__(self, ev: "Evaluator", st: ast.stmt, mod: Module, ns: dict[str, Any]):
        self.ev, self.st, self.mod, self.ns = ev, st, mod, ns
        self.names = sorted(_bound_names(st))
        self.before: dict[str, Any] = {}
        self.done = False

    def run(self) -> None:
        if self.done:
            return
        self.done = True
        for n in self.names:  # what the names were before the block; the block may leave some alone
            if self.ns.get(n) is self:
                if self.before[n] is _MISSING:
                    del self.ns[n]
                else:
                    self.ns[n] = self.before[n]
        try:
            self.ev._block([self.st], self.mod, self.ns, top=True)
        except (Undecided, Raised) as exc:
            for n in self.names:
                self.ns[n] = _Poison(f"{self.mod.name}.{n} is set by code preflight does not run ({exc})")


class _Poison:
    def __init__(self, why: str):
        self.why = why

    def __repr__(self):
        return f"<undecided: {self.why}>"


class _LazyModule:
    def __init__(self, ev: Evaluator, name: str):
        self.ev, self.name = ev, name

    def get(self):
        return self.ev.module(self.name)


class _LazyName:
    def __init__(self, ev: Evaluator, base: str, name: str):
        self.ev, self.base, self.name = ev, base, name

    def get(self):
        return self.ev.attr(self.ev.module(self.base), self.name)


_LAZY = object()
_PYCMP = {"__lt__": lambda a, b: a < b, "__le__": lambda a, b: a <= b, "__gt__": lambda a, b: a > b,
          "__ge__": lambda a, b: a >= b, "__eq__": lambda a, b: a == b, "__ne__": lambda a, b: a != b}
SAFE_METHODS = {"startswith", "endswith", "lower", "upper", "split", "rsplit", "strip", "join", "replace",
                "index", "count", "partition", "rpartition", "isdigit", "copy"}


def _strings_only(fn):
    def inner(*args):
        if not all(isinstance(a, str) for a in args):
            raise Undecided(f"os.path.{fn.__name__} of an object")
        return fn(*args)
    return inner


def _is_logging(node: ast.expr) -> bool:
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    while isinstance(f, ast.Attribute):
        f = f.value
    return isinstance(f, ast.Name) and (f.id in ("logger", "logging", "warnings", "log", "_logger", "print"))


def _is_classvar(ann: ast.expr) -> bool:
    node = ann.value if isinstance(ann, ast.Subscript) else ann
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("ClassVar")
    return _names_of(node)[-1:] == ["ClassVar"]


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _names_of(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Tuple):
        return [x for e in node.elts for x in _names_of(e)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return []


def _bound_names(st: ast.stmt) -> set[str]:
    out = set()
    for n in ast.walk(st):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
            out.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.ClassDef)):
            out.add(n.name)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).split(".")[0])
    return out


def _load(target: ast.expr) -> ast.expr:
    """An assignment target read as a value (for `x += 1`)."""
    return ast.parse(ast.unparse(target), mode="eval").body


def _isinstance(obj, kinds) -> bool:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    for k in kinds:
        if isinstance(k, Builtin) and k.name in _PY_TYPES:
            k = _PY_TYPES[k.name]
        if isinstance(k, Klass):
            if isinstance(obj, Instance) and obj.klass.subclass_of(k):
                return True
            if isinstance(obj, EnumMember) and obj.klass.subclass_of(k):
                return True
        elif isinstance(k, Ext):
            name = k.path.split(".")[-1]
            if name in _PY_TYPES and isinstance(obj, _PY_TYPES[name]) and not isinstance(obj, bool) or (
                    name == "bool" and isinstance(obj, bool)):
                return True
            if name not in _PY_TYPES:
                raise Undecided(f"isinstance against {k.path}")
        elif isinstance(k, type):
            if isinstance(obj, k) and not (k is int and isinstance(obj, bool)):
                return True
        else:
            raise Undecided("isinstance against an object")
    return False


def _getattr(obj, name, *default):
    ev = _CURRENT[-1]
    try:
        return ev.attr(obj, name)
    except Raised as exc:
        if exc.kind == "AttributeError" and default:
            return default[0]
        raise


def _hasattr(obj, name) -> bool:
    try:
        _getattr(obj, name)
        return True
    except Raised as exc:
        if exc.kind == "AttributeError":
            return False
        raise


def _callable(obj) -> bool:
    return isinstance(obj, (Function, Bound, Builtin, Klass, Ext))


def _int(x=0, *base):
    if isinstance(x, (Ext, Instance)):
        raise Undecided("int() of an object")
    return int(x, *base)


def _str(x="") -> str:
    return _fmt(x)


def _builtin_type(name):
    def fail(*a, **k):
        raise Undecided(f"{name}()")
    return fail


def _sorted(it, key=None, reverse=False):
    ev = _CURRENT[-1]
    items = ev._iter(it)
    if key is not None:
        keyed = [(ev.call(key, [x], {}), x) for x in items]
        return [x for _, x in sorted(keyed, key=lambda kv: kv[0], reverse=reverse)]
    return sorted(items, reverse=reverse)


def _minmax(fn):
    def inner(*args, key=None, default=_MISSING):
        ev = _CURRENT[-1]
        items = ev._iter(args[0]) if len(args) == 1 else list(args)
        if not items and default is not _MISSING:
            return default
        if key is not None:
            return fn(items, key=lambda x: ev.call(key, [x], {}))
        return fn(items)
    return inner


_PY_TYPES = {"int": int, "str": str, "float": float, "list": list, "tuple": tuple, "dict": dict, "bool": bool,
             "set": set}
_CURRENT: list[Evaluator] = []
BUILTINS: dict[str, Any] = {}


def _install_builtins() -> None:
    def b(name, fn):
        BUILTINS[name] = Builtin(fn, name)

    b("len", lambda x: len(_CURRENT[-1]._iter(x)) if not isinstance(x, (str, dict, list, tuple, set)) else len(x))
    b("isinstance", _isinstance)
    b("getattr", _getattr)
    b("hasattr", _hasattr)
    b("callable", _callable)
    b("int", _int)
    b("str", _str)
    b("float", lambda x=0.0: float(x) if isinstance(x, (int, float, str)) else _builtin_type("float")())
    b("bool", lambda x=False: _CURRENT[-1].truth(x))
    b("list", lambda x=(): list(_CURRENT[-1]._iter(x)))
    b("tuple", lambda x=(): tuple(_CURRENT[-1]._iter(x)))
    b("set", lambda x=(): set(_CURRENT[-1]._iter(x)))
    b("frozenset", lambda x=(): frozenset(_CURRENT[-1]._iter(x)))
    b("dict", lambda *a, **k: dict(*a, **k))
    b("any", lambda x: any(_CURRENT[-1].truth(v) for v in _CURRENT[-1]._iter(x)))
    b("all", lambda x: all(_CURRENT[-1].truth(v) for v in _CURRENT[-1]._iter(x)))
    b("min", _minmax(min))
    b("max", _minmax(max))
    b("sorted", _sorted)
    b("range", lambda *a: range(*a) if all(isinstance(x, int) for x in a) and (a[-1] if a else 0) < 100_000
      else _builtin_type("range")())
    b("enumerate", lambda x, start=0: list(enumerate(_CURRENT[-1]._iter(x), start)))
    b("zip", lambda *xs: list(zip(*[_CURRENT[-1]._iter(x) for x in xs])))
    b("abs", abs)
    b("round", round)
    b("repr", lambda x: repr(x) if isinstance(x, (str, int, float, type(None), list, tuple)) else _fmt(x))
    b("type", lambda x: x.klass if isinstance(x, Instance) else (
        Namespace(__name__=x.kind) if isinstance(x, Raised) else _builtin_type("type")()))
    BUILTINS["None"] = None
    BUILTINS["True"] = True
    BUILTINS["False"] = False
    BUILTINS["NotImplemented"] = NotImplemented
    for exc in ("ImportError", "ModuleNotFoundError", "ValueError", "TypeError", "RuntimeError", "Exception",
                "AttributeError", "KeyError", "NotImplementedError", "AssertionError", "OSError"):
        BUILTINS[exc] = Ext(exc)
    for name in ("object", "classmethod", "staticmethod", "property"):
        BUILTINS[name] = Ext(name)


_install_builtins()


class Session:
    """One evaluator made current (the builtins getattr/sorted need it), for `with`."""

    def __init__(self, ev: Evaluator):
        self.ev = ev

    def __enter__(self):
        _CURRENT.append(self.ev)
        return self.ev

    def __exit__(self, *exc):
        _CURRENT.pop()
        return False
