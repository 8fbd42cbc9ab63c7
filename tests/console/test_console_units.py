"""Unit tests of the console's plain parts: run state folding, the runner's sink, data helpers, latency, CLI."""

from __future__ import annotations

import json
import random

import pytest
from conftest import FIXED_METRICS

from genenv_console import messages as M
from genenv_console.__main__ import main, make_app
from genenv_console.data import (
    PAGE_SIZE,
    TaskFilter,
    apply_edit,
    export_jsonl,
    list_sessions,
    next_revision_id,
    table_row,
    task_page,
    toggle_status,
)
from genenv_console.latency import LatencyProbe, percentile
from genenv_console.runner import EngineRunner
from genenv_console.screens.sessions import form_config
from genenv_console.state import RunState, describe
from genenv_engine.config import ConfigError, load_config
from genenv_engine.core import events as ev
from genenv_engine.environments import get_environment
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.storage.store import Store


def state() -> RunState:
    return RunState.from_session("s", load_config("micro", overrides={"epochs": 3}), [])


def test_state_folds_a_run_into_plot_series():
    s = state()
    assert s.run == "idle" and s.calibration().points == {"bfcl": []} and s.histogram().epoch is None
    s.apply(ev.RunStarted(0, "s", {}, 0))
    assert s.run == "running" and s.active
    s.apply(ev.EpochFinished(0, FIXED_METRICS[0]))
    s.apply(ev.EpochStarted(1))
    s.apply(ev.PhaseStarted(1, "rollout"))
    s.apply(ev.BatchProgressed(1, "rollout", 3, 8))
    assert (s.epoch, s.phase, s.progress) == (1, "rollout", ("rollout", 3, 8))
    changed = s.apply(ev.AttemptsScored(1, 8, 32, 0.5, [0.25, 0.5], [0.88, 1.0]))
    assert "plots" in changed and s.histogram().p_hats == [0.25, 0.5] and s.histogram().r_envs == [0.88, 1.0]
    s.apply(ev.EpochFinished(1, FIXED_METRICS[1]))
    assert s.calibration().points == {"bfcl": [(1, 0.625)]}
    assert s.heldout() == {"bfcl": [(0, 0.125), (1, 0.25)]}
    epochs, phases = s.phase_seconds()
    assert epochs == [0, 1] and list(phases)[:2] == ["warm_start", "generate"] and phases["rollout"] == [0.0, 2.4]
    assert s.throughput() == [(1, 410.0)]
    # a resume from epoch 1 forgets what epoch 1 showed before (the partial epoch is redone)
    s.apply(ev.RunStarted(1, "s", {}, 1))
    assert s.calibration().points == {"bfcl": []} and s.histogram().epoch is None and s.epochs_done() == 0


def test_state_pause_resume_stop_and_failure():
    s = state()
    s.apply(ev.RunStarted(0, "s", {}, 0))
    s.request_pause()
    assert s.run == "pausing"
    s.apply(ev.RunPaused(1))
    assert s.run == "paused"
    s.request_resume()
    s.apply(ev.RunResumed(1))
    assert s.run == "running"
    s.request_stop()
    s.apply(ev.RunPaused(1))  # a stop wins over a late pause
    assert s.run == "stopping"
    s.apply(ev.RunStopped(1, "stop requested"))
    assert s.run == "stopped" and not s.active
    s.apply(ev.RunFailed(1, "boom"))
    assert s.run == "failed" and s.error == "boom"


def test_state_from_stored_epochs():
    rows = [{"epoch": e, "status": "done", **m} for e, m in FIXED_METRICS.items()] + [{"epoch": 3, "status": "partial"}]
    s = RunState.from_session("s", load_config("micro", overrides={"epochs": 3}), rows)
    assert s.run == "stopped" and s.epoch == 3 and s.epochs_done() == 2
    hist = s.histogram()
    assert hist.epoch == 2 and hist.p_hats == FIXED_METRICS[2]["batch_p_hats"] and len(hist.r_envs) == 4
    assert hist.counts(4) == [0, 1, 3, 0] and hist.in_band_fraction() == pytest.approx(0.5)


