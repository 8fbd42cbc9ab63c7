"""The layout of the console: no import cycle among its modules, screens that open each other only through the app.

Imports are read from the source (every ``import``, at module level or inside a function), so a deferred import
that closes a cycle counts too; only imports under ``if TYPE_CHECKING:`` are left out (they never run). The
direction of the imports (which layer may import which) is the console's import-linter ``layers`` contract in
pyproject.toml.
"""

from __future__ import annotations

import ast
import graphlib
from pathlib import Path

import pytest

import genenv_console

ROOT = Path(genenv_console.__file__).parent
PACKAGE = genenv_console.__name__


def module_files(root: Path = ROOT, package: str = PACKAGE) -> dict[str, Path]:
    """Every module under ``root`` by dotted name (a package by its own name, from its ``__init__.py``)."""
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        modules[".".join((package, *parts))] = path
    return modules


def _run_time_nodes(tree: ast.AST):
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks (their ``else`` is kept)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(name: str, source: str, modules: dict[str, Path], is_package: bool = False) -> set[str]:
    """The modules of ``modules`` that module ``name`` (whose text is ``source``) imports anywhere at run time
    (``from P import m`` names ``P.m``; ``from P.m import f`` names ``P.m``, or the nearest enclosing module).

    >>> mods = dict.fromkeys(["c", "c.a", "c.s", "c.s.x"])
    >>> sorted(imports_of("c.a", "def f():\\n    from c.s import x\\nfrom typing import TYPE_CHECKING\\n"
    ...                   "if TYPE_CHECKING:\\n    import c.s\\n", mods))
    ['c.s.x']
    >>> sorted(imports_of("c.s.x", "from . import x\\nfrom ..a import f", mods))
    ['c.a']
    """
    package = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in _run_time_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = package.split(".")
            anchor = parts[:len(parts) - node.level + 1] if node.level else []
            base = ".".join(anchor + ([node.module] if node.module else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name and target != name.split(".")[0]:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    """Each console module's run-time imports of other console modules."""
    modules = module_files()
    return {name: imports_of(name, path.read_text(encoding="utf-8"), modules, path.name == "__init__.py")
            for name, path in modules.items()}


def cycle_of(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules in import order, the first repeated at the end), or [] for none.

    >>> cycle_of({"a": {"b"}, "b": {"c"}, "c": set()}), len(cycle_of({"a": {"b"}, "b": {"a"}}))
    ([], 3)
    """
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        return list(exc.args[1])
    return []


def test_the_reader_sees_imports_made_inside_functions():
    graph = import_graph()
    assert "genenv_console.__main__" in graph["genenv_console.bench"]  # imported inside a function
    assert "genenv_console.screens.funnel" in graph["genenv_console.screens.dashboard"]  # the same
    assert "genenv_console.screens.base" in graph["genenv_console.screens.batch"]
    assert not any(name.startswith("genenv_engine") for deps in graph.values() for name in deps)


def test_the_console_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 30
    assert cycle_of(graph) == []


@pytest.mark.parametrize("screen", ["batch", "drill", "lineage"])
def test_the_drill_screens_open_each_other_only_through_the_app(screen):
    """A drill screen posts a request (`OpenBatch`, `OpenDrill`, `OpenLineage`, `OpenTask`); the app pushes the
    screen, so no drill screen imports another."""
    others = {f"{PACKAGE}.screens.{name}" for name in ("batch", "drill", "lineage") if name != screen}
    assert import_graph()[f"{PACKAGE}.screens.{screen}"] & others == set()
