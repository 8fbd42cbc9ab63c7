"""The store's verbs behind a variation batch and a lineage: a batch's seed and variations with their training
rollouts, the batch filter, the lineage tree from a seed through every simulator version, and a task's place in
the tasks table's order; each checked against literal rows."""

from __future__ import annotations

import pytest

from genenv_engine.core.records import Task
from genenv_engine.storage.store import LINEAGE_PROMPT_CHARS, Store, TaskFilter


def task(id: str, **changes) -> Task:
    return Task(id=id, benchmark="bfcl", prompt=f"prompt of {id}", answer=f"answer of {id}").with_(**changes)


def gen(id: str, parent: str, epoch: int, version: int | None, **changes) -> Task:
    return task(
        id,
        origin="generated",
        split="generated",
        parent_id=parent,
        epoch=epoch,
        simulator_version=version,
        generator=f"sim@e{epoch - 1}",
        **changes,
    )


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "genenv.db") as s:
        s.insert_tasks([task("seed/1", split="seed"), task("seed/2", split="seed"), task("other/x", parent_id="gone")])
        s.insert_tasks(
            [gen("g/e1/0", "seed/1", 1, 0), gen("g/e1/1", "seed/1", 1, 0, valid=False, reason="dup: x")],
            batch_id="e1/seed/1",
        )
        s.insert_tasks([gen("g/e1/2", "seed/2", 1, 0)], batch_id="e1/seed/2")
        s.insert_tasks([gen("g/e2/0", "seed/1", 2, 1, prompt="y" * 1000)], batch_id="e2/seed/1")
        s.upsert_batches(
            [{"id": "e1/seed/1", "epoch": 1, "benchmark": "bfcl", "seed_task_id": "seed/1", "prompt_note": None}]
        )
        s.set_task_stats("g/e1/0", p_hat=0.25, r_env=0.9, n_rollouts=4)
        s.set_task_stats("g/e2/0", p_hat=0.75)
        s.insert_rollouts(
            [
                {"task_id": "g/e1/0", "epoch": e, "reward": float(ok), "success": ok, "response": "r"}
                for e, ok in ((1, True), (1, False), (1, False), (1, False), (2, True))
            ]
        )
        s.insert_rollouts([{"task_id": "g/e1/0", "epoch": 1, "reward": 1.0, "success": True, "purpose": "heldout"}])
        yield s


def test_batch_tasks_are_the_seed_then_the_variations_with_their_training_rollouts(store):
    rows = store.batch_tasks("e1/seed/1")
    assert [(r["role"], r["id"]) for r in rows] == [
        ("seed", "seed/1"),
        ("variation", "g/e1/0"),
        ("variation", "g/e1/1"),
    ]
    assert [(r["train_rollouts"], r["train_successes"]) for r in rows] == [(0, 0), (5, 2), (0, 0)]  # heldout: not
    seed, first, second = rows
    assert first["p_hat"] == 0.25 and first["r_env"] == 0.9 and first["simulator_version"] == 0
    assert second["valid"] is False and second["reason"] == "dup: x" and seed["batch_id"] is None
    assert first["difficulty"] == {} and first["batch_id"] == "e1/seed/1"  # JSON decoded, as query_tasks gives
    # no batch row: the seed is the variations' parent
    assert [r["id"] for r in store.batch_tasks("e2/seed/1")] == ["seed/1", "g/e2/0"]
    assert store.batch_tasks("nope") == []


def test_the_batch_filter_pages_and_counts_one_batch(store):
    assert store.count_tasks(batch_id="e1/seed/1") == 2
    assert [r["id"] for r in store.query_tasks(TaskFilter(batch_id="e1/seed/1", valid=True))] == ["g/e1/0"]
    assert store.count_tasks(TaskFilter(batch_id="e1/seed/2", epoch=2)) == 0


def test_lineage_tree_from_the_seed_through_every_simulator_version(store):
    revised = store.revise_task("g/e1/0", task("g/e1/0/r1", split="generated", epoch=1))
    for start in ("seed/1", "g/e2/0", revised.id):  # any member gives the whole tree
        nodes = store.lineage_tree(start)
        assert [(n["id"], n["depth"]) for n in nodes] == [
            ("seed/1", 0),
            ("g/e1/0", 1),
            ("g/e1/1", 1),
            ("g/e2/0", 1),
            ("g/e1/0/r1", 2),
        ]
    by_id = {n["id"]: n for n in nodes}
    assert by_id["g/e1/0"]["simulator_version"] == 0 and by_id["g/e2/0"]["simulator_version"] == 1
    assert by_id["g/e1/0"]["p_hat"] == 0.25 and by_id["g/e2/0"]["p_hat"] == 0.75
    assert by_id["g/e1/1"]["valid"] is False and by_id["g/e1/0/r1"]["origin"] == "edited"
    assert by_id["g/e1/0/r1"]["parent_id"] == "g/e1/0" and by_id["g/e1/0"]["superseded_by"] == "g/e1/0/r1"
    assert by_id["g/e2/0"]["prompt"] == "y" * LINEAGE_PROMPT_CHARS
    assert [n["id"] for n in store.lineage_tree("seed/1", limit=2)] == ["seed/1", "g/e1/0"]
    # a parent that is not stored: the tree starts at the first stored ancestor
    assert [(n["id"], n["depth"]) for n in store.lineage_tree("other/x")] == [("other/x", 0)]
    assert store.lineage_tree("nope") == []


def test_lineage_tree_ends_on_a_parent_cycle(store):
    store.insert_tasks([task("a", parent_id="b"), task("b", parent_id="a")])
    assert sorted((n["id"], n["depth"]) for n in store.lineage_tree("a")) == [("a", 1), ("b", 0)]


def test_task_position_is_the_index_in_the_pages_order(store):
    store.insert_tasks([task("late", epoch=None)])
    every = [r["id"] for r in store.query_tasks(limit=100)]
    assert every[-1] == "late"
    assert [store.task_position(i) for i in every] == list(range(len(every)))
    generated = [r["id"] for r in store.query_tasks(origin="generated", limit=100)]
    assert [store.task_position(i, origin="generated") for i in generated] == list(range(len(generated)))
    assert store.task_position("seed/1", origin="generated") is None and store.task_position("nope") is None
    words = TaskFilter(text="prompt of g")
    found = [r["id"] for r in store.query_tasks(words, limit=100)]
    assert found and [store.task_position(i, words) for i in found] == list(range(len(found)))
