"""Official ALFWorld games from a user folder (the ``$ALFWORLD_DATA`` layout), read as step tasks.

``load_upstream(data_dir)`` reads ``json_2.1.1/{valid_seen,valid_unseen}/<task>/trial_*/traj_data.json``
(plain JSON; the TextWorld ``game.tw-pddl`` files are not needed) and turns each trial's expert plan
(``plan.high_pddl``) into GenEnv step tasks, one per expert action:

- the goal comes from ``task_type`` and ``pddl_params`` (``object_target``, ``parent_target``,
  ``toggle_target``); the game is the smallest world the expert plan implies: the receptacles it goes
  to (in visiting order; ``coordinateReceptacleObjectId`` tells instances of one type apart), the
  objects it picks up or switches on, placed where it finds them, openable receptacles closed and the
  agent in the middle of the room, as in ALFWorld;
- ``GotoLocation``, ``PickupObject``, ``PutObject``, ``HeatObject``, ``CoolObject``, ``CleanObject``
  and ``ToggleObject`` map to ``go to``, ``take .. from``, ``put .. in/on``, ``heat``/``cool``/``clean
  .. with`` and ``use``; ALFRED's implicit opening becomes an ``open`` step, as in ALFWorld's expert;
- each state becomes a prompt in the mini's state line; the gold is the expert action, and the
  checker also accepts every other action the planner finds optimal from that state.

Trials that do not map (``pick_and_place_with_movable_recep``, sliced objects, other actions, types
outside the catalog, expert plans that do not replay) are skipped, with the reason appended to
``skipped`` when given. Malformed files raise ``ValueError`` naming the file and the line or key.
:func:`trial_pairs` gives one parsed trial's (prompt, expert action) pairs, as a task import reads them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from genenv_engine.core.records import Task
from genenv_engine.environments.alfworld.planner import solve
from genenv_engine.environments.alfworld.tasks import make_task
from genenv_engine.environments.alfworld.text import PromptError, read_goal, read_state, render_state
from genenv_engine.environments.alfworld.world import (
    KIND_OF,
    NOWHERE,
    OPENABLE,
    Goal,
    World,
    apply,
    parse_command,
    rtype,
    won,
)

SPLITS = ("valid_seen", "valid_unseen")
_PROCESS_VERBS = {"HeatObject": "heat", "CoolObject": "cool", "CleanObject": "clean"}


class SkipTrial(Exception):
    """A well-formed trial that the mini grammar cannot express."""


def load_upstream(
    data_dir: str | Path, *, splits: tuple[str, ...] = SPLITS, skipped: list[str] | None = None
) -> list[Task]:
    """Step tasks (split ``heldout``, origin ``official``) from every mappable trial under ``data_dir``.

    ``data_dir`` is ``$ALFWORLD_DATA`` (holding ``json_2.1.1``) or the ``json_2.1.1`` folder itself.
    """
    root = Path(data_dir)
    if (root / "json_2.1.1").is_dir():
        root = root / "json_2.1.1"
    folders = [root / split for split in splits if (root / split).is_dir()]
    if not folders:
        raise FileNotFoundError(
            f"{data_dir}: no json_2.1.1/{{{','.join(splits)}}} folder (expected the $ALFWORLD_DATA layout)"
        )
    tasks: list[Task] = []
    for folder in folders:
        for path in sorted(folder.glob("*/trial_*/traj_data.json")):
            try:
                steps = trial_steps(read_traj(path), path)
            except SkipTrial as why:
                if skipped is not None:
                    skipped.append(f"{path}: {why}")
                continue
            source = "/".join(path.parts[-4:-1])
            for k, (state, action) in enumerate(steps):
                world = read_state(render_state(state))
                extra = {"source": source, "step": k, "expert": action}
                tasks.append(
                    make_task(
                        world,
                        solve(world),
                        f"alfworld/heldout/{len(tasks):05d}",
                        answer=action,
                        extra=extra,
                        split="heldout",
                        origin="official",
                    )
                )
    return tasks


def trial_pairs(traj: Any, where: str | Path = "traj_data.json") -> list[tuple[str, str]]:
    """The (state-line prompt, expert action) pairs of one parsed ``traj_data.json`` object, the prompts as
    `load_upstream` writes them; raise SkipTrial when the trial does not map, ValueError when it is malformed."""
    return [(render_state(read_state(render_state(state))), action) for state, action in trial_steps(traj, where)]


def read_traj(path: Path) -> dict[str, Any]:
    """Parse one ``traj_data.json``; a JSON error names the file, line and column."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}:{err.colno}: invalid JSON: {err.msg}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}:1: expected a JSON object")
    return data


