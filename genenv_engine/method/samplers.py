"""Difficulty samplers: the task source of ``simulator.mode = "sampler"``, GenEnv's comparison without a language model.

In sampler mode no simulator writes the fresh tasks: the benchmark's own generator does, at the difficulty
cells a sampler picks, and everything else (rollouts, p-hat per batch, R_env, the agent's GRPO update, equal
compute) is the loop's as for GenEnv. A cell is a level, or for the ``controller`` a level and a value of each of
the benchmark's knobs (`genenv_engine.environments.base.LadderEnvironment.KNOBS`; chain: its distractor count);
each epoch's tasks of one cell form one batch (id ``e<epoch>/<benchmark>/<cell>``), scored like a variation batch.

The samplers (``curriculum.sampler``), over the levels ``simulator.seed_levels``:

- ``uniform``: every level alike;
- ``target``: the highest level only;
- ``schedule``: easy to hard over the epochs, the current and the previous rung of a ladder that reaches the
  highest level in the last epoch (`schedule_levels`);
- ``learnability``: level ``k`` in proportion to p_hat_k (1 - p_hat_k), p_hat_k being the agent's success on the
  level's tasks when they were last rolled out (an unmeasured level counts as 1/4, the most learnable), as in
  learnability sampling (SFL, LILO);
- ``controller``: a categorical policy (a softmax) over cells trained by reward-weighted regression with GenEnv's
  own reward: each epoch its batches are filtered by the band and weighted by exp(lambda R_env) as the
  simulator's RWR does (`genenv_engine.core.curriculum.rwr_weights`), and the policy takes the M-step of that
  regression, which for a categorical policy has a closed form (the weighted share of each cell), mixed with
  the old policy by `CONTROLLER_STEP` (`controller_policy`).

The adaptive samplers mix in `EXPLORE` of uniform mass so that no cell is starved. Everything they use is read
back from the store's batches, so a resumed run samples as an uninterrupted one does. The weights are pure
functions of that history (doctested here); `sampler_tasks` is the loop's glue. A plugin's draw that raises or runs
past its time limit is left out and counted (``plugin_faults``, as the simulator's rejected drafts are).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from genenv_engine.core.curriculum import rwr_weights
from genenv_engine.environments.plugin_worker import one_task
from genenv_engine.method.faults import add_fault

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig
    from genenv_engine.core.records import Task
    from genenv_engine.environments.base import Environment

EXPLORE = 0.1
"""Share of uniform mass mixed into the ``learnability`` and ``controller`` samplers' weights."""
CONTROLLER_STEP = 0.5
"""How far one epoch's M-step moves the controller's policy towards the reward-weighted cell shares."""
UNMEASURED = 0.25
"""The learnability p (1 - p) of a level not yet rolled out: the largest it can be."""


def cell_name(level: int, knobs: dict[str, int] | None = None) -> str:
    """A cell's name: ``L<level>`` then ``-<knob><value>`` per knob, sorted.

    >>> cell_name(3), cell_name(6, {"distractors": 2})
    ('L3', 'L6-distractors2')
    """
    return f"L{level}" + "".join(f"-{k}{v}" for k, v in sorted((knobs or {}).items()))


def parse_cell(name: str) -> tuple[int, dict[str, int]]:
    """The level and knobs of a cell name (`cell_name`'s inverse).

    >>> parse_cell("L6-distractors2"), parse_cell("L3")
    ((6, {'distractors': 2}), (3, {}))
    """
    head, *parts = name.split("-")
    knobs = {}
    for part in parts:
        key = part.rstrip("0123456789")
        knobs[key] = int(part[len(key) :])
    return int(head[1:]), knobs


def cells(levels: Sequence[int], knobs: dict[str, Sequence[int]]) -> list[str]:
    """Every cell of ``levels`` x the knobs' values, in order.

    >>> cells([1, 2], {"distractors": [0, 2]})
    ['L1-distractors0', 'L1-distractors2', 'L2-distractors0', 'L2-distractors2']
    """
    names = sorted(knobs)
    return [
        cell_name(level, dict(zip(names, values, strict=False)))
        for level in levels
        for values in itertools.product(*(knobs[n] for n in names))
    ]


def schedule_levels(levels: Sequence[int], epoch: int, epochs: int) -> list[int]:
    """The ``schedule`` sampler's levels at ``epoch`` (1-based) of ``epochs``: the rung ``(epoch - 1) (n - 1) /
    (epochs - 1)`` (rounded half up) of the ``n`` sorted levels, with the rung below it, so the first epoch trains
    the lowest level, the ladder is climbed evenly, and the last epoch trains the highest level.

    >>> [schedule_levels([1, 2, 3, 4, 5, 6], e, 8) for e in range(1, 9)]
    [[1], [1, 2], [1, 2], [2, 3], [3, 4], [4, 5], [4, 5], [5, 6]]
    >>> schedule_levels([1, 2, 3, 4, 5, 6], 9, 8), schedule_levels([2, 4], 1, 1)   # past the plan: the top
    ([5, 6], [2, 4])
    """
    ladder = sorted(levels)
    progress = (max(epoch, 1) - 1) / (epochs - 1) if epochs > 1 else 1.0
    rung = min(len(ladder) - 1, int(progress * (len(ladder) - 1) + 0.5))
    return ladder[max(0, rung - 1) : rung + 1]


