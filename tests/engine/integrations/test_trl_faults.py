"""Faults on the TRL reward path (`genenv_engine.integrations.trl`), scored without a trainer: the reward function
is called as TRL calls it. A task id no epoch issued is skipped (None) and counted; a batch whose groups came in part
gets its p-hat from what was scored, with the attempts counted; a plugin whose check raises or hangs fails that
completion (None, stored with its fault, counted in the epoch's ``plugin_faults``) and the trainer goes on."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("trl")

from genenv_engine.config import load_config  # noqa: E402
from genenv_engine.integrations.trl import TrlCoEvolution, _adopt  # noqa: E402
from genenv_engine.storage.progress import epoch_line  # noqa: E402
from genenv_engine.storage.session import Session  # noqa: E402

SMALL = {
    "epochs": 1,
    "simulator.seeds_per_epoch": 2,
    "agent.rollouts": 4,
    "agent.replay_tasks": 4,
    "heldout_size": 24,
}
"""The tiny preset cut to seconds: epoch 1 writes 4 fresh tasks in 2 batches and replays 4."""


def stored(folder: Path, sql: str, *params) -> list[tuple]:
    with sqlite3.connect(folder / "genenv.db") as db:
        return db.execute(sql, params).fetchall()


def metrics_of(folder: Path, epoch: int) -> dict:
    return {m["epoch"]: m for m in Session.open(folder).store.epoch_metrics()}[epoch]


def chat(text: str) -> list[dict]:
    return [{"role": "assistant", "content": text}]


@pytest.mark.slow
def test_a_batch_scored_in_part_and_unknown_ids_are_counted(tmp_path, recwarn):
    folder = tmp_path / "s"
    coevo = TrlCoEvolution(folder, config=load_config("tiny", overrides=SMALL), steps_per_epoch=1)
    with coevo:
        op = coevo.core._open
        by_batch: dict[str, list] = {}
        for task in op.fresh.tasks:
            by_batch.setdefault(op.fresh.batch_of[task.id], []).append(task)
        batch, (first, _second) = next((b, ts) for b, ts in by_batch.items() if len(ts) == 2)
        # half a group of one of the batch's two tasks, none of the other; two rows of a task no epoch issued
        got = coevo.reward(
            prompts=[[]] * 4,
            completions=[chat(first.answer), chat("no"), chat("x"), chat("y")],
            task_id=[first.id, first.id, "gen/e9/none", "gen/e9/none"],
            genenv_epoch=[1, 1, 1, 1],
        )
        assert got == [1.0, 0.0, None, None]
        assert [w for w in recwarn if "gen/e9/none" in str(w.message)]
        coevo.core.end_epoch(_adopt(None, 0))
    m = metrics_of(folder, 1)
    assert stored(folder, "select id, p_hat, n_valid from batches where epoch = 1") == [(batch, 0.5, 1)]
    assert m["batch_p_hats"] == [0.5] and m["batch_attempts"] == [2]
    assert (m["rollouts_recorded"], m["unknown_rollouts"]) == (2, 2)
    assert (m["unscored_tasks"], m["unscored_batches"]) == (len(op.tasks) - 1, len(by_batch) - 1)
    assert f"unknown=2 unscored={len(op.tasks) - 1} tasks" in epoch_line(m, 1)


@pytest.mark.subprocess  # the plugin's checks run in a forked worker
@pytest.mark.slow
def test_a_plugin_check_that_raises_or_hangs_in_the_reward_is_counted_and_the_trainer_goes_on(flaky, tmp_path):
    from genenv_engine.environments import environments_of
    from genenv_engine.training.warmstart import warm_start

    overrides = {"benchmarks": ["flaky_envs:Flaky"], "epochs": 1, "simulator.plugin_timeout": 0.3}
    cfg = load_config("micro", overrides=overrides)
    flaky.MODE.update(validate="ok", check="ok", sibling="ok", draft="ok")
    warm_start(cfg, environments_of(cfg))  # trained (or found cached) while nothing misbehaves
    folder = tmp_path / "s"
    with TrlCoEvolution(folder, config=cfg, steps_per_epoch=1) as coevo:

        def check(mode: str) -> None:  # the plugin's checks run in a forked worker: fork it again with the mode
            flaky.MODE["check"] = mode
            coevo._envs["flaky"]._plugin_worker.stop()

        tasks = list(coevo._tasks[1].values())[:2]
        ids = [tasks[0].id] * 2 + [tasks[1].id] * 2
        check("raise")
        assert coevo.reward(prompts=[[]] * 4, completions=["a"] * 4, task_id=ids, genenv_epoch=[1] * 4) == [None] * 4
        check("sleep")  # past the 0.3 s limit
        hung = coevo.reward(prompts=[[]] * 2, completions=["b"] * 2, task_id=ids[:2], genenv_epoch=[1, 1])
        assert hung == [None, None]
        check("ok")
        scored = coevo.reward(prompts=[[]] * 2, completions=[tasks[1].answer] * 2, task_id=ids[2:], genenv_epoch=[1, 1])
        assert scored == [1.0, 1.0]
        coevo.core.end_epoch(_adopt(None, 0))
    m = metrics_of(folder, 1)
    assert m["plugin_faults"]["flaky"]["rollouts"] == {"plugin_error": 4, "plugin_timeout": 2}
    errors = stored(
        folder, "select error_type, count(*) from rollouts where epoch = 1 and purpose = 'train' group by 1"
    )
    assert dict(errors) == {"plugin_error: KeyError": 4, "plugin_timeout": 2, None: 2}
    assert m["rollouts_recorded"] == 8 and coevo.summary == {"epochs_done": 1}
    assert "PLUGIN FAULTS flaky: 4 rollouts plugin_error, 2 rollouts plugin_timeout" in epoch_line(m, 1)
