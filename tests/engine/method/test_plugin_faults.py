"""Every call into a plugin's code is contained: a check, validate, sibling or sampler draw that raises or runs past
``simulator.plugin_timeout`` fails its item and the epoch goes on, counted per benchmark in the epoch's line, in
``genenv status`` (text and --json), in ``genenv report`` and on the console's dashboard; a warm start that can draw no
sibling, or a plugin raising where no item can fail (its splits), stops the run with one line, never a traceback;
``genenv resume --rescore-heldout`` re-checks the held-out answers a broken checker scored and loses no row. The
plugin is the `flaky` fixture of ``tests/engine/conftest.py`` (micro runs)."""

from __future__ import annotations

import json
import random
import sqlite3

import pytest

from genenv_engine.interfaces.cli import main
from genenv_engine.storage.progress import fault_text

RUN = ["--preset", "micro", "--epochs", "1", "--quiet", "--benchmarks", "flaky_envs:Flaky"]
TIMEOUT = ["--set", "simulator.plugin_timeout=0.3"]
HELDOUT = 24
"""micro's held-out tasks per benchmark."""
DRAFTS = 8
"""micro's drafts per epoch: 4 seeds x 2 variations."""


def _warm(flaky, mode: str = "trained") -> None:
    """The micro warm start of the plugin, trained (or found cached) while nothing misbehaves."""
    from genenv_engine.config import load_config
    from genenv_engine.environments import environments_of
    from genenv_engine.training.warmstart import warm_start

    saved = dict(flaky.MODE)
    flaky.MODE.update(validate="ok", check="ok", sibling="ok", draft="ok")
    cfg = load_config("micro", overrides={"benchmarks": ["flaky_envs:Flaky"], "simulator.mode": mode})
    warm_start(cfg, environments_of(cfg))
    flaky.MODE.update(saved)


def _status(session, capsys) -> list[dict]:
    capsys.readouterr()
    assert main(["status", str(session), "--json"]) == 0
    return json.loads(capsys.readouterr().out)["epochs"]


def _count(session, sql: str, *params) -> int:
    with sqlite3.connect(session / "genenv.db") as db:
        return db.execute(sql, params).fetchone()[0]


def _tables(session) -> dict[str, int]:
    with sqlite3.connect(session / "genenv.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        names = [
            r[0]
            for r in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' "
                "AND name NOT LIKE 'tasks_fts%' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {name: db.execute(f"SELECT count(*) FROM {name}").fetchone()[0] for name in names}


def _train_rollouts(session, epoch: int) -> int:
    return _count(session, "SELECT count(*) FROM rollouts WHERE epoch = ? AND purpose = 'train'", epoch)


def test_a_trained_run_whose_check_raises_finishes_and_says_so_everywhere(flaky, tmp_path, capsys, monkeypatch):
    from genenv_console.state import RunState, history_lines
    from genenv_console.widgets.status_bar import StatusBar
    from genenv_engine.core.events import EpochFinished
    from genenv_engine.reports import build_report
    from genenv_engine.storage.store import Store

    _warm(flaky)
    flaky.MODE.update(check="raise", validate="ok")
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN]) == 0  # the drift probe's siblings used to kill it
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("epoch 1:"))
    rollouts = _train_rollouts(session, 1)
    drafts = _count(session, "SELECT count(*) FROM tasks WHERE epoch = 1 AND reason = 'plugin_error: KeyError'")
    assert rollouts > 0
    epochs = _status(session, capsys)
    assert [e["status"] for e in epochs] == ["done", "done"]
    assert epochs[0]["plugin_faults"] == {"flaky": {"heldout": {"plugin_error": HELDOUT}}}
    expected = {
        "rollouts": {"plugin_error": rollouts},
        "siblings": {"plugin_error": 8},  # the drift probe's 8
        "heldout": {"plugin_error": HELDOUT},
        **({"drafts": {"plugin_error": drafts}} if drafts else {}),
    }
    assert epochs[1]["plugin_faults"] == {"flaky": expected}
    text = fault_text(epochs[1]["plugin_faults"])  # "flaky: 32 rollouts plugin_error, 8 siblings plugin_error, ..."
    assert line.endswith(f"s PLUGIN FAULTS {text}") and f"{rollouts} rollouts plugin_error" in text
    store = Store(session / "genenv.db")
    try:
        store_metrics = store.epoch_metrics()
        metrics = store_metrics[1]
        assert metrics["agent_update"]["groups"] == 0.0  # no faulted rollout reached the agent's update
        assert metrics["batches"] == 0
        assert metrics["simulator_update"]["sibling_faults"] == {"flaky": {"plugin_error": 8}}
        log = history_lines(store)  # the console's event log (the dashboard)
    finally:
        store.close()
    assert any(x.startswith("epoch 1 finished") and x.endswith(f" — PLUGIN FAULTS {text}") for x in log)
    state = RunState()  # the dashboard's status bar
    for m in store_metrics:
        state.apply(EpochFinished(m["epoch"], m))
    bar = StatusBar()
    bar.fault_line = state.plugin_faults()
    assert bar.text.endswith(f" │ plugin faults: {text}")

    monkeypatch.setenv("COLUMNS", "400")
    assert main(["status", str(session)]) == 0
    table = capsys.readouterr().out
    assert "plugin faults" in table and f"flaky: {HELDOUT} heldout plugin_error" in table
    report = build_report([session], "md", tmp_path / "report")["md"].read_text()
    assert "## Plugin faults" in report
    assert f"| 1 | done | flaky | {text.partition(': ')[2]} |".replace("_", "\\_") in report


