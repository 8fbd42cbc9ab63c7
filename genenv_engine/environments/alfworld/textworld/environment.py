"""ALFWorld on the real TextWorld engine: generated PDDL games, Fast-Downward's plan as the gold actions.

Provides :class:`AlfworldTextWorld` (benchmark ``alfworld_textworld``, source ``package``), the optional
counterpart of the pure-Python mini ``alfworld``: the same state line as prompt, the same command grammar
and six task types, the same step decomposition (context -> next action), but every game runs in
TextWorld's PDDL engine over ALFWorld's own domain (see :mod:`.pddl` for the problem a
state line becomes, :mod:`.engine` for the engine and planner):

- **splits**: rooms sampled by the mini's generator from the seed, kept only when ALFWorld's rules allow
  the goal and Fast-Downward solves the state; the level comes from the planner's plan length and the
  room size (the mini's :func:`~..tasks.infer_level`); the gold answer is the plan's first action, in
  ALFWorld 0.4.2's spelling (``move apple 1 to fridge 1``);
- **checker** ``tw_step_match``: the response is parsed with the mini grammar, then executed in the
  TextWorld state; success iff it is admissible there and Fast-Downward's plan from the new state is one
  step shorter (the action is on a shortest plan). Error types are the mini's :data:`ERROR_TYPES`;
- **validator**: a generated ``<state line> => <command>`` is parsed strictly (never eval'd), sized,
  checked against ALFWorld's rules (``canContain``, appliances), loaded into TextWorld and planned;
  unsolvable, already-won and unparseable tasks are rejected with the reason;
- **episodes**: :func:`play_episode` plays a whole game in TextWorld with an acting function;
- **official games**: with ``data_dir`` (``$ALFWORLD_DATA``), the held-out split is the official trials'
  expert steps read by the mini's loader (:mod:`..upstream`), each re-planned in TextWorld.

Constructing the environment without the extra raises
:class:`~.engine.AlfworldUnavailable`; importing this module does not need it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from genenv_engine.core.records import CheckResult, Task
from genenv_engine.environments.alfworld.mini import (
    EPISODE_ERROR_TYPES,
    ERROR_TYPES,
    StateLineEnvironment,
    generate_state,
    grade_step,
)
from genenv_engine.environments.alfworld.planner import MAX_PLAN
from genenv_engine.environments.alfworld.tasks import infer_level
from genenv_engine.environments.alfworld.text import read_state, render_state
from genenv_engine.environments.alfworld.textworld.engine import Analysis, Game, analyse, require_package, step_verdict
from genenv_engine.environments.alfworld.textworld.pddl import static_problem, tw_command
from genenv_engine.environments.alfworld.world import Command, CommandError, World, parse_command
from genenv_engine.environments.base import SplitSizes

NAME = "alfworld_textworld"
CHECKER = "tw_step_match"

__all__ = [
    "AlfworldTextWorld",
    "CHECKER",
    "EPISODE_ERROR_TYPES",
    "ERROR_TYPES",
    "NAME",
    "check_step",
    "load_official",
    "make_task",
    "planner_act",
    "play_episode",
]


def make_task(
    world: World,
    analysis: Analysis,
    task_id: str,
    *,
    answer: str | None = None,
    extra: dict[str, Any] | None = None,
    **fields: Any,
) -> Task:
    """A step task for a planned state: gold = the plan's first action (or ``answer``, e.g. an expert's)."""
    plan = list(analysis.plan)
    gold = answer or plan[0]
    features = {
        "task_type": world.goal.task_type,
        "plan_len": len(plan),
        "n_receptacles": len(world.recs),
        "n_objects": len(world.objs),
        "n_closed": sum(world.closed),
        "holding": world.held is not None,
    }
    expected = {
        "optimal": list(dict.fromkeys([gold, plan[0]])),
        "plan": plan,
        "plan_len": len(plan),
        "task_type": world.goal.task_type,
        **(extra or {}),
    }
    return Task(
        id=task_id,
        benchmark=NAME,
        prompt=render_state(world),
        answer=gold,
        expected=expected,
        difficulty={"level": infer_level(features), "features": features},
        checker=CHECKER,
        granularity="step",
        **fields,
    )


def check_step(task: Task, response: str) -> CheckResult:
    """``tw_step_match``: success iff the command, run in TextWorld, starts a shortest plan (scores as the mini's
    :func:`~..mini.grade_step` gives them)."""
    return grade_step(task, response, _tw_verdict)


def _tw_verdict(task: Task, cmd: Command) -> str:
    """``cmd``'s grade in the task's state: on the gold's optimal list, else TextWorld's :func:`step_verdict`."""
    command = tw_command(cmd)
    return "optimal" if command in task.expected["optimal"] else step_verdict(task.prompt, command)


def play_episode(game: Task | str, act: Callable[[str], str], max_steps: int = 50) -> CheckResult:
    """Play a whole game in TextWorld from a task's state: ``act`` reads the state line, returns a command.

    The state line after each step is read back from TextWorld's facts. Inadmissible or unparsable
    commands change nothing but use a step (TextWorld's "Nothing happens."). ``success`` is TextWorld's
    ``won`` within ``max_steps``; ``sub_scores`` hold ``granularity_episode: 1.0``, ``won``, ``steps``,
    ``optimal_steps`` (the planner's plan length from the start) and ``invalid_actions``.
    """
    prompt = game.prompt if isinstance(game, Task) else game
    tw = Game(read_state(prompt))
    optimal, invalid = len(tw.plan), 0
    while not tw.won and tw.steps < max_steps:
        try:
            command = tw_command(parse_command(act(render_state(tw.current_world()))))
        except CommandError:
            command = "not a command"
        invalid += not tw.step(command)
    sub = {
        "granularity_episode": 1.0,
        "won": float(tw.won),
        "steps": float(tw.steps),
        "optimal_steps": float(optimal),
        "invalid_actions": float(invalid),
    }
    return CheckResult(tw.won, float(tw.won), sub, None if tw.won else "max_steps")


def planner_act(state_line: str) -> str:
    """Fast-Downward's next action for a state line (an oracle acting function for :func:`play_episode`)."""
    return analyse(state_line).plan[0]


def load_official(data_dir: str | Path, skipped: list[str] | None = None) -> list[Task]:
    """Held-out step tasks from official trials (``$ALFWORLD_DATA`` layout), re-planned in TextWorld.

    Trials are read by the mini's loader (``traj_data.json`` expert plans; see :mod:`..upstream`);
    each expert step's state is loaded into TextWorld. The gold is the expert action (in ALFWorld 0.4.2's
    spelling); the checker also accepts any action on a shortest TextWorld plan. Steps ALFWorld's rules or
    the planner rule out (the mini allows any object anywhere, ALFWorld's ``canContain`` does not) and steps
    whose expert action TextWorld does not admit are skipped, with the reason appended to ``skipped``.
    """
    from genenv_engine.environments.alfworld.upstream import SPLITS, SkipTrial, read_traj, trial_steps

    skip = skipped if skipped is not None else []
    root = Path(data_dir)
    root = root / "json_2.1.1" if (root / "json_2.1.1").is_dir() else root
    folders = [root / split for split in SPLITS if (root / split).is_dir()]
    if not folders:
        raise FileNotFoundError(
            f"{data_dir}: no json_2.1.1/{{{','.join(SPLITS)}}} folder (expected the $ALFWORLD_DATA layout)"
        )
    tasks: list[Task] = []
    for path in (p for folder in folders for p in sorted(folder.glob("*/trial_*/traj_data.json"))):
        try:
            steps = trial_steps(read_traj(path), path)
        except SkipTrial as why:
            skip.append(f"{path}: {why}")
            continue
        source = "/".join(path.parts[-4:-1])
        for k, (state, action) in enumerate(steps):
            prompt, command = render_state(state), tw_command(parse_command(action))
            why = static_problem(state)
            analysis = analyse(prompt) if not why else Analysis("unsolvable", reason=why)
            why = (
                analysis.reason
                if analysis.status != "solved"
                else ("" if step_verdict(prompt, command) != "not_admissible" else f"{command!r} is not admissible")
            )
            if why:
                skip.append(f"{path} step {k}: {why}")
                continue
            tasks.append(
                make_task(
                    read_state(prompt),
                    analysis,
                    f"{NAME}/heldout/{len(tasks):05d}",
                    answer=command,
                    extra={"source": source, "step": k, "expert": command},
                    split="heldout",
                    origin="official",
                )
            )
    return tasks


class AlfworldTextWorld(StateLineEnvironment):
    """ALFWorld step tasks played and planned by the real TextWorld engine and Fast-Downward."""

    name = NAME
    granularity = "step"
    source = "package"
    reserve_official_prompts = True

    def __init__(self, seed: int = 0, sizes: SplitSizes = SplitSizes(), data_dir: str | None = None) -> None:
        self.versions = require_package()
        super().__init__(seed, sizes, data_dir)
        self.skipped: list[str] = []
        """Official steps left out of the held-out split, with the reason."""
        self._official: list[Task] | None = None

    def describe(self) -> dict[str, object]:
        """Like every benchmark's, but without generating the splits (each task is a TextWorld game to plan).

        The generated splits always have the configured sizes; an official held-out split is loaded to count it.
        """
        heldout = len(self._official_heldout() or ()) if self.data_dir else self.sizes.heldout
        return {
            "name": self.name,
            "granularity": self.granularity,
            "source": "upstream folder" if self.data_dir else self.source,
            "sizes": {"heldout": heldout, "train": self.sizes.train, "seed": self.sizes.seed},
        }

    def draft(self, level: int, rng: random.Random, kind: str | None = None) -> tuple[str, Callable[..., Task]]:
        """A state on a mini plan at ``level`` that ALFWorld allows and Fast-Downward plans at that level."""
        while True:
            state, _ = generate_state(level, rng, kind)
            if static_problem(state):
                continue
            prompt = render_state(state)
            analysis = analyse(prompt)
            if (
                analysis.status == "solved"
                and infer_level({"plan_len": len(analysis.plan), "n_receptacles": len(state.recs)}) == level
            ):
                return prompt, partial(make_task, state, analysis)

    def _plan(self, prompt: str, world: World) -> Callable[..., Task] | str:
        """Build the world's PDDL problem and plan the state line in TextWorld (within :data:`MAX_PLAN` steps)."""
        missing = static_problem(world)
        if missing:
            return f"unsolvable: {missing}"
        analysis = analyse(prompt)
        if analysis.status != "solved":
            reason = "already_solved" if analysis.status == "won" else "unsolvable"
            return f"{reason}: {analysis.reason}"
        if len(analysis.plan) > MAX_PLAN:
            return f"too_hard: plan of {len(analysis.plan)} steps (max {MAX_PLAN})"
        return partial(make_task, world, analysis)

    def _official_heldout(self) -> list[Task] | None:
        """With ``data_dir``, the official trials' steps (see :func:`load_official`), loaded once."""
        if self.data_dir and self._official is None:
            self._official = load_official(self.data_dir, self.skipped)
        return list(self._official) if self._official is not None else None

    def check(self, task: Task, response: str) -> CheckResult:
        """``tw_step_match`` check of one response (see :func:`check_step`)."""
        return check_step(task, response)
