"""A long session's history, written through the store's own verbs, for timing the console's views at scale.

`fill_session` gives a micro session ``epochs`` epochs of co-evolution as the loop stores them: the built-in
splits (as epoch 0 stores them), then per epoch ``batches`` variation batches of ``variations`` drafts each
(bfcl-shaped tasks, 80 % valid, each batch a variation of one seed task, so every seed gathers descendants written
by many simulator versions), ``rollouts`` training rollouts per valid draft with their policy version, the greedy
held-out answers, the batch rows (p̂, R_env, in band) and the epoch's metrics (calibration, held-out, funnel
counts). 100 epochs of 200 × 5 drafts make the 100k-task session the console's goals are stated for.

The values are drawn from a seeded RNG: they have the shapes and volumes of a real run, not its learning.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter
from typing import Any

REASONS = ("unparsable", "unknown_function", "gold_mismatch", "duplicate")
"""Rejection reasons the filled drafts carry (the prefixes real validators write)."""


def _r_env(p_hat: float, alpha: float = 0.5, beta: float = 2.0) -> float:
    """The paper's reward for one batch's success rate."""
    return math.exp(-beta * (p_hat - alpha) ** 2)


def fill_session(
    session: Any, epochs: int = 100, batches: int = 200, variations: int = 5, rollouts: int = 8, seed: int = 0
) -> dict[str, Any]:
    """Write ``epochs`` epochs of history into ``session`` (a fresh `genenv_engine.storage.session.Session` of a
    one-bfcl preset); return the counts written and the seconds it took.

    >>> import tempfile, pathlib
    >>> from genenv_engine.config import load_config
    >>> from genenv_engine.storage.session import Session
    >>> with tempfile.TemporaryDirectory() as tmp:
    ...     s = Session.create(load_config("micro"), pathlib.Path(tmp) / "s")
    ...     out = fill_session(s, epochs=2, batches=3, variations=2, rollouts=4)
    ...     n = s.store.count_tasks(origin="generated")
    ...     s.store.close()
    >>> out["generated"], n, out["epochs"]
    (12, 12, 2)
    """
    from genenv_engine.environments import environments_of
    from genenv_engine.training.agent import heldout_tasks

    start = time.perf_counter()
    store, cfg = session.store, session.config
    env = environments_of(cfg)["bfcl"]
    splits = env.splits()
    for tasks in splits.values():
        store.insert_tasks(tasks)
    seeds = splits["seed"]
    templates = seeds + splits["train"][:300]
    heldout = heldout_tasks({"bfcl": env}, cfg.heldout_size)
    rng = random.Random(seed)
    counts = Counter()
    store.start_epoch(0)
    store.finish_epoch(0, _heldout_metrics(heldout, rng, 0.5))
    for epoch in range(1, epochs + 1):
        store.start_epoch(epoch)
        tasks_by_batch: dict[str, list[Any]] = {}
        batch_rows, rollout_rows, scores, task_p = [], [], [], []
        for b in range(batches):
            parent = seeds[(epoch * batches + b) % len(seeds)]
            batch_id = f"e{epoch}/bfcl/b{b:03d}"
            mine = []
            for v in range(variations):
                t = templates[rng.randrange(len(templates))]
                valid = rng.random() < 0.8
                mine.append(
                    t.with_(
                        id=f"gen/e{epoch}/bfcl/{b * variations + v:05d}",
                        origin="generated",
                        split="generated",
                        epoch=epoch,
                        parent_id=parent.id,
                        generator=f"simulator@e{epoch - 1}",
                        simulator_version=epoch - 1,
                        valid=valid,
                        reason="" if valid else f"{rng.choice(REASONS)}: filled",
                    )
                )
            p_batch = []
            for t in mine:
                if not t.valid:
                    continue
                wins = [rng.random() < 0.5 for _ in range(rollouts)]
                p = sum(wins) / rollouts
                p_batch.append(p)
                scores.append((t.id, p, _r_env(p), rollouts))
                rollout_rows += [
                    {
                        "task_id": t.id,
                        "epoch": epoch,
                        "response": t.answer if w else "[]",
                        "reward": float(w),
                        "success": w,
                        "error_type": None if w else "wrong_call",
                        "purpose": "train",
                        "policy_version": epoch - 1,
                    }
                    for w in wins
                ]
            task_p += p_batch
            p_hat = sum(p_batch) / len(p_batch) if p_batch else None
            batch_rows.append(
                {
                    "id": batch_id,
                    "epoch": epoch,
                    "benchmark": "bfcl",
                    "seed_task_id": parent.id,
                    "n_generated": variations,
                    "n_valid": len(p_batch),
                    "p_hat": p_hat,
                    "r_env": None if p_hat is None else _r_env(p_hat),
                    "alpha": 0.5,
                    "in_band": p_hat is not None and abs(p_hat - 0.5) <= 0.1,
                    "prompt_note": None,
                }
            )
            tasks_by_batch[batch_id] = mine
        for batch_id, mine in tasks_by_batch.items():
            store.insert_tasks(mine, batch_id=batch_id)
        store.upsert_batches(batch_rows)
        correct = [rng.random() < 0.5 for _ in heldout]
        rollout_rows += [
            {
                "task_id": t.id,
                "epoch": epoch,
                "response": t.answer if ok else "[]",
                "reward": float(ok),
                "success": ok,
                "error_type": None if ok else "wrong_call",
                "purpose": "heldout",
                "policy_version": epoch,
            }
            for t, ok in zip(heldout, correct, strict=False)
        ]
        store.insert_rollouts(rollout_rows)
        store.set_rollout_scores(scores)
        drafts = [t for mine in tasks_by_batch.values() for t in mine]
        valid = [t for t in drafts if t.valid]
        metrics = _heldout_metrics(heldout, rng, None, correct)
        metrics.update(
            {
                "generated": len(drafts),
                "valid": len(valid),
                "valid_fraction": len(valid) / len(drafts),
                "invalid_reasons": dict(Counter(t.reason.split(":")[0] for t in drafts if not t.valid)),
                "difficulty_mix": dict(Counter(f"L{t.level}" for t in valid)),
                "batch_p_hats": [r["p_hat"] for r in batch_rows if r["p_hat"] is not None],
                "task_p_hats": task_p,
                "calibration_error": abs(sum(task_p) / len(task_p) - 0.5) if task_p else None,
                "in_band_fraction": sum(r["in_band"] for r in batch_rows) / len(batch_rows),
                "tasks_trained": len(valid),
                "tasks_trained_by_origin": {"generated": len(valid)},
            }
        )
        store.finish_epoch(epoch, metrics)
        counts.update(generated=len(drafts), valid=len(valid), rollouts=len(rollout_rows), batches=len(batch_rows))
    return {**counts, "epochs": epochs, "seconds": round(time.perf_counter() - start, 1)}


def _heldout_metrics(
    heldout: list[Any], rng: random.Random, rate: float | None, correct: list[bool] | None = None
) -> dict[str, Any]:
    """An epoch's held-out entries: the score, its per-level split and the per-task string the plots read."""
    if correct is None:
        correct = [rng.random() < (rate or 0.5) for _ in heldout]
    by_level: dict[str, list[bool]] = {}
    for t, ok in zip(heldout, correct, strict=False):
        by_level.setdefault(f"L{t.level}", []).append(ok)
    return {
        "heldout": {"bfcl": sum(correct) / len(correct)},
        "heldout_by_level": {"bfcl": {k: sum(v) / len(v) for k, v in sorted(by_level.items())}},
        "heldout_correct": {"bfcl": "".join("1" if ok else "0" for ok in correct)},
    }
