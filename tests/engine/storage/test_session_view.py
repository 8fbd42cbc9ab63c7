"""SessionView: one typed reader of a session's stored epochs and batches.

The unit tests write a small session through the store's own methods (no engine); one module-scoped micro run with
``curriculum.reward = "agent0"`` and the steer word on checks the whole path: what the loop stores for each batch
(R_env, alpha, prompt note) is what the view, the console's reopened state and the report show.
"""

from __future__ import annotations

import dataclasses
import math
import shutil
import sqlite3

import pytest

from genenv_engine.config import load_config
from genenv_engine.core.curriculum import agent0_reward, alpha_reward
from genenv_engine.method.loop import run
from genenv_engine.method.simulator_update import success_by_epoch, success_history
from genenv_engine.method.strategies import epoch_note
from genenv_engine.storage.session import Session
from genenv_engine.storage.session_view import BatchView, PromptNote, SessionView
from genenv_engine.storage.store import Store
from genenv_engine.testing import scripted_backends

ALPHAS = {"curriculum.reward": "agent0", "curriculum.alpha": 0.5, "curriculum.alpha_by_benchmark": {"bfcl": 0.3}}


def batch(id: str, epoch: int, p_hat: float | None, **stored) -> dict:
    """A `batches` row as the loop writes one (``stored``: r_env, alpha, in_band, prompt_note; unset ones NULL)."""
    return {
        "id": id,
        "epoch": epoch,
        "benchmark": "bfcl",
        "seed_task_id": "bfcl/seed/00000",
        "n_generated": 2,
        "n_valid": 2,
        "p_hat": p_hat,
        **stored,
    }


@pytest.fixture
def written(tmp_path):
    """A session folder whose store holds a finished epoch 0 and a partial epoch 1 with three batches: one with
    every value stored, one as an older genenv stored it (no alpha, R_env or band flag), one never scored."""
    session = Session.create(load_config("micro", overrides=ALPHAS), tmp_path / "written")
    store = session.store
    store.start_epoch(0)
    store.finish_epoch(
        0, {"heldout": {"bfcl": 0.25}, "heldout_correct": {"bfcl": "0101"}, "phase_seconds": {"warm_start": 1.5}}
    )
    store.start_epoch(1)
    store.upsert_batches(
        [
            batch(
                "e1/a",
                1,
                0.5,
                r_env=0.123,
                alpha=0.35,
                in_band=True,
                prompt_note={"steer": "harder", "success_line": None},
            )
        ]
    )
    store.upsert_batches([batch("e1/b", 1, 0.55), batch("e1/c", 1, None)])
    store.close()
    return session.path


def test_stored_values_are_read_as_stored_and_missing_ones_come_from_the_sessions_config(written):
    view = SessionView.open(written)
    assert view.config.curriculum.reward == "agent0" and view.path == written
    assert [(e.epoch, e.status, e.done) for e in view.epochs] == [(0, "done", True), (1, "running", False)]
    a, b, c = view.batches_of(1)
    # stored: returned as written, even where no formula gives that number
    assert (a.r_env, a.alpha, a.in_band, a.prompt_note) == (0.123, 0.35, True, PromptNote(steer="harder"))
    assert a.r_env_stored and a.alpha_stored and a.in_band_stored and a.prompt_note.text == "harder"
    # not stored: the benchmark's own alpha (0.3, not the global 0.5) and the agent0 reward, not the alpha reward
    assert (b.alpha, b.alpha_stored, b.r_env_stored, b.in_band_stored) == (0.3, False, False, False)
    assert b.r_env == pytest.approx(agent0_reward(0.55, 0.3)) == pytest.approx(0.5)
    assert not math.isclose(b.r_env, alpha_reward(0.55, 0.5, 2.0)) and not math.isclose(b.r_env, agent0_reward(0.55))
    assert b.in_band is False  # |0.55 - 0.3| > k_min; against the global alpha it would be kept
    assert b.prompt_note is None
    assert (c.scored, c.p_hat, c.r_env, c.in_band) == (False, None, None, None)
    # derived helpers over the scored batches, each against its own alpha
    assert view.p_hats(1) == [0.5, 0.55] and view.r_envs(1) == [0.123, pytest.approx(0.5)]
    assert view.in_band_fraction(1) == 0.5
    assert view.calibration_error(1) == pytest.approx((abs(0.5 - 0.35) + abs(0.55 - 0.3)) / 2)
    assert view.prompt_notes(1) == {"bfcl": PromptNote(steer="harder")}
    assert view.heldout(0) == {"bfcl": 0.25} and view.heldout_correct(0) == {"bfcl": "0101"}
    assert view.heldout(1) == {} and view.heldout_correct(7) == {} and view.epoch(7) is None
    assert view.reward == "agent0" and view.reward_formula == "max(0, 1 - 2 |p̂ - alpha|)"


def test_a_view_is_read_only_and_its_rows_are_copies(written):
    view = SessionView.open(written)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.batches[0].r_env = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.epochs[0].metrics["heldout"]["bfcl"] = 1.0  # type: ignore[index]
    row = view.epochs[0].row()
    row["heldout"]["bfcl"] = 1.0
    assert view.heldout(0) == {"bfcl": 0.25}
    assert row == {
        "epoch": 0,
        "status": "done",
        "started_at": view.epochs[0].started_at,
        "finished_at": view.epochs[0].finished_at,
        "heldout": {"bfcl": 1.0},
        "heldout_correct": {"bfcl": "0101"},
        "phase_seconds": {"warm_start": 1.5},
    }
    with Store(written / "genenv.db") as store:  # the same rows as the store's own readers give
        assert view.epochs[0].row() == store.epoch_metrics()[0]
        assert SessionView.from_store(store, view.config) == dataclasses.replace(view, path=None)


