"""The co-evolution core fed by a trainer outside genenv: `CoEvolution.record` stores attempts scored elsewhere, each
batch's p-hat and R_env come from them, an attempt at a closed epoch's task is stored apart and counted as late, one
at a task no epoch issued is counted and named once, and the epoch ends as the native one does (held-out,
checkpoint, events). Micro preset; the simulator is a scripted double so that its drafts are valid."""

from __future__ import annotations

import sqlite3

import pytest

from genenv_engine.config import load_config
from genenv_engine.core.curriculum import env_reward
from genenv_engine.method.coevolution import CoEvolution, UnknownTask
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends


def no_update(ep, roles, trained):
    """An outside trainer's update that leaves the session's agent as it is."""
    return {"steps": 0.0}


PATTERNS = ([1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0])
"""The rewards recorded for the i-th task of an epoch: PATTERNS[i % 3]."""


def test_an_outside_trainer_feeds_the_core(tmp_path):
    session = Session.create(load_config("micro", overrides={"epochs": 2}), tmp_path / "s")
    events = []
    with CoEvolution(session, events.append, backend_factory=scripted_backends()) as coevo:
        coevo.start()
        assert coevo.epoch == 1 and not coevo.finished
        first = coevo.begin_epoch()
        with pytest.raises(RuntimeError, match="epoch 1 is open"):
            coevo.begin_epoch()
        for i, task in enumerate(first):
            assert coevo.record(task.id, PATTERNS[i % 3], responses=[f"answer {i}"] * 4) == "recorded"
        done = coevo.end_epoch(no_update, {"trainer": 1.5})
        second = coevo.begin_epoch()
        assert coevo.record(first[0].id, [1.0, 0.0], epoch=1) == "late"  # read ahead of the boundary
        with pytest.warns(UnknownTask, match="no/such/task"):
            assert coevo.record("no/such/task", [1.0, 1.0, 1.0]) == "unknown"
        for task in second:
            coevo.record(task.id, [0.0, 1.0, 0.0, 1.0], epoch=2)
        last = coevo.end_epoch(no_update)
        assert coevo.finished
    assert coevo.summary == {"epochs_done": 2}

    fresh = [t for t in first if t.origin == "generated"]
    assert fresh and done["tasks_trained"] == len(first) and done["rollouts_recorded"] == 4 * len(first)
    assert done["agent_update"] == {"steps": 0.0} and done["phase_seconds"]["trainer"] == 1.5
    assert done["late_rollouts"] == {} and done["unknown_rollouts"] == 0
    assert last["late_rollouts"] == {"1": 2} and last["unknown_rollouts"] == 3
    assert {"heldout_eval", "checkpoint", "simulator_update"} <= set(done["phase_seconds"])
    assert session.store.rollout_counts() == {
        0: {"heldout": 24},
        1: {"heldout": 24, "train": 4 * len(first)},
        2: {"heldout": 24, "late": 2, "train": 4 * len(second)},
    }
    assert session.checkpoint_epochs() == [0, 1, 2]

    # each batch's p-hat pools its tasks' recorded successes, and R_env is Eq. 3 of it
    db = sqlite3.connect(session.path / "genenv.db")
    batch_of = dict(db.execute("select id, batch_id from tasks where epoch = 1 and valid = 1 and origin = 'generated'"))
    position = {t.id: i for i, t in enumerate(first)}
    cur = session.config.curriculum
    stored = db.execute("select id, p_hat, r_env from batches where epoch = 1").fetchall()
    assert len(stored) == len(set(batch_of.values())) == done["batches"]
    for batch, p_hat, r_env in stored:
        rewards = [r for t, b in batch_of.items() if b == batch for r in PATTERNS[position[t] % 3]]
        assert p_hat == pytest.approx(sum(rewards) / len(rewards))
        assert r_env == pytest.approx(env_reward(p_hat, cur.reward, cur.alpha_for("bfcl"), cur.beta))
    responses = {r for (r,) in db.execute("select response from rollouts where epoch = 1 and purpose = 'train'")}
    assert responses == {f"answer {i}" for i in range(len(first))}
    kinds = [e.kind for e in events if e.epoch == 1 and e.kind in ("PhaseFinished", "EpochFinished")]
    assert kinds[-1] == "EpochFinished" and "trainer" in [e.phase for e in events if e.kind == "PhaseFinished"]


def test_an_epoch_the_trainer_leaves_open_is_partial_and_redone(tmp_path):
    session = Session.create(load_config("micro", overrides={"epochs": 2}), tmp_path / "s")
    with CoEvolution(session, backend_factory=scripted_backends()) as coevo:
        coevo.start()
        tasks = coevo.begin_epoch()
        coevo.record(tasks[0].id, [1.0, 0.0])
    assert coevo.summary == {"stopped_at": 1, "epochs_done": 0}
    assert [(m["epoch"], m["status"]) for m in session.store.epoch_metrics()] == [(0, "done"), (1, "partial")]
    with CoEvolution(session, backend_factory=scripted_backends()) as again:
        again.start()
        assert again.epoch == 1
    assert session.store.rollout_counts() == {0: {"heldout": 24}}  # the partial epoch's rows dropped
