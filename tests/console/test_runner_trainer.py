"""The console's engine worker runs a session with the trainer it was run with: genenv's own loop, or TRL for a
session TRL trained (its meta says so), under the console's lease, with the worker's sink and control."""

from __future__ import annotations

import json

import pytest

from genenv_console.runner import EngineRunner
from genenv_engine.config import load_config
from genenv_engine.integrations import trl_run
from genenv_engine.storage.session import Session


@pytest.mark.parametrize("trainer", ["native", "trl"])
def test_the_console_runs_a_session_with_its_own_trainer(tmp_path, monkeypatch, trainer):
    session = Session.create(load_config("micro"), tmp_path / "s")
    if trainer == "trl":
        session.store.set_meta(trl_run.TRAINER_KEY, json.dumps({"trainer": "trl", "steps_per_epoch": 3, "batch": 8}))
    session.store.close()
    calls = []

    def trl_double(s, **kw):  # test double for TRL's run: records how it was called
        calls.append(("trl", s.held is not None, kw["sink"], kw["control"]))
        return {"epochs_done": 0}

    def loop_double(s, sink, control, factory):  # test double for genenv's own loop
        calls.append(("native", s.held is not None, sink, control))
        return {"epochs_done": 0}

    monkeypatch.setattr(trl_run, "run_trl", trl_double)
    monkeypatch.setattr("genenv_engine.method.loop.run", loop_double)
    runner = EngineRunner(post=lambda message: None)
    assert runner.run(tmp_path / "s") == {"epochs_done": 0}
    assert calls == [(trainer, True, runner.sink, runner.control)]  # under the console's lease
