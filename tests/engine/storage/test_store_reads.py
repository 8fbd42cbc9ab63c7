"""The store's read verbs for the loop, the reports and the console, checked against literal rows.

Every SQL query lives in `genenv_engine.storage.store`; these are the verbs that replaced queries once written
in `loop.py`, `reports/data.py`, `genenv_console/app.py` and `session.py`.
"""

from __future__ import annotations

import sqlite3

import pytest

from genenv_engine.core.records import Task
from genenv_engine.storage.store import Store, probe_database


def task(id: str, **changes) -> Task:
    return Task(id=id, benchmark="bfcl", prompt=f"prompt of {id}", answer=f"answer of {id}").with_(**changes)


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "genenv.db") as s:
        s.insert_tasks([
            task("base/1", split="train"),
            task("base/2", split="train", status="banned"),
            task("base/3", split="train"),
            task("heldout/1", split="heldout", status="pinned"),
            task("gen/e1/a", origin="generated", split="generated", epoch=1, valid=True, difficulty={"level": 2}),
            task("gen/e1/b", origin="generated", split="generated", epoch=1, valid=False, reason="parse: no call"),
            task("gen/e2/a", origin="generated", split="generated", epoch=2, valid=True, difficulty={"level": 3}),
            task("gen/e2/b", origin="generated", split="generated", epoch=2, valid=False, reason="gold: none"),
        ])  # fmt: skip
        s.insert_tasks([task("st/1", origin="static", split="generated", epoch=1, valid=True)], batch_id="sb/2")
        s.insert_tasks([task("st/2", origin="static", split="generated", epoch=1, valid=True)], batch_id="sb/1")
        s.insert_tasks(
            [task("st/3", origin="static", split="generated", epoch=1, valid=True, status="banned")], batch_id="sb/3"
        )
        s.insert_tasks([task("st/4", origin="static", split="generated", epoch=1, valid=False)], batch_id="sb/4")
        yield s


def test_static_batch_ids_only_batches_with_a_valid_active_task(store):
    assert store.static_batch_ids() == ["sb/1", "sb/2"]


def test_inactive_train_ids_banned_pinned_or_superseded(store):
    assert store.inactive_train_ids() == {"base/2"}
    store.revise_task("base/3", task("edit/1", origin="edited", split="generated"))
    store.set_status("base/1", "pinned")
    assert store.inactive_train_ids() == {"base/1", "base/2", "base/3"}
    assert store.edits() == [("edit/1", "base/3")]


def test_generated_verdicts_of_one_epoch(store):
    assert store.generated_verdicts(2) == [{"valid": True, "reason": ""}, {"valid": False, "reason": "gold: none"}]
    assert [r["valid"] for r in store.generated_verdicts(1)] == [True, False, True, True, True, False]
    assert store.generated_verdicts(1, origins=("static",)) == [{"valid": v, "reason": ""} for v in (1, 1, 1, 0)]


def test_generated_summaries_and_rejected_ids_newest_first(store):
    rows = store.generated_summaries(origins=("generated",))
    assert rows == [
        {"id": "gen/e2/a", "benchmark": "bfcl", "difficulty": {"level": 3}, "epoch": 2},
        {"id": "gen/e1/a", "benchmark": "bfcl", "difficulty": {"level": 2}, "epoch": 1},
    ]
    assert store.rejected_ids(5) == ["gen/e2/b", "gen/e1/b", "st/4"]
    assert store.rejected_ids(1) == ["gen/e2/b"]


def test_batch_task_successes_and_train_rollouts(store):
    store.insert_tasks(
        [task("gen/e3/x", origin="generated", split="generated", epoch=3, valid=True)], batch_id="e3/bfcl/b0"
    )
    store.upsert_batches([{"id": "e3/bfcl/b0", "epoch": 3, "benchmark": "bfcl", "seed_task_id": "base/1"}])
    store.insert_rollouts([
        {"task_id": "gen/e3/x", "epoch": 3, "response": "a", "reward": 1.0, "success": True},
        {"task_id": "gen/e3/x", "epoch": 3, "response": "b", "reward": 0.0, "success": False},
        {"task_id": "base/1", "epoch": 3, "response": "c", "reward": 0.5, "success": True},
        {"task_id": "base/1", "epoch": 3, "response": "d", "reward": 0.0, "success": False, "purpose": "heldout"},
    ])  # fmt: skip
    assert store.batch_task_successes(3) == [
        {"id": "gen/e3/x", "benchmark": "bfcl", "success": 1},
        {"id": "gen/e3/x", "benchmark": "bfcl", "success": 0},
    ]
    assert store.batch_task_successes(2) == []
    assert store.train_rollouts(3) == [
        {"task_id": "gen/e3/x", "reward": 1.0, "response": "a"},
        {"task_id": "gen/e3/x", "reward": 0.0, "response": "b"},
        {"task_id": "base/1", "reward": 0.5, "response": "c"},
    ]


