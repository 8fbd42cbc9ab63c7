"""Store tests: each opens a small database, writes a few rows and compares against literal values."""

from __future__ import annotations

import sqlite3
import threading

import pytest
from sqlite_utils import Database

from genenv_engine.core.records import Task
from genenv_engine.storage.store import MIGRATIONS, Store, TaskFilter


def task(id: str, **changes) -> Task:
    """A small valid task; keyword arguments override fields."""
    base = Task(id=id, benchmark="bfcl", prompt=f"prompt of {id}", answer=f"answer of {id}")
    return base.with_(**changes)


@pytest.fixture
def store():
    with Store(":memory:") as s:
        yield s


@pytest.fixture
def file_store(tmp_path):
    with Store(tmp_path / "tasks.db") as s:
        yield s


def test_insert_get_roundtrip_with_nested_dicts(file_store):
    original = Task(
        id="gen/e1/0001",
        benchmark="bfcl",
        prompt="Call add with 2 and 3.",
        answer="add(a=2, b=3)",
        expected={"calls": [{"name": "add", "args": {"a": [2], "b": [3, 3.0]}}]},
        tools=[{"name": "add", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}}],
        difficulty={"level": 3, "features": {"n_calls": 1, "nested": True}},
        origin="generated",
        parent_id="bfcl/train/00001",
        epoch=1,
        generator="sim@e1",
        split="generated",
        simulator_version=1,
    )
    file_store.insert_tasks([original], batch_id="e1/bfcl/seed/00001")
    assert file_store.get_task("gen/e1/0001") == original
    assert file_store.get_task("missing") is None
    assert file_store.task_stats("gen/e1/0001") == {
        "p_hat": None, "r_env": None, "n_rollouts": 0, "batch_id": "e1/bfcl/seed/00001", "superseded_by": None,
    }  # fmt: skip
    row = file_store.db.execute("SELECT level, valid, expected, simulator_version FROM tasks").fetchone()
    assert row == (3, 1, '{"calls": [{"args": {"a": [2], "b": [3, 3.0]}, "name": "add"}]}', 1)
    file_store.insert_tasks([task("bfcl/seed/00000", origin="seed")])
    assert file_store.get_task("bfcl/seed/00000").simulator_version is None  # no simulator wrote it


def test_upsert_keeps_stats_and_created_at(store):
    store.insert_tasks([task("t1")], batch_id="b1")
    store.set_task_stats("t1", p_hat=0.5, n_rollouts=4)
    created = store.db.execute("SELECT created_at FROM tasks").fetchone()[0]
    store.insert_tasks([task("t1", prompt="new prompt")])
    assert store.get_task("t1").prompt == "new prompt"
    assert store.task_stats("t1") == {
        "p_hat": 0.5, "r_env": None, "n_rollouts": 4, "batch_id": "b1", "superseded_by": None,
    }  # fmt: skip
    assert store.db.execute("SELECT created_at FROM tasks").fetchone()[0] == created
    store.set_task_stats("t1", r_env=0.25)
    assert store.task_stats("t1")["r_env"] == 0.25 and store.task_stats("t1")["p_hat"] == 0.5
    with pytest.raises(KeyError):
        store.set_task_stats("nope", p_hat=0.1)


def test_migrations_idempotent(tmp_path):
    path = tmp_path / "tasks.db"
    with Store(path) as first:
        applied = list(first.db.query("SELECT migration_set, name FROM _sqlite_migrations ORDER BY id"))
        first.insert_tasks([task("t1")])
    with Store(path) as second:
        assert list(second.db.query("SELECT migration_set, name FROM _sqlite_migrations ORDER BY id")) == applied
        assert second.applied_migrations() == [
            "m001_initial",
            "m002_fts",
            "m003_page_indexes",
            "m004_search_indexes",
            "m005_rollout_policy_version",
            "m006_task_simulator_version",
            "m007_batch_alpha_and_prompt_note",
            "m008_epoch_funnels",
        ]
        assert second.get_meta("schema_version") == "8"
        assert second.get_task("t1") == task("t1")
    assert applied == [
        {"migration_set": "genenv.store", "name": "m001_initial"},
        {"migration_set": "genenv.store", "name": "m002_fts"},
        {"migration_set": "genenv.store", "name": "m003_page_indexes"},
        {"migration_set": "genenv.store", "name": "m004_search_indexes"},
        {"migration_set": "genenv.store", "name": "m005_rollout_policy_version"},
        {"migration_set": "genenv.store", "name": "m006_task_simulator_version"},
        {"migration_set": "genenv.store", "name": "m007_batch_alpha_and_prompt_note"},
        {"migration_set": "genenv.store", "name": "m008_epoch_funnels"},
    ]


