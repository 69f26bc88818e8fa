"""Regenerate triage/catalogue/messages.json.gz: the error and warning messages vLLM and the libraries
that fail its launches can print, mined from their Python source.

    python scripts/mine_messages.py [--wheels DIR] [--download] [--site SITE_PACKAGES] [--out FILE]

(the shipped file: `--download --site $(python -c 'import site; print(site.getsitepackages()[0])')` with
torch 2.13.0, numpy 2.4.6 and triton 3.9.0 installed; about 2 minutes of CPU per vLLM wheel, cached per
wheel under --cache so that a rerun reads only new ones)

Sources: wheels (`pip download vllm==X --no-deps -d DIR`), read straight from the zip (no install),
and installed packages (site-packages folders) for the libraries. From every `.py` file:
`raise X(msg)`, `assert cond, msg`, `logger.error/warning/exception/critical(msg, ...)` and
`warnings.warn(msg)` whose message is a literal, an f-string, a %-format, a `.format` call, a
concatenation of those, or a local variable assigned one of them in the same function. Each becomes a
template: literal pieces joined by HOLE where a value goes. A template is kept with the releases it
occurs in (first and last of the mined list, per package), its exception type (or log level), and
its module. Messages with too little literal text to recognise are dropped.
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import re
import subprocess
import sys
import warnings
import zipfile
from collections import Counter
from pathlib import Path

HOLE = "\x1f"
LOG_LEVELS = {"error": "ERROR", "exception": "ERROR", "critical": "CRITICAL", "fatal": "CRITICAL",
              "warning": "WARNING", "warn": "WARNING", "warning_once": "WARNING", "error_once": "ERROR"}
MIN_LITERAL = 12  # a template with fewer literal characters matches too much to say anything
MIN_PIECE = 6
_FMT_PCT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?[diouxXeEfFgGcrsa%]")
_FMT_BRACE = re.compile(r"\{\{|\}\}|\{[^{}]*\}")

# The last patch of every minor release from 0.6 on (PyPI, November 2026).
VLLM_RELEASES = ["0.6.6.post1", "0.7.3", "0.8.5.post1", "0.9.2", "0.10.2", "0.11.2", "0.12.0", "0.13.0", "0.14.1",
                 "0.15.1", "0.16.0", "0.17.1", "0.18.1", "0.19.1", "0.20.2", "0.21.0", "0.22.1", "0.23.0", "0.24.0",
                 "0.25.1", "0.26.0", "0.27.1", "0.28.0", "0.29.0", "0.30.0", "0.31.0", "0.32.0", "0.33.0"]
# Libraries that fail vLLM launches: a few versions each, spanning what vLLM releases pinned.
# FlashInfer before 0.6 and DeepGEMM are sdists only on PyPI (nothing to read without building them);
# vLLM's own wrappers (vllm/utils/deep_gemm.py, flashinfer.py) carry the messages users see from them.
# torch, numpy and triton are read from an installed environment (--site): their wheels are large.
LIBRARIES: dict[str, list[str]] = {
    "transformers": ["4.46.3", "4.51.3", "4.57.6", "5.24.0"],
    "huggingface_hub": ["0.26.5", "0.36.0", "2.4.0"],
    "tokenizers": ["0.21.1", "0.23.3"],
    "safetensors": ["0.4.5", "0.8.0"],
    "flashinfer_python": ["0.6.18.post1", "0.7.4"],
    "triton": ["3.1.0", "3.3.1"],
    "ray": ["2.40.0", "2.49.2", "2.60.0"],
}
# Only these parts of big libraries: what a launch goes through (torch: CUDA, distributed, loading).
SUBTREES = {
    "torch": ("torch/cuda/", "torch/distributed/", "torch/serialization.py", "torch/_ops.py", "torch/library.py",
              "torch/utils/cpp_extension.py", "torch/_inductor/", "torch/_dynamo/exc.py", "torch/multiprocessing/",
              "torch/__init__.py", "torch/_utils.py", "torch/backends/cuda/", "torch/_C/"),
    "transformers": ("transformers/configuration_utils.py", "transformers/modeling_utils.py",
                     "transformers/tokenization_utils", "transformers/models/auto/", "transformers/utils/hub.py",
                     "transformers/utils/import_utils.py", "transformers/utils/quantization_config.py",
                     "transformers/dynamic_module_utils.py", "transformers/processing_utils.py",
                     "transformers/image_processing_utils.py", "transformers/generation/configuration_utils.py",
                     "transformers/modeling_rope_utils.py", "transformers/integrations/"),
    "ray": ("ray/exceptions.py", "ray/_private/worker.py", "ray/_private/services.py", "ray/util/placement_group.py",
            "ray/_private/node.py", "ray/_private/utils.py", "ray/actor.py", "ray/_private/accelerators/"),
    "numpy": ("numpy/core/", "numpy/_core/", "numpy/__init__.py", "numpy/_utils/"),
}
SKIP_PARTS = ("/tests/", "/test/", "/testing/", "/benchmarks/", "/examples/", "/_vendor/")
# Kernel sources written in Python DSLs (CuTe, vendored CUTLASS, experimental kernels): thousands of
# shape asserts that fire while a kernel is written, not while vLLM starts.
SKIP_UNDER = {"flashinfer": ("flashinfer/data/", "flashinfer/experimental/", "kernel_src/", "cute_dsl/", "prims_ts/",
                             "/kernels/")}


# --- templates ----------------------------------------------------------------------------------

def _pct_pieces(s: str) -> list[str]:
    out, pos = [], 0
    for m in _FMT_PCT.finditer(s):
        out.append(s[pos:m.start()] + ("%" if m.group() == "%%" else ""))
        if m.group() != "%%":
            out.append(HOLE)
        pos = m.end()
    out.append(s[pos:])
    return out


def _brace_pieces(s: str) -> list[str]:
    out, pos = [], 0
    for m in _FMT_BRACE.finditer(s):
        out.append(s[pos:m.start()])
        out.append(m.group()[0] if m.group() in ("{{", "}}") else HOLE)
        pos = m.end()
    out.append(s[pos:])
    return out


def template_of(node: ast.AST | None, env: dict[str, ast.AST] | None = None, *, pct: bool = False,
                depth: int = 0) -> str | None:
    """The message an expression builds, holes where values go; None when it has no literal part.
    `pct`: the string is a logger format (its %-specifiers are holes)."""
    if node is None or depth > 6:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return "".join(_pct_pieces(node.value)) if pct else node.value
    if isinstance(node, ast.JoinedStr):
        parts = []
        for v in node.values:
            if isinstance(v, ast.Constant) and isinstance(v.value, str):
                parts.append(v.value)
            else:
                parts.append(HOLE)
        return "".join(parts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left = template_of(node.left, env, pct=pct, depth=depth + 1)
        right = template_of(node.right, env, pct=pct, depth=depth + 1)
        if left is None and right is None:
            return None
        return (left if left is not None else HOLE) + (right if right is not None else HOLE)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        if isinstance(node.left, ast.Constant) and isinstance(node.left.value, str):
            return "".join(_pct_pieces(node.left.value))
        if isinstance(node.left, ast.Name):
            return template_of(node.left, env, pct=True, depth=depth + 1)
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = node.func.value
        if isinstance(base, ast.Constant) and isinstance(base.value, str):
            return "".join(_brace_pieces(base.value))
        return None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        return HOLE
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("strip", "rstrip"):
        return template_of(node.func.value, env, pct=pct, depth=depth + 1)
    if isinstance(node, ast.Call) and _exc_name(node.func) == "dedent" and node.args:
        return template_of(node.args[0], env, pct=pct, depth=depth + 1)
    if isinstance(node, ast.Name) and env and node.id in env:
        return template_of(env[node.id], None, pct=pct, depth=depth + 1)
    if isinstance(node, ast.IfExp):
        return template_of(node.body, env, pct=pct, depth=depth + 1)
    return None


def normalise(t: str) -> str:
    """Runs of holes become one; whitespace runs one space (logs re-wrap them)."""
    t = re.sub(r"[ \t\r\n\f\v]+", " ", t)  # not \s: it takes HOLE (\x1f) for white space
    t = re.sub(f"{HOLE}(?:[ ]*{HOLE})+", HOLE, t)
    return t.strip(" ")


def worth_keeping(t: str) -> bool:
    pieces = [p.strip(" ") for p in t.split(HOLE)]
    lit = sum(len(p) for p in pieces)
    return lit >= MIN_LITERAL and max((len(p) for p in pieces), default=0) >= MIN_PIECE


def _exc_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class _Visitor(ast.NodeVisitor):
    def __init__(self) -> None:
        self.found: list[tuple[str, str]] = []  # (kind, template); kind: exception type or log level
        self._envs: list[dict[str, ast.AST]] = [{}]

    def _scoped(self, node: ast.AST) -> None:
        env: dict[str, ast.AST] = {}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1 and isinstance(sub.targets[0], ast.Name):
                env.setdefault(sub.targets[0].id, sub.value)  # the first assignment: usually the message
            elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.value is not None:
                env.setdefault(sub.target.id, sub.value)
        self._envs.append(env)
        self.generic_visit(node)
        self._envs.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = _scoped

    def _add(self, kind: str, t: str | None) -> None:
        if t is None:
            return
        t = normalise(t)
        if worth_keeping(t):
            self.found.append((kind, t))

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call):
            name = _exc_name(exc)
            if name and exc.args:
                self._add(name, template_of(exc.args[0], self._envs[-1]))
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._add("AssertionError", template_of(node.msg, self._envs[-1]))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        f = node.func
        if isinstance(f, ast.Attribute) and node.args:
            owner = f.value
            oname = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if f.attr in LOG_LEVELS and ("log" in oname.lower()):
                self._add(LOG_LEVELS[f.attr], template_of(node.args[0], self._envs[-1], pct=True))
            elif f.attr == "warn" and oname == "warnings":
                self._add("WARNING", template_of(node.args[0], self._envs[-1]))
            elif f.attr == "write" and oname == "stderr":  # a banner printed before failing (NumPy's ABI one)
                self._add("ERROR", template_of(node.args[0], self._envs[-1]))
        self.generic_visit(node)


def mine_source(src: str) -> list[tuple[str, str]]:
    """(kind, template) for every message the module can raise or log."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escape sequences in old sources
        try:
            tree = ast.parse(src)
        except (SyntaxError, ValueError):
            return []
    v = _Visitor()
    v.visit(tree)
    return v.found


