"""The layout of ``genenv_engine/environments``: one subpackage per benchmark beside ``base`` and the registry,
the registry pointing at those packages, and no import cycle among the environment modules.

Imports are read from the source (every ``import``, at module level or inside a function), so a lazy import
that closes a cycle counts too.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import genenv_engine.environments as environments
from genenv_engine.environments import BENCHMARKS

ROOT = Path(environments.__file__).parent
PACKAGE = environments.__name__
SHARED = {"__init__.py", "base.py"}
"""The only modules directly in ``environments/``: the registry and the shared interface."""


def module_files() -> dict[str, Path]:
    """Every environment module by dotted name (a package by its own name, from its ``__init__.py``)."""
    modules = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        modules[".".join((PACKAGE, *parts))] = path
    return modules


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The environment modules ``name`` imports anywhere in its source (``from P import m`` names ``P.m``)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            anchor = parts[:len(parts) - node.level + 1] if node.level else []
            base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        found.update(t for t in targets if t in modules and t != name)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_only_the_registry_and_base_lie_outside_a_benchmark_subpackage():
    loose = {p.name for p in ROOT.glob("*.py")}
    assert loose == SHARED
    for folder in (p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} is not a package"


def test_every_benchmark_subpackage_is_registered_and_exposes_its_class():
    registered = {name: spec.partition(":") for name, spec in BENCHMARKS.items()}
    for name, (module, _, cls) in registered.items():
        path = module_files().get(module)
        assert path is not None and path.name == "__init__.py", f"{name}: {module} is not a benchmark package"
        package = importlib.import_module(module)
        assert cls in package.__all__ and getattr(package, cls).name == name
    tops = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    assert tops == {module.split(".")[2] for module, _, _ in registered.values()}


def test_environment_modules_have_no_import_cycle():
    modules = module_files()
    graph = {name: imports_of(name, path, modules) for name, path in modules.items()}
    assert sum(map(len, graph.values())) > 50  # the reader sees the real imports
    assert cycles(graph) == []


@pytest.mark.parametrize("graph, expected", [
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_the_cycle_finder_itself(graph, expected):
    assert cycles(graph) == expected


def test_the_import_reader_sees_a_lazy_import(tmp_path):
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from pkg.sub import thing\n    import pkg.other\n", encoding="utf-8")
    modules = {"pkg.m": lazy, "pkg.sub": lazy, "pkg.sub.thing": lazy, "pkg.other": lazy}
    assert imports_of("pkg.m", lazy, modules) == {"pkg.sub.thing", "pkg.other"}
