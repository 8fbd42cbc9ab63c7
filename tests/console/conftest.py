"""Console test helpers: scripted generation doubles, a fixed session written without the engine, waits.

`ScriptedSimulator` and `ScriptedAgent` are the engine tests' doubles (tests/engine/method/test_loop.py):
seconds-old micro models cannot write valid tasks, so the console's end-to-end tests swap the roles'
generation backends for them while the policies, trainers, loop and store stay real.
`fixed_session` writes a small deterministic session (tasks, rollouts, batches, epoch metrics,
events) straight through the store, for snapshot and screen tests that need no running engine.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from genenv_engine.config import load_config
from genenv_engine.core import events as ev
from genenv_engine.environments import get_environment
from genenv_engine.environments.bfcl.mini import generate_task
from genenv_engine.storage.session import Session
from genenv_engine.testing import ScriptedSimulator, scripted_backends  # noqa: F401 (re-exported to tests)


def scripted(p: float = 0.5):
    """A backend factory that gives each role its scripted double."""
    return scripted_backends(p=p)


@pytest.fixture
def scripted_factory():
    """A fresh scripted backend factory."""
    return scripted()


async def wait_until(predicate: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    """Let the app run until ``predicate()`` holds (plain sleeps: the engine thread keeps the process busy)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.05)


def first(messages: list, cls: type, **fields):
    """The first captured message of a class whose attributes (or event fields) match ``fields``."""
    for m in messages:
        if isinstance(m, cls) and all(
            getattr(getattr(m, "event", m), k, getattr(m, k, None)) == v for k, v in fields.items()
        ):
            return m
    return None


FIXED_METRICS = {
    0: {"heldout": {"bfcl": 0.125}, "phase_seconds": {"warm_start": 6.5, "heldout_eval": 2.0, "checkpoint": 0.1}},
    1: {
        "generated": 8,
        "valid": 6,
        "valid_fraction": 0.75,
        "generated_success": 0.625,
        "generated_success_by_benchmark": {"bfcl": 0.625},
        "calibration_error": 0.17,
        "batch_p_hats": [0.25, 0.5, 0.75, 1.0],
        "task_p_hats": [0.25, 0.5, 0.5, 0.75, 1.0, 0.75],
        "heldout": {"bfcl": 0.25},
        "tokens_per_second": 410.0,
        "tasks_trained": 14,
        "phase_seconds": {
            "generate": 0.9,
            "validate": 0.1,
            "rollout": 2.4,
            "agent_update": 3.1,
            "simulator_update": 1.2,
            "heldout_eval": 2.1,
            "checkpoint": 0.1,
        },
    },
    2: {
        "generated": 8,
        "valid": 7,
        "valid_fraction": 0.875,
        "generated_success": 0.55,
        "generated_success_by_benchmark": {"bfcl": 0.55},
        "calibration_error": 0.08,
        "batch_p_hats": [0.5, 0.5, 0.625, 0.375],
        "task_p_hats": [0.5, 0.5, 0.75, 0.5, 0.25, 0.5, 0.5],
        "heldout": {"bfcl": 0.375},
        "tokens_per_second": 455.0,
        "tasks_trained": 15,
        "phase_seconds": {
            "generate": 0.8,
            "validate": 0.1,
            "rollout": 2.2,
            "agent_update": 3.0,
            "simulator_update": 1.4,
            "heldout_eval": 2.0,
            "checkpoint": 0.1,
        },
    },
}
"""Epoch metrics of the fixed session (the shapes `loop.run_epoch` stores)."""


def write_fixed_session(folder: Path) -> Session:
    """A deterministic 2-of-3-epoch micro session: 20 seeds, 8 generated tasks per epoch, rollouts, events."""
    session = Session.create(load_config("micro", overrides={"epochs": 3}), folder)
    store = session.store
    env = get_environment("bfcl", 0)
    seeds = env.splits()["seed"][:20]
    store.insert_tasks(seeds)
    rng = random.Random(7)
    for epoch in (1, 2):
        store.start_epoch(epoch)
        rollouts, batches = [], []
        for b in range(4):
            seed = seeds[(epoch * 4 + b) % len(seeds)]
            batch_id = f"e{epoch}/{seed.id}"
            p_hat = FIXED_METRICS[epoch]["batch_p_hats"][b]
            for v in range(2):
                task_id = f"gen/e{epoch}/bfcl/{b:04d}-{v}"
                if epoch == 1 and b == 3 and v == 1:
                    prompt, answer = "F: fly(a:int) | Q: fly 3", "fly(a=3)"
                else:
                    prompt, answer, *_ = generate_task(rng.choice([1, 2, 3]), rng)
                verdict = env.validate(
                    prompt, answer, task_id=task_id, parent=seed, epoch=epoch, generator=f"simulator@e{epoch - 1}"
                )
                task = verdict.task or seed.with_(
                    id=task_id,
                    prompt=prompt,
                    answer=answer,
                    valid=False,
                    reason=verdict.reason,
                    origin="generated",
                    split="generated",
                    parent_id=seed.id,
                    epoch=epoch,
                    generator=f"simulator@e{epoch - 1}",
                )
                store.insert_tasks([task], batch_id=batch_id)
                if task.valid:
                    rewards = [1.0 if i < round(p_hat * 4) else 0.0 for i in range(4)]
                    rollouts += [
                        {
                            "task_id": task_id,
                            "epoch": epoch,
                            "response": answer if r else "nope(x=1)",
                            "reward": r,
                            "success": bool(r),
                            "error_type": None if r else "wrong_name",
                        }
                        for r in rewards
                    ]
                    r_env = round(2.718281828 ** (-2 * (p_hat - 0.5) ** 2), 4)
                    store.set_task_stats(task_id, p_hat=p_hat, r_env=r_env, n_rollouts=4)
            batches.append(
                {
                    "id": batch_id,
                    "epoch": epoch,
                    "benchmark": "bfcl",
                    "seed_task_id": seed.id,
                    "n_generated": 2,
                    "n_valid": 2,
                    "p_hat": p_hat,
                    "r_env": None,
                    "in_band": abs(p_hat - 0.5) <= 0.1,
                }
            )
        store.insert_rollouts(rollouts)
        store.upsert_batches(batches)
    store.start_epoch(0)
    for epoch, metrics in FIXED_METRICS.items():
        store.finish_epoch(epoch, metrics)
    events = [ev.EpochFinished(0, FIXED_METRICS[0])]
    for epoch in (1, 2):
        m = FIXED_METRICS[epoch]
        events += [
            ev.EpochStarted(epoch),
            ev.PhaseFinished(epoch, "generate", m["phase_seconds"]["generate"]),
            ev.TasksGenerated(epoch, "bfcl", 8, m["valid"], {"parse_error": 8 - m["valid"]}),
            ev.AttemptsScored(epoch, 8, 32, m["generated_success"], m["batch_p_hats"], []),
            ev.HeldoutEvaluated(epoch, m["heldout"]),
            ev.EpochFinished(epoch, m),
        ]
    events.append(ev.RunStopped(3, "stop requested"))
    for e in events:
        store.log_event(e.kind, e.epoch, e.payload())
    return session


@pytest.fixture
def fixed_session(tmp_path: Path) -> Path:
    """Folder of the fixed session (named ``demo-session``, under ``tmp_path/sessions``)."""
    session = write_fixed_session(tmp_path / "sessions" / "demo-session")
    session.store.close()
    return session.path