# --- sources --------------------------------------------------------------------------------------

def wanted(path: str, package: str) -> bool:
    if not path.endswith(".py") or any(p in "/" + path for p in SKIP_PARTS + SKIP_UNDER.get(package, ())):
        return False
    sub = SUBTREES.get(package)
    return sub is None or path.startswith(sub)


def iter_wheel(path: Path, package: str):
    with zipfile.ZipFile(path) as z:
        for name in z.namelist():
            if wanted(name, package):
                yield name, z.read(name).decode("utf-8", "replace")


def iter_tree(root: Path, package: str):
    top = root / package
    for p in sorted(top.rglob("*.py")):
        rel = str(p.relative_to(root))
        if wanted(rel, package):
            yield rel, p.read_text("utf-8", "replace")


def find_wheel(wheels: Path, dist: str, version: str) -> Path | None:
    for p in sorted(wheels.glob(f"{dist}-{version}-*.whl")):
        return p
    return None


def download(wheels: Path, dist: str, version: str) -> Path | None:
    pin = dist.replace("_", "-")
    subprocess.run([sys.executable, "-m", "pip", "download", f"{pin}=={version}", "--no-deps", "--only-binary",
                    ":all:", "-q", "-d", str(wheels)], check=False)
    return find_wheel(wheels, dist, version)


