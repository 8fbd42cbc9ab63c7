"""The epoch calls the strategies its run resolved (`genenv_engine.method.strategies`) instead of branching on study
settings: the modules `run_epoch`, its steps and the simulator's update live in read no setting named in
`VARIANT_FIELDS` and compare nothing on ``simulator.mode``; each setting resolves to its strategy by name."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

from genenv_engine.config import VARIANT_FIELDS, load_config
from genenv_engine.method import coevolution, loop, phases, simulator_update
from genenv_engine.method.strategies import REGISTRY, get, note_name, replay_name, resolve

CORE_MODULES = (coevolution, loop, phases, simulator_update)
"""The modules the epoch's method lives in."""


def _is_mode(node: ast.AST) -> bool:
    """``<anything>.simulator.mode``, or a name or attribute called ``mode`` (an alias of it)."""
    if isinstance(node, ast.Attribute) and node.attr == "mode":
        return True
    return isinstance(node, ast.Name) and node.id == "mode"


def study_branches(source: str) -> list[str]:
    """Every read of a setting named in `VARIANT_FIELDS` (an attribute, or ``getattr`` with its name) and
    every comparison or ``match`` on ``simulator.mode`` in ``source``, as ``line N: what``."""
    names = {dotted.rsplit(".", 1)[1] for dotted in VARIANT_FIELDS}
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in names:
            found.append(f"line {node.lineno}: reads .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in names
        ):
            found.append(f"line {node.lineno}: getattr {node.args[1].value}")
        elif (
            isinstance(node, ast.Attribute)
            and node.attr == "mode"
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "simulator"
        ):
            found.append(f"line {node.lineno}: reads simulator.mode")
        elif isinstance(node, ast.Compare) and any(_is_mode(side) for side in (node.left, *node.comparators)):
            found.append(f"line {node.lineno}: compares mode")
        elif isinstance(node, ast.Match) and _is_mode(node.subject):
            found.append(f"line {node.lineno}: matches mode")
    return found


@pytest.mark.parametrize("module", CORE_MODULES, ids=lambda m: m.__name__)
def test_the_epoch_reads_no_study_setting_and_never_branches_on_the_mode(module):
    assert study_branches(inspect.getsource(module)) == []


def test_run_epoch_lives_in_a_checked_module():
    assert inspect.getmodule(loop.run_epoch) is loop


@pytest.mark.parametrize(
    "snippet, want",
    [
        ("n = cfg.agent.base_pool", ["line 1: reads .base_pool"]),
        ("if cfg.simulator.mode == 'off':\n    pass", ["line 1: reads simulator.mode", "line 1: compares mode"]),
        (
            "mode = cfg.simulator.mode\nok = mode in ('off', 'static')",
            ["line 1: reads simulator.mode", "line 2: compares mode"],
        ),
        ("levels = getattr(cfg.agent, 'base_levels')", ["line 1: getattr base_levels"]),
        ("match mode:\n    case 'off':\n        pass", ["line 1: matches mode"]),
        ("x = s.simulator.seed_sampling == 'alpha'", ["line 1: reads .seed_sampling"]),
        ("fresh, batch_of, gens = plan.tasks.fresh(step)\nn = cfg.agent.replay_tasks", []),
    ],
)
def test_the_rule_catches_a_study_branch(snippet, want):
    assert sorted(study_branches(snippet)) == sorted(want)


def test_every_setting_resolves_to_its_named_strategy():
    cases = [
        ({}, ("TrainedSimulatorTasks", "UniformSeeds", "TrainReplay", "NoNote")),
        ({"simulator.mode": "frozen"}, ("SimulatorTasks", "UniformSeeds", "TrainReplay", "NoNote")),
        ({"simulator.mode": "static"}, ("StaticTasks", "UniformSeeds", "TrainReplay", "NoNote")),
        ({"simulator.mode": "off"}, ("NoTasks", "UniformSeeds", "TrainReplay", "NoNote")),
        ({"simulator.mode": "sampler"}, ("SamplerTasks", "UniformSeeds", "TrainReplay", "NoNote")),
        ({"simulator.seed_sampling": "alpha"}, ("TrainedSimulatorTasks", "AlphaSeeds", "TrainReplay", "NoNote")),
        ({"agent.base_levels": [3]}, ("TrainedSimulatorTasks", "UniformSeeds", "SubsetReplay", "NoNote")),
        ({"agent.base_pool": 5}, ("TrainedSimulatorTasks", "UniformSeeds", "SubsetReplay", "NoNote")),
        ({"agent.base_source": "unseen"}, ("TrainedSimulatorTasks", "UniformSeeds", "UnseenReplay", "NoNote")),
        ({"simulator.note": "steer"}, ("TrainedSimulatorTasks", "UniformSeeds", "TrainReplay", "SteerNote")),
    ]
    for overrides, want in cases:
        plan = resolve(load_config("micro", overrides=overrides))
        got = tuple(type(s).__name__ for s in (plan.tasks, plan.seeds, plan.replay, plan.note))
        assert got == want, overrides
    smol = load_config("smol-ablation")
    assert type(resolve(smol).note).__name__ == "SuccessLine"
    assert note_name(smol.with_overrides({"simulator.note": "fixed_line"})) == "fixed_line"
    assert replay_name(load_config("micro")) == "train"


