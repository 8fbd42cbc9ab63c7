"""Third-party code at the edges: a plugin's ``check`` or ``validate`` that raises fails that rollout or rejects
that task as ``plugin_error: <type>`` and the epoch goes on; with ``simulator.plugin_timeout`` set, one that runs
past it (in a worker process) as ``plugin_timeout``; a wrong return type stops the epoch with one line naming the
environment, the method and the task, and the session resumes once the plugin is fixed. Built-in environments are
not guarded (their exceptions are bugs and propagate, as before)."""

from __future__ import annotations

import json
import sqlite3

import pytest

import genenv_engine.environments as environments
from genenv_engine.core.limits import PluginError, check_response
from genenv_engine.training.simulator import judge


def _judge(env, text="numbers: 3 5 8 | target: 64 => 8 * (3 + 5)"):
    seed = env.splits()["seed"][0]
    return judge(env, text, task_id="gen/e1/flaky/0000-0", seed=seed, epoch=1, generator="test")


def test_a_validate_that_raises_rejects_the_task_as_plugin_error(flaky):
    task, repair = _judge(flaky.Flaky())
    assert (task.valid, task.reason, task.id, repair) == (
        False,
        "plugin_error: RuntimeError",
        "gen/e1/flaky/0000-0",
        None,
    )


def test_a_check_that_raises_fails_the_rollout_as_plugin_error(flaky):
    env = flaky.Flaky()
    flaky.MODE["check"] = "raise"
    result = check_response(env, env.splits()["train"][0], "1 + 2")
    assert (result.success, result.score, result.error_type) == (False, 0.0, "plugin_error: KeyError")
    flaky.MODE.update(check="raise", validate="ok")  # validate's own checker call raising rejects the task too
    assert _judge(env)[0].reason == "plugin_error: KeyError"


@pytest.mark.parametrize(
    "method, mode, words",
    [
        ("validate", "wrong", "validate returned list, not Validation (task gen/e1/flaky/0000-0)"),
        ("validate", "no_task", "validate returned NoneType, not a Task in its accepted Validation"),
        ("check", "wrong", "check returned float, not CheckResult (task flaky/train/00000)"),
    ],
)
def test_a_wrong_return_type_is_one_line_naming_environment_method_and_task(flaky, method, mode, words):
    env = flaky.Flaky()
    flaky.MODE.update(validate="ok", check="ok")
    flaky.MODE[method] = mode
    with pytest.raises(PluginError) as err:
        if method == "check":
            check_response(env, env.splits()["train"][0], "1 + 2")
        else:
            _judge(env)
    line = str(err.value)
    assert line.startswith("environment 'flaky' (flaky_envs.Flaky): ") and words in line and "\n" not in line


def test_a_builtin_is_not_guarded(monkeypatch):
    env = environments.get_environment("bfcl")

    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr(env, "check", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        check_response(env, env.splits()["train"][0], "x")


def test_a_run_goes_on_past_plugin_errors_stops_on_a_wrong_type_and_resumes(flaky, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main
    from genenv_engine.storage.session import Session

    session = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(session),
                "--epochs",
                "1",
                "--quiet",
                "--benchmarks",
                "flaky_envs:Flaky",
            ]
        )
        == 0
    )
    capsys.readouterr()
    with sqlite3.connect(session / "genenv.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        reasons = dict(db.execute("SELECT reason, COUNT(*) FROM tasks WHERE split = 'generated' GROUP BY reason"))
    assert main(["status", str(session), "--json"]) == 0
    epochs = json.loads(capsys.readouterr().out)["epochs"]
    validity = epochs[1]["validity"]["flaky"]
    assert validity["drafts"] > 0 and validity["rejected"] == {"plugin_error": validity["drafts"]}
    assert reasons == {"plugin_error: RuntimeError": validity["drafts"]} and epochs[1]["status"] == "done"

    flaky.MODE["validate"] = "wrong"
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        "genenv: environment 'flaky' (flaky_envs.Flaky): validate returned list, not Validation (task gen/e2/flaky/"
    )

    flaky.MODE["validate"] = "raise"
    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 0
    assert "done: 2 epochs" in capsys.readouterr().out
    opened = Session.open(session, check=True)
    try:
        assert [(m["epoch"], m["status"]) for m in opened.store.epoch_metrics()] == [
            (0, "done"),
            (1, "done"),
            (2, "done"),
        ]
        generated = [t for t in opened.store.pool(["flaky"]) if t.split == "generated"]
        assert generated == []  # every loop-time validate raised: nothing admitted, nothing lost
        ids = opened.store.task_ids()
        assert sum(i.startswith("gen/e2/") for i in ids) == sum(i.startswith("gen/e1/") for i in ids) == 8
    finally:
        opened.store.close()


def test_a_call_past_the_time_limit_is_plugin_timeout_and_the_next_call_runs(flaky):
    from genenv_engine.environments.plugin_worker import release_plugins, time_limit_plugins

    env, builtin = flaky.Flaky(), environments.get_environment("bfcl")
    task = env.splits()["train"][0]
    flaky.MODE.update(validate="sleep", check="ok")
    time_limit_plugins({"flaky": env, "bfcl": builtin}, 0.5)
    try:
        assert "check" not in vars(builtin)  # a built-in is never wrapped
        assert _judge(env)[0].reason == "plugin_timeout"
        assert check_response(env, task, task.answer).success  # a new worker, forked after the timeout
        flaky.MODE.update(validate="raise", check="sleep")  # the next worker is forked with these
        env._plugin_worker.stop()
        assert _judge(env)[0].reason == "plugin_error: RuntimeError"
        assert check_response(env, task, task.answer).error_type == "plugin_timeout"
    finally:
        release_plugins({"flaky": env})
    assert "check" not in vars(env) and "_plugin_worker" not in vars(env)


def test_a_run_with_a_plugin_past_its_time_limit_goes_on(flaky, tmp_path, capsys):
    from genenv_engine.interfaces.cli import main

    flaky.MODE["validate"] = "sleep"
    session = tmp_path / "s"
    assert (
        main(
            [
                "run",
                "--preset",
                "micro",
                "--session",
                str(session),
                "--epochs",
                "1",
                "--quiet",
                "--benchmarks",
                "flaky_envs:Flaky",
                "--set",
                "simulator.plugin_timeout=0.3",
            ]
        )
        == 0
    )
    assert "done: 1 epochs" in capsys.readouterr().out
    with sqlite3.connect(session / "genenv.db") as db:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        reasons = dict(db.execute("SELECT reason, COUNT(*) FROM tasks WHERE split = 'generated' GROUP BY reason"))
    assert reasons == {"plugin_timeout": 8}


def test_the_time_limit_is_a_checked_setting():
    from genenv_engine.config import load_config
    from genenv_engine.core.errors import ConfigError

    assert load_config("micro").simulator.plugin_timeout == 0.0
    with pytest.raises(ConfigError, match="simulator.plugin_timeout"):
        load_config("micro", overrides={"simulator.plugin_timeout": -1})