# --- the catalogue --------------------------------------------------------------------------------

class Catalogue:
    def __init__(self) -> None:
        self.releases: dict[str, list[str]] = {}
        self.entries: dict[tuple[str, str, str, str], list[int]] = {}  # (pkg, module, kind, tpl) -> [first, last]

    def add_release(self, package: str, version: str, files, cache: Path | None = None) -> int:
        rels = self.releases.setdefault(package, [])
        idx = len(rels)
        rels.append(version)
        found = None
        if cache is not None and cache.exists():
            found = json.loads(cache.read_text())
        if found is None:
            found = [[name, kind, tpl] for name, src in files for kind, tpl in mine_source(src)]
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps(found))
        n = 0
        for module, kind, tpl in found:
            key = (package, module, kind, tpl)
            span = self.entries.get(key)
            if span is None:
                self.entries[key] = [idx, idx]
            else:
                span[1] = idx
            n += 1
        return n

    def to_json(self) -> dict:
        modules = sorted({k[1] for k in self.entries})
        kinds = sorted({k[2] for k in self.entries})
        packages = sorted(self.releases)
        mi = {m: i for i, m in enumerate(modules)}
        ki = {k: i for i, k in enumerate(kinds)}
        pi = {p: i for i, p in enumerate(packages)}
        rows = sorted(self.entries.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][3]))
        entries = [[pi[p], mi[m], ki[k], t, a, b] for (p, m, k, t), (a, b) in rows]
        return {"format": 1, "hole": HOLE, "packages": packages, "releases": [self.releases[p] for p in packages],
                "modules": modules, "kinds": kinds, "entries": entries, "index": build_index(entries)}


