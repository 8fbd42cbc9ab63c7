"""The layout of the engine: no import cycle among all of its modules, and in ``genenv_engine/environments`` one
subpackage per benchmark beside ``base`` and the registry, the registry pointing at those packages.

Imports are read from the source (every ``import``, at module level or inside a function), so a lazy import
that closes a cycle counts too; only imports under ``if TYPE_CHECKING:`` are left out (they never run). The
direction of the imports (which layer may import which) is the import-linter ``layers`` contract in
pyproject.toml.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from import_graph import cycles, import_graph, imports_of, module_files

import genenv_engine
import genenv_engine.environments as environments
from genenv_engine.environments import ADAPTERS, BENCHMARKS

ROOT = Path(environments.__file__).parent
PACKAGE = environments.__name__
ENGINE_ROOT = Path(genenv_engine.__file__).parent
SHARED = {"__init__.py", "base.py", "drafts.py", "plugin_worker.py", "sandbox.py", "seccomp.py"}
"""The only modules directly in ``environments/``: the registry, the shared interface and the parsing and step-task
records benchmarks share, the worker process that
runs third-party environment code under a time limit, and the contained worker (and its seccomp filter) that runs
untrusted scoring code."""


def test_only_the_registry_base_and_plugin_worker_lie_outside_a_benchmark_subpackage():
    loose = {p.name for p in ROOT.glob("*.py")}
    assert loose == SHARED
    for folder in (p for p in ROOT.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(ROOT)} is not a package"


def test_every_benchmark_subpackage_is_registered_and_exposes_its_class():
    registered = {name: spec.partition(":") for name, spec in BENCHMARKS.items()}
    for name, (module, _, cls) in registered.items():
        path = module_files(ROOT, PACKAGE).get(module)
        assert path is not None and path.name == "__init__.py", f"{name}: {module} is not a benchmark package"
        package = importlib.import_module(module)
        assert cls in package.__all__ and getattr(package, cls).name == name
    tops = {p.name for p in ROOT.iterdir() if (p / "__init__.py").is_file()}
    adapters = {target.split(".")[2] for target in ADAPTERS.values() if target}  # rg: -> reasoning_gym
    assert tops == {module.split(".")[2] for module, _, _ in registered.values()} | adapters


def test_environment_modules_have_no_import_cycle():
    graph = import_graph(ROOT, PACKAGE)
    assert sum(map(len, graph.values())) > 50  # the reader sees the real imports
    assert cycles(graph) == []


def test_engine_modules_have_no_import_cycle():
    graph = import_graph(ENGINE_ROOT, genenv_engine.__name__)
    assert len(graph) > 80 and sum(map(len, graph.values())) > 250  # the reader sees the whole engine
    assert cycles(graph) == []


@pytest.mark.parametrize(
    "graph, expected",
    [({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]), ({"a": {"b"}, "b": set()}, [])],
)
def test_the_cycle_finder_itself(graph, expected):
    assert cycles(graph) == expected


def test_the_import_reader_sees_a_lazy_import(tmp_path):
    lazy = tmp_path / "m.py"
    lazy.write_text("def f():\n    from pkg.sub import thing\n    import pkg.other\n", encoding="utf-8")
    modules = {"pkg.m": lazy, "pkg.sub": lazy, "pkg.sub.thing": lazy, "pkg.other": lazy}
    assert imports_of("pkg.m", lazy, modules) == {"pkg.sub.thing", "pkg.other"}


def test_the_import_reader_skips_type_checking_imports(tmp_path):
    hinted = tmp_path / "m.py"
    hinted.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.sub import thing\n"
        "else:\n    import pkg.other\n",
        encoding="utf-8",
    )
    modules = {"pkg.m": hinted, "pkg.sub": hinted, "pkg.other": hinted}
    assert imports_of("pkg.m", hinted, modules) == {"pkg.other"}


def test_the_import_reader_names_the_module_a_from_import_comes_from(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("from pkg.sub import helper\n", encoding="utf-8")
    assert imports_of("pkg.m", src, {"pkg.m": src, "pkg.sub": src}) == {"pkg.sub"}
