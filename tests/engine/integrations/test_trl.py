"""GenEnv inside TRL's GRPOTrainer (`genenv_engine.integrations.trl`): TRL trains the agent on genenv's task stream,
its completions are scored by the environment and recorded in the session, and every genenv epoch holds the simulator
batches with p-hat from TRL's rollouts, R_env, the simulator's update and held-out success. One process in this
interpreter (the tiny preset's shipped warm start, so that the simulator writes valid tasks and the agent solves
some), and two under torchrun (the micro preset, through the example script)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("trl")

from genenv_engine.config import load_config  # noqa: E402
from genenv_engine.core.curriculum import env_reward  # noqa: E402
from genenv_engine.integrations.trl import TaskStream, TrlCoEvolution  # noqa: E402
from genenv_engine.reports import build_report  # noqa: E402
from genenv_engine.storage.session import Session  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "docs" / "examples" / "trl" / "train.py"
SMALL = {
    "epochs": 2,
    "simulator.seeds_per_epoch": 2,
    "agent.rollouts": 4,
    "agent.replay_tasks": 4,
    "heldout_size": 24,
}
"""The tiny preset cut to seconds an epoch: 2 seeds x 4 variations, 4 rollouts a task (TRL's num_generations)."""


def train(folder: Path, steps_per_epoch: int = 2, batch: int = 4) -> tuple[TrlCoEvolution, object]:
    """Two genenv epochs of ``steps_per_epoch`` TRL steps each on a new tiny session in ``folder``; the integration
    and TRL's trainer."""
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    with TrlCoEvolution(folder, config=load_config("tiny", overrides=SMALL), steps_per_epoch=steps_per_epoch) as coevo:
        args = coevo.grpo_config(output_dir=str(folder / "trl"), per_device_train_batch_size=batch, disable_tqdm=True)
        assert (args.num_generations, args.max_steps, args.shuffle_dataset) == (4, 2 * steps_per_epoch, False)
        trainer = GRPOTrainer(
            model=str(coevo.agent_path),
            reward_funcs=[coevo.reward],
            args=args,
            train_dataset=coevo.dataset(),
            processing_class=AutoTokenizer.from_pretrained(coevo.agent_path),
            callbacks=[coevo.callback],
        )
        trainer.train()
        assert trainer.state.global_step == 2 * steps_per_epoch
    return coevo, trainer


def weights(folder: Path) -> dict:
    """The tensors of a saved model folder."""
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def stored(folder: Path, sql: str, *params) -> list[tuple]:
    db = sqlite3.connect(folder / "genenv.db")
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


@pytest.mark.slow
def test_trl_trains_the_agent_of_a_co_evolving_session(tmp_path):
    folder = tmp_path / "s"
    coevo, trainer = train(folder)
    assert (coevo.rank, coevo.world) == (0, 1)
    assert coevo.summary == {"epochs_done": 2}
    session = Session.open(folder)
    counts = session.store.rollout_counts()
    # every completion TRL generated is stored once: 2 epochs x 2 steps x 4 completions
    assert coevo.scored == 16
    assert sum(n for e in (1, 2) for p, n in counts[e].items() if p in ("train", "late")) == coevo.scored
    assert counts[2].get("late", 0) == coevo.late == 4  # the batch TRL read ahead of the first boundary
    metrics = {m["epoch"]: m for m in session.store.epoch_metrics()}
    cur = session.config.curriculum
    scored_batches = 0
    for epoch in (1, 2):
        m = metrics[epoch]
        assert m["status"] == "done" and m["agent_update"] == {"steps": 2.0, "trainer_step": 2 * epoch}
        assert m["rollouts_recorded"] == counts[epoch]["train"] and m["unknown_rollouts"] == 0
        assert {"generate", "validate", "trainer", "simulator_update", "heldout_eval", "checkpoint"} <= set(
            m["phase_seconds"]
        )
        assert "simulator_update" in m and set(m["heldout"]) == {"bfcl"} and counts[epoch]["heldout"] == 24
        per_task = stored(
            folder, "select task_id, count(*) from rollouts where epoch = ? and purpose = 'train' group by 1", epoch
        )
        assert per_task and all(n % 4 == 0 for _, n in per_task)  # whole groups of num_generations
        batches = stored(folder, "select id, p_hat, r_env from batches where epoch = ?", epoch)
        assert len(batches) == m["batches"]
        for batch, p_hat, r_env in batches:
            successes = stored(
                folder,
                "select r.success from rollouts r join tasks t on t.id = r.task_id "
                "where r.epoch = ? and r.purpose = 'train' and t.batch_id = ?",
                epoch,
                batch,
            )
            assert successes and p_hat == pytest.approx(sum(s for (s,) in successes) / len(successes))
            assert r_env == pytest.approx(env_reward(p_hat, cur.reward, cur.alpha_for("bfcl"), cur.beta))
        scored_batches += len(batches)
    assert scored_batches >= 1  # the tiny simulator's drafts were valid at least once
    assert session.checkpoint_epochs() == [0, 1, 2]
    saved = weights(session.checkpoint_dir(2) / "agent")  # the session's agent is the one TRL trained
    assert saved.keys() <= trainer.model.state_dict().keys()
    assert all(torch.equal(v, trainer.model.state_dict()[k]) for k, v in saved.items())
    report = build_report([folder], "md", tmp_path / "report")["md"].read_text()
    for epoch in (1, 2):
        m = metrics[epoch]
        row = f"| {epoch} | done | {m['generated_success']:.3f} |" if m["batches"] else f"| {epoch} | done |"
        assert row in report


def test_the_stream_restarts_at_each_epoch_and_ends_without_tasks():
    from genenv_engine.core.records import Task

    stream = TaskStream()
    assert list(stream.rows()) == []
    stream.epoch, stream.tasks = 1, [Task(f"t{i}", "bfcl", f"q{i}", "a") for i in range(3)]
    rows = stream.rows()
    assert [next(rows)["task_id"] for _ in range(4)] == ["t0", "t1", "t2", "t0"]
    stream.epoch, stream.tasks = 2, [Task("u0", "bfcl", "p", "a"), Task("u1", "bfcl", "p1", "a")]
    first = next(rows)
    assert first == {"prompt": [{"role": "user", "content": "p"}], "task_id": "u0", "genenv_epoch": 2}
    stream.tasks = []
    assert next(rows, None) is None


@pytest.mark.slow
def test_unknown_task_ids_are_counted_and_the_epoch_adopts_trls_weights(tmp_path, recwarn):
    from transformers import AutoModelForCausalLM

    from genenv_engine.integrations.trl import _adopt

    coevo = TrlCoEvolution(tmp_path / "s", config=load_config("tiny", overrides=SMALL), steps_per_epoch=1)
    with coevo:
        task = next(iter(coevo._tasks[1].values()))
        got = coevo.reward(
            prompts=[[]] * 3,
            completions=[[{"role": "assistant", "content": task.answer}], "x", "y"],
            task_id=[task.id, "no/such/task", "no/such/task"],
            genenv_epoch=[1, 1, 1],
        )
        assert got[0] == 1.0 and got[1:] == [None, None]  # the gold answer scores 1, unknown ids None
        assert (coevo.scored, coevo.unknown) == (3, 2)
        assert [w for w in recwarn if "no/such/task" in str(w.message)]
        trained = AutoModelForCausalLM.from_pretrained(coevo.agent_path)
        with torch.no_grad():
            trained.model.norm.weight.add_(0.25)  # stands for what TRL learned
        # a trainer resumed from a checkpoint saved inside an epoch takes the session's agent, and counts from there
        state = SimpleNamespace(global_step=3, max_steps=2)
        coevo.train_begin(state, trained)
        assert state.max_steps == 3 + 1 * 2 and coevo._steps_at == 3
        assert torch.equal(trained.model.norm.weight, weights(coevo.agent_path)["model.norm.weight"])
        with torch.no_grad():
            trained.model.norm.weight.add_(0.25)
        coevo.core.end_epoch(_adopt(trained, 3))
    metrics = {m["epoch"]: m for m in Session.open(tmp_path / "s").store.epoch_metrics()}
    assert metrics[1]["unknown_rollouts"] == 2 and metrics[1]["rollouts_recorded"] == 1
    assert metrics[1]["agent_update"] == {"steps": 3.0}
    saved = weights(tmp_path / "s" / "checkpoints" / "epoch_001" / "agent")
    assert torch.equal(saved["model.norm.weight"], trained.model.norm.weight)
    assert not torch.equal(saved["model.norm.weight"], weights(coevo.agent_path)["model.norm.weight"])


@pytest.mark.subprocess
@pytest.mark.slow
def test_two_processes_under_torchrun_record_every_completion_once(tmp_path):
    folder = tmp_path / "s"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(EXAMPLE)]
    command += ["--session", str(folder), "--preset", "micro", "--epochs", "3", "--steps-per-epoch", "2"]
    command += ["--batch", "4", "--set", "runtime.threads=1"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    scored = {int(r): int(n) for r, n in re.findall(r"rank (\d)/2: scored (\d+) completions", done.stdout)}
    assert sorted(scored) == [0, 1]  # both ranks ran in a world of 2
    assert scored == {0: 24, 1: 24}  # 3 epochs x 2 steps x 4 completions on each rank
    counts = Session.open(folder).store.rollout_counts()
    assert sum(n for e in (1, 2, 3) for p, n in counts[e].items() if p in ("train", "late")) == sum(scored.values())
    rows = stored(
        folder, "select epoch, purpose, task_id, count(*) from rollouts where purpose != 'heldout' group by 1, 2, 3"
    )
    assert rows and all(n % 4 == 0 for *_, n in rows)  # whole groups, each recorded once
    assert "{'epochs_done': 3}" in done.stdout
    metrics = {m["epoch"]: m for m in Session.open(folder).store.epoch_metrics()}
    for epoch in (1, 2, 3):  # each epoch: its batches scored from both ranks' rollouts, the updates, held-out
        m = metrics[epoch]
        assert m["status"] == "done" and "simulator_update" in m and m["heldout"]
        assert m["rollouts_recorded"] == counts[epoch]["train"]


@pytest.mark.subprocess
def test_importing_the_integration_loads_no_trainer_or_torch():
    code = "import json, sys, genenv_engine.integrations.trl; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout.strip().splitlines()[-1])}
    assert "genenv_engine" in loaded
    assert loaded.isdisjoint({"trl", "transformers", "datasets", "accelerate", "torch"})


def _tables(folder: Path, upto: int) -> dict[str, list[tuple]]:
    """The rows the session committed for its epochs up to ``upto``: rollouts, batches, epoch rows, and each task's
    identity (what later epochs may update, its counts and p-hat, left out)."""
    return {
        "rollouts": stored(folder, "select * from rollouts where epoch <= ? order by id", upto),
        "batches": stored(folder, "select * from batches where epoch <= ? order by id", upto),
        "epochs": stored(folder, "select * from epochs where epoch <= ? order by epoch", upto),
        "tasks": stored(
            folder,
            "select id, benchmark, prompt, answer, epoch, origin, parent_id, batch_id, valid, reason from tasks "
            "where epoch <= ? order by id",
            upto,
        ),
    }


@pytest.mark.subprocess
@pytest.mark.slow
def test_a_run_killed_mid_epoch_resumes_from_its_last_finished_epoch(tmp_path):
    import signal
    import time

    folder, out = tmp_path / "s", tmp_path / "trl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, str(EXAMPLE), "--session", str(folder), "--out", str(out), "--save", "--batch", "4"]
    command += ["--epochs", "2", "--steps-per-epoch", "2", "--set", "runtime.threads=1"]
    command += [f"--set={k}={v}" for k, v in SMALL.items() if k != "epochs"]
    with (tmp_path / "killed.log").open("w") as log:
        child = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)
        try:
            deadline = time.monotonic() + 240
            while child.poll() is None and time.monotonic() < deadline:
                if (out / "checkpoint-2" / "trainer_state.json").exists():  # saved after epoch 1 closed
                    break
                time.sleep(0.05)
            child.send_signal(signal.SIGKILL)
        finally:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL, (tmp_path / "killed.log").read_text()[-3000:]
    assert stored(folder, "select epoch, status from epochs order by epoch")[:2] == [(0, "done"), (1, "done")]
    assert (2, "done") not in stored(folder, "select epoch, status from epochs")  # killed inside epoch 2
    before = _tables(folder, 1)

    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "{'epochs_done': 2}" in again.stdout
    assert _tables(folder, 1) == before  # the committed epochs, row for row
    assert stored(folder, "select epoch, status from epochs order by epoch") == [(0, "done"), (1, "done"), (2, "done")]
    finished = stored(folder, "select epoch from events where kind = 'EpochFinished' order by id")
    assert finished == [(0,), (1,), (2,)]  # contiguous, none twice
    updates = {
        e: m["agent_update"] for e, m in ((m["epoch"], m) for m in Session.open(folder).store.epoch_metrics()) if e
    }
    assert updates == {1: {"steps": 2.0, "trainer_step": 2}, 2: {"steps": 2.0, "trainer_step": 4}}
    scored = int(re.search(r"scored (\d+) completions", again.stdout).group(1))
    assert scored == 8  # the resumed trainer's 2 steps x 4 completions, all of epoch 2
    rows = stored(folder, "select purpose, count(*) from rollouts where epoch = 2 and purpose != 'heldout' group by 1")
    assert dict(rows) == {"train": 8}  # nothing doubled: the killed run's epoch-2 rows were dropped
    assert json.loads((out / "checkpoint-4" / "trainer_state.json").read_text())["global_step"] == 4