FIRST_KEY_MAX = 60
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def words(text: str) -> list[str]:
    return [w.lower() for w in _WORD.findall(text)]


def build_index(entries: list[list]) -> dict[str, list[int]]:
    """Each entry under its rarest whole word of four letters or more, and under the rarest of its first
    piece that has one (a fragment is usually the start of a message, cut). A log line is looked up by
    its words: the rarest word makes the shortest candidate list."""
    freq: Counter[str] = Counter()
    per: list[list[list[str]]] = []
    for e in entries:
        per.append(piece_words(e[3]))
        freq.update({w for ws in per[-1] for w in ws})
    index: dict[str, list[int]] = {}
    for i, pieces in enumerate(per):
        every = [w for ws in pieces for w in ws]
        if not every:
            continue
        rare = lambda ws: min(ws, key=lambda w: (freq[w], -len(w), w))  # noqa: E731
        keys = {rare(every)}
        first = rare(next(ws for ws in pieces if ws))
        if freq[first] <= FIRST_KEY_MAX:  # a common first word would make every line a candidate
            keys.add(first)
        for key in sorted(keys):
            index.setdefault(key, []).append(i)
    return index


def key_words(template: str) -> list[str]:
    return sorted({w for ws in piece_words(template) for w in ws})


def piece_words(template: str) -> list[list[str]]:
    """The words of each piece that print whole: not touching a hole (a value may extend them)."""
    pieces = template.split(HOLE)
    out = []
    for j, piece in enumerate(pieces):
        ws = []
        for m in _WORD.finditer(piece):
            left_ok = m.start() > 0 or j == 0
            right_ok = m.end() < len(piece) or j == len(pieces) - 1
            if left_ok and right_ok:
                ws.append(m.group().lower())
        out.append(ws)
    return out


