"""Run records (`genenv_engine.ablation.run_records`): a finished ablation bench's runs as small JSON files that
stand in for
their session folders on another machine: read back into the same tables, never re-run, compared with new arms
on the same held-out tasks, re-scored only where they carry it, refused when they are another run's."""

from __future__ import annotations

import json
import shutil

import pytest

from genenv_engine.ablation.arms import Plan
from genenv_engine.ablation.bench import run_plan
from genenv_engine.ablation.tables import collect
from genenv_engine.config import ConfigError
from genenv_engine.storage.session import Session
from genenv_engine.training.warmstart.training import built_on

EQUAL = {"agent.tasks_per_epoch": 24, "agent.steps_per_epoch": 3}


def _plan(out, arms, records=None, **sets):
    return Plan(out, arms, (0,), 2, "micro", None, None, {**EQUAL, **sets}, records)


def _public(runs):
    return {
        arm: {s: {k: v for k, v in run.items() if k != "recorded"} for s, run in by.items()} for arm, by in runs.items()
    }


def test_records_stand_in_for_their_sessions_elsewhere(tmp_path):
    here = _plan(tmp_path / "here", ("trained", "off"))
    results = run_plan(here, quiet=True)
    rescored = collect(here.out, here.arms, here.seeds, rescore=30, records=here.records_folder())
    path = here.records_folder() / "off-s0.json"
    record = json.loads(path.read_text())
    assert record["version"] == 1 and path.stat().st_size < 60_000  # small enough to commit
    zero = {}
    for arm in ("off", "trained"):
        session = Session.open(here.out / f"{arm}-s0")
        zero[arm] = [m for m in session.store.epoch_metrics() if m["epoch"] == 0][0]
        session.store.close()
    session = Session.open(here.out / "off-s0")
    stored = {str(m["epoch"]): m["heldout_correct"] for m in session.store.epoch_metrics() if m["status"] == "done"}
    session.store.close()
    assert record["correct"] == stored  # every epoch's per-task results, as the database holds them
    # the warm start each arm started from: its key, the epoch-0 fingerprint of each role the arm uses, and the
    # machine that trained it
    machine = zero["off"]["warm_start"]["built_on"]
    assert machine == built_on()
    assert record["warm_start"] == {
        "key": zero["off"]["warm_start"]["key"],
        "built_on": machine,
        "fingerprints": {"agent": zero["off"]["agent_fingerprint"]},
    }
    trained = json.loads((here.records_folder() / "trained-s0.json").read_text())
    assert trained["warm_start"] == {
        "key": zero["off"]["warm_start"]["key"],
        "built_on": machine,
        "fingerprints": {
            "agent": zero["trained"]["agent_fingerprint"],
            "simulator": zero["trained"]["simulator_fingerprint"],
        },
    }
    assert record["heldout_split"] == {"bfcl": 400} and record["heldout_size"] == 24
    assert results["warm_start_mismatches"] == []  # one seed, one cached warm start: nothing to flag
    assert set(record["rescored"]["30"]) == {"0", "2"} and len(record["rescored"]["30"]["2"]["bfcl"]) == 30

    committed = tmp_path / "committed"  # what a later session finds in git: the records, no session folders
    shutil.copytree(here.records_folder(), committed)
    there = _plan(tmp_path / "there", ("trained", "off"), records=committed)
    again = run_plan(there, quiet=True)
    assert not (there.out / "off-s0").exists() and not (there.out / "trained-s0").exists()  # nothing re-run
    assert _public(again["runs"]) == _public(results["runs"])
    assert again["summary"] == results["summary"] and again["budget"] == results["budget"]
    assert again["runs"]["off"]["0"]["recorded"] == str(committed / "off-s0.json")
    assert "Read from run records" in (there.out / "ablation.md").read_text()
    assert collect(there.out, there.arms, there.seeds, rescore=30, records=committed)["summary"] == rescored["summary"]
    with pytest.raises(ConfigError, match="re-scored on 40 tasks"):
        collect(there.out, there.arms, there.seeds, rescore=40, records=committed)

    # a new arm run next to recorded ones is compared with them on the same held-out tasks
    mixed = run_plan(_plan(tmp_path / "there", ("off", "unseen"), records=committed), quiet=True)
    assert (there.out / "unseen-s0" / "config.toml").exists() and (committed / "unseen-s0.json").exists()
    (vs,) = mixed["summary"]["_versus"]
    final = {arm: mixed["runs"][arm]["0"]["epochs"][-1]["heldout"]["bfcl"] for arm in ("unseen", "off")}
    assert (vs["a"], vs["b"]) == ("unseen", "off")
    # the new arm starts from the same warm start as the recorded one: the pairing is not flagged
    assert mixed["warm_start_mismatches"] == [] and vs["per_seed"][0]["epoch0_differs"] is None
    assert "⚠" not in (there.out / "ablation.md").read_text()
    assert vs["per_seed"][0]["diff"] == pytest.approx(final["unseen"] - final["off"])


def test_records_of_other_runs_or_broken_files_are_refused(tmp_path):
    here = _plan(tmp_path / "here", ("off",))
    run_plan(here, quiet=True)
    records = here.records_folder()
    with pytest.raises(ConfigError, match="records a run with other settings"):
        run_plan(_plan(tmp_path / "there", ("off",), records=records, **{"agent.lr": 1e-3}), quiet=True)
    assert not (tmp_path / "there" / "off-s0").exists()
    path = records / "off-s0.json"
    good = path.read_text()
    path.write_text(good[:-20])
    with pytest.raises(ConfigError, match="not valid JSON"):
        run_plan(_plan(tmp_path / "there", ("off",), records=records), quiet=True)
    path.write_text(json.dumps({**json.loads(good), "version": 99}))
    with pytest.raises(ConfigError, match="version 99"):
        run_plan(_plan(tmp_path / "there", ("off",), records=records), quiet=True)
    path.write_text(json.dumps({"version": 1, "epochs": []}))
    with pytest.raises(ConfigError, match="missing"):
        run_plan(_plan(tmp_path / "there", ("off",), records=records), quiet=True)
