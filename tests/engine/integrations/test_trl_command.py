"""``genenv run --agent-trainer trl``: TRL's GRPOTrainer trains the agent in the command's process, and the session
reads back with ``genenv status`` and ``genenv report`` as a native one; ``genenv resume`` trains with TRL again,
from the TRL checkpoint saved at the last finished epoch. The tiny preset at the TRL tests' smallest sizes."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from genenv_engine.interfaces.cli import main  # noqa: E402
from genenv_engine.reports import build_report  # noqa: E402
from genenv_engine.storage.session import Session  # noqa: E402

SMALL = ["simulator.seeds_per_epoch=2", "agent.rollouts=4", "agent.replay_tasks=4", "heldout_size=24"]
TRL = ["--agent-trainer", "trl", "--trl-steps", "2", "--trl-batch", "4"]


def metrics(session) -> dict[int, dict]:
    return {m["epoch"]: m for m in Session.open(session).store.epoch_metrics()}


def status(session, capsys) -> dict:
    capsys.readouterr()
    assert main(["status", str(session), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_genenv_run_trains_the_agent_with_trl_and_resume_goes_on_with_it(tmp_path, capsys):
    session = tmp_path / "s"
    sets = [x for kv in SMALL for x in ("--set", kv)]
    assert main(["run", "--session", str(session), "--preset", "tiny", "--epochs", "1", "--quiet", *TRL, *sets]) == 0
    out = capsys.readouterr().out
    assert f"done: 1 epochs in {session}" in out and "epoch 1:" in out
    data = status(session, capsys)
    assert [e["status"] for e in data["epochs"]] == ["done", "done"] and data["target_epochs"] == 1
    assert set(data["epochs"][1]["heldout"]) == {"bfcl"}
    m = metrics(session)[1]
    assert m["agent_update"] == {"steps": 2.0, "trainer_step": 2}
    assert m["rollouts_recorded"] == 8 and "trainer" in m["phase_seconds"]
    assert [p.name for p in (session / "trl").glob("checkpoint-*")] == ["checkpoint-2"]  # at the epoch boundary

    assert main(["resume", str(session), "--epochs", "2", "--quiet"]) == 0  # TRL again: the session says so
    data = status(session, capsys)
    assert [e["status"] for e in data["epochs"]] == ["done", "done", "done"]
    assert metrics(session)[2]["agent_update"] == {"steps": 2.0, "trainer_step": 4}  # from TRL's checkpoint-2
    assert sorted(p.name for p in (session / "trl").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-4"]
    report = build_report([session], "md", tmp_path / "report")["md"].read_text()
    assert "| 2 | done |" in report


def test_what_trl_cannot_train_is_refused_before_the_session_is_created(tmp_path, capsys):
    session = tmp_path / "s"
    command = ["run", "--session", str(session), "--preset", "tiny", "--epochs", "1", "--quiet", "--agent-trainer"]
    assert main([*command, "trl", "--trl-batch", "6", "--set", "agent.rollouts=4"]) == 2
    assert "must be a multiple of agent.rollouts (4, TRL's num_generations)" in capsys.readouterr().err
    assert not session.exists()