def test_opening_a_folder_without_a_session_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a genenv session"):
        SessionView.open(tmp_path)


def test_the_alpha_of_an_old_batch_follows_the_config_not_a_fixed_default():
    rows = [batch("e1/x", 1, 0.2)]
    for overrides, alpha, r_env in (
        ({"curriculum.reward": "uniform"}, 0.5, 1.0),
        ({"curriculum.alpha": 0.2}, 0.2, 1.0),
        ({"curriculum.beta": 10.0}, 0.5, math.exp(-10 * 0.09)),
    ):
        (view,) = SessionView.from_rows(load_config("micro", overrides=overrides), [], rows).batches
        assert isinstance(view, BatchView) and (view.alpha, view.r_env) == (alpha, pytest.approx(r_env)), overrides


# -- one real run ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def agent0(tmp_path_factory):
    """A 2-epoch micro session scored with the agent0 reward and asking with the steer word; the scripted agent
    solves 80% of its tasks, so batch p-hats sit away from 0.5, where the agent0 and alpha rewards differ."""
    overrides = {
        "curriculum.reward": "agent0",
        "simulator.note": "steer",
        "heldout_size": 12,
        "agent.replay_tasks": 4,
        "simulator.seeds_per_epoch": 3,
    }
    session = Session.create(load_config("micro", overrides=overrides), tmp_path_factory.mktemp("view") / "agent0")
    factory = scripted_backends(p=0.8)
    assert run(session, backend_factory=factory) == {"epochs_done": 2}
    session.store.close()
    return session.path, factory.made["simulator"].prompts


def test_the_loop_stores_each_batchs_r_env_alpha_and_prompt_note(agent0):
    path, prompts = agent0
    view = SessionView.open(path)
    with Store(path / "genenv.db") as store:
        rows = store.batches()
        rates = success_by_epoch(store)
    assert rows and {r["epoch"] for r in rows} == {1, 2}
    for row, b in zip(rows, view.batches, strict=False):
        assert b.r_env_stored and b.alpha_stored and b.in_band_stored
        assert (b.r_env, b.alpha) == (row["r_env"], 0.5)
        assert b.r_env == pytest.approx(agent0_reward(b.p_hat, 0.5))
    for epoch in (1, 2):
        word = epoch_note(view.config, "bfcl", success_history(rates, "bfcl", epoch))
        assert word in ("easier", "same", "harder")  # the steer note's words
        assert {b.prompt_note for b in view.batches_of(epoch)} == {PromptNote(steer=word)}
        # the word the batch stored is the one its prompts carried
        assert any(f"{word}| " in p for p in prompts)
    assert view.batches_of(1)[0].prompt_note.text == "same"  # nothing measured before epoch 1


def test_a_reopened_agent0_session_shows_the_stored_r_env_in_the_console(agent0):
    from genenv_console.state import RunState

    path, _ = agent0
    view = SessionView.open(path)
    with Store(path / "genenv.db") as store:
        stored = [b for b in store.batches(2) if b["p_hat"] is not None]
    state = RunState.from_view("agent0", view)
    hist = state.histogram()
    assert hist.epoch == 2 and hist.p_hats == [b["p_hat"] for b in stored]
    assert hist.r_envs == [b["r_env"] for b in stored]
    assert hist.in_band_fraction() == sum(b["in_band"] for b in stored) / len(stored)
    assert any(not math.isclose(r, alpha_reward(p, 0.5, 2.0)) for p, r in zip(hist.p_hats, hist.r_envs, strict=False))
    # without the batches (metrics only) the state scores p-hats with the session's reward kind, not the alpha one
    rows_only = RunState.from_session("agent0", view.config, [e.row() for e in view.epochs]).histogram()
    assert rows_only.r_envs == [agent0_reward(p, 0.5) for p in rows_only.p_hats]


def test_an_old_database_without_stored_r_env_is_scored_with_the_sessions_reward(agent0, tmp_path):
    path, _ = agent0
    copy = tmp_path / "old"
    shutil.copytree(path, copy, ignore=shutil.ignore_patterns("checkpoints"))
    with sqlite3.connect(copy / "genenv.db") as conn:
        conn.execute("UPDATE batches SET r_env = NULL, alpha = NULL, prompt_note = NULL")
    old, new = SessionView.open(copy), SessionView.open(path)
    assert [b.r_env_stored for b in old.batches] == [False] * len(new.batches)
    assert [b.r_env for b in old.batches] == pytest.approx([b.r_env for b in new.batches])
    assert [b.prompt_note for b in old.batches] == [None] * len(new.batches)


def test_the_report_labels_and_scores_the_agent0_session_by_its_reward(agent0):
    from genenv_engine.reports.data import load_session

    path, _ = agent0
    data, view = load_session(path), SessionView.open(path)
    assert data.reward == "agent0" and data.label == "GenEnv (trained), agent0 R_env" and "uniform" not in data.label
    for e in data.done_epochs[1:]:
        assert e.r_envs == view.r_envs(e.epoch)
