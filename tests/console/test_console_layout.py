"""The layout of the console: no import cycle among its modules, screens that open each other only through the app.

Imports are read from the source (every ``import``, at module level or inside a function), so a deferred import
that closes a cycle counts too; only imports under ``if TYPE_CHECKING:`` are left out (they never run). The
direction of the imports (which layer may import which) is the console's import-linter ``layers`` contract in
pyproject.toml.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from import_graph import cycles, import_graph

import genenv_console

ROOT = Path(genenv_console.__file__).parent
PACKAGE = genenv_console.__name__


def console_graph() -> dict[str, set[str]]:
    """Each console module's run-time imports of other console modules."""
    return import_graph(ROOT, PACKAGE)


def test_the_reader_sees_imports_made_inside_functions():
    graph = console_graph()
    assert "genenv_console.__main__" in graph["genenv_console.measure"]  # imported inside a function
    assert "genenv_console.screens.funnel" in graph["genenv_console.screens.dashboard"]  # the same
    assert "genenv_console.screens.base" in graph["genenv_console.screens.batch"]
    assert not any(name.startswith("genenv_engine") for deps in graph.values() for name in deps)


def test_the_console_has_no_import_cycle():
    graph = console_graph()
    assert len(graph) > 30
    assert cycles(graph) == []


@pytest.mark.parametrize("screen", ["batch", "drill", "lineage"])
def test_the_drill_screens_open_each_other_only_through_the_app(screen):
    """A drill screen posts a request (`OpenBatch`, `OpenDrill`, `OpenLineage`, `OpenTask`); the app pushes the
    screen, so no drill screen imports another."""
    others = {f"{PACKAGE}.screens.{name}" for name in ("batch", "drill", "lineage") if name != screen}
    assert console_graph()[f"{PACKAGE}.screens.{screen}"] & others == set()