def test_status_census_created_at_and_scores(store):
    assert store.ids_with_status("banned") == ["base/2", "st/3"]
    assert store.ids_with_status("pinned") == ["heldout/1"]
    census = {
        (r["epoch"], r["origin"], r["split"], r["status"], r["valid"], r["superseded"]): r["n"]
        for r in store.task_census()
    }
    assert census[(1, "static", "generated", "active", 1, 0)] == 2
    assert census[(0, "seed", "train", "active", 1, 0)] == 2
    assert sum(census.values()) == 12
    assert store.created_at("base/1") and store.created_at("missing") is None
    store.set_rollout_scores([("gen/e1/a", 0.25, 0.9, 8)])
    assert store.task_stats("gen/e1/a")["p_hat"] == 0.25 and store.task_stats("gen/e1/a")["n_rollouts"] == 8


def test_last_event_id(store):
    assert store.last_event_id() == 0
    store.log_event("A", 1, {})
    newest = store.log_event("B", 1, {})
    assert store.last_event_id() == newest == 2


def test_probe_database_reads_without_writing(store, tmp_path):
    store.set_meta("schema_version", "4")
    facts = probe_database(tmp_path / "genenv.db")
    assert facts["quick_check"] == ["ok"] and facts["schema_version"] == "4"
    assert facts["applied"] == store.applied_migrations()
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"not a database at all" * 100)
    with pytest.raises(sqlite3.DatabaseError):
        probe_database(junk)


def test_the_importers_reads_prompts_ids_and_numbered_imports(store):
    store.insert_tasks(
        [
            task("bfcl/import/00000", origin="imported", split="seed"),
            task("BFCL/IMPORT/00001", origin="imported", split="seed"),
            task("chain/import/00000", benchmark="chain", origin="imported", split="seed"),
        ]
    )
    assert store.task_prompts("chain") == {"prompt of chain/import/00000"}
    assert "prompt of base/1" in store.task_prompts("bfcl") and len(store.task_prompts("bfcl")) == 14
    assert len(store.task_ids()) == 15 and "st/4" in store.task_ids()
    assert store.imported_id_count("bfcl") == 2  # SQL LIKE: letters of any case
    assert store.imported_id_count("chain") == 1 and store.imported_id_count("apibank") == 0


def test_the_loggers_reads_batch_scores_and_sample_rollouts(store):
    store.upsert_batches(
        [
            {"id": "e3/b1", "epoch": 3, "p_hat": 0.5, "r_env": 1.0},
            {"id": "e3/b0", "epoch": 3, "p_hat": 0.25, "r_env": None},
            {"id": "e3/b2", "epoch": 3, "p_hat": None, "r_env": None},
            {"id": "e4/b0", "epoch": 4, "p_hat": 1.0, "r_env": 0.1},
        ]
    )
    assert store.batch_scores(3) == [{"p_hat": 0.5, "r_env": 1.0}, {"p_hat": 0.25, "r_env": None}]
    store.insert_rollouts([
        {"task_id": "gen/e1/a", "epoch": 3, "response": "a", "reward": 1.0, "success": True},
        {"task_id": "base/1", "epoch": 3, "response": "h", "reward": 0.0, "success": False, "purpose": "heldout"},
        {"task_id": "base/1", "epoch": 3, "response": "b", "reward": 0.0, "success": False},
        {"task_id": "base/3", "epoch": 3, "response": "c", "reward": 0.5, "success": True},
        {"task_id": "base/3", "epoch": 4, "response": "d", "reward": 0.5, "success": True},
    ])  # fmt: skip
    assert store.sample_rollouts(3, 2) == [
        {
            "benchmark": "bfcl",
            "level": 2,
            "origin": "generated",
            "prompt": "prompt of gen/e1/a",
            "response": "a",
            "reward": 1.0,
            "success": 1,
        },
        {
            "benchmark": "bfcl",
            "level": 0,
            "origin": "seed",
            "prompt": "prompt of base/1",
            "response": "b",
            "reward": 0.0,
            "success": 0,
        },
    ]
    assert [r["response"] for r in store.sample_rollouts(3, 8)] == ["a", "b", "c"]
