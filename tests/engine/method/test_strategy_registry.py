"""The strategies' seams: `Strategies` typed by a Protocol per kind, a name registered once (a second factory under it
raises, the same one again, as a reloaded module registers it, does not), plugins found through the
``genenv.strategies`` entry points (a broken one named in one line), and `run_epoch` calling Algorithm 1's steps in
order through the co-evolution core, with the run's strategies passed, never resolved again."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import sys
import textwrap
import typing
import warnings
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from genenv_engine.method import coevolution, loop, protocols, strategies
from genenv_engine.method.strategies import REGISTRY, DuplicateStrategy, NoNote, Strategies, get, register

PACKAGE = Path(strategies.__file__).parents[1]


@pytest.fixture
def registry():
    """The registry as it was, restored after the test."""
    saved = {kind: dict(names) for kind, names in REGISTRY.items()}
    yield REGISTRY
    for kind, names in saved.items():
        REGISTRY[kind].clear()
        REGISTRY[kind].update(names)


def test_strategies_are_typed_by_a_protocol_per_kind():
    hints = typing.get_type_hints(Strategies, vars(protocols))
    assert hints == {
        "tasks": protocols.TaskSource,
        "seeds": protocols.SeedSampler,
        "replay": protocols.ReplaySource,
        "note": protocols.PromptNote,
        "reward": protocols.SimulatorReward,
    }
    assert all(typing.Protocol in hint.__mro__ for hint in hints.values())


def test_a_second_factory_under_a_taken_name_raises_naming_both(registry):
    class Shout(NoNote):
        pass

    with pytest.raises(DuplicateStrategy) as raised:
        register("note", "whisper", "none")(Shout)
    message = str(raised.value)
    assert "note strategy 'none'" in message
    assert "genenv_engine.method.strategies.NoNote" in message and "Shout" in message
    assert "whisper" not in registry["note"] and registry["note"]["none"] is NoNote  # nothing registered


def test_the_same_factory_again_is_allowed(registry):
    assert register("note", "none")(NoNote) is NoNote
    assert register("note", "none", "quiet")(NoNote) is NoNote
    assert registry["note"]["quiet"] is NoNote


PLUGIN = """
from genenv_engine.method.strategies import NoNote, register


@register("note", "plugin-note")
class PluginNote(NoNote):
    pass


@register("note", "plugin-fn")
def plugin_note(config):
    return PluginNote(config)
"""


def test_a_reloaded_or_twice_imported_module_registers_again_without_error(registry, tmp_path, monkeypatch):
    (tmp_path / "genenv_test_plugin.py").write_text(textwrap.dedent(PLUGIN))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("genenv_test_plugin")
    try:
        first = registry["note"]["plugin-note"]
        again = importlib.reload(module)  # new class objects, the same definitions
        assert registry["note"]["plugin-note"] is again.PluginNote is not first
        spec = importlib.util.spec_from_file_location("another_name", tmp_path / "genenv_test_plugin.py")
        twin = importlib.util.module_from_spec(spec)
        sys.modules["another_name"] = twin
        spec.loader.exec_module(twin)  # the same file under a second name
        assert registry["note"]["plugin-fn"] is twin.plugin_note
    finally:
        sys.modules.pop("genenv_test_plugin", None)
        sys.modules.pop("another_name", None)


def test_a_broken_entry_point_is_one_line_and_the_lookup_names_it(registry, monkeypatch):
    broken = EntryPoint("broken", "genenv_no_such_module_here", strategies.GROUP)
    monkeypatch.setattr(strategies, "entry_points", lambda group: [broken] if group == strategies.GROUP else [])
    strategies.load_plugins.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(KeyError) as raised:
                get("note", "shout")
        lines = [str(w.message) for w in caught]
        assert len(lines) == 1 and "\n" not in lines[0]
        assert "'broken'" in lines[0] and "genenv_no_such_module_here" in lines[0] and "ModuleNotFoundError" in lines[0]
        assert "'broken'" in str(raised.value)
        with pytest.raises(KeyError):
            get("note", "shout")
        assert len(caught) == 1  # loaded once per process
    finally:
        strategies.load_plugins.cache_clear()


def test_plugins_are_found_by_their_entry_points_not_by_a_module_name():
    targets = {e.value for e in strategies.entry_points(group=strategies.GROUP)}
    assert targets and all(importlib.util.find_spec(target) for target in targets)
    assert "import_module" not in inspect.getsource(strategies)


def names_used(function) -> list[str]:
    """The names ``function`` calls or passes as an argument, in the order Python evaluates them (``f(x)`` and
    ``o.f(x)`` give ``f``; ``g(f(x))``: ``f`` then ``g``; ``g(h)``: ``h`` then ``g``)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            found.append((node.end_lineno, node.end_col_offset, ast.unparse(node.func).split(".")[-1]))
            found += [(a.end_lineno, a.end_col_offset, a.id) for a in node.args if isinstance(a, ast.Name)]
    return [name for *_, name in sorted(found)]


def test_run_epoch_calls_the_steps_of_algorithm_1_in_order():
    core = coevolution.CoEvolution
    steps = ["generate", "validate", "training_tasks"]
    assert [c for c in names_used(core.begin_epoch) if c in steps] == steps
    steps = ["begin_epoch", "rollout", "record_attempts", "grpo", "end_epoch"]  # the native update, passed to the core
    assert [c for c in names_used(loop.run_epoch) if c in steps] == steps
    steps = ["score", "update_agent", "update_simulator", "heldout", "checkpoint"]
    assert [c for c in names_used(core.end_epoch) if c in steps] == steps


def resolved_again(source: str) -> list[int]:
    """The lines of ``source`` that resolve the strategies as a default (``x or resolve(...)``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.BoolOp)
        and isinstance(node.op, ast.Or)
        and any(
            isinstance(v, ast.Call) and getattr(v.func, "id", getattr(v.func, "attr", None)) == "resolve"
            for v in node.values
        )
    ]


def test_the_resolved_plan_is_always_passed_never_defaulted():
    assert resolved_again("plan = plan or resolve(cfg)\nx = (p or strategies.resolve(c)).replay") == [1, 2]
    for folder in ("method", "training"):
        for path in sorted((PACKAGE / folder).rglob("*.py")):
            assert resolved_again(path.read_text()) == [], path
