"""ALFWorld-mini step tasks: the level of a state, its difficulty features, and the task record built from it.

Shared by the mini's generator and validator (:mod:`.mini`) and the official-games loader (:mod:`.upstream`),
so neither imports the other for it.
"""

from __future__ import annotations

from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.environments.alfworld.planner import Solution
from genenv_engine.environments.alfworld.text import render_state
from genenv_engine.environments.alfworld.world import World


def infer_level(features: dict[str, Any]) -> int:
    """Level 1-4 from the remaining optimal plan length and the number of receptacles.

    >>> infer_level({"plan_len": 2, "n_receptacles": 3}), infer_level({"plan_len": 6, "n_receptacles": 3})
    (1, 3)
    >>> infer_level({"plan_len": 1, "n_receptacles": 6})
    4
    """
    plan_len, size = features["plan_len"], features["n_receptacles"]
    by_plan = 1 if plan_len <= 2 else 2 if plan_len <= 4 else 3 if plan_len <= 7 else 4
    by_size = 1 if size <= 3 else 2 if size == 4 else 3 if size == 5 else 4
    return max(by_plan, by_size)


def step_features(world: World, solution: Solution) -> dict[str, Any]:
    """Difficulty features of a state: task type, plan length, game size, closed receptacles, choices."""
    return {
        "task_type": world.goal.task_type,
        "plan_len": solution.dist,
        "n_receptacles": len(world.recs),
        "n_objects": len(world.objs),
        "n_closed": sum(world.closed),
        "n_optimal": len(solution.optimal),
        "holding": world.held is not None,
    }


def make_task(
    world: World,
    solution: Solution,
    task_id: str,
    *,
    answer: str | None = None,
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> Task:
    """A step task for a state: gold = the canonical optimal action (or ``answer``), expected = all optimal."""
    features = step_features(world, solution)
    optimal = list(solution.optimal) + ([answer] if answer and answer not in solution.optimal else [])
    expected = {
        "optimal": optimal,
        "plan": list(solution.plan),
        "plan_len": solution.dist,
        "task_type": world.goal.task_type,
        **(extra or {}),
    }
    return Task(
        id=task_id,
        benchmark="alfworld",
        prompt=render_state(world),
        answer=answer or solution.canonical,
        expected=expected,
        difficulty={"level": infer_level(features), "features": features},
        checker="step_match",
        granularity="step",
        **fields,
    )