def test_a_database_without_the_batch_note_columns_is_migrated_on_open(tmp_path):
    path = tmp_path / "old.db"
    old = Database(path)
    MIGRATIONS.apply(old, stop_before="m007_batch_alpha_and_prompt_note")  # the schema of genenv before m007
    old["meta"].insert({"key": "schema_version", "value": "6"})
    old["batches"].insert(
        {
            "id": "e1/s",
            "epoch": 1,
            "benchmark": "bfcl",
            "seed_task_id": "s",
            "n_generated": 2,
            "n_valid": 2,
            "p_hat": 0.25,
            "r_env": 0.5,
            "in_band": 0,
        }
    )
    assert "prompt_note" not in {c.name for c in old["batches"].columns}
    old.close()
    with Store(path) as store:
        assert "m007_batch_alpha_and_prompt_note" in store.applied_migrations()
        assert store.get_meta("schema_version") == "8"
        assert store.batches() == [
            {
                "id": "e1/s",
                "epoch": 1,
                "benchmark": "bfcl",
                "seed_task_id": "s",
                "n_generated": 2,
                "n_valid": 2,
                "p_hat": 0.25,
                "r_env": 0.5,
                "in_band": False,
                "alpha": None,
                "prompt_note": None,
            }
        ]
        note = {"steer": "harder", "success_line": None}
        store.upsert_batches(
            [
                {
                    "id": "e2/s",
                    "epoch": 2,
                    "benchmark": "bfcl",
                    "seed_task_id": "s",
                    "p_hat": 0.5,
                    "r_env": 1.0,
                    "in_band": True,
                    "alpha": 0.4,
                    "prompt_note": note,
                }
            ]
        )
    with Store(path) as store:  # reopened: the note comes back as it was written, the old row keeps None
        assert [(b["id"], b["alpha"], b["prompt_note"]) for b in store.batches()] == [
            ("e1/s", None, None),
            ("e2/s", 0.4, note),
        ]
        raw = store.db.execute("SELECT prompt_note FROM batches WHERE id = 'e2/s'").fetchone()[0]
        assert raw == '{"steer": "harder", "success_line": null}'


def test_wal_on_file_db(file_store):
    assert file_store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_one_connection_per_thread(file_store):
    file_store.insert_tasks([task("t1")])
    seen = {}

    def reader():
        seen["db"] = file_store.db
        seen["task"] = file_store.get_task("t1")
        seen["same_again"] = file_store.db is seen["db"]
        file_store.close()

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    assert seen["db"] is not file_store.db
    assert seen["same_again"] is True
    assert seen["task"] == task("t1")
    # the main thread's connection is still open after the other thread closed its own
    assert file_store.get_task("t1") == task("t1")


def test_close_then_reopen_on_same_thread(file_store):
    file_store.insert_tasks([task("t1")])
    old = file_store.db
    file_store.close()
    with pytest.raises(sqlite3.ProgrammingError):
        old.execute("SELECT 1")
    assert file_store.get_task("t1") == task("t1")


def test_fts_finds_later_insert_and_survives_syntax(file_store):
    file_store.insert_tasks([task("t1", prompt="multiply two numbers")])
    file_store.insert_tasks([task("t2", prompt="add the numbers", answer="add(a=1)")])
    assert [r["id"] for r in file_store.query_tasks(text="add")] == ["t2"]
    assert [r["id"] for r in file_store.query_tasks(text="numbers", order="id")] == ["t1", "t2"]
    assert file_store.query_tasks(text='add" OR (') == []
    assert file_store.count_tasks(text='add" OR (') == 0
    assert [r["id"] for r in file_store.query_tasks(text='add" (')] == ["t2"]
    # an update is re-indexed by the triggers
    file_store.insert_tasks([task("t1", prompt="subtract")])
    assert [r["id"] for r in file_store.query_tasks(text="subtract")] == ["t1"]
    assert file_store.query_tasks(text="multiply") == []


