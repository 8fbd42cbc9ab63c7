"""One arm x seed session of the ablation bench read back from its database as plain rows.

`read_session` gives the per-epoch rows the tables use, read through `genenv_engine.storage.session_view.SessionView`
(the metrics the loop recorded, the held-out ``0``/``1`` strings, the warm start's cache key and the epoch-0
weight fingerprints of each role). Diversity is measured here so that it can fail: besides the engine's within-epoch
exact-string unique fraction, each epoch's valid generated tasks are compared with every earlier task of the
session (near-duplicate keys: numbers masked) and scored by distinct word bigrams. Each row also carries the
simulator's validity per benchmark (`genenv_engine.storage.store.funnel_validity`, from the store's funnel).

`warm_start_mismatches` finds the pairs of arms of one seed whose epoch-0 agents differ (another warm start: other
weights, other epoch-0 held-out results), which an arm-against-arm difference then silently includes.
"""

from __future__ import annotations

import math
from collections import Counter
from itertools import combinations
from pathlib import Path
from typing import Any

from genenv_engine.ablation.arms import COMPUTE_FIELDS
from genenv_engine.ablation.stats import band_share, distinct_bigrams, level_rate
from genenv_engine.config import NO_SIMULATOR_MODES
from genenv_engine.storage.store import funnel_validity, with_admitted
from genenv_engine.training.simulator import near_duplicate_key


def _diversity(store: Any, epochs: list[int]) -> dict[int, dict[str, float | None]]:
    """Per epoch: the share of valid generated/static tasks whose near-duplicate key no earlier task of the
    session (seeds, train split, older generations) has, and their distinct-bigram fraction."""
    seen = {near_duplicate_key(r["prompt"]) for r in store.query_tasks(origin="seed", limit=10**9, order="id")}
    out: dict[int, dict[str, float | None]] = {}
    for epoch in sorted(epochs):
        rows = [
            r
            for origin in ("generated", "static")
            for r in store.query_tasks(origin=origin, epoch=epoch, valid=True, limit=10**9, order="id")
        ]
        keys = [near_duplicate_key(r["prompt"]) for r in rows]
        fresh = [k not in seen for k in keys]
        out[epoch] = {
            "pool_unique_fraction": (sum(fresh) / len(fresh)) if fresh else None,
            "distinct_bigrams": distinct_bigrams([r["prompt"].split("| Q:")[-1] for r in rows]),
        }
        seen.update(keys)
    return out


