"""Run the console modules' doctests (the pytest testpaths collect the engine's doctests, not the console's)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "genenv_console.state",
    "genenv_console.data",
    "genenv_console.latency",
    "genenv_console.widgets.status_bar",
    "genenv_console.safe",
    "genenv_console.compare",
    "genenv_console.compare_funnel",
    "genenv_console.screens.drill",
    "genenv_console.screens.funnel",
    "genenv_console.screens.batch",
    "genenv_console.screens.lineage",
    "genenv_console.screens.base",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0 and result.failed == 0