def explore(weights: dict[str, float], share: float = EXPLORE) -> dict[str, float]:
    """Normalise ``weights`` and mix in ``share`` of uniform mass (all-zero weights give the uniform).

    >>> explore({"L1": 3.0, "L2": 1.0}, 0.0), explore({"L1": 1.0, "L2": 0.0}, 0.2), explore({"L1": 0.0, "L2": 0.0})
    ({'L1': 0.75, 'L2': 0.25}, {'L1': 0.9, 'L2': 0.1}, {'L1': 0.5, 'L2': 0.5})
    """
    total = sum(weights.values())
    n = len(weights)
    if total <= 0:
        return {c: 1 / n for c in weights}
    return {c: (1 - share) * w / total + share / n for c, w in weights.items()}


def learnability_weights(levels: Sequence[int], last_p_hat: dict[int, float]) -> dict[str, float]:
    """p (1 - p) per level from each level's latest p-hat (`UNMEASURED` when it has none), before `explore`.

    >>> learnability_weights([1, 2, 3], {1: 1.0, 2: 0.5})
    {'L1': 0.0, 'L2': 0.25, 'L3': 0.25}
    """
    return {cell_name(k): (last_p_hat[k] * (1 - last_p_hat[k]) if k in last_p_hat else UNMEASURED) for k in levels}


def controller_policy(
    cell_names: Sequence[str], history: Iterable[Sequence[dict[str, Any]]], lam: float, step: float = CONTROLLER_STEP
) -> dict[str, float]:
    """The controller's policy after replaying ``history`` (each epoch's scored batches, oldest first: dicts with
    ``cell``, ``n`` tasks, ``r_env`` and ``kept``, whether the band filter keeps it), from the uniform policy.

    Each epoch, the kept batches are weighted by `rwr_weights` of their R_env and the tasks they hold; the
    regression's M-step is the cells' weighted shares ``q``, and the policy moves to ``(1 - step) pi + step q``.
    An epoch without a kept batch leaves it unchanged.

    >>> pi = controller_policy(["L1", "L2", "L3"], [[{"cell": "L2", "n": 8, "r_env": 1.0, "kept": True},
    ...                                              {"cell": "L3", "n": 8, "r_env": 0.1, "kept": False}]], lam=1.0)
    >>> {c: round(p, 4) for c, p in pi.items()}
    {'L1': 0.1667, 'L2': 0.6667, 'L3': 0.1667}
    >>> pi = controller_policy(["L1", "L2"], [[{"cell": "L1", "n": 4, "r_env": 1.0, "kept": True},
    ...                                       {"cell": "L2", "n": 4, "r_env": 0.0, "kept": True}]], lam=1.0, step=1.0)
    >>> round(pi["L1"], 4)   # e / (e + 1): the weights exp(lambda R) of the two cells
    0.7311
    """
    pi = {c: 1 / len(cell_names) for c in cell_names}
    for batches in history:
        kept = [b for b in batches if b["kept"] and b["cell"] in pi and b["n"] > 0]
        if not kept:
            continue
        weights = rwr_weights([b["r_env"] for b in kept], lam)
        mass = {c: 0.0 for c in pi}
        for b, w in zip(kept, weights, strict=False):
            mass[b["cell"]] += w * b["n"]
        total = sum(mass.values())
        pi = {c: (1 - step) * p + step * mass[c] / total for c, p in pi.items()}
    return pi


def sampler_weights(
    sampler: str,
    levels: Sequence[int],
    knobs: dict[str, Sequence[int]],
    epoch: int,
    epochs: int,
    history: Sequence[Sequence[dict[str, Any]]],
    lam: float,
) -> dict[str, float]:
    """The probability of each cell this epoch under ``sampler`` (a level cell, knobs drawn by the benchmark,
    for every sampler but the controller), from the earlier epochs' scored batches ``history``.

    >>> sampler_weights("target", [1, 2, 3], {}, 1, 8, [], 1.0)
    {'L1': 0.0, 'L2': 0.0, 'L3': 1.0}
    >>> sampler_weights("schedule", [1, 2, 3, 4], {}, 8, 8, [], 1.0)
    {'L1': 0.0, 'L2': 0.0, 'L3': 0.5, 'L4': 0.5}
    >>> h = [[{"cell": "L1-distractors0", "n": 4, "r_env": 1.0, "kept": True, "p_hat": 1.0}]]
    >>> {c: round(w, 4) for c, w in sampler_weights("learnability", [1, 2], {"distractors": [0]}, 2, 8, h, 1.0).items()}
    {'L1': 0.05, 'L2': 0.95}
    """
    levels = sorted(levels)
    if sampler == "controller":
        return explore(controller_policy(cells(levels, knobs), history, lam))
    if sampler == "uniform":
        return {cell_name(k): 1 / len(levels) for k in levels}
    if sampler == "target":
        return {cell_name(k): float(k == levels[-1]) for k in levels}
    if sampler == "schedule":
        now = schedule_levels(levels, epoch, epochs)
        return {cell_name(k): (1 / len(now) if k in now else 0.0) for k in levels}
    if sampler == "learnability":
        return explore(learnability_weights(levels, last_p_hat(history)))
    raise ValueError(f"unknown sampler {sampler!r}")


