"""The console's view benchmark (``python -m genenv_console.measure views``) and the session history it fills.

Timings are not asserted (they belong to the benchmark's own run); these tests check that the filled history has
the shape the benchmark states, and that every view it times opens on it and shows its rows.
"""

from __future__ import annotations

import asyncio
from collections import Counter

from genenv_console.measure import VIEW_GOAL_MS, _views
from genenv_engine.config import load_config
from genenv_engine.interfaces.benches.session_fill import fill_session
from genenv_engine.storage.session import Session


def test_the_filled_history_has_the_stated_shape(tmp_path):
    session = Session.create(load_config("micro"), tmp_path / "s")
    out = fill_session(session, epochs=2, batches=10, variations=5, rollouts=8)
    store = session.store
    try:
        assert out["generated"] == 100 and out["batches"] == 20
        assert [m["epoch"] for m in store.epoch_metrics()] == [0, 1, 2]
        batches = store.batches(2)
        assert len(batches) == 10
        assert {store.get_task(b["seed_task_id"]).split for b in batches} == {"seed"}
        tasks = store.batch_tasks(batches[0]["id"])
        assert [t["role"] for t in tasks] == ["seed"] + ["variation"] * 5
        for t in tasks[1:]:
            assert t["train_rollouts"] == (8 if t["valid"] else 0)
            assert t["parent_id"] == tasks[0]["id"] and t["simulator_version"] == 1
        assert len(store.heldout_answers(1)) == session.config.heldout_size
        metrics = {m["epoch"]: m for m in store.epoch_metrics()}
        (entry,) = store.funnel(1)
        assert entry["drafts"] == metrics[1]["generated"] == 50
        assert entry["valid"] == metrics[1]["valid"] == sum(b["n_valid"] for b in store.batches(1))
        assert dict(Counter(entry["rejected"])) == metrics[1]["invalid_reasons"]
        assert len(metrics[1]["heldout_correct"]["bfcl"]) == session.config.heldout_size
    finally:
        store.close()


def test_every_view_of_the_benchmark_opens_and_shows_its_rows():
    out = asyncio.run(_views(epochs=2, repeats=1, size=(140, 44)))
    assert out["filled"]["generated"] == 2000 and out["goal_ms"] == VIEW_GOAL_MS
    assert len(out["ms"]) == 7
    for name, ms in out["ms"].items():
        assert 0 < ms["median"] <= ms["max"], name
