"""`Store.funnel` (drafts -> passed the validator -> kept by the duplicate cap -> trained) checked against what a real
micro run stored as its epoch metrics and `TasksGenerated` events.

The scripted simulator writes a fixed cycle of texts: valid tasks, an exact repeat, malformed text, a held-out copy
and a call to an unknown function, so every stage drops something; between the epochs a base task is pinned and a
generated task edited by hand, so the second epoch trains on every source.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.method.loop import run
from genenv_engine.storage.session import Session
from genenv_engine.storage.store import CAP_REASONS, FUNNEL_STAGES
from genenv_engine.testing import scripted_backends


def _texts() -> list[str]:
    rng = random.Random(11)
    valid = [" => ".join(generate_task(level, rng)[:2]) for level in (1, 2, 3, 2)]
    heldout = get_environment("bfcl", 0).splits()["heldout"][0]
    return [
        valid[0],
        valid[0],
        "hello there",
        f"{heldout.prompt} => {heldout.answer}",
        valid[1],
        "F: fly(a:int) | Q: fly 3 => fly(a=3)",
        valid[2],
        valid[3],
    ]


@pytest.fixture(scope="module")
def session(tmp_path_factory) -> Session:
    path = tmp_path_factory.mktemp("funnel") / "s"
    factory = scripted_backends(_texts())
    first = Session.create(load_config("micro", overrides={"epochs": 1}), path)
    run(first, backend_factory=factory)
    store = first.store
    store.set_status(get_environment("bfcl", 0).splits()["train"][0].id, "pinned")
    gen = store.query_tasks(origin="generated", valid=True, limit=1, order="id")[0]
    old = store.get_task(gen["id"])
    store.revise_task(old.id, old.with_(id=old.id + "/r1"))
    first.set_epochs(2)
    first.store.close()
    again = Session.open(path)
    run(again, backend_factory=factory)
    return again


def _merged(entries: list[dict], key: str) -> Counter:
    total: Counter = Counter()
    for e in entries:
        total.update(e[key])
    return total


def test_funnel_counts_equal_the_epoch_metrics(session):
    store = session.store
    metrics = {m["epoch"]: m for m in store.epoch_metrics()}
    funnel = store.funnel()
    assert {e["epoch"] for e in funnel} == {1, 2}
    for epoch in (1, 2):
        m, entries = metrics[epoch], [e for e in funnel if e["epoch"] == epoch]
        assert entries == store.funnel(epoch)
        assert sum(e["drafts"] for e in entries) == m["generated"] == 8
        assert sum(e["valid"] for e in entries) == m["valid"]
        assert _merged(entries, "rejected") == Counter(m["invalid_reasons"])
        assert sum(e["trained"] for e in entries) == m["tasks_trained"]
        assert _merged(entries, "trained_by_origin") == Counter(m["tasks_trained_by_origin"])
        assert sum(e["train_rollouts"] for e in entries) == m["tasks_trained"] * session.config.agent.rollouts
        levels = Counter()
        for e in entries:
            levels.update(e["levels"]["valid"])
        assert levels == Counter(m["difficulty_mix"])
        for e in entries:
            cap = sum(n for reason, n in e["rejected"].items() if reason in CAP_REASONS)
            assert e["drafts"] - e["passed"] == sum(e["rejected"].values()) - cap
            assert e["passed"] - e["valid"] == cap
            assert e["drafts"] >= e["passed"] >= e["valid"]
            assert sum(e["trained_by_source"].values()) == e["trained"]
            for stage in FUNNEL_STAGES:
                assert sum(e["levels"][stage].values()) == e[stage], stage
    first = store.funnel(1)[0]
    assert {"duplicate", "heldout_copy", "parse_error", "unknown_function"} <= set(first["rejected"])
    assert first["trained_by_source"]["fresh"] == first["valid"]


def test_funnel_matches_the_tasks_generated_events(session):
    events = [e for e in session.store.events() if e["kind"] == "TasksGenerated"]
    assert events
    for ev in events:
        (entry,) = [e for e in session.store.funnel(ev["epoch"]) if e["benchmark"] == ev["payload"]["benchmark"]]
        assert (entry["drafts"], entry["valid"], entry["rejected"]) == (
            ev["payload"]["generated"],
            ev["payload"]["valid"],
            dict(sorted(ev["payload"]["reasons"].items())),
        )


def test_second_epoch_trains_on_pinned_edited_replayed_and_base_tasks(session):
    (entry,) = session.store.funnel(2)
    sources = entry["trained_by_source"]
    assert sources["pinned"] == 1 and sources["edited"] == 1
    assert sources["base"] > 0 and sources.get("replayed", 0) + sources.get("fresh", 0) > 0
    assert entry["trained_by_origin"]["edited"] == 1


def test_read_only_funnel_equals_the_stores_and_writes_nothing(session, tmp_path):
    import hashlib
    import sqlite3

    from genenv_engine.storage.store import read_only_funnel

    db = session.path / "genenv.db"
    session.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    assert read_only_funnel(db) == session.store.funnel() and len(session.store.funnel()) == 2
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    bare = tmp_path / "bare.db"
    sqlite3.connect(bare).execute("CREATE TABLE epochs (epoch INTEGER)").connection.close()
    assert read_only_funnel(bare) == []
    with pytest.raises(FileNotFoundError):
        read_only_funnel(tmp_path / "missing.db")


def _copy_without_snapshots(session, tmp_path, where: str) -> Path:
    import shutil
    import sqlite3

    session.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    copy = tmp_path / f"copy-{len(list(tmp_path.iterdir()))}.db"
    shutil.copy(session.path / "genenv.db", copy)
    conn = sqlite3.connect(copy)
    with conn:
        conn.execute(f"DELETE FROM funnels WHERE {where}")
    conn.close()
    return copy


def test_each_finished_epoch_stores_a_snapshot_equal_to_the_funnel_computed_from_rollouts(session, tmp_path):
    from genenv_engine.storage.store import read_only_funnel

    stored = {row["epoch"]: row for row in session.store.db.query("SELECT epoch FROM funnels")}
    assert sorted(stored) == [0, 1, 2]
    computed = read_only_funnel(_copy_without_snapshots(session, tmp_path, "1"))  # a database from before snapshots
    assert computed == session.store.funnel() and [e["epoch"] for e in computed] == [1, 2]
    partly = read_only_funnel(_copy_without_snapshots(session, tmp_path, "epoch = 1"))  # epoch 1 computed alone
    assert partly == computed
    assert session.store.funnel(2) == [e for e in computed if e["epoch"] == 2]


def test_a_snapshot_keeps_the_epoch_as_it_ended_and_a_dropped_epoch_loses_it(session, tmp_path):
    import shutil

    from genenv_engine.storage.store import Store

    session.store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    folder = tmp_path / "s"
    folder.mkdir()
    shutil.copy(session.path / "genenv.db", folder / "genenv.db")
    with Store(folder / "genenv.db") as store:
        before = store.funnel(1)
        fresh = next(t for t in store.query_tasks(origin="generated", valid=True, epoch=1, limit=50) if t["n_rollouts"])
        store.set_status(fresh["id"], "pinned")  # after the epoch ended
        assert store.funnel(1) == before
        store.drop_epochs_from(2)
        assert [row["epoch"] for row in store.db.query("SELECT epoch FROM funnels")] == [0, 1]
        assert store.funnel(2) == [] and store.funnel() == before