def test_trained_is_the_only_task_source_that_trains_the_simulator():
    trains = {name: get("tasks", name).trains_simulator for name in ("trained", "frozen", "static", "off", "sampler")}
    assert trains == {"trained": True, "frozen": False, "static": False, "off": False, "sampler": False}
    assert {"none", "success_line", "steer", "fixed_line"} <= set(REGISTRY["note"])


def test_study_variants_live_in_the_lab_and_the_engines_variants_beside_the_method():
    for kind, names in {
        "seeds": ["alpha"],
        "note": ["steer", "fixed_line"],
    }.items():
        for name in names:
            assert get(kind, name).__module__ == "genenv_lab.strategies", (kind, name)
    for kind, names in {
        "tasks": ["sampler"],
        "replay": ["train_subset", "unseen"],
    }.items():
        for name in names:
            assert get(kind, name).__module__ == "genenv_engine.method.variants", (kind, name)
    for kind, names in {
        "tasks": ["trained", "frozen", "static", "off"],
        "seeds": ["uniform"],
        "replay": ["train"],
        "note": ["none", "success_line"],
    }.items():
        for name in names:
            assert get(kind, name).__module__ == "genenv_engine.method.strategies", (kind, name)


def test_the_core_modules_do_not_import_the_study_code():
    for module in (*CORE_MODULES, __import__("genenv_engine.method.strategies", fromlist=["x"])):
        tree = ast.parse(Path(module.__file__).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert not {m for m in imported if m.startswith(("genenv_lab", "genenv_engine.ablation"))}, module.__name__


def test_the_study_module_is_loaded_only_when_a_config_names_a_study_variant():
    code = (
        "import sys; from genenv_engine.config import load_config; "
        "from genenv_engine.method.strategies import resolve; "
        "resolve(load_config('tiny')); print('genenv_lab.strategies' in sys.modules); "
        "resolve(load_config('tiny', overrides={'simulator.seed_sampling': 'alpha'})); "
        "print('genenv_lab.strategies' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]


EXPERIMENTAL_SETTINGS = (
    "curriculum.filter",
    "curriculum.alpha_by_benchmark",
    "simulator.seed_levels",
    "simulator.seed_sampling",
    "simulator.seed_beta",
    "simulator.success_note",
    "simulator.steer",
    "simulator.steer_hold",
    "simulator.steer_relabel",
    "agent.base_levels",
    "agent.base_source",
    "agent.unseen_tasks",
    "agent.base_pool",
    "curriculum.sampler",
    "warm_start.agent_levels",
)
"""The study settings when the strategies took them out of the core: each is now a variant's setting, a method
setting (per-benchmark alpha), or retired through a rename (to a note strategy or the ``[study]`` table)."""
METHOD_NOW = ("curriculum.alpha_by_benchmark", "warm_start.agent_levels")
"""Settings of that list that became the method's own: per-benchmark alpha (documented for users' task families)
and the agent warm start's levels (a setting of the warm-start recipe, which the warm start reads)."""


def dropped(known: tuple[str, ...], kept: tuple[str, ...], renamed: dict[str, str]) -> list[str]:
    """The settings of ``known`` that left ``kept`` without a rename entry."""
    return [name for name in known if name not in kept and name not in renamed]


def test_a_study_setting_leaves_the_config_only_with_a_rename():
    from genenv_engine.config import RENAMED_SETTINGS

    assert dropped(EXPERIMENTAL_SETTINGS, VARIANT_FIELDS + METHOD_NOW, RENAMED_SETTINGS) == []
    assert dropped(("simulator.steer",), ("agent.base_pool",), {}) == ["simulator.steer"]
    assert dropped(("simulator.steer",), (), {"simulator.steer": "simulator.note"}) == []
    retired = [name for name in EXPERIMENTAL_SETTINGS if name in RENAMED_SETTINGS]
    assert retired == [
        "simulator.seed_beta",
        "simulator.success_note",
        "simulator.steer",
        "simulator.steer_hold",
        "simulator.steer_relabel",
    ]
    assert load_config("micro", overrides={"curriculum.alpha_by_benchmark": {"apibank": 0.4}})  # known, not enabled
