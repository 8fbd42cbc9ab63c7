"""``genenv bench reliability``: does the simulator's reward carry a signal? Its batches scored again, fresh seeds.

From a session's epoch E: the valid generated tasks of each of its variation batches, and the agent as it was when
they were rolled out (the checkpoint of epoch E - 1). Each of ``--rounds`` rounds samples ``--attempts`` completions of
every task with its own seeds and scores them with the environment's checker. Then, for every number of attempts
per task k (``--k``) and tasks per batch B (``--tasks``; a batch's first B tasks, its first k attempts), each round
gives every batch a p-hat, an alpha-reward R_env (the session's alpha and beta) and an RWR weight (the session's
``rwr_lambda``, over the epoch's batches), and the bench reports how well the rounds agree
(`genenv_engine.core.reliability`): ICC(1) and the mean test-retest correlation of p-hat and of R_env, the mean rank
correlation of the RWR weights between rounds, and the reliability binomial sampling alone would leave to p-hat
(each task's true rate estimated from all its attempts in all rounds, less the spread that estimate has by
chance). A reliability near 0 means the simulator's
update is weighted by noise; the figures say how many attempts and tasks per batch would make it a signal.

Beside the raw p-hat, each cell reports every success estimator of `genenv_engine.core.estimators` (the
``shrunk`` and ``predicted`` rewards' p~) from the same attempts. Their history is what the loop had when it scored
epoch E: the stored training rollouts of the epochs before it, fixed, and epoch E's replayed tasks, which every
round samples again (k attempts each, their own seeds) as it does the batches', so that a round retests everything
an estimate reads of epoch E. Beside the agreement figures, two tell a steadier estimate from a truer one:
``validity``, the mean correlation of a round's estimates with each batch's p-hat over every attempt of the other
rounds, and ``bias``, the estimates' mean less that of the p-hat over every attempt of every round.
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from genenv_engine.core.curriculum import alpha_reward, rwr_weights
from genenv_engine.core.estimators import ESTIMATORS, HORIZON, Estimator, Tally
from genenv_engine.core.reliability import binomial_reliability, icc1, pearson, retest_correlation, spearman
from genenv_engine.interfaces.benches.common import rich_table

Outcomes = dict[str, list[int]]
"""One round: task id -> the success (0/1) of each of its attempts, in order."""


def batch_p_hats(rounds: Sequence[Outcomes], batches: Sequence[Sequence[str]], k: int, b: int) -> list[list[float]]:
    """Per round, each batch's p-hat over its first ``b`` tasks' first ``k`` attempts (``b`` 0: all its tasks, as
    the loop scores a batch).

    >>> rounds = [{"a": [1, 0, 1], "b": [0, 0, 1]}, {"a": [1, 1, 1], "b": [0, 1, 1]}]
    >>> batch_p_hats(rounds, [["a", "b"]], k=2, b=2), batch_p_hats(rounds, [["a", "b"]], k=3, b=1)
    ([[0.25], [0.75]], [[0.6666666666666666], [1.0]])
    """
    out = []
    for outcomes in rounds:
        out.append([fmean([s for t in batch[: b or None] for s in outcomes[t][:k]]) for batch in batches])
    return out


Kinds = dict[str, tuple[str, int | None, bool]]
"""Task id -> its benchmark, level and whether the simulator wrote it."""


def batch_tallies(
    outcomes: Outcomes, batches: Sequence[Sequence[str]], k: int, b: int, kinds: Kinds
) -> list[list[Tally]]:
    """One round's tallies of each batch's first ``b`` tasks' first ``k`` attempts.

    >>> kinds = {"a": ("x", 1, True), "b": ("x", 2, True)}
    >>> batch = batch_tallies({"a": [1, 0, 1], "b": [0, 0, 1]}, [["a", "b"]], 2, 0, kinds)
    >>> [(t.benchmark, t.level, t.successes, t.attempts) for t in batch[0]]
    [('x', 1, 1, 2), ('x', 2, 0, 2)]
    """
    return [[_tally(outcomes, t, k, kinds) for t in batch[: b or None]] for batch in batches]


def _tally(outcomes: Outcomes, task: str, k: int, kinds: Kinds) -> Tally:
    """One task's first ``k`` attempts of a round as a `Tally`."""
    benchmark, level, generated = kinds[task]
    return Tally(benchmark, level, sum(outcomes[task][:k]), len(outcomes[task][:k]), generated)


