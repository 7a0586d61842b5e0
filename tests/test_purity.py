"""The pure package `calculators` imports no measurement or UI machinery: no torch, pynvml,
sqlite3, subprocess or streamlit. Those belong to `measure/` and the pages, so the estimates
load fast, run anywhere and can be tested without a GPU.

Two checks. At run time, a fresh interpreter imports every calculators module and looks at
sys.modules; pandas itself imports subprocess (pandas._config.localization), so what the
declared third-party dependencies bring in is set apart first. In the source, no calculators
module names a forbidden module in an import statement, at any depth (a lazy import inside a
function counts too), which also covers subprocess.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = ("torch", "pynvml", "sqlite3", "subprocess", "streamlit")
DEPENDENCIES = ("pandas", "pydantic", "numpy")  # what calculators may import from outside the standard library

IMPORT_EVERYTHING = f"""
import importlib, json, pkgutil, sys
forbidden = {FORBIDDEN!r}
for dependency in {DEPENDENCIES!r}:
    importlib.import_module(dependency)
from_dependencies = [name for name in forbidden if name in sys.modules]
import calculators
found = pkgutil.walk_packages(calculators.__path__, "calculators.")
modules = [module.name for module in found if module.name != "calculators.__main__"]
for name in modules:
    importlib.import_module(name)
print(json.dumps({{
    "modules": modules,
    "from_dependencies": from_dependencies,
    "loaded": [name for name in forbidden if name in sys.modules],
}}))
"""


def test_importing_every_calculators_module_loads_no_forbidden_module():
    done = subprocess.run(
        [sys.executable, "-c", IMPORT_EVERYTHING], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True
    )
    found = json.loads(done.stdout)
    assert "calculators.memory" in found["modules"] and "calculators.interface.cli" in found["modules"]
    assert set(found["from_dependencies"]) <= {"subprocess"}, found  # pandas's own import, nothing heavier
    added_by_calculators = set(found["loaded"]) - set(found["from_dependencies"])
    assert added_by_calculators == set()


def imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, top-level module name) of every import statement in the tree."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append((node.lineno, node.module.split(".")[0]))
    return names


def test_no_calculators_source_imports_a_forbidden_module():
    offending = [
        f"{path.relative_to(ROOT)}:{line} imports {name}"
        for path in sorted((ROOT / "calculators").rglob("*.py"))
        for line, name in imported_names(ast.parse(path.read_text(), str(path)))
        if name in FORBIDDEN
    ]
    assert offending == []
