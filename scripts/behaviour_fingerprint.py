"""Behaviour fingerprint of the co-evolution loop: one small run per task source, seed sampler, replay source and
prompt note, and what each stored.

Each run is the micro preset for two epochs (the sampler runs: three, on the chain benchmark) with scripted
generation backends (`genenv_engine.testing`), so what it stores depends on the loop's choices only, not on
floating-point detail of the machine: the tasks (id, prompt, answer, validity, origin, batch), the variation
batches, every rollout's task, response and reward, and the epoch metrics less timings, losses and weight hashes. The
dump is read with plain ``sqlite3`` from each session's ``genenv.db``, so any version of the engine can be
fingerprinted and two versions compared::

    python scripts/behaviour_fingerprint.py OUT.json [RUN ...]     # every run, or the named ones

``tests/engine/method/test_behaviour_fingerprint.py`` (the bfcl runs) and
``tests/engine/method/test_samplers.py`` (the sampler runs, on the sessions its own tests use)
compare the current code with the committed ``tests/engine/data/behaviour_fingerprint.json``.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CHAIN = {
    "benchmarks": ["chain"],
    "epochs": 3,
    "simulator.mode": "sampler",
    "simulator.seed_levels": [1, 2, 3, 4, 5, 6],
    "simulator.variations": 5,
    "agent.tasks_per_epoch": 20,
    "agent.steps_per_epoch": 2,
    "heldout_size": 16,
}
"""The sampler runs' settings: the chain benchmark at levels 1-6, three epochs, exactly the sessions that
``tests/engine/method/test_samplers.py`` makes (whose test compares them with this fingerprint)."""

RUNS: dict[str, dict[str, Any]] = {
    "trained": {},
    "frozen": {"simulator.mode": "frozen"},
    "static": {"simulator.mode": "static", "simulator.static_multiplier": 2},
    "off": {"simulator.mode": "off"},
    "unseen": {
        "simulator.mode": "off",
        "agent.base_source": "unseen",
        "agent.base_levels": [3],
        "agent.unseen_tasks": 40,
    },
    "base_pool": {"agent.base_levels": [3], "agent.base_pool": 5, "agent.tasks_per_epoch": 24},
    "alpha_seeds": {"simulator.seed_sampling": "alpha", "simulator.seed_levels": [2, 3]},
    "steer": {"simulator.note": "steer", "study.steer_hold": True, "study.steer_relabel": True},
    **{
        f"sampler_{name}": {**CHAIN, "curriculum.sampler": name}
        for name in ("uniform", "target", "schedule", "learnability", "controller")
    },
}
"""Name -> overrides of the micro preset (two epochs each)."""

DROPPED_METRICS = {
    "phase_seconds",
    "tokens_generated",
    "tokens_per_second",
    "agent_fingerprint",
    "simulator_fingerprint",
    "rollout_workers",
    "warm_start",
    "agent_update",
    "simulator_update",
}
"""Epoch metrics that hold timings, losses or weight hashes (machine-dependent), left out of the fingerprint."""


def chain_backends():
    """A ``backend_factory``: a scripted simulator, and an agent that solves chain tasks by level (the gold chain at
    levels 1-2, every other rollout at level 3, a wrong call above)."""
    from genenv_engine.backends.base import Completion
    from genenv_engine.environments.chain.grammar import join_calls, read_prompt
    from genenv_engine.testing import USER_TURN, ScriptedSimulator

    class ChainAgent:
        def __init__(self, policy) -> None:
            self.policy, self.tokens_generated, self.tick, self.level3 = policy, 0, None, 0

        def sync(self) -> None:
            """No weights are used."""

        def generate(self, prompts, sampling):
            out = []
            for prompt in prompts:
                draft = read_prompt(USER_TURN.search(prompt).group(1))
                if draft.level == 3:
                    self.level3 += 1
                good = draft.level <= 2 or (draft.level == 3 and self.level3 % 2 == 0)
                text = join_calls(draft.calls) if good else "q(0)=0"
                out.append(Completion(text, self.policy.encode(text)))
            return out

    return lambda role, policy: ChainAgent(policy) if role == "agent" else ScriptedSimulator(policy)


def run_one(name: str, root: Path) -> Path:
    """Run ``name`` (`RUNS`) in a new session under ``root``; returns the session's folder."""
    from genenv_engine.config import load_config
    from genenv_engine.method.loop import run
    from genenv_engine.storage.session import Session
    from genenv_engine.testing import scripted_backends

    overrides = {"epochs": 2, **RUNS[name]}
    session = Session.create(load_config("micro", overrides=overrides), root / name)
    factory = chain_backends() if "chain" in overrides.get("benchmarks", ()) else scripted_backends()
    run(session, backend_factory=factory)
    return session.path