def estimator_figures(
    values: Sequence[Sequence[float]],
    reference: Sequence[Sequence[float]],
    reward: Callable[[float], float],
    lam: float,
) -> dict[str, float | None]:
    """How the rounds agree on one estimate of every batch (``values``: per round, one per batch) and on its
    R_env and RWR weights, its ``validity`` (the mean correlation of a round with ``reference``'s other rounds
    pooled: per round, each batch's p-hat over all its attempts) and its ``bias`` against the reference's mean.

    >>> fig = estimator_figures([[0.2, 0.8, 0.5], [0.3, 0.7, 0.5]], [[0.2, 0.9, 0.4], [0.2, 0.7, 0.6]], abs, 1.0)
    >>> fig["icc"] > 0.9, round(fig["validity"], 3), round(fig["bias"], 3)  # validity: mean of 0.945 and 0.971
    (True, 0.958, 0.0)
    """
    rewards = [[reward(p) for p in ps] for ps in values]
    validity = []
    for r, ps in enumerate(values):
        others = [[ref[i] for j, ref in enumerate(reference) if j != r] for i in range(len(ps))]
        v = pearson(ps, [fmean(o) for o in others]) if all(others) else None
        if v is not None:
            validity.append(v)
    return {
        "icc": icc1(values),
        "retest": retest_correlation(values),
        "reward_icc": icc1(rewards),
        "reward_retest": retest_correlation(rewards),
        "weights_rank": retest_correlation([rwr_weights(rs, lam) for rs in rewards], spearman),
        "validity": fmean(validity) if validity else None,
        "bias": fmean(p for ps in values for p in ps) - fmean(p for ps in reference for p in ps),
    }


