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
"""

from __future__ import annotations

import argparse
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from statistics import fmean, stdev
from typing import Any

from genenv_engine.core.curriculum import alpha_reward, rwr_weights
from genenv_engine.core.reliability import binomial_reliability, icc1, retest_correlation, spearman
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


def reliability_cell(
    rounds: Sequence[Outcomes],
    batches: Sequence[Sequence[str]],
    k: int,
    b: int,
    reward: Callable[[float], float],
    lam: float,
) -> dict[str, Any]:
    """The figures of one (k, B) cell: how the rounds agree on p-hat, R_env and the RWR weights, and what binomial
    sampling alone allows (true rates estimated from every attempt of every round).

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
    session: Any, epoch: int, task_ids: list[str], rounds: int, attempts: int, seed: int, backend_factory: Any = None
) -> list[Outcomes]:
    """Each round's outcomes of every task (``attempts`` sampled completions scored by the checker)."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.environments import environments_of
    from genenv_engine.training.agent import rollout
    from genenv_engine.training.roles import load_roles

    cfg = session.config
    envs = environments_of(cfg)
    roles = load_roles(session, epoch - 1, backend_factory=backend_factory)
    tasks = [session.store.get_task(t) for t in task_ids]
    rng = random.Random(seed)
    out = []
    for _ in range(rounds):
        sampling = Sampling(
            temperature=cfg.agent.temperature, max_new_tokens=cfg.agent.max_new_tokens, seed=rng.randrange(2**31)
        )
        scored = rollout(roles.agent_backend, roles.agent, envs, tasks, attempts, sampling, cfg.agent.success_threshold)
        out.append({s.task.id: [int(a.success) for a in s.attempts] for s in scored})
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
    outcomes = _score_rounds(session, epoch, task_ids, rounds, attempts, seed, backend_factory)
    cur = cfg.curriculum

    def reward(p: float) -> float:
        return alpha_reward(p, cur.alpha, cur.beta)

    cells = [reliability_cell(outcomes, batches, k, b, reward, cfg.simulator.rwr_lambda) for b in bs for k in ks]
    return {
        "session": str(session.path),
        "epoch": epoch,
        "rounds": rounds,
        "attempts": attempts,
        "seed": seed,
        "batches": len(batches),
        "tasks": len(task_ids),
        "alpha": cur.alpha,
        "beta": cur.beta,
        "rwr_lambda": cfg.simulator.rwr_lambda,
        "mean_success": fmean([s for o in outcomes for v in o.values() for s in v]),
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


def markdown(result: dict[str, Any]) -> str:
    """The result as a Markdown table (written beside the JSON as ``bench-reliability.md``).

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
    return "\n".join(lines)


def table(result: dict[str, Any]) -> Any:
    """Rich table: one row per (tasks per batch, attempts) cell."""
    t = rich_table(
        f"reward reliability: epoch {result['epoch']}, {result['batches']} batches, {result['rounds']} rounds, "
        f"mean success {result['mean_success']:.3f}",
        ("B", "k", *(name for _, name in COLUMNS)),
    )
    for c in result["cells"]:
        t.add_row(str(c["tasks_per_batch"] or "all"), str(c["k"]), *(_fmt(c[key]) for key, _ in COLUMNS))
    return t