def _get(data: Any, path: str | Path, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(data, dict) or key not in data:
            raise ValueError(f"{path}: missing key '{dotted}'")
        data = data[key]
    return data


def trial_goal(traj: dict[str, Any], path: str | Path) -> Goal:
    """The mini goal of a trial, from ``task_type`` and ``pddl_params``."""
    task_type = _get(traj, path, "task_type")
    if not isinstance(task_type, str) or task_type not in KIND_OF:
        raise SkipTrial(f"task type {task_type!r} is not one of ALFWorld's six")
    params = _get(traj, path, "pddl_params")
    if not isinstance(params, dict):
        raise ValueError(f"{path}: 'pddl_params' must be an object")
    if params.get("object_sliced"):
        raise SkipTrial("sliced objects are outside the mini grammar")
    kind = KIND_OF[task_type]
    target = _get(traj, path, "pddl_params.toggle_target" if kind == "look" else "pddl_params.parent_target")
    obj = _get(traj, path, "pddl_params.object_target")
    try:
        return read_goal(Goal(kind, str(obj).lower(), str(target).lower()).text)
    except PromptError as err:
        raise SkipTrial(f"goal outside the mini grammar: {err}") from None


class _Builder:
    """Walks the expert plan, naming receptacles/objects and collecting the commands it implies."""

    def __init__(self) -> None:
        self.recs: list[str] = []
        self.objs: list[str] = []
        self.where: list[int] = []
        self.keys: dict[tuple[str, str], str] = {}
        self.at: str | None = None
        self.held: str | None = None
        self.commands: list[str] = []

    def name(self, kind: str, key: str, names: list[str]) -> str:
        if (kind, key) not in self.keys:
            count = sum(rtype(n) == kind for n in names)
            self.keys[(kind, key)] = f"{kind} {count + 1}"
        return self.keys[(kind, key)]

    def go(self, kind: str, key: str) -> None:
        name = self.name(kind, key, self.recs)
        if name not in self.recs:
            self.recs.append(name)
        if name != self.at:
            self.commands.append(f"go to {name}")
            self.at = name

    def found(self, kind: str, key: str) -> str:
        name = self.name(kind, key, self.objs)
        if name not in self.objs:
            if self.at is None:
                raise SkipTrial(f"{name} is used before going anywhere")
            self.objs.append(name)
            self.where.append(self.recs.index(self.at))
        return name

    def world(self, goal: Goal) -> World:
        return World(
            goal,
            tuple(self.recs),
            tuple(self.objs),
            tuple(self.where),
            (0,) * len(self.objs),
            tuple(rtype(r) in OPENABLE for r in self.recs),
            NOWHERE,
        )


def trial_steps(traj: dict[str, Any], path: str | Path) -> list[tuple[World, str]]:
    """The (state, expert action) steps of one trial; raise SkipTrial when it does not map."""
    goal = trial_goal(traj, path)
    high = _get(traj, path, "plan.high_pddl")
    if not isinstance(high, list):
        raise ValueError(f"{path}: 'plan.high_pddl' must be a list")
    builder = _Builder()
    for i, step in enumerate(high):
        action, args = _discrete(step, path, i)
        if action == "NoOp":
            break
        _walk(builder, action, args, high, i)
    start = builder.world(goal)
    try:
        start = read_state(render_state(start))
    except PromptError as err:
        raise SkipTrial(f"game outside the mini grammar: {err}") from None
    return _replay(start, builder.commands)


def _discrete(step: Any, path: str | Path, i: int) -> tuple[str, list[str]]:
    discrete = step.get("discrete_action") if isinstance(step, dict) else None
    action = discrete.get("action") if isinstance(discrete, dict) else None
    args = discrete.get("args", []) if isinstance(discrete, dict) else None
    if not isinstance(action, str) or not isinstance(args, list):
        raise ValueError(f"{path}: 'plan.high_pddl[{i}].discrete_action' needs an action and an args list")
    return action, [str(a).lower() for a in args]


def _walk(builder: _Builder, action: str, args: list[str], high: list[Any], i: int) -> None:
    planner = high[i].get("planner_action") or {}
    planner = planner if isinstance(planner, dict) else {}
    if action == "GotoLocation" and args:
        builder.go(args[0], _receptacle_key(args[0], high, i))
    elif action == "PickupObject" and args and builder.at:
        builder.held = builder.found(args[0], _object_key(planner))
        builder.commands.append(f"take {builder.held} from {builder.at}")
    elif action == "PutObject" and len(args) == 2 and builder.held and builder.at:
        if rtype(builder.at) != args[1]:
            raise SkipTrial(f"puts into {args[1]} while at {builder.at}")
        builder.commands.append(f"put {builder.held} in/on {builder.at}")
        builder.held = None
    elif action in _PROCESS_VERBS and builder.held and builder.at:
        builder.commands.append(f"{_PROCESS_VERBS[action]} {builder.held} with {builder.at}")
    elif action == "ToggleObject" and args:
        builder.commands.append(f"use {builder.found(args[0], _object_key(planner))}")
    else:
        raise SkipTrial(f"high_pddl[{i}] {action} {args} has no mini command")


def _receptacle_key(kind: str, high: list[Any], i: int) -> str:
    """Tell receptacles of one type apart by the receptacle id of the actions done there."""
    for step in high[i + 1 :]:
        planner = (step.get("planner_action") or {}) if isinstance(step, dict) else {}
        if not isinstance(planner, dict):
            continue
        if planner.get("action") == "GotoLocation":
            break
        coord = planner.get("coordinateReceptacleObjectId")
        if isinstance(coord, list) and coord and str(coord[0]).lower() == kind:
            return json.dumps(coord)
    return ""


def _object_key(planner: dict[str, Any]) -> str:
    return json.dumps(planner.get("objectId") or planner.get("coordinateObjectId") or "")


def _replay(start: World, commands: list[str]) -> list[tuple[World, str]]:
    """Run the expert commands, adding ALFWorld's ``open`` before using a closed receptacle."""
    steps, world = [], start
    for command in commands:
        cmd = parse_command(command)
        if cmd.verb in ("take", "put") and world.closed[world.recs.index(cmd.args[1])]:
            steps.append((world, f"open {cmd.args[1]}"))
            world = apply(world, parse_command(f"open {cmd.args[1]}"))  # type: ignore[assignment]
        outcome = apply(world, cmd)
        if isinstance(outcome, str):
            raise SkipTrial(f"expert step {command!r} is not admissible: {outcome}")
        steps.append((world, command))
        world = outcome
    if not won(world):
        raise SkipTrial("the expert plan does not reach the goal")
    return steps