def _epoch_row(
    m: dict[str, Any],
    rollouts: int,
    diversity: dict[str, float | None],
    validity: dict[str, dict[str, Any]] | None = None,
    counts: dict[str, int] | None = None,
    band: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One epoch's row from its stored metrics; ``counts``: its stored rollouts per purpose
    (`genenv_engine.storage.store.Store.rollout_counts`), ``band``: (alpha, half-width) of the share of fresh tasks and
    batches whose p-hat lies in the band (None: not computed)."""
    upd = m.get("agent_update") or {}
    sim_upd = m.get("simulator_update") or {}
    groups, seqs = upd.get("groups") or 0, upd.get("sequences") or 0
    return {
        "epoch": m["epoch"],
        "status": m.get("status"),
        "heldout": m.get("heldout") or {},
        "heldout_by_level": m.get("heldout_by_level") or {},
        "p_hat": m.get("generated_success"),
        "calibration_error": m.get("calibration_error"),
        "in_band_fraction": m.get("in_band_fraction"),
        "valid_fraction": m.get("valid_fraction"),
        "unique_fraction": m.get("unique_fraction"),
        "difficulty_mix": m.get("difficulty_mix") or {},
        "tasks_trained": m.get("tasks_trained"),
        "rollouts": (m.get("tasks_trained") or 0) * rollouts,
        "agent_steps": upd.get("steps"),
        "zero_advantage_share": (1 - seqs / (groups * rollouts)) if groups else None,
        "simulator_examples": sim_upd.get("examples"),
        "seed_levels": dict(sum((Counter(v) for v in (m.get("seed_levels_drawn") or {}).values()), Counter())),
        **diversity,
        "validity": with_admitted(validity or {}, m.get("admitted") or {}),
        **_training_signals(m, sim_upd, counts, band),
    }


PROBE_PURPOSES = ("probe_before", "probe_after")
"""The rollout purposes of the grounded reward's sibling answers (`genenv_lab.grounded.PURPOSES`)."""


def _training_signals(
    m: dict[str, Any], sim_upd: dict[str, Any], counts: dict[str, int] | None, band: tuple[float, float] | None
) -> dict[str, Any]:
    """What the epoch trained on and what moved: the fresh tasks (rolled out this epoch) and the share of them, and
    of the batches, whose p-hat lies in the alpha band; the RWR weights' spread and the simulator's drift from its
    initial weights; the training rollouts and evaluation generations counted from the store.

    >>> row = _training_signals({"task_p_hats": [0.5, 1.0], "batch_p_hats": [0.75]}, {"weight_sd": 0.25},
    ...                         {"train": 64, "probe_before": 8, "probe_after": 8}, (0.5, 0.1))
    >>> row["fresh_tasks"], row["task_band_fraction"], row["band_fraction"], row["eval_generations"]
    (2, 0.5, 0.0, 16)
    """
    tasks, batches = m.get("task_p_hats"), m.get("batch_p_hats")
    return {
        "fresh_tasks": len(tasks) if tasks is not None else None,
        "task_band_fraction": band_share(tasks, *band) if band else None,
        "band_fraction": band_share(batches, *band) if band else None,
        **{key: sim_upd.get(key) for key in ("weight_min", "weight_max", "weight_sd", "drift")},
        "train_rollouts": None if counts is None else counts.get("train", 0),
        "eval_generations": None if counts is None else sum(counts.get(p, 0) for p in PROBE_PURPOSES),
    }


def read_session(folder: Path) -> dict[str, Any] | None:
    """One arm x seed session as rows per finished epoch (None if the folder holds no session)."""
    from genenv_engine.storage.session import Session
    from genenv_engine.storage.session_view import SessionView

    if not (folder / "config.toml").exists():
        return None
    session = Session.open(folder)
    try:
        view = SessionView.of(session)
        cfg = view.config
        done = view.done_epochs
        metrics = [e.row() for e in done]
        diversity = _diversity(session.store, [e.epoch for e in done if e.epoch > 0])
        validity = funnel_validity(session.store.funnel())
        counts = session.store.rollout_counts()
        band = (
            cfg.curriculum.alpha_for(cfg.benchmarks[0]) if len(cfg.benchmarks) == 1 else cfg.curriculum.alpha,
            cfg.curriculum.k_min,
        )
        rows = [
            _epoch_row(
                m,
                cfg.agent.rollouts,
                diversity.get(m["epoch"], {}),
                validity.get(m["epoch"]),
                counts.get(m["epoch"], {}),
                band,
            )
            for m in metrics
        ]
        correct = {e.epoch: dict(e.heldout_correct) for e in done}
    finally:
        session.store.close()
    levels = heldout_levels(cfg, metrics)
    budget = {name: (list(v) if isinstance(v := getattr(cfg.agent, name), tuple) else v) for name in COMPUTE_FIELDS}
    budget.update(
        rollouts_per_epoch=cfg.agent.tasks_per_epoch * cfg.agent.rollouts,
        heldout_size=cfg.heldout_size,
        benchmarks=list(cfg.benchmarks),
    )
    zero = metrics[0] if metrics and metrics[0]["epoch"] == 0 else {}
    return {
        "alpha": cfg.curriculum.alpha,
        "target_epochs": cfg.epochs,
        "benchmarks": list(cfg.benchmarks),
        "heldout_size": cfg.heldout_size,
        "epochs": rows,
        "_correct": correct,
        "_levels": levels,
        "_budget": budget,
        "_folder": folder,
        "_config": cfg,
        "_warm_start": (zero.get("warm_start") or {}).get("key"),
        "_built_on": (zero.get("warm_start") or {}).get("built_on"),
        "_fingerprints": warm_start_fingerprints(zero, cfg.simulator.mode),
        "_heldout_split": heldout_split_sizes(cfg, correct.get(0, {})),
    }


def warm_start_fingerprints(epoch_zero: dict[str, Any], simulator_mode: str) -> dict[str, float]:
    """Each role's weight fingerprint (`genenv_engine.training.policy.Policy.fingerprint`) after the warm start, from
    the metrics of epoch 0: the agent's, and the simulator's when the run uses one (none the metrics lack).

    >>> warm_start_fingerprints({"agent_fingerprint": 2.5, "simulator_fingerprint": 3.0}, "off")
    {'agent': 2.5}
    >>> warm_start_fingerprints({"agent_fingerprint": 2.5, "simulator_fingerprint": 3.0}, "trained")
    {'agent': 2.5, 'simulator': 3.0}
    """
    roles = ("agent",) if simulator_mode in NO_SIMULATOR_MODES else ("agent", "simulator")
    return {role: float(v) for role in roles if isinstance(v := epoch_zero.get(f"{role}_fingerprint"), (int, float))}


def heldout_split_sizes(cfg: Any, epoch_zero: dict[str, str]) -> dict[str, int]:
    """Each benchmark's held-out split size: a run evaluates ``min(heldout_size, split)`` tasks, and a re-score on
    ``n`` tasks ``min(n, split)``, which a split smaller than ``heldout_size`` (official data) makes fewer than asked.
    Rebuilt from the benchmark's environment; where it cannot be built, an epoch-0 result string shorter than
    ``heldout_size`` still gives it (the whole split was evaluated), and otherwise the benchmark is left out."""
    from genenv_engine.environments import get_environment

    out: dict[str, int] = {}
    for name in cfg.benchmarks:
        try:
            env = get_environment(
                name, cfg.seed, data_dir=cfg.data_dirs.get(name), options=cfg.environments_options.get(name)
            )
            out[name] = len(env.splits()["heldout"])
        except Exception:  # noqa: BLE001 - the benchmark's data is missing: only the stored results tell
            if name in epoch_zero and len(epoch_zero[name]) < cfg.heldout_size:
                out[name] = len(epoch_zero[name])
    return out


FINGERPRINT_RTOL = 1e-6
"""Relative difference under which two weight fingerprints count as the same weights: a fingerprint is a float32
sum over every weight, so the same weights summed in another order (another thread count) can differ in the last
digits; two different warm starts differ far above it."""


def epoch0_difference(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any] | None:
    """How the epoch-0 agents of two runs of one seed differ, or None when nothing says they do.

    They differ when both agent fingerprints are known and differ (beyond `FINGERPRINT_RTOL`), when their epoch-0
    held-out results differ on any task (the same tasks: one seed fixes the split), or, where a fingerprint is
    unknown (a record or session older than fingerprints), when both warm-start keys are known and differ. The
    answer gives the grounds (``differs``), both fingerprints and keys, per benchmark how many of the epoch-0
    tasks compared are scored differently, and the machines that built the two warm starts where they are recorded
    (``built_on``; None for warm starts made before they were).

    >>> same = {"_fingerprints": {"agent": 10.0}, "_correct": {0: {"bfcl": "0110"}}}
    >>> epoch0_difference(same, {**same, "_warm_start": "other threads"}) is None
    True
    >>> d = epoch0_difference(same, {"_fingerprints": {"agent": 10.5}, "_correct": {0: {"bfcl": "0111"}}})
    >>> d["differs"], d["epoch0_heldout"]
    (['agent fingerprint', 'epoch-0 held-out'], {'bfcl': {'differ': 1, 'tasks': 4}})
    """
    prints = [(r.get("_fingerprints") or {}).get("agent") for r in (a, b)]
    keys = [r.get("_warm_start") for r in (a, b)]
    machines = [r.get("_built_on") for r in (a, b)]
    first, second = ((r.get("_correct") or {}).get(0) or {} for r in (a, b))
    heldout = {
        bench: {
            "differ": sum(x != y for x, y in zip(first[bench], second[bench], strict=False)),
            "tasks": len(first[bench]),
        }
        for bench in sorted(set(first) & set(second))
        if first[bench] and len(first[bench]) == len(second[bench])
    }
    differs = []
    if None not in prints and not math.isclose(prints[0], prints[1], rel_tol=FINGERPRINT_RTOL):
        differs.append("agent fingerprint")
    if any(h["differ"] for h in heldout.values()):
        differs.append("epoch-0 held-out")
    if None in prints and None not in keys and keys[0] != keys[1]:
        differs.append("warm-start key")
    if not differs:
        return None
    return {
        "differs": differs,
        "agent_fingerprints": prints,
        "warm_start_keys": keys,
        "epoch0_heldout": heldout,
        "built_on": machines,
    }


def warm_start_mismatches(
    runs: dict[str, dict[int, dict[str, Any]]], pairs: list[tuple[str, str]] | None = None
) -> list[dict[str, Any]]:
    """The pairings of two arms on one seed whose epoch-0 agents differ (`epoch0_difference`): another warm start
    (e.g. arms run on separate caches, each training its warm start on its own machine or thread count, whose float
    rounding differs), whose difference every arm-against-arm comparison of that seed then includes. ``pairs``: the
    arm pairs compared (default: every pair of arms); each entry names the seed and both arms, ``a`` and ``b``, and
    what differs.

    >>> runs = {"off": {0: {"_fingerprints": {"agent": 1.0}}, 1: {"_fingerprints": {"agent": 1.0}}},
    ...         "unseen": {0: {"_fingerprints": {"agent": 2.0}}, 1: {"_fingerprints": {"agent": 1.0}}}}
    >>> [(m["seed"], m["a"], m["b"], m["differs"]) for m in warm_start_mismatches(runs, [("unseen", "off")])]
    [(0, 'unseen', 'off', ['agent fingerprint'])]
    """
    out = []
    for a, b in pairs if pairs is not None else list(combinations(runs, 2)):
        for seed in sorted(set(runs.get(a, {})) & set(runs.get(b, {}))):
            differ = epoch0_difference(runs[a][seed], runs[b][seed])
            if differ:
                out.append({"seed": seed, "a": a, "b": b, **differ})
    return out


def heldout_levels(cfg: Any, metrics: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each benchmark's held-out tasks' difficulty buckets, in the order of ``heldout_correct``: rebuilt from the
    session's environments the way the loop picks them, and kept only where they reproduce the per-level rates
    the database stored (a benchmark whose data is missing here, or whose split changed, gets none)."""
    from genenv_engine.environments import get_environment
    from genenv_engine.training.agent import heldout_tasks

    out: dict[str, list[str]] = {}
    for name in cfg.benchmarks:
        try:
            env = get_environment(
                name, cfg.seed, data_dir=cfg.data_dirs.get(name), options=cfg.environments_options.get(name)
            )
            buckets = [env.bucket(t) for t in heldout_tasks({name: env}, cfg.heldout_size)]
        except Exception:  # noqa: BLE001 - the benchmark's data cannot be read here: the table goes without levels
            continue
        agree = True
        for m in metrics:
            stored, correct = (m.get("heldout_by_level") or {}).get(name), (m.get("heldout_correct") or {}).get(name)
            if stored and correct:
                agree &= len(correct) == len(buckets) and all(
                    math.isclose(rate, level_rate(correct, buckets, level)) for level, rate in stored.items()
                )
        if agree:
            out[name] = buckets
    return out
