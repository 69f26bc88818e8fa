#!/usr/bin/env python3
"""Regenerate triage/rules/model_types.txt: every `model_type` transformers knows (CONFIG_MAPPING_NAMES), read
from a transformers wheel's source without importing it.

    python scripts/model_types.py /path/to/transformers-X-py3-none-any.whl

A bare `KeyError: 'qwen2'` in a pasted log is CONFIG_MAPPING[model_type] failing in an older transformers; the
list tells such a key apart from any other KeyError.
"""

from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "triage" / "rules" / "model_types.txt"
SOURCES = ("transformers/models/auto/auto_mappings.py", "transformers/models/auto/configuration_auto.py")


def model_types(wheel: str) -> set[str]:
    names: set[str] = set()
    with zipfile.ZipFile(wheel) as zf:
        for src in SOURCES:
            if src not in zf.namelist():
                continue
            for node in ast.walk(ast.parse(zf.read(src))):
                targets = []
                if isinstance(node, ast.Assign):
                    targets = [getattr(t, "id", "") for t in node.targets]
                elif (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "update"
                      and getattr(node.func.value, "id", "") == "CONFIG_MAPPING_NAMES"):
                    targets = ["CONFIG_MAPPING_NAMES"]
                if "CONFIG_MAPPING_NAMES" not in targets:
                    continue
                for elt in ast.walk(node):
                    if (isinstance(elt, ast.Tuple) and len(elt.elts) == 2 and isinstance(elt.elts[0], ast.Constant)
                            and isinstance(elt.elts[0].value, str)):
                        names.add(elt.elts[0].value)
                    elif isinstance(elt, ast.Dict):
                        names.update(k.value for k in elt.keys if isinstance(k, ast.Constant) and isinstance(k.value, str))
    return names


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: model_types.py TRANSFORMERS_WHEEL", file=sys.stderr)
        return 2
    names = model_types(argv[0])
    if not names:
        print(f"no CONFIG_MAPPING_NAMES found in {argv[0]}", file=sys.stderr)
        return 1
    OUT.write_text("".join(n + "\n" for n in sorted(names)))
    print(f"{len(names)} model types -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