def test_a_frozen_run_whose_validate_hangs_and_check_raises_counts_both(flaky, tmp_path, capsys):
    _warm(flaky, "frozen")
    flaky.MODE.update(validate="sleep", check="raise")
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN, "--simulator-mode", "frozen", *TIMEOUT]) == 0
    assert "PLUGIN FAULTS flaky" in capsys.readouterr().out
    epochs = _status(session, capsys)
    assert epochs[1]["plugin_faults"] == {
        "flaky": {
            "drafts": {"plugin_timeout": DRAFTS},
            "rollouts": {"plugin_error": _train_rollouts(session, 1)},
            "heldout": {"plugin_error": HELDOUT},
        }
    }
    assert epochs[1]["validity"]["flaky"]["rejected"] == {"plugin_timeout": DRAFTS}


@pytest.mark.parametrize("mode, extra, kind", [("raise", [], "plugin_error"), ("sleep", TIMEOUT, "plugin_timeout")])
def test_a_sampler_run_whose_draws_fail_leaves_them_out_and_counts_them(flaky, tmp_path, capsys, mode, extra, kind):
    _warm(flaky, "sampler")
    flaky.MODE.update(draft=mode)
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN, "--simulator-mode", "sampler", *extra]) == 0
    epochs = _status(session, capsys)
    assert epochs[1]["plugin_faults"] == {"flaky": {"drafts": {kind: DRAFTS}}}
    assert (epochs[1]["valid_fraction"], _count(session, "SELECT count(*) FROM tasks WHERE epoch = 1")) == (0.0, 0)


@pytest.mark.parametrize("mode, extra, kind", [("raise", [], "plugin_error"), ("sleep", TIMEOUT, "plugin_timeout")])
def test_a_trained_run_whose_sibling_fails_skips_the_drift_probe_pairs(flaky, tmp_path, capsys, mode, extra, kind):
    _warm(flaky)
    flaky.MODE.update(sibling=mode)  # validate raises at loop time: no draft is admitted, the update only probes
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN, *extra]) == 0
    epochs = _status(session, capsys)
    assert epochs[1]["plugin_faults"] == {"flaky": {"drafts": {"plugin_error": DRAFTS}, "siblings": {kind: 8}}}