def test_state_of_a_reopened_session_shows_the_stored_r_env_and_band_flags():
    from genenv_engine.storage.session_view import SessionView

    cfg = load_config("micro", overrides={"epochs": 3, "curriculum.reward": "agent0"})
    rows = [{"epoch": e, "status": "done", **m} for e, m in FIXED_METRICS.items()]
    store = Store(":memory:")
    # epoch 2 as the engine stored it (R_env values no formula of p-hat gives, so a recomputation would show);
    # epoch 1 as an older genenv did (no R_env): scored with the session's agent0 reward
    store.upsert_batches(
        [
            {
                "id": f"e2/{i}",
                "epoch": 2,
                "benchmark": "bfcl",
                "p_hat": p,
                "r_env": 0.1 * (i + 1),
                "in_band": i < 3,
                "alpha": 0.5,
            }
            for i, p in enumerate(FIXED_METRICS[2]["batch_p_hats"])
        ]
    )
    store.upsert_batches(
        [
            {"id": f"e1/{i}", "epoch": 1, "benchmark": "bfcl", "p_hat": p}
            for i, p in enumerate(FIXED_METRICS[1]["batch_p_hats"])
        ]
    )
    view = SessionView.from_rows(cfg, rows, store.batches())
    s = RunState.from_view("s", view)
    assert s.epochs_done() == 2 and sorted(s.stored) == [1, 2]
    hist = s.histogram()
    assert hist.epoch == 2 and hist.p_hats == FIXED_METRICS[2]["batch_p_hats"]
    assert hist.r_envs == pytest.approx([0.1, 0.2, 0.3, 0.4]) and hist.in_band_fraction() == 0.75
    assert s.stored[1][1] == [1.0 - 2 * abs(p - 0.5) for p in FIXED_METRICS[1]["batch_p_hats"]]  # agent0, not alpha
    # a run resumed from epoch 2 drops what the reopened epoch 2 showed
    s.apply(ev.RunStarted(2, "s", {}, 2))
    assert s.histogram().epoch == 1 and s.histogram().r_envs == s.stored[1][1]


def test_describe_lines():
    assert describe(ev.BatchProgressed(1, "rollout", 1, 2)) is None
    assert describe(ev.TasksGenerated(2, "bfcl", 8, 6, {"parse_error": 2})) == "e2 bfcl: 6/8 valid (parse_error 2)"
    assert describe(ev.RunStopped(3, "stop requested")) == "stopped in epoch 3: stop requested (resumable)"
    assert "FAILED" in describe(ev.RunFailed(1, "x"))


def test_runner_sink_wraps_throttles_and_pauses_after_epoch():
    posted: list = []
    runner = EngineRunner(posted.append, min_interval=60.0)
    for done in range(1, 11):
        runner.sink(ev.BatchProgressed(1, "rollout", done, 10))
    assert [m.event.done for m in posted] == [1, 10]  # throttled, but the last batch always goes through
    assert all(isinstance(m, M.BatchProgressed) and m.runner is runner for m in posted)
    runner.sink(ev.EpochFinished(1, {}))
    assert not runner.control.paused and isinstance(posted[-1], M.EpochFinished)
    runner.pause_after_epoch = True
    runner.sink(ev.EpochFinished(2, {}))
    assert runner.control.paused
    assert {cls.__name__ for cls in M.ENGINE_MESSAGES.values()} == {
        c.__name__ for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.Event) and c is not ev.Event
    }


@pytest.fixture
def memory_store():
    store = Store(":memory:")
    env = get_environment("bfcl", 0)
    store.insert_tasks(env.splits()["seed"][:5])
    return store


def test_revision_ids_and_edits(memory_store):
    store = memory_store
    seed = store.get_task("bfcl/seed/00000")
    assert next_revision_id(store, seed.id) == "bfcl/seed/00000/r1"
    assert apply_edit(store, seed.id, seed.prompt, seed.answer).error == "nothing changed"
    bad = apply_edit(store, seed.id, "F: add(a:int,b:int) | Q: add 3 and 5", "add(a=3,b=9)")
    assert not bad.ok and bad.error.startswith("invalid: answer_mismatch") and store.count_tasks(origin="edited") == 0
    prompt, answer, *_ = generate_task(2, random.Random(5))
    good = apply_edit(store, seed.id, prompt, answer)
    assert good.ok and good.task.id == "bfcl/seed/00000/r1" and good.task.origin == "edited"
    again = apply_edit(store, seed.id, prompt + " ", answer)
    assert not again.ok and "already revised" in again.error
    prompt2, answer2, *_ = generate_task(1, random.Random(6))
    second = apply_edit(store, good.task.id, prompt2, answer2)
    assert second.ok and second.task.id == "bfcl/seed/00000/r2" and second.task.parent_id == good.task.id
    assert [t.id for t in store.lineage(second.task.id)] == [second.task.id, good.task.id, seed.id]
    assert toggle_status(store, seed.id, "banned") == "banned" and toggle_status(store, seed.id, "banned") == "active"


def test_an_edit_that_cannot_be_checked_here_is_refused_and_stores_nothing(memory_store, monkeypatch):
    store = memory_store
    seed = store.get_task("bfcl/seed/00000")
    store.insert_tasks([seed.with_(id="elsewhere/seed/0", benchmark="elsewhere")])
    prompt, answer, *_ = generate_task(2, random.Random(5))
    missing = apply_edit(store, "elsewhere/seed/0", prompt, answer)
    assert not missing.ok and missing.error.startswith("cannot check the edit here: unknown benchmark 'elsewhere'")
    env_class = type(get_environment("bfcl", 0))

    def boom(self, *args, **kwargs):
        raise RuntimeError("checker crashed")

    monkeypatch.setattr(env_class, "validate", boom)  # test double: an environment whose own code raises
    raised = apply_edit(store, seed.id, prompt, answer)
    assert (raised.ok, raised.error) == (False, "bfcl's validate raised RuntimeError: checker crashed")
    assert store.count_tasks(origin="edited") == 0 and not (store.task_stats(seed.id) or {}).get("superseded_by")