def test_pool_rules(store):
    store.insert_tasks(
        [
            task("seed1", origin="seed"),
            task("seed_pinned", origin="seed", status="pinned"),
            task("g_active", origin="generated"),
            task("g_banned", origin="generated", status="banned"),
            task("g_invalid", origin="generated", valid=False, reason="no answer"),
            task("g_pinned", origin="generated", status="pinned"),
            task("s1", origin="static", benchmark="apibank"),
            task("g_old", origin="generated"),
        ]
    )
    store.revise_task("g_old", task("g_old.v2"))
    assert [t.id for t in store.pool()] == ["g_active", "g_old.v2", "g_pinned", "s1", "seed_pinned"]
    assert [t.id for t in store.pool(["apibank"])] == ["s1"]
    assert [t.id for t in store.pinned_tasks()] == ["g_pinned", "seed_pinned"]


def test_revise_keeps_old_and_lineage(store):
    store.insert_tasks([task("seed", origin="seed"), task("gen", origin="generated", parent_id="seed", epoch=1)])
    new = store.revise_task("gen", task("gen.edit", prompt="fixed prompt", epoch=1))
    assert new == task("gen.edit", prompt="fixed prompt", epoch=1, origin="edited", parent_id="gen")
    assert store.get_task("gen") == task("gen", origin="generated", parent_id="seed", epoch=1)
    assert store.task_stats("gen")["superseded_by"] == "gen.edit"
    assert [t.id for t in store.lineage("gen.edit")] == ["gen.edit", "gen", "seed"]
    with pytest.raises(KeyError):
        store.revise_task("missing", task("x"))
    assert store.get_task("x") is None


def test_lineage_stops_on_cycle(store):
    store.insert_tasks([task("a", parent_id="b"), task("b", parent_id="a")])
    assert [t.id for t in store.lineage("a")] == ["a", "b"]


def test_query_tasks_paging_and_filters(store):
    store.insert_tasks([task(f"t{i}", epoch=i % 2, origin="generated") for i in range(5)])
    store.insert_tasks([task("e1", origin="edited", valid=False)])
    for i, p in enumerate([0.1, 0.4, 0.5, 0.9, 1.0]):
        store.set_task_stats(f"t{i}", p_hat=p)

    assert [r["id"] for r in store.query_tasks()] == ["t1", "t3", "e1", "t0", "t2", "t4"]
    assert [r["id"] for r in store.query_tasks(limit=2, offset=2)] == ["e1", "t0"]
    assert [r["id"] for r in store.query_tasks(limit=2, offset=5)] == ["t4"]
    assert [r["id"] for r in store.query_tasks(p_min=0.3, p_max=0.9, order="p_hat DESC")] == ["t3", "t2", "t1"]
    assert store.count_tasks(p_min=0.3, p_max=0.9) == 3
    assert [r["id"] for r in store.query_tasks(origin="edited")] == ["e1"]
    assert store.count_tasks(valid=True) == 5
    assert store.count_tasks(valid=False) == 1
    assert store.count_tasks(epoch=1, origin="generated") == 2
    assert store.count_tasks() == 6
    row = store.query_tasks(origin="edited")[0]
    assert {k: row[k] for k in ("valid", "expected", "p_hat", "n_rollouts", "batch_id")} == {
        "valid": False, "expected": {}, "p_hat": None, "n_rollouts": 0, "batch_id": None,
    }  # fmt: skip
    with pytest.raises(ValueError, match="bad order term"):
        store.query_tasks(order="id; DROP TABLE tasks")


def test_counts_by_epoch(store):
    store.insert_tasks([task("a"), task("b"), task("c", epoch=1, origin="generated", valid=False)])
    assert store.counts_by_epoch() == [
        {"epoch": 0, "origin": "seed", "status": "active", "valid": True, "n": 2},
        {"epoch": 1, "origin": "generated", "status": "active", "valid": False, "n": 1},
    ]