@pytest.mark.parametrize(
    "broken, extra, error",
    [
        ({"check": "raise"}, [], "sibling failed (KeyError: 'boom') for every warm-start pair of the simulator"),
        (
            {"sibling": "sleep"},
            TIMEOUT,
            "sibling failed (plugin_timeout: flaky.sibling ran past 0.3 s) for every warm-start pair of the simulator",
        ),
    ],
)
def test_a_cold_warm_start_that_draws_no_sibling_stops_with_one_line_and_resumes(
    flaky, tmp_path, capsys, monkeypatch, broken, extra, error
):
    from genenv_engine.storage.store import Store

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    flaky.MODE.update(validate="ok", **broken)
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN, *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("genenv: environment 'flaky' (flaky_envs.Flaky): ")
    assert error in err[0] and err[0].endswith("; fix it, then genenv resume")
    if "check" in broken:  # the agent's warm-start samples were checked, failed and shown, not fatal
        store = Store(session / "genenv.db")
        try:
            samples = [e["payload"] for e in store.events() if e["kind"] == "WarmStartSample"]
        finally:
            store.close()
        agent = [s for s in samples if s["role"] == "agent"]
        assert agent and all(not s["ok"] and s["detail"].endswith("(plugin_error: KeyError)") for s in agent)
    before = _tables(session)
    flaky.MODE.update(check="ok", sibling="ok")
    assert main(["resume", str(session), "--quiet"]) == 0
    assert "done: 1 epochs" in capsys.readouterr().out
    after = _tables(session)
    assert all(after[name] >= n for name, n in before.items()), (before, after)
    assert _status(session, capsys)[1]["status"] == "done"


def test_a_cold_warm_start_without_a_simulator_shows_failed_samples_and_finishes(flaky, tmp_path, capsys, monkeypatch):
    from genenv_engine.storage.store import Store

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    flaky.MODE.update(check="raise")
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN, "--simulator-mode", "sampler"]) == 0
    assert "warm start agent" in capsys.readouterr().out
    store = Store(session / "genenv.db")
    try:
        samples = [e["payload"] for e in store.events() if e["kind"] == "WarmStartSample"]
    finally:
        store.close()
    assert samples and all(not s["ok"] and s["detail"].endswith("(plugin_error: KeyError)") for s in samples)
    assert _status(session, capsys)[1]["plugin_faults"] == {
        "flaky": {"rollouts": {"plugin_error": _train_rollouts(session, 1)}, "heldout": {"plugin_error": HELDOUT}}
    }


