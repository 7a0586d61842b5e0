"""The pure package `calculators` imports no measurement or UI machinery: no torch, pynvml,
sqlite3, subprocess or streamlit. Those belong to `measure/` and the pages, so the estimates
load fast, run anywhere and can be tested without a GPU.

Two checks. At run time, a fresh interpreter imports every calculators module and looks at
sys.modules; pandas itself imports subprocess (pandas._config.localization), so what the
declared third-party dependencies bring in is set apart first. In the source, no calculators
module names a forbidden module in an import statement, at any depth (a lazy import inside a
function counts too), which also covers subprocess.

The domain (every calculators module outside calculators.interface, and the entry point
calculators/__main__.py) imports neither the interface nor measure/ nor the UI, at any depth;
calculators.interface imports measure/ only inside the command functions that need it.
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


# what the domain packages may not import, beyond FORBIDDEN: the edges that depend on them
DOMAIN_FORBIDDEN = (*FORBIDDEN, "measure", "ui", "app_pages", "calculators.interface")
INTERFACE = ROOT / "calculators" / "interface"
ENTRY_POINT = ROOT / "calculators" / "__main__.py"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(tree: ast.AST, module: str, is_package: bool) -> list[tuple[int, str]]:
    """(line, dotted name) of every module an import statement in the tree names: relative imports
    resolved against `module`, and `from a import b` naming both a and a.b (b may be a module)."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")[: len(module.split(".")) - node.level + is_package]
                base = ".".join([*anchor, *([base] if base else [])])
            names.append((node.lineno, base))
            names += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
    return names


def names_any_of(name: str, modules: tuple[str, ...]) -> bool:
    return any(name == module or name.startswith(module + ".") for module in modules)


def domain_import_problems(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    found = imported_modules(tree, module_name(path), path.name == "__init__.py")
    return [f"{path.relative_to(ROOT)}:{line} imports {name}" for line, name in found
            if names_any_of(name, DOMAIN_FORBIDDEN)]  # fmt: skip


def test_no_domain_module_imports_the_interface_measure_or_the_ui():
    domain = [
        path
        for path in sorted((ROOT / "calculators").rglob("*.py"))
        if INTERFACE not in path.parents and path != ENTRY_POINT
    ]
    assert any(path.name == "build.py" for path in domain) and not any(INTERFACE in p.parents for p in domain)
    assert [problem for path in domain for problem in domain_import_problems(path)] == []


def module_level_imports(tree: ast.Module) -> list[ast.stmt]:
    """Import statements that run when the module is imported: anywhere but inside a function."""
    found, pending = [], list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        pending += list(ast.iter_child_nodes(node))
    return found


def eager_measure_imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    module = ast.Module(body=module_level_imports(tree), type_ignores=[])
    found = imported_modules(module, module_name(path), path.name == "__init__.py")
    return [f"{path.relative_to(ROOT)}:{line} imports {name}" for line, name in found
            if names_any_of(name, ("measure",))]  # fmt: skip


def test_the_interface_imports_measure_only_inside_functions():
    interface = sorted(INTERFACE.rglob("*.py"))
    assert any(path.name == "cli.py" for path in interface)
    assert [problem for path in interface for problem in eager_measure_imports(path)] == []


# The domain packages in the order a question flows through them (ARCHITECTURE.md): each may
# import only the packages before it, so the folder tree reads as the architecture and no
# package reaches into one that builds on it.
LAYERS = ("hardware", "models", "workload", "memory", "timing", "cost", "plan", "validation")


def package_of(module: str) -> str | None:
    """The calculators package a dotted module name belongs to, or None outside calculators."""
    parts = module.split(".")
    return parts[1] if parts[0] == "calculators" and len(parts) > 1 else None


def layering_problems(path: Path, source: str | None = None) -> list[str]:
    """Imports of `path` (a module of one of LAYERS; its text, or `source`) that name a package
    later in LAYERS."""
    own = package_of(module_name(path))
    tree = ast.parse(path.read_text() if source is None else source, str(path))
    found = imported_modules(tree, module_name(path), path.name == "__init__.py")
    later = LAYERS[LAYERS.index(own) + 1 :]
    return [f"{path.relative_to(ROOT)}:{line} imports {name}" for line, name in found if package_of(name) in later]


def test_each_domain_package_imports_only_the_packages_before_it():
    packages = {path.name for path in (ROOT / "calculators").iterdir() if (path / "__init__.py").exists()}
    assert packages == {*LAYERS, "interface"}  # a new package takes its place in LAYERS
    problems = [
        problem
        for layer in LAYERS
        for path in sorted((ROOT / "calculators" / layer).rglob("*.py"))
        for problem in layering_problems(path)
    ]
    assert problems == []


def test_the_layering_check_sees_an_import_of_a_later_package(tmp_path):
    """The check itself: a workload module importing the memory engine is named."""
    probe = ROOT / "calculators" / "workload" / "probe.py"  # never written: its text is given
    assert layering_problems(probe, "from calculators.memory.engine import estimate_memory\n") == [
        "calculators/workload/probe.py:1 imports calculators.memory.engine",
        "calculators/workload/probe.py:1 imports calculators.memory.engine.estimate_memory",
    ]
    assert layering_problems(probe, "from calculators.models.spec import ModelSpec\n") == []
