"""One arm x seed session of the ablation bench read back from its database as plain rows.

`read_session` gives the per-epoch rows the tables use, read through `genenv_engine.session_view.SessionView`
(the metrics the loop recorded, the held-out ``0``/``1`` strings). Diversity is measured here so that it can fail: besides
the engine's within-epoch exact-string unique fraction, each epoch's valid generated tasks are compared with every
earlier task of the session (near-duplicate keys: numbers masked) and scored by distinct word bigrams.
"""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any

from genenv_engine.experiments.arms import COMPUTE_FIELDS
from genenv_engine.experiments.stats import distinct_bigrams, level_rate
from genenv_engine.simulator import near_duplicate_key


def _diversity(store: Any, epochs: list[int]) -> dict[int, dict[str, float | None]]:
    """Per epoch: the share of valid generated/static tasks whose near-duplicate key no earlier task of the
    session (seeds, train split, older generations) has, and their distinct-bigram fraction."""
    seen = {near_duplicate_key(r["prompt"]) for r in store.query_tasks(origin="seed", limit=10**9, order="id")}
    out: dict[int, dict[str, float | None]] = {}
    for epoch in sorted(epochs):
        rows = [r for origin in ("generated", "static")
                for r in store.query_tasks(origin=origin, epoch=epoch, valid=True, limit=10**9, order="id")]
        keys = [near_duplicate_key(r["prompt"]) for r in rows]
        fresh = [k not in seen for k in keys]
        out[epoch] = {"pool_unique_fraction": (sum(fresh) / len(fresh)) if fresh else None,
                      "distinct_bigrams": distinct_bigrams([r["prompt"].split("| Q:")[-1] for r in rows])}
        seen.update(keys)
    return out


def _epoch_row(m: dict[str, Any], rollouts: int, diversity: dict[str, float | None]) -> dict[str, Any]:
    upd = m.get("agent_update") or {}
    groups, seqs = upd.get("groups") or 0, upd.get("sequences") or 0
    return {
        "epoch": m["epoch"], "status": m.get("status"),
        "heldout": m.get("heldout") or {}, "heldout_by_level": m.get("heldout_by_level") or {},
        "p_hat": m.get("generated_success"), "calibration_error": m.get("calibration_error"),
        "in_band_fraction": m.get("in_band_fraction"), "valid_fraction": m.get("valid_fraction"),
        "unique_fraction": m.get("unique_fraction"), "difficulty_mix": m.get("difficulty_mix") or {},
        "tasks_trained": m.get("tasks_trained"), "rollouts": (m.get("tasks_trained") or 0) * rollouts,
        "agent_steps": upd.get("steps"),
        "zero_advantage_share": (1 - seqs / (groups * rollouts)) if groups else None,
        "simulator_examples": (m.get("simulator_update") or {}).get("examples"),
        "seed_levels": dict(sum((Counter(v) for v in (m.get("seed_levels_drawn") or {}).values()), Counter())),
        **diversity,
    }


def read_session(folder: Path) -> dict[str, Any] | None:
    """One arm x seed session as rows per finished epoch (None if the folder holds no session)."""
    from genenv_engine.session import Session
    from genenv_engine.session_view import SessionView

    if not (folder / "config.toml").exists():
        return None
    session = Session.open(folder)
    try:
        view = SessionView.of(session)
        cfg = view.config
        done = view.done_epochs
        metrics = [e.row() for e in done]
        diversity = _diversity(session.store, [e.epoch for e in done if e.epoch > 0])
        rows = [_epoch_row(m, cfg.agent.rollouts, diversity.get(m["epoch"], {})) for m in metrics]
        correct = {e.epoch: dict(e.heldout_correct) for e in done}
    finally:
        session.store.close()
    levels = heldout_levels(cfg, metrics)
    budget = {name: (list(v) if isinstance(v := getattr(cfg.agent, name), tuple) else v) for name in COMPUTE_FIELDS}
    budget.update(rollouts_per_epoch=cfg.agent.tasks_per_epoch * cfg.agent.rollouts, heldout_size=cfg.heldout_size,
                  benchmarks=list(cfg.benchmarks))
    return {"alpha": cfg.curriculum.alpha, "target_epochs": cfg.epochs, "benchmarks": list(cfg.benchmarks),
            "heldout_size": cfg.heldout_size, "epochs": rows, "_correct": correct, "_levels": levels,
            "_budget": budget, "_folder": folder, "_config": cfg,
            "_warm_start": ((metrics[0].get("warm_start") or {}).get("key") if metrics and metrics[0]["epoch"] == 0
                            else None)}


def warm_start_mismatches(runs: dict[str, dict[int, dict[str, Any]]]) -> dict[str, dict[str, str]]:
    """Seeds whose arms started from different warm starts (e.g. run with other ``model.threads``, which the
    warm-start key holds): their arm-against-arm differences then include the epoch-0 agents' difference.

    >>> warm_start_mismatches({"off": {0: {"_warm_start": "a"}}, "unseen": {0: {"_warm_start": "b"}, 1: {}}})
    {'0': {'off': 'a', 'unseen': 'b'}}
    """
    by_seed: dict[int, dict[str, str]] = {}
    for arm, by in runs.items():
        for seed, run in by.items():
            if run.get("_warm_start"):
                by_seed.setdefault(seed, {})[arm] = run["_warm_start"]
    return {str(seed): keys for seed, keys in sorted(by_seed.items()) if len(set(keys.values())) > 1}


def heldout_levels(cfg: Any, metrics: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each benchmark's held-out tasks' difficulty buckets, in the order of ``heldout_correct``: rebuilt from the
    session's environments the way the loop picks them, and kept only where they reproduce the per-level rates
    the database stored (a benchmark whose data is missing here, or whose split changed, gets none)."""
    from genenv_engine.agent import heldout_tasks
    from genenv_engine.environments import get_environment

    out: dict[str, list[str]] = {}
    for name in cfg.benchmarks:
        try:
            env = get_environment(name, cfg.seed, data_dir=cfg.data_dirs.get(name))
            buckets = [env.bucket(t) for t in heldout_tasks({name: env}, cfg.heldout_size)]
        except Exception:  # noqa: BLE001 - data not on this machine: the table goes without levels
            continue
        agree = True
        for m in metrics:
            stored, correct = (m.get("heldout_by_level") or {}).get(name), (m.get("heldout_correct") or {}).get(name)
            if stored and correct:
                agree &= len(correct) == len(buckets) and all(
                    math.isclose(rate, level_rate(correct, buckets, level)) for level, rate in stored.items())
        if agree:
            out[name] = buckets
    return out