def serialise(data: dict) -> bytes:
    """The shipped form, made to load fast: a JSON header line, then one line per template
    ("package module kind first last template", tab-separated, numbers into the header's lists), then
    one line per index word ("word id id ..."). Reading it is a split, not a JSON parse of every row;
    a row is parsed when a lookup reaches it."""
    header = {k: data[k] for k in ("hole", "packages", "releases", "modules", "kinds")}
    header["format"] = 2
    header["entries"] = len(data["entries"])
    header["index"] = len(data["index"])
    lines = [json.dumps(header, separators=(",", ":"), ensure_ascii=False)]
    for p, m, k, t, a, b in data["entries"]:
        assert "\t" not in t and "\n" not in t
        lines.append(f"{p}\t{m}\t{k}\t{a}\t{b}\t{t}")
    for w, ids in sorted(data["index"].items()):
        lines.append(w + "\t" + " ".join(map(str, ids)))
    return ("\n".join(lines) + "\n").encode()


def _mine_job(job: tuple[str, str, str, str, str]) -> str:
    package, version, kind, path, cache = job
    files = iter_wheel(Path(path), package) if kind == "wheel" else iter_tree(Path(path), package)
    found = [[name, k, tpl] for name, src in files for k, tpl in mine_source(src)]
    Path(cache).parent.mkdir(parents=True, exist_ok=True)
    tmp = cache + ".tmp"
    Path(tmp).write_text(json.dumps(found))
    os.replace(tmp, cache)
    return f"mined {package} {version}: {len(found)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", default="/work/cache/wheels", type=Path)
    ap.add_argument("--download", action="store_true", help="pip download the wheels that are missing")
    ap.add_argument("--site", type=Path, action="append", default=[],
                    help="a site-packages folder whose torch/numpy/triton to mine as well")
    ap.add_argument("--cache", type=Path, default=Path("/work/cache/mined"),
                    help="per-wheel results, so that a rerun only reads new wheels")
    ap.add_argument("--jobs", type=int, default=3)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).resolve().parent.parent / "triage" / "catalogue" / "messages.json.gz")
    args = ap.parse_args()
    jobs = []  # (package, version, kind of source, path, cache file)
    for dist, version in [("vllm", v) for v in VLLM_RELEASES] + [(p, v) for p, vs in LIBRARIES.items() for v in vs]:
        whl = find_wheel(args.wheels, dist, version) or (download(args.wheels, dist, version) if args.download else None)
        if whl is None:
            print(f"skip {dist} {version}: no wheel", file=sys.stderr)
            continue
        package = {"flashinfer_python": "flashinfer", "deep_gemm": "deep_gemm"}.get(dist, dist)
        jobs.append((package, version, "wheel", str(whl), str(args.cache / f"{whl.name}.json")))
    for site in args.site:
        for package in ("torch", "numpy", "triton"):
            info = next(iter(sorted(site.glob(f"{package}-*.dist-info"))), None)
            if info is None or not (site / package).is_dir():
                continue
            version = info.name[len(package) + 1:-len(".dist-info")].split("+")[0]
            jobs.append((package, version, "tree", str(site), str(args.cache / f"{package}-{version}.json")))
    todo = [j for j in jobs if not Path(j[4]).exists()]
    if todo:  # parsing is the slow part: one process per wheel
        from multiprocessing import Pool

        with Pool(args.jobs) as pool:
            for done in pool.imap_unordered(_mine_job, todo):
                print(done, file=sys.stderr)
    cat = Catalogue()
    for package, version, _, _, cache in jobs:
        if package in cat.releases and version in cat.releases[package]:
            continue
        n = cat.add_release(package, version, [], Path(cache))
        print(f"{package} {version}: {n} messages", file=sys.stderr)
    data = cat.to_json()
    raw = serialise(data)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "wb") as fh:
        fh.write(gzip.compress(raw, 9, mtime=0))
    print(f"{len(data['entries'])} templates, {len(data['modules'])} modules; {len(raw)} bytes JSON, "
          f"{os.path.getsize(args.out)} bytes gzip -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