def last_p_hat(history: Sequence[Sequence[dict[str, Any]]]) -> dict[int, float]:
    """Each level's pooled p-hat in the latest epoch that rolled it out (batches need ``cell``, ``n`` and ``p_hat``).

    >>> last_p_hat([[{"cell": "L1-distractors0", "n": 2, "p_hat": 0.5},
    ...              {"cell": "L1-distractors1", "n": 2, "p_hat": 1.0}],
    ...             [{"cell": "L2", "n": 4, "p_hat": 0.25}]])
    {1: 0.75, 2: 0.25}
    """
    out: dict[int, float] = {}
    for batches in history:
        pooled: dict[int, list[float]] = {}
        for b in batches:
            level = parse_cell(b["cell"])[0]
            total = pooled.setdefault(level, [0.0, 0.0])
            total[0] += b["p_hat"] * b["n"]
            total[1] += b["n"]
        out.update({k: s / n for k, (s, n) in pooled.items() if n})
    return out


def draw(weights: dict[str, float], n: int, rng: random.Random) -> list[str]:
    """``n`` cells drawn independently from ``weights`` (sorted by cell, so batches come in a fixed order).

    >>> draw({"L1": 0.0, "L2": 1.0}, 3, random.Random(0))
    ['L2', 'L2', 'L2']
    """
    names = list(weights)
    return sorted(rng.choices(names, weights=[weights[c] for c in names], k=n), key=names.index)


# ---------------------------------------------------------------- the loop's glue


def history_of(
    batches: Sequence[dict[str, Any]], benchmark: str, before: int, keeps: Any
) -> list[list[dict[str, Any]]]:
    """The sampler's history from the store's batch rows of one benchmark, epochs before ``before``, oldest first
    (``keeps(p_hat)``: the band filter of that benchmark)."""
    by_epoch: dict[int, list[dict[str, Any]]] = {}
    prefix = f"/{benchmark}/"
    for row in batches:
        if row["epoch"] >= before or row.get("p_hat") is None or prefix not in row["id"]:
            continue
        by_epoch.setdefault(row["epoch"], []).append(
            {
                "cell": row["id"].split(prefix, 1)[1],
                "n": row.get("n_valid") or 0,
                "p_hat": row["p_hat"],
                "r_env": row["r_env"],
                "kept": keeps(row["p_hat"]),
            }
        )
    return [by_epoch[e] for e in sorted(by_epoch)]


def sampler_tasks(
    cfg: RunConfig,
    envs: dict[str, Environment],
    batches: Sequence[dict[str, Any]],
    epoch: int,
    rng: random.Random,
    taken: set[str],
) -> tuple[list[Task], dict[str, str], dict[str, Any]]:
    """This epoch's fresh tasks in sampler mode: ``seeds_per_epoch x variations`` per benchmark at cells drawn
    from `sampler_weights`, written by the benchmark's generator with prompts not in ``taken`` (which grows);
    returns the tasks, each task's batch id and the metrics (the weights and the cells drawn)."""
    n = cfg.simulator.seeds_per_epoch * cfg.simulator.variations
    tasks: list[Task] = []
    batch_of: dict[str, str] = {}
    metrics: dict[str, Any] = {"sampler": cfg.curriculum.sampler, "sampler_weights": {}, "sampler_cells": {}}
    for name, env in envs.items():
        levels = cfg.simulator.seed_levels or tuple(sorted({t.level for t in env.splits()["seed"]}))
        knobs = dict(getattr(env, "KNOBS", {})) if cfg.curriculum.sampler == "controller" else {}
        cur = cfg.curriculum
        history = history_of(batches, name, epoch, lambda p, name=name, cur=cur: cur.keeps(p, name))
        weights = sampler_weights(cur.sampler, levels, knobs, epoch, cfg.epochs, history, cfg.simulator.rwr_lambda)
        drawn = draw(weights, n, rng)
        metrics["sampler_weights"][name] = {c: round(w, 4) for c, w in weights.items()}
        counts: dict[str, int] = {}
        for cell in drawn:
            counts[cell] = counts.get(cell, 0) + 1
        metrics["sampler_cells"][name] = counts
        for i, cell in enumerate(drawn):
            level, cell_knobs = parse_cell(cell)
            task, fault = one_task(
                env,
                level,
                rng,
                f"{name}/sampler/e{epoch:03d}/{i:05d}",
                taken,
                knobs=cell_knobs,
                split="generated",
                origin="generated",
                epoch=epoch,
                generator=f"sampler:{cur.sampler}",
            )
            if task is None:
                add_fault(metrics.setdefault("plugin_faults", {}), name, "drafts", fault)
                continue
            tasks.append(task)
            batch_of[task.id] = f"e{epoch:03d}/{name}/{cell}"
    return tasks, batch_of, metrics