def _rows(db: sqlite3.Connection, sql: str) -> list[list[Any]]:
    return [list(r) for r in db.execute(sql).fetchall()]


def dump(folder: Path) -> dict[str, Any]:
    """What one session stored, read with plain sqlite3 from its ``genenv.db``."""
    db = sqlite3.connect(folder / "genenv.db")
    try:
        tasks = _rows(
            db,
            "select id, benchmark, prompt, answer, valid, reason, origin, split, parent_id, epoch, "
            "batch_id, status from tasks where split not in ('train', 'seed', 'heldout') order by id",
        )
        split_ids = [
            r[0] for r in db.execute("select id from tasks where split in ('train', 'seed', 'heldout') order by id")
        ]
        batches = _rows(
            db,
            "select id, epoch, benchmark, seed_task_id, n_generated, n_valid, p_hat, r_env, "
            "in_band, alpha, prompt_note from batches order by epoch, id",
        )
        rollouts = _rows(
            db,
            "select epoch, purpose, task_id, response, reward, success, error_type from rollouts "
            "order by epoch, purpose, task_id, id",
        )
        metrics = {}
        for epoch, text in db.execute("select epoch, metrics from epochs order by epoch"):
            kept = {k: v for k, v in json.loads(text or "{}").items() if k not in DROPPED_METRICS}
            metrics[str(epoch)] = kept
    finally:
        db.close()
    split = [len(split_ids), hashlib.sha256("\n".join(split_ids).encode()).hexdigest()]
    return {"tasks": tasks, "split_tasks": split, "batches": batches, "rollouts": rollouts, "metrics": metrics}


@contextmanager
def shared_environments() -> Iterator[None]:
    """Runs of one benchmark and seed share its environment while this lasts (its splits are built once, not once
    per run: the chain benchmark's take seconds); what a run stores does not change."""
    import genenv_engine.method.coevolution as core_module
    from genenv_engine.environments import get_environment

    made: dict[tuple, Any] = {}

    def environments_of(config):
        out = {}
        for name in config.benchmarks:
            key = (name, config.seed, config.data_dirs.get(name))
            if key not in made:
                made[key] = get_environment(name, config.seed, data_dir=config.data_dirs.get(name))
            out[name] = made[key]
        return out

    original = core_module.environments_of
    core_module.environments_of = environments_of
    try:
        yield
    finally:
        core_module.environments_of = original


def fingerprint(names: list[str] | None = None, root: Path | None = None) -> dict[str, dict[str, Any]]:
    """Run each of ``names`` (default: every run) and dump what it stored; ``"seconds"`` in each is its wall time."""
    out = {}
    with tempfile.TemporaryDirectory() as tmp, shared_environments():
        base = root or Path(tmp)
        for name in names or list(RUNS):
            start = time.perf_counter()
            folder = run_one(name, base)
            out[name] = {**dump(folder), "seconds": round(time.perf_counter() - start, 1)}
    return out


def first_difference(want, got, where: str = "") -> str:
    """Where two JSON values first differ, as a path with both values."""
    if isinstance(want, dict) and isinstance(got, dict):
        for key in sorted(set(want) | set(got)):
            if want.get(key) != got.get(key):
                return first_difference(want.get(key), got.get(key), f"{where}/{key}")
    if isinstance(want, list) and isinstance(got, list) and len(want) == len(got):
        for i, (a, b) in enumerate(zip(want, got, strict=False)):
            if a != b:
                return first_difference(a, b, f"{where}[{i}]")
    return f"{where}: want {json.dumps(want)[:300]}, got {json.dumps(got)[:300]}"


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if "GENENV_CACHE" not in os.environ:
        os.environ["GENENV_CACHE"] = tempfile.mkdtemp(prefix="genenv-fingerprint-cache-")
    result = fingerprint(argv[1:] or None)
    for name, got in result.items():
        print(
            f"{name}: {got['seconds']} s, {len(got['tasks'])} tasks, {len(got['batches'])} batches, "
            f"{len(got['rollouts'])} rollouts"
        )
    Path(argv[0]).write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
