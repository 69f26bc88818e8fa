"""Start-up is part of the product: no module that `triage --json` imports compiles a regex at import time.
Module-level patterns are triage.lazyre.lazy (compiled on first use); only the line readers' hot loops
(logread.scan, logread.select, catalogue.store, sanitize), whose few patterns run on every line, compile eagerly."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent / "triage"
EAGER_ALLOWED = {"logread/scan.py", "logread/select.py", "catalogue/store.py", "sanitize.py"}


def _module_level_compiles(path: Path) -> list[int]:
    found: list[int] = []

    def walk(node: ast.AST, in_def: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inside = in_def or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            f = getattr(child, "func", None)
            if not in_def and isinstance(child, ast.Call) and isinstance(f, ast.Attribute) and f.attr == "compile" \
                    and isinstance(f.value, ast.Name) and f.value.id == "re":
                found.append(child.lineno)
            walk(child, inside)

    walk(ast.parse(path.read_text()), False)
    return found


@pytest.mark.parametrize("path", sorted(p for p in ROOT.rglob("*.py")
                                        if p.relative_to(ROOT).as_posix() not in EAGER_ALLOWED),
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_regex_compiled_at_import(path):
    assert not _module_level_compiles(path), f"use triage.lazyre.lazy for module-level patterns (lines " \
                                             f"{_module_level_compiles(path)})"


def test_the_check_sees_a_module_level_compile(tmp_path):
    f = tmp_path / "m.py"
    f.write_text("import re\nA = re.compile('x')\nB = [re.compile('y')]\ndef f():\n    return re.compile('z')\n")
    assert _module_level_compiles(f) == [2, 3]