def test_task_page_never_reads_more_than_a_page(memory_store):
    store = memory_store
    base = store.get_task("bfcl/seed/00000")
    store.insert_tasks([base.with_(id=f"x/{i:04d}") for i in range(PAGE_SIZE * 2 + 3)])
    total = store.count_tasks()
    page = task_page(store, TaskFilter(), page=99)
    assert page.page == 2 and len(page.rows) == total - 2 * PAGE_SIZE and page.pages == 3
    assert len(task_page(store, TaskFilter()).rows) == PAGE_SIZE
    assert task_page(store, TaskFilter(origin="edited")).total == 0
    row = table_row(store.query_tasks(limit=1)[0])
    assert len(row) == 10 and row[6] == "-"


def test_sessions_listing_and_streamed_export(fixed_session, tmp_path):
    (fixed_session.parent / "not-a-session").mkdir()
    [info] = list_sessions(fixed_session.parent)
    assert (info.preset, info.mode, info.epochs_done, info.target) == ("micro", "trained", 2, 3)
    assert info.status == "resumable"
    assert list_sessions(tmp_path / "missing") == []
    paths, n = export_jsonl(fixed_session, page=7)
    kept = [json.loads(x) for x in paths[1].read_text().splitlines()]
    rejected = [json.loads(x) for x in paths[2].read_text().splitlines()]
    assert n == len(kept) + len(rejected) == 36 and len({t["id"] for t in kept + rejected}) == 36
    assert kept and all(t["valid"] or t["split"] in ("seed", "train", "heldout") for t in kept)
    assert rejected and all(not t["valid"] and t["split"] == "generated" and t["reason"] for t in rejected)


def test_latency_probe_and_percentiles():
    probe = LatencyProbe(interval=0.05)
    probe.tick(0.0)
    probe.tick(0.06)  # not recording yet
    probe.recording = True
    probe.tick(0.12)
    probe.tick(0.20)
    probe.key_shown(7, 1.0, "down", now=1.004)
    probe.key_shown(7, 1.0, "down", now=1.002)  # a second step of the same key: the latest repaint counts
    probe.recording = False
    probe.key_shown(8, 2.0, "t", now=2.5)  # not recording
    summary = probe.summary({"moves": ("down", "up")})
    assert summary["timer_lateness"]["n"] == 2 and summary["timer_lateness"]["max_ms"] == pytest.approx(30.0)
    assert summary["key_to_screen"]["p50_ms"] == pytest.approx(4.0) and summary["key_to_screen[moves]"]["n"] == 1
    assert percentile([3.0, 1.0, 2.0], 100) == 3.0


def test_create_form_config():
    config = form_config(
        "micro",
        {"benchmarks": "bfcl", "alpha": "0.4", "beta": "5", "k_min": "0.2", "lambda": "2", "epochs": "4"},
        "frozen",
    )
    assert (config.curriculum.alpha, config.curriculum.beta, config.curriculum.k_min) == (0.4, 5.0, 0.2)
    assert (config.simulator.rwr_lambda, config.epochs, config.simulator.mode) == (2.0, 4, "frozen")
    with pytest.raises(ConfigError, match="curriculum.beta"):
        form_config(
            "micro",
            {"benchmarks": "bfcl", "alpha": "0.4", "beta": "x", "k_min": "0.2", "lambda": "2", "epochs": "4"},
            "trained",
        )


def test_cli_errors_and_factory(tmp_path, capsys):
    assert main(["--preset", "nope", "--sessions-root", str(tmp_path)]) == 2
    assert "unknown preset" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
    assert main([str(tmp_path), "--preset", "micro"]) == 2
    app = make_app(preset="micro", overrides={"epochs": 1}, sessions_root=tmp_path, autostart=False)
    assert app.initial_session.parent == tmp_path and (app.initial_session / "config.toml").exists()
    resumed = make_app(app.initial_session, overrides={"epochs": 4}, sessions_root=tmp_path, autostart=False)
    assert "epochs = 4" in (resumed.initial_session / "config.toml").read_text()


async def test_browse_opens_the_sessions_screen(fixed_session):
    app = make_app(sessions_root=fixed_session.parent, browse=True)
    started: list = []
    app.start_run = lambda: started.append(app.session_path)  # the fixed session has no checkpoints to run from
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        assert app.current_mode == "sessions" and app.session_path is None
        await pilot.press("enter")  # resume the highlighted (only) session
        await pilot.pause()
        assert app.session_path == fixed_session and app.current_mode == "dashboard" and started == [fixed_session]
