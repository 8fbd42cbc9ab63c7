"""The loop stores what it stored before its strategies were named: one micro run per task source, seed sampler,
replay source and prompt note (`scripts/behaviour_fingerprint.py`), compared with the committed fingerprint of the
code before (``tests/engine/data/behaviour_fingerprint.json``): the same tasks, batches, rollouts and epoch
metrics. The sampler runs are the sessions ``test_samplers.py`` makes; that file compares them."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BASELINE = Path(__file__).parents[1] / "data" / "behaviour_fingerprint.json"
SCRIPT = ROOT / "scripts" / "behaviour_fingerprint.py"


def script():
    """``scripts/behaviour_fingerprint.py`` as a module."""
    spec = importlib.util.spec_from_file_location("behaviour_fingerprint", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def baseline() -> dict:
    """The committed fingerprint of the code before."""
    return json.loads(BASELINE.read_text())


@pytest.mark.slow
def test_every_strategy_stores_what_it_stored_before(tmp_path):
    fingerprint, before = script(), baseline()
    assert sorted(before) == sorted(fingerprint.RUNS)
    names = [name for name in fingerprint.RUNS if not name.startswith("sampler_")]
    got = fingerprint.fingerprint(names, root=tmp_path)
    for name in names:
        want, mine = before[name], got[name]
        want.pop("seconds"), mine.pop("seconds")
        assert mine == want, f"{name} differs at {fingerprint.first_difference(want, mine)}"
    # the runs exercise what they are named for
    assert {r[6] for r in before["static"]["tasks"]} == {"static"}
    assert before["off"]["tasks"] == [] and before["off"]["batches"] == []
    assert {r[7] for r in before["unseen"]["tasks"]} == {"unseen"}
    assert {json.loads(b[10])["steer"] for b in before["steer"]["batches"]} <= {"same", "harder", "easier"}
    assert "seed_level_weights" in before["alpha_seeds"]["metrics"]["2"]
    for sampler in ("uniform", "target", "schedule", "learnability", "controller"):
        assert before[f"sampler_{sampler}"]["metrics"]["1"]["sampler"] == sampler


def test_first_difference_names_the_path():
    assert script().first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "/a[1]/b: want 2, got 3"
