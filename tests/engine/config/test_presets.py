"""Preset tests: every built-in preset builds the config its snapshot records (tests/fixtures/presets, written
before presets extended each other; since then only moved, value for value, as the Ray settings went into ``[ray]``
and the runtime settings into ``[runtime]``, and retired at their defaults, as the success note's switches became
``simulator.note`` and the study settings the ``[study]`` table; changed only where a faster setting became the
default: the fused training forward and the static decode, and SFT length groups in the ``smol`` family's warm
start), each experiment preset holds only what it changes over the preset it extends, and the dataclass defaults
are the ``tiny`` preset."""

from __future__ import annotations

import dataclasses
import json
import tomllib
from pathlib import Path

import pytest

from genenv_engine.config import (
    PRESET_DIR,
    AgentConfig,
    CurriculumConfig,
    ModelConfig,
    RayConfig,
    RunConfig,
    RuntimeConfig,
    SimulatorConfig,
    VLLMConfig,
    WarmStartConfig,
    load_config,
    preset_names,
)

SNAPSHOTS = Path(__file__).parents[2] / "fixtures" / "presets"
SNAPSHOT_NAMES = sorted(p.stem for p in SNAPSHOTS.glob("*.json"))

MAX_KEYS = 23
"""Most settings an experiment preset holds over the one it extends: ``smol``, another model family over tiny
(its model, its warm start, the instruct simulator prompt and its agent's update)."""


def plain(value):
    """A config as JSON would hold it: tuples become lists."""
    return json.loads(json.dumps(value, default=list))


def built(name: str) -> dict:
    return plain(dataclasses.asdict(load_config(name)))


def snapshot(name: str) -> dict:
    """The snapshot of preset ``name``."""
    return json.loads((SNAPSHOTS / f"{name}.json").read_text())


def leaves(table: dict, prefix: str = "") -> dict:
    """A preset file's settings as dotted keys (``extends`` left out)."""
    out = {}
    for key, value in table.items():
        if key == "extends":
            continue
        if isinstance(value, dict) and key not in ("data_dirs", "alpha_by_benchmark"):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def at(config: dict, dotted: str):
    for part in dotted.split("."):
        config = config[part]
    return config


def preset_file(name: str) -> dict:
    return tomllib.loads((PRESET_DIR / f"{name}.toml").read_text())


def test_every_preset_has_a_snapshot_and_every_snapshot_a_preset():
    assert SNAPSHOT_NAMES and set(preset_names()) == set(SNAPSHOT_NAMES)


@pytest.mark.parametrize("name", SNAPSHOT_NAMES)
def test_preset_builds_its_snapshot_field_for_field(name):
    got, want = built(name), snapshot(name)
    assert set(got) == set(want)
    for section in want:
        assert got[section] == want[section], section


def test_every_renamed_key_names_a_setting_of_the_snapshots():
    """Each key of an earlier version is read as a setting today's config has (the snapshots list every one)."""
    from genenv_engine.config import RENAMED_SETTINGS, study_keys
    from genenv_engine.method.strategies import load_plugins

    load_plugins()  # the study settings are registered by the package that reads them
    tiny = snapshot("tiny")
    for old, new in RENAMED_SETTINGS.items():
        section, leaf = new.split(".")
        if section == "study":  # the study part: a registered setting, absent from a preset's empty table
            assert leaf in study_keys() and tiny["study"] == {}, (old, new)
            continue
        assert leaf in tiny[section] and not isinstance(tiny[section][leaf], dict), (old, new)


def test_dataclass_defaults_are_the_tiny_preset():
    tiny = load_config("tiny")
    assert RunConfig() == tiny
    for cls, section in (
        (ModelConfig, tiny.model),
        (WarmStartConfig, tiny.warm_start),
        (SimulatorConfig, tiny.simulator),
        (AgentConfig, tiny.agent),
        (CurriculumConfig, tiny.curriculum),
        (RuntimeConfig, tiny.runtime),
        (VLLMConfig, tiny.vllm),
        (RayConfig, tiny.ray),
    ):
        assert cls() == section, cls.__name__


def test_tiny_sets_nothing():
    assert leaves(preset_file("tiny")) == {}


@pytest.mark.parametrize("name", [n for n in SNAPSHOT_NAMES if n != "tiny"])
def test_experiment_preset_extends_another_and_holds_only_its_changes(name):
    data = preset_file(name)
    parent = data.get("extends")
    assert parent in preset_names() and parent != name
    keys = leaves(data)
    assert 0 < len(keys) <= MAX_KEYS
    inherited = built(parent)
    repeated = [key for key, value in keys.items() if plain(value) == at(inherited, key)]
    assert not repeated, f"{name} repeats what it inherits from {parent}: {repeated}"