def reliability_cell(
    rounds: Sequence[Outcomes],
    batches: Sequence[Sequence[str]],
    k: int,
    b: int,
    reward: Callable[[float], float],
    lam: float,
    estimators: dict[str, Estimator] | None = None,
    kinds: Kinds | None = None,
    past: Sequence[Tally] = (),
    replay: Sequence[str] = (),
) -> dict[str, Any]:
    """The figures of one (k, B) cell: how the rounds agree on p-hat, R_env and the RWR weights, and what binomial
    sampling alone allows (true rates estimated from every attempt of every round); with ``estimators``, the cell's
    ``estimators`` holds each one's `estimator_figures` and the raw p-hat's (``p_hat``), each estimate's history
    the tallies of the epochs before (``past``) and the round's first ``k`` attempts at the epoch's replayed tasks
    (``replay``, in the rounds' outcomes too).

    >>> rounds = [{"a": [1, 1], "b": [0, 0], "c": [1, 0]}, {"a": [1, 1], "b": [0, 0], "c": [0, 1]}]
    >>> cell = reliability_cell(rounds, [["a"], ["b"], ["c"]], 2, 1, lambda p: p, 1.0)
    >>> cell["p_hat_icc"], cell["weights_rank"], cell["batches"]
    (1.0, 1.0, 3)
    """
    p_hats = batch_p_hats(rounds, batches, k, b)
    rewards = [[reward(p) for p in ps] for ps in p_hats]
    weights = [rwr_weights(rs, lam) for rs in rewards]
    true_rates = [
        [fmean([s for outcomes in rounds for s in outcomes[t]]) for t in batch[: b or None]] for batch in batches
    ]
    figures: dict[str, Any] = {}
    if estimators:
        every = batch_p_hats(rounds, batches, max(len(o[t]) for o in rounds for batch in batches for t in batch), b)
        figures["p_hat"] = estimator_figures(p_hats, every, reward, lam)
        kinds = kinds or {}
        measured = [
            (batch_tallies(o, batches, k, b, kinds), [*past, *(_tally(o, t, k, kinds) for t in replay)]) for o in rounds
        ]
        for name, estimate in estimators.items():
            values = [[float(v) for v in estimate(tallies, history).values] for tallies, history in measured]
            figures[name] = estimator_figures(values, every, reward, lam)
    return {
        "k": k,
        "tasks_per_batch": b,
        "batches": len(batches),
        "p_hat_icc": icc1(p_hats),
        "p_hat_retest": retest_correlation(p_hats),
        "reward_icc": icc1(rewards),
        "reward_retest": retest_correlation(rewards),
        "weights_rank": retest_correlation(weights, spearman),
        "binomial": binomial_reliability(true_rates, k, estimated_from=sum(len(o[batches[0][0]]) for o in rounds)),
        "reward_sd": fmean(stdev(rs) for rs in rewards),
        **({"estimators": figures} if figures else {}),
    }


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``genenv bench reliability``."""
    parser.add_argument("session", type=Path, help="a session folder with checkpoints")
    parser.add_argument("--epoch", type=int, default=1, help="the epoch whose simulator batches are scored (>= 1)")
    parser.add_argument("--rounds", type=int, default=4, help="independent scorings of every batch (default 4)")
    parser.add_argument(
        "--attempts", type=int, default=None, help="attempts per task and round (default: the largest --k)"
    )
    parser.add_argument(
        "--k", type=int, action="append", default=[], help="attempts per task to evaluate (default: 1, 2, rollouts, 2x)"
    )
    parser.add_argument(
        "--tasks",
        type=int,
        action="append",
        default=[],
        help="tasks per batch to evaluate, 0 for each batch's own (default: 0 and the smallest batch's)",
    )
    parser.add_argument("--seed", type=int, default=0, help="the rounds' sampling seed")


def _score_rounds(
    session: Any,
    epoch: int,
    task_ids: list[str],
    rounds: int,
    attempts: int,
    seed: int,
    backend_factory: Any = None,
    replay: Sequence[str] = (),
) -> list[Outcomes]:
    """Each round's outcomes of every task (``attempts`` sampled completions scored by the checker); the ``replay``
    tasks' from a second rollout per round with seeds of their own (the batches' seeds are as without them)."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.environments import environments_of
    from genenv_engine.training.agent import rollout
    from genenv_engine.training.roles import load_roles

    cfg = session.config
    envs = environments_of(cfg)
    roles = load_roles(session, epoch - 1, backend_factory=backend_factory)
    tasks = [session.store.get_task(t) for t in task_ids]
    replayed = [session.store.get_task(t) for t in replay]
    rng, replay_rng = random.Random(seed), random.Random(f"{seed}/replay")
    out = []
    for _ in range(rounds):
        outcomes: Outcomes = {}
        for group, seeds in ((tasks, rng), (replayed, replay_rng)):
            if not group:
                continue
            sampling = Sampling(
                temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens, seed=seeds.randrange(2**31)
            )
            scored = rollout(
                roles.agent_backend, roles.agent, envs, group, attempts, sampling, cfg.agent.success_threshold
            )
            outcomes.update({s.task.id: [int(a.success) for a in s.attempts] for s in scored})
        out.append(outcomes)
    return out


