"""The loop stores what it stored before its strategies were named: one micro run per task source, seed sampler,
replay source and prompt note (`scripts/behaviour_fingerprint.py`), compared with the committed fingerprint of the
code before (``tests/engine/data/behaviour_fingerprint.json``): the same tasks, batches, rollouts and epoch
metrics."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BASELINE = Path(__file__).parent / "data" / "behaviour_fingerprint.json"


def _script():
    spec = importlib.util.spec_from_file_location("behaviour_fingerprint", ROOT / "scripts" / "behaviour_fingerprint.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _first_difference(want, got, where: str = "") -> str:
    """Where two JSON values first differ, as a path with both values."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                return _first_difference(want.get(key), got.get(key), f"{where}/{key}")
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got)):
            if a != b:
                return _first_difference(a, b, f"{where}[{i}]")
    return f"{where}: want {json.dumps(want)[:300]}, got {json.dumps(got)[:300]}"


@pytest.mark.slow
def test_every_strategy_stores_what_it_stored_before(tmp_path):
    script = _script()
    baseline = json.loads(BASELINE.read_text())
    assert sorted(baseline) == sorted(script.RUNS)
    got = script.fingerprint(root=tmp_path)
    for name, want in baseline.items():
        want.pop("seconds")
        mine = got[name]
        mine.pop("seconds")
        assert mine == want, f"{name} differs at {_first_difference(want, mine)}"
    # the runs exercise what they are named for
    assert {r[6] for r in baseline["static"]["tasks"]} == {"static"}
    assert baseline["off"]["tasks"] == [] and baseline["off"]["batches"] == []
    assert {r[7] for r in baseline["unseen"]["tasks"]} == {"unseen"}
    assert {json.loads(b[10])["steer"] for b in baseline["steer"]["batches"]} <= {"same", "harder", "easier"}
    assert "seed_level_weights" in baseline["alpha_seeds"]["metrics"]["2"]
    for sampler in ("uniform", "target", "schedule", "learnability", "controller"):
        assert baseline[f"sampler_{sampler}"]["metrics"]["1"]["sampler"] == sampler


def test_first_difference_names_the_path():
    assert _first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "/a[1]/b: want 2, got 3"