def test_drop_epochs_from(store):
    store.insert_tasks(
        [
            task("seed", origin="seed"),
            task("g1", origin="generated", epoch=1),
            task("g2", origin="generated", epoch=2),
            task("s2", origin="static", epoch=2),
            task("ed2", origin="edited", epoch=2),
            task("g3", origin="generated", epoch=3),
        ]
    )
    store.insert_rollouts(
        [{"task_id": t, "epoch": e, "response": "r", "reward": 1.0, "success": True} for t, e in [("g1", 1), ("g2", 2)]]
    )
    store.upsert_batches([{"id": f"e{e}/bfcl/seed/00000", "epoch": e} for e in (1, 2)])
    for e in (1, 2):
        store.start_epoch(e)
    store.finish_epoch(1, {"acc": 0.5})
    store.log_event("epoch_started", 2, {})

    store.drop_epochs_from(2)
    assert [r["id"] for r in store.query_tasks(order="id")] == ["ed2", "g1", "seed"]
    assert [r["task_id"] for r in store.rollouts_for("g1")] == ["g1"]
    assert store.rollouts_for("g2") == []
    assert [b["id"] for b in store.batches()] == ["e1/bfcl/seed/00000"]
    assert [m["epoch"] for m in store.epoch_metrics()] == [1]
    assert [e["kind"] for e in store.events()] == ["epoch_started"]
    assert store.query_tasks(text="g2") == []


def test_set_status(store):
    store.insert_tasks([task("t1")])
    store.set_status("t1", "pinned")
    assert store.get_task("t1").status == "pinned"
    with pytest.raises(ValueError, match="bad status 'deleted': must be one of active, pinned, banned"):
        store.set_status("t1", "deleted")
    with pytest.raises(KeyError):
        store.set_status("missing", "banned")


def test_rollouts_and_batches(store):
    store.insert_rollouts(
        [
            {"task_id": "t1", "epoch": 1, "response": "add(1)", "reward": 1.0, "success": True},
            {"task_id": "t1", "epoch": 1, "response": "x", "reward": 0.0, "success": False,
             "error_type": "wrong_name", "purpose": "heldout"},
        ]
    )  # fmt: skip
    assert store.rollouts_for("t1") == [
        {"id": 1, "task_id": "t1", "epoch": 1, "response": "add(1)", "reward": 1.0, "success": True,
         "error_type": None, "purpose": "train", "policy_version": None},
        {"id": 2, "task_id": "t1", "epoch": 1, "response": "x", "reward": 0.0, "success": False,
         "error_type": "wrong_name", "purpose": "heldout", "policy_version": None},
    ]  # fmt: skip
    batch = {"id": "e3/bfcl/seed/00012", "epoch": 3, "benchmark": "bfcl", "seed_task_id": "seed",
             "n_generated": 4, "n_valid": 3, "p_hat": None, "r_env": None, "in_band": False}  # fmt: skip
    store.upsert_batches([batch])
    store.upsert_batches([{"id": "e3/bfcl/seed/00012", "p_hat": 0.5, "r_env": 1.0, "in_band": True}])
    assert store.batches(3) == [
        {**batch, "p_hat": 0.5, "r_env": 1.0, "in_band": True, "alpha": None, "prompt_note": None}
    ]
    assert store.batches(2) == []
    # the prompt note goes in as a dict and comes back as one; a later upsert that leaves it out keeps it
    note = {"steer": None, "success_line": "Agent success on recent bfcl tasks: 25% (target 40%)."}
    store.upsert_batches([{"id": "e3/bfcl/seed/00012", "alpha": 0.4, "prompt_note": note}])
    store.upsert_batches([{"id": "e3/bfcl/seed/00012", "epoch": 4, "p_hat": 0.75}])
    assert store.batches(4) == [
        {**batch, "epoch": 4, "p_hat": 0.75, "r_env": 1.0, "in_band": True, "alpha": 0.4, "prompt_note": note}
    ]


def test_epochs(store):
    assert store.last_finished_epoch() == -1
    store.start_epoch(0)
    store.finish_epoch(0, {"success": 0.25, "epoch": 99})
    store.start_epoch(1)
    assert store.last_finished_epoch() == 0
    store.mark_partial(1)
    rows = store.epoch_metrics()
    assert [{k: r[k] for k in ("epoch", "status", "success") if k in r} for r in rows] == [
        {"epoch": 0, "status": "done", "success": 0.25},
        {"epoch": 1, "status": "partial"},
    ]
    assert rows[0]["started_at"].endswith("Z") and rows[1]["finished_at"] is not None
    store.finish_epoch(1, {})
    assert store.last_finished_epoch() == 1