def measure(
    session: Any,
    epoch: int,
    rounds: int,
    ks: Sequence[int] = (),
    bs: Sequence[int] = (),
    attempts: int | None = None,
    seed: int = 0,
    backend_factory: Any = None,
) -> dict[str, Any]:
    """Score epoch ``epoch``'s batches ``rounds`` times and compute every (B, k) cell (see the module docstring);
    ``backend_factory`` replaces the agent's backend (tests use a scripted double)."""
    if epoch < 1:
        raise SystemExit("--epoch must be at least 1 (epoch 0 has no simulator batches)")
    if rounds < 2:
        raise SystemExit("--rounds must be at least 2")
    cfg = session.config
    ks = sorted(set(ks or [1, 2, cfg.agent.rollouts, 2 * cfg.agent.rollouts]))
    attempts = attempts or max(ks)
    if min(ks) < 1 or max(ks) > attempts:
        raise SystemExit(f"--k must be between 1 and --attempts ({attempts})")
    rows = session.store.batches(epoch)
    grouped = session.store.tasks_in_batches([r["id"] for r in rows], origin="generated")
    batches = [[t.id for t in tasks] for tasks in grouped.values() if tasks]
    if len(batches) < 2:
        raise SystemExit(f"epoch {epoch} has {len(batches)} batch(es) with valid tasks: at least 2 are needed")
    smallest = min(len(b) for b in batches)
    bs = sorted(set(bs or [0, smallest]))
    if min(bs) < 0 or max(bs) > smallest:
        raise SystemExit(f"--tasks must be between 0 (each batch's own tasks) and the smallest batch's {smallest}")
    task_ids = [t for b in batches for t in b]
    tallies = session.store.training_tallies(epoch, since=epoch - HORIZON + 1)
    replay = sorted({r["task_id"] for r in tallies if r["epoch"] == epoch} - set(task_ids))
    outcomes = _score_rounds(session, epoch, task_ids, rounds, attempts, seed, backend_factory, replay)
    cur = cfg.curriculum

    def reward(p: float) -> float:
        return alpha_reward(p, cur.alpha, cur.beta)

    from genenv_engine.method.rewards import tally
    from genenv_engine.storage.store import GENERATED_ORIGINS

    kinds: Kinds = {}
    for t in [*task_ids, *replay]:
        task = session.store.get_task(t)
        kinds[t] = (task.benchmark, task.level, task.origin in GENERATED_ORIGINS)
    past = [tally(r, epoch) for r in tallies if r["epoch"] < epoch]
    lam = cfg.simulator.rwr_lambda
    cells = [
        reliability_cell(outcomes, batches, k, b, reward, lam, ESTIMATORS, kinds, past, replay) for b in bs for k in ks
    ]
    return {
        "session": str(session.path),
        "epoch": epoch,
        "rounds": rounds,
        "attempts": attempts,
        "seed": seed,
        "batches": len(batches),
        "tasks": len(task_ids),
        "replayed_tasks": len(replay),
        "alpha": cur.alpha,
        "beta": cur.beta,
        "rwr_lambda": cfg.simulator.rwr_lambda,
        "mean_success": fmean([s for o in outcomes for t in task_ids for s in o[t]]),
        "cells": cells,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Entry point."""
    from genenv_engine.storage.session import Session
    from genenv_engine.training.policy import quiet_transformers

    quiet_transformers()
    session = Session.open(args.session)
    try:
        result = measure(session, args.epoch, args.rounds, args.k, args.tasks, args.attempts, args.seed)
    finally:
        session.store.close()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench-reliability.md").write_text(markdown(result) + "\n", encoding="utf-8")
    return result


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


COLUMNS = (
    ("p_hat_icc", "p̂ ICC"),
    ("p_hat_retest", "p̂ retest"),
    ("reward_icc", "R_env ICC"),
    ("reward_retest", "R_env retest"),
    ("weights_rank", "RWR rank"),
    ("binomial", "binomial"),
    ("reward_sd", "R_env sd"),
)
"""The figures of a cell, as the tables name them."""


ESTIMATE_COLUMNS = (
    ("icc", "ICC"),
    ("retest", "retest"),
    ("reward_icc", "R_env ICC"),
    ("reward_retest", "R_env retest"),
    ("weights_rank", "RWR rank"),
    ("validity", "validity"),
    ("bias", "bias"),
)
"""The figures of an estimate of a cell (`estimator_figures`), as the estimators' table names them."""


def estimator_rows(result: dict[str, Any]) -> list[list[str]]:
    """One row per (tasks per batch, attempts, estimate): the raw p-hat's (``p̂``) and each estimator's figures;
    none for a result without them.

    >>> figs = {key: 0.5 for key, _ in ESTIMATE_COLUMNS}
    >>> estimator_rows({"cells": [{"tasks_per_batch": 0, "k": 8, "estimators": {"p_hat": figs, "shrunk": figs}}]})[1]
    ['all', '8', 'shrunk', '0.500', '0.500', '0.500', '0.500', '0.500', '0.500', '0.500']
    """
    rows = []
    for c in result["cells"]:
        for name, figs in c.get("estimators", {}).items():
            label = "p̂" if name == "p_hat" else name
            rows.append(
                [str(c["tasks_per_batch"] or "all"), str(c["k"]), label, *(_fmt(figs[k]) for k, _ in ESTIMATE_COLUMNS)]
            )
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The result as Markdown tables (written beside the JSON as ``bench-reliability.md``): the cells, then each
    estimate's figures where the result has them.

    >>> cell = {"tasks_per_batch": 0, "k": 8, **{key: 0.5 for key, _ in COLUMNS}}
    >>> print(markdown({"epoch": 1, "batches": 10, "rounds": 4, "mean_success": 0.5, "cells": [cell]}))
    Reward reliability: epoch 1, 10 batches, 4 rounds, mean success 0.500.
    <BLANKLINE>
    | B | k | p̂ ICC | p̂ retest | R_env ICC | R_env retest | RWR rank | binomial | R_env sd |
    |---|---|---|---|---|---|---|---|---|
    | all | 8 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 | 0.500 |
    """
    lines = [
        f"Reward reliability: epoch {result['epoch']}, {result['batches']} batches, {result['rounds']} rounds, "
        f"mean success {result['mean_success']:.3f}.",
        "",
        "| B | k | " + " | ".join(name for _, name in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for c in result["cells"]:
        cells = " | ".join(_fmt(c[key]) for key, _ in COLUMNS)
        lines.append(f"| {c['tasks_per_batch'] or 'all'} | {c['k']} | {cells} |")
    rows = estimator_rows(result)
    if rows:
        lines += [
            "",
            "Each estimate of a batch's success from the same attempts: the raw p̂ and the estimators of "
            "`genenv_engine.core.estimators` (validity: correlation with the p̂ over every attempt of the other "
            "rounds; bias: against its mean).",
            "",
            "| B | k | estimate | " + " | ".join(name for _, name in ESTIMATE_COLUMNS) + " |",
            "|---|---|---|" + "---|" * len(ESTIMATE_COLUMNS),
        ]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def table(result: dict[str, Any]) -> Any:
    """Rich tables: one row per (tasks per batch, attempts) cell, then one per cell and estimate where the result
    has them."""
    from rich.console import Group

    t = rich_table(
        f"reward reliability: epoch {result['epoch']}, {result['batches']} batches, {result['rounds']} rounds, "
        f"mean success {result['mean_success']:.3f}",
        ("B", "k", *(name for _, name in COLUMNS)),
    )
    for c in result["cells"]:
        t.add_row(str(c["tasks_per_batch"] or "all"), str(c["k"]), *(_fmt(c[key]) for key, _ in COLUMNS))
    rows = estimator_rows(result)
    if not rows:
        return t
    e = rich_table("each estimate of a batch's success", ("B", "k", "estimate", *(n for _, n in ESTIMATE_COLUMNS)))
    for row in rows:
        e.add_row(*row)
    return Group(t, e)