def test_resume_rescores_the_heldout_a_broken_checker_scored_and_loses_no_row(flaky, tmp_path, capsys):
    from genenv_engine.reports import build_report
    from genenv_engine.storage.store import Store

    _warm(flaky)
    flaky.MODE.update(check="raise")
    session = tmp_path / "s"
    assert main(["run", "--session", str(session), *RUN]) == 0
    before = _tables(session)
    heldout = "SELECT count(*) FROM rollouts WHERE purpose = 'heldout' AND error_type LIKE 'plugin_error%'"
    assert _count(session, heldout) == 2 * HELDOUT

    flaky.MODE.update(check="ok")
    capsys.readouterr()
    assert main(["resume", str(session), "--rescore-heldout", "--epochs", "2", "--quiet"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert (
        out[0].startswith(
            f"re-scored {2 * HELDOUT} stored held-out answers: {2 * HELDOUT} changed (epoch 0: flaky 0.000 -> "
        )
        and "done: 2 epochs" in out[-1]
    )
    after = _tables(session)
    assert all(after[name] >= n for name, n in before.items()), (before, after)
    assert _count(session, "SELECT count(*) FROM rollouts WHERE epoch <= 1") == before["rollouts"]
    assert _count(session, heldout) == 0
    epochs = _status(session, capsys)
    assert [e["plugin_faults"].get("flaky", {}).get("heldout") for e in epochs] == [None, None, None]
    store = Store(session / "genenv.db")
    try:
        metrics = store.epoch_metrics()
        for m in metrics[:2]:
            rows = store.heldout_rollouts(m["epoch"])
            assert m["heldout"] == {"flaky": sum(r["success"] for r in rows) / len(rows)}
            assert m["heldout_correct"] == {"flaky": "".join(str(r["success"]) for r in rows)}
            assert [(r["changed"], r["heldout_before"]) for r in m["heldout_rescored"]] == [(HELDOUT, {"flaky": 0.0})]
        (event,) = [e for e in store.events() if e["kind"] == "HeldoutRescored"]
    finally:
        store.close()
    assert event["payload"]["changed"] == len(event["payload"]["before"]) == 2 * HELDOUT
    assert {old[3] for old in event["payload"]["before"]} == {"plugin_error: KeyError"}
    report = build_report([session], "md", tmp_path / "report")["md"].read_text()
    assert "held-out re-scored at" in report


def test_a_plugin_raising_where_no_item_can_fail_stops_with_one_line(flaky, tmp_path, capsys):
    flaky.MODE.update(draft="always")  # its splits cannot be built
    assert main(["run", "--session", str(tmp_path / "s"), *RUN]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "genenv: environment 'flaky' (flaky_envs.Flaky): draft failed (ZeroDivisionError: draft) at "
    )
    assert "flaky_envs.py:" in err[0] and err[0].endswith("; fix it, then genenv resume")


def test_contained_sibling_pairs_are_the_environments_own_and_count_what_fails(flaky):
    from genenv_engine.environments.plugin_worker import GIVE_UP, release_plugins, sibling_pairs, time_limit_plugins

    env = flaky.Flaky()
    pool = env.splits()["seed"]
    a, b = random.Random(5), random.Random(5)
    assert sibling_pairs(env, pool, a, 6).pairs == env.sibling_pairs(pool, b, 6) and a.random() == b.random()
    time_limit_plugins({"flaky": env}, 5.0)  # through the worker: the same pairs, the same random state after
    try:
        a, b = random.Random(5), random.Random(5)
        assert sibling_pairs(env, pool, a, 6).pairs == type(env).sibling_pairs(env, pool, b, 6)
        assert a.random() == b.random()
        taken: set[str] = set()
        task = env.task_at(2, random.Random(1), "flaky/x/0", taken)
        assert taken == {task.prompt}  # the worker's additions to the set come back
    finally:
        release_plugins({"flaky": env})
    flaky.MODE.update(sibling="raise")
    calls = []
    env.sibling = lambda *args: calls.append(1) or type(env).sibling(env, *args)
    drawn = sibling_pairs(env, pool, random.Random(0), 20)
    assert (drawn.pairs, dict(drawn.failed), drawn.error) == ([], {"plugin_error": 20}, "ValueError: no sibling today")
    assert len(calls) == GIVE_UP  # then it stops asking


def test_an_exception_of_genenv_itself_is_not_blamed_on_the_plugin_one_from_its_worker_is(flaky):
    from genenv_engine.core.limits import plugin_failure
    from genenv_engine.environments import get_environment
    from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins

    env = flaky.Flaky()
    try:
        raise RuntimeError("a genenv bug")
    except RuntimeError as exc:
        assert plugin_failure(exc, [env]) is None
    flaky.MODE.update(check="sleep")
    time_limit_plugins({"flaky": env}, 0.2)
    try:
        with pytest.raises(Exception) as err:
            env.check(env.splits()["train"][0], "1")
    finally:
        release_plugins({"flaky": env})
    assert str(plugin_failure(err.value, [get_environment("bfcl"), env])) == (
        "environment 'flaky' (flaky_envs.Flaky): check failed (plugin_timeout: flaky.check ran past 0.2 s); "
        "fix it, then genenv resume"
    )
