"""The estimated-success rewards (`genenv_engine.method.rewards`, ``curriculum.reward = "shrunk"`` or
``"predicted"``) in a real micro run whose batches a scripted simulator wrote and a scripted agent attempted: every
stored batch's R_env and band flag follow its estimate, which the store alone gives back (a resumed run computes the
same), and the strategies are named, not branched on."""

from __future__ import annotations

import pytest

from genenv_engine.config import load_config
from genenv_engine.core.curriculum import alpha_reward
from genenv_engine.core.estimators import ESTIMATORS, HORIZON
from genenv_engine.method.loop import run
from genenv_engine.method.rewards import EstimatedReward, split_tallies
from genenv_engine.method.strategies import get
from genenv_engine.storage.session import Session
from genenv_engine.testing import scripted_backends


@pytest.fixture(scope="module", params=sorted(ESTIMATORS))
def session(request, tmp_path_factory) -> Session:
    path = tmp_path_factory.mktemp(request.param) / "s"
    overrides = {"epochs": 2, "simulator.seeds_per_epoch": 12, "curriculum.reward": request.param}
    made = Session.create(load_config("micro", overrides=overrides), path)
    run(made, backend_factory=scripted_backends())
    made.store.close()
    return Session.open(path)


def test_every_batch_is_scored_on_its_estimate_which_the_store_gives_back(session):
    cur = session.config.curriculum
    estimator = ESTIMATORS[cur.reward]
    metrics = {m["epoch"]: m for m in session.store.epoch_metrics()}
    moved = 0
    for epoch in (1, 2):
        rows = [b for b in session.store.batches(epoch) if b["p_hat"] is not None]
        assert len(rows) >= 4
        tallies = session.store.training_tallies(epoch, since=epoch - HORIZON + 1)
        batches, history = split_tallies(tallies, epoch, [b["id"] for b in rows])
        assert all(batches) and history  # each batch's attempts, and the replayed base tasks' beside them
        found = estimator(batches, history)
        for row, tallies, value in zip(rows, batches, found.values, strict=True):
            assert value is not None
            assert sum(t.successes for t in tallies) / sum(t.attempts for t in tallies) == pytest.approx(row["p_hat"])
            assert row["r_env"] == pytest.approx(alpha_reward(value, cur.alpha_for(row["benchmark"]), cur.beta))
            assert bool(row["in_band"]) == cur.keeps(value, row["benchmark"])
            moved += abs(value - row["p_hat"]) > 0.01
        recorded = metrics[epoch]["reward_estimate"]
        assert recorded["estimator"] == cur.reward
        assert recorded["batch_estimates"] == {
            r["id"]: round(float(v), 4) for r, v in zip(rows, found.values, strict=True)
        }
        assert metrics[epoch]["r_env_mean"] == pytest.approx(sum(r["r_env"] for r in rows) / len(rows))
    assert moved  # the estimate is not the raw p-hat (else this test could not tell them apart)


def test_the_tasks_carry_their_batch_s_estimated_reward(session):
    rows = session.store.batches(2)
    by_batch = session.store.tasks_in_batches([b["id"] for b in rows], origin="generated")
    checked = 0
    for row in rows:
        for task in by_batch[row["id"]]:
            stats = session.store.task_stats(task.id)
            if stats and stats["n_rollouts"]:
                assert stats["r_env"] == pytest.approx(row["r_env"])
                checked += 1
    assert checked


def test_the_rewards_are_registered_by_name():
    for name in ESTIMATORS:
        cfg = load_config("micro", overrides={"curriculum.reward": name})
        reward = get("reward", name)(cfg)
        assert isinstance(reward, EstimatedReward) and reward.estimator is ESTIMATORS[name]