def test_events_and_meta(store):
    first = store.log_event("run_started", None, {"model": "tiny"})
    second = store.log_event("epoch_done", 0, {"acc": [0.5]})
    assert (first, second) == (1, 2)
    events = store.events()
    assert [(e["id"], e["epoch"], e["kind"], e["payload"]) for e in events] == [
        (1, None, "run_started", {"model": "tiny"}),
        (2, 0, "epoch_done", {"acc": [0.5]}),
    ]
    assert [e["id"] for e in store.events(after_id=1)] == [2]
    assert [e["id"] for e in store.events(limit=1)] == [1]
    assert store.get_meta("nope", "dflt") == "dflt"
    store.set_meta("run", "a")
    store.set_meta("run", "b")
    assert store.get_meta("run") == "b"


def test_task_pages_use_the_page_index(tmp_path):
    store = Store(tmp_path / "s.db")
    plan = " ".join(
        str(r[-1])
        for r in store.db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM tasks ORDER BY epoch DESC, id LIMIT 50 OFFSET 1000"
        ).fetchall()
    )
    assert "idx_tasks_epoch_desc_id" in plan and "TEMP B-TREE" not in plan


def test_bulk_stats_and_batch_lookup(tmp_path):
    store = Store(tmp_path / "s.db")
    store.insert_tasks([task("g/1", origin="generated"), task("g/2", origin="generated")], batch_id="e1/a")
    store.insert_tasks([task("g/3", origin="generated", valid=False)], batch_id="e1/a")
    store.insert_tasks([task("g/4", origin="generated")], batch_id="e1/b")
    store.add_rollout_stats([("g/1", 0.25, 4), ("g/2", 0.5, 4)])
    store.add_rollout_stats([("g/1", 0.75, 4)])
    store.set_r_env([("g/1", 0.9), ("g/2", 0.8)])
    assert {k: store.task_stats("g/1")[k] for k in ("p_hat", "n_rollouts", "r_env")} == {
        "p_hat": 0.75,
        "n_rollouts": 8,
        "r_env": 0.9,
    }
    assert store.task_stats("g/2")["n_rollouts"] == 4 and store.task_stats("g/4")["r_env"] is None
    grouped = store.tasks_in_batches(["e1/a", "e1/b", "e1/none"], origin="generated")
    assert {b: [t.id for t in ts] for b, ts in grouped.items()} == {
        "e1/a": ["g/1", "g/2"],
        "e1/b": ["g/4"],
        "e1/none": [],
    }
    assert [t.id for t in store.tasks_in_batches(["e1/a"], origin="generated", valid=False)["e1/a"]] == ["g/3"]


def test_common_word_pages_walk_the_page_index_and_match_the_plain_search(tmp_path, monkeypatch):
    import genenv_engine.storage.store.search as store_module

    store = Store(tmp_path / "s.db")
    store.insert_tasks(
        [
            task(
                f"g{i:02d}",
                epoch=i % 5,
                origin="generated" if i % 3 else "edited",
                prompt=("add two numbers" if i % 2 else "subtract") + f" case {i}",
            )
            for i in range(40)
        ]
    )
    expected_ids = sorted((f"g{i:02d}" for i in range(1, 40, 2)), key=lambda t: (-(int(t[1:]) % 5), t))
    searches = [dict(text="add"), dict(text="add", origin="generated"), dict(text="add", epoch=3), dict(text="case")]
    plain = {}
    for scan in (10**9, 0):  # never / always walk the page index
        monkeypatch.setattr(store_module, "SCAN_MATCHES", scan)
        assert [r["id"] for r in store.query_tasks(text="add")] == expected_ids
        assert [r["id"] for r in store.query_tasks(text="add", limit=5, offset=15)] == expected_ids[15:]
        got = {
            str(f): ([r["id"] for r in store.query_tasks(**f, limit=7, offset=3)], store.count_tasks(**f))
            for f in searches
        }
        plain = plain or got
        assert got == plain
    assert store.count_tasks(text="add") == 20 and store.count_tasks(text="add", origin="generated") == 13
    sql = "SELECT tasks.rowid FROM tasks{} ORDER BY tasks.epoch DESC, tasks.id ASC LIMIT 50"
    walk = " ".join(
        str(r[-1])
        for r in store.db.execute(
            "EXPLAIN QUERY PLAN " + sql.format(store._where(TaskFilter(text="add"), scan_matches=True)[0]), ['"add"']
        ).fetchall()
    )
    assert "idx_tasks_epoch_desc_id" in walk and "TEMP B-TREE" not in walk
