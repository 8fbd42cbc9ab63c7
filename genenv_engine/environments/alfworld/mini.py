"""ALFWorld-mini: household text games decomposed into single steps (state -> next action), as GenEnv does.

Provides :class:`AlfworldMini` (seeded splits on a 4-level ladder, the ``step_match`` checker, a
validator that rebuilds the world from a generated prompt and recomputes every optimal next action
with the planner, sibling pairs for the simulator's warm start, official games from an
``$ALFWORLD_DATA`` folder as the held-out split) plus :func:`generate_task`, :func:`check_step`
and :func:`play_episode` (a whole game with an acting function, benchmark-official ``won``), and
:class:`StateLineEnvironment`, the validator and siblings it shares with :mod:`.textworld`'s environment.

The world and its rules live in :mod:`.world`, the state line (the prompt) in :mod:`.text`, the
breadth-first planner in :mod:`.planner`, the step task record and its level in :mod:`.tasks` and the
``traj_data.json`` loader in :mod:`.upstream`.

A prompt is one state line; the answer is one ALFWorld command. The checker accepts any admissible
action that starts *some* optimal plan from that state:

>>> env = AlfworldMini(seed=0, sizes=SplitSizes(seed=3, train=8, heldout=4))
>>> task = env.splits()["train"][0]
>>> env.check(task, task.answer).success
True
>>> env.check(task, "dance").error_type
'invalid_command'
"""

from __future__ import annotations

import random
from abc import abstractmethod
from collections.abc import Callable
from functools import partial
from typing import Any

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.alfworld.planner import Solution, solve
from genenv_engine.environments.alfworld.tasks import infer_level, make_task
from genenv_engine.environments.alfworld.text import PromptError, first_names, read_state, render_state
from genenv_engine.environments.alfworld.upstream import load_upstream
from genenv_engine.environments.alfworld.world import (
    KIND_OF,
    LAMPS,
    MAX_OBJECTS,
    MAX_RECEPTACLES,
    NOWHERE,
    OPENABLE,
    PROCESS,
    TASK_TYPES,
    Command,
    CommandError,
    Goal,
    World,
    apply,
    parse_command,
    rtype,
    won,
)
from genenv_engine.environments.base import LadderEnvironment, SplitSizes  # noqa: F401 (the docstring's example)

ERROR_TYPES = ("parse_error", "invalid_command", "not_admissible", "suboptimal")
"""Step errors: not one short line; not a command of the grammar; not executable in this state;
executable but on no optimal plan."""
EPISODE_ERROR_TYPES = ("max_steps",)
"""Episode errors: the goal was not reached within the step budget."""
MAX_PROMPT_CHARS = 180
MAX_ANSWER_CHARS = 60
MAX_GOAL_OBJECTS = 3

MINI_RECEPTACLES = (
    "armchair",
    "bed",
    "cabinet",
    "cart",
    "coffeetable",
    "countertop",
    "desk",
    "diningtable",
    "drawer",
    "dresser",
    "fridge",
    "garbagecan",
    "microwave",
    "ottoman",
    "safe",
    "shelf",
    "sidetable",
    "sinkbasin",
    "sofa",
    "toilet",
)
REPEATABLE = ("cabinet", "countertop", "drawer", "shelf")
"""Receptacle types that may appear twice in one game (``cabinet 1``, ``cabinet 2``)."""
LAMP_HOSTS = ("coffeetable", "countertop", "desk", "diningtable", "dresser", "shelf", "sidetable")
SMALL_THINGS = (
    "book",
    "cd",
    "cellphone",
    "creditcard",
    "keychain",
    "laptop",
    "pen",
    "pencil",
    "pillow",
    "statue",
    "vase",
    "watch",
    "candle",
)
MINI_OBJECTS = (
    "apple",
    "bowl",
    "bread",
    "cloth",
    "cup",
    "egg",
    "fork",
    "knife",
    "lettuce",
    "mug",
    "pan",
    "plate",
    "pot",
    "potato",
    "soapbar",
    "spoon",
    "tomato",
) + SMALL_THINGS
GOAL_OBJECTS = {
    "pick": MINI_OBJECTS,
    "two": MINI_OBJECTS,
    "look": SMALL_THINGS + ("mug", "bowl"),
    **{kind: tuple(o for o in MINI_OBJECTS if o in spec[4]) for kind, spec in PROCESS.items()},
}
_LADDER = {1: (2, 3), 2: (3, 4), 3: (4, 5), 4: (5, 5, 5, 6)}
"""Level -> receptacle counts to draw from (at L4, five receptacles need an 8+ step plan, six do not)."""
_CLUTTER = {1: (0, 1), 2: (0, 2), 3: (0, 2), 4: (0, 2)}
"""Level -> number of distractor objects."""


# ---------------------------------------------------------------- the checker


def check_step(task: Task, response: str) -> CheckResult:
    """``step_match``: success iff the response is an admissible action on some optimal plan (scores as
    :func:`grade_step` gives them)."""
    return grade_step(task, response, _step_verdict)


def _step_verdict(task: Task, cmd: Command) -> str:
    """``cmd``'s grade in the task's state: on the gold's optimal list, not executable there, or suboptimal."""
    if cmd.text in task.expected["optimal"]:
        return "optimal"
    return "not_admissible" if isinstance(apply(read_state(task.prompt), cmd), str) else "suboptimal"


def grade_step(task: Task, response: str, verdict: Callable[[Task, Command], str]) -> CheckResult:
    """The step checkers' result: ``response`` parsed as a command, then graded by ``verdict(task, cmd)``
    (``optimal``, ``not_admissible`` or else suboptimal).

    ``score`` is 1.0 (optimal), 0.5 (admissible but suboptimal) or 0.0; sub-scores say whether the
    response parsed, was admissible, was optimal and used the gold action's verb.
    """
    try:
        cmd = parse_command(response)
    except CommandError as err:
        return CheckResult(False, 0.0, {"parsed": 0.0, "admissible": 0.0, "optimal": 0.0, "verb": 0.0}, err.kind)
    verb = float(cmd.verb == parse_command(task.answer).verb)
    grade = verdict(task, cmd)
    if grade == "optimal":
        return CheckResult(True, 1.0, {"parsed": 1.0, "admissible": 1.0, "optimal": 1.0, "verb": verb}, None)
    if grade == "not_admissible":
        return CheckResult(
            False, 0.0, {"parsed": 1.0, "admissible": 0.0, "optimal": 0.0, "verb": verb}, "not_admissible"
        )
    return CheckResult(False, 0.5, {"parsed": 1.0, "admissible": 1.0, "optimal": 0.0, "verb": verb}, "suboptimal")


# ---------------------------------------------------------------- episode-level play


def play_episode(game: Task | World | str, act: Callable[[str], str], max_steps: int = 50) -> CheckResult:
    """Play a whole game from a task's state: ``act`` reads the state line and returns a command.

    Inadmissible or unparsable commands change nothing but use a step (ALFWorld's "Nothing happens.").
    ``success`` is ALFWorld's ``won`` within ``max_steps``; ``sub_scores`` carry the label
    ``granularity_episode: 1.0`` plus ``won``, ``steps``, ``optimal_steps`` and ``invalid_actions``.

    >>> start = "G: put apple in desk | at: - | has: - | bed 1: apple 1; desk 1"
    >>> play_episode(start, expert_act).sub_scores["steps"]
    4.0
    """
    world = game if isinstance(game, World) else read_state(game.prompt if isinstance(game, Task) else game)
    optimal = solve(world, want_plan=False).dist
    invalid, steps = 0, 0
    while not won(world) and steps < max_steps:
        steps += 1
        try:
            outcome = apply(world, parse_command(act(render_state(world))))
        except CommandError:
            outcome = "not a command"
        if isinstance(outcome, str):
            invalid += 1
        else:
            world = outcome
    success = won(world)
    sub = {
        "granularity_episode": 1.0,
        "won": float(success),
        "steps": float(steps),
        "optimal_steps": float(optimal),
        "invalid_actions": float(invalid),
    }
    return CheckResult(success, float(success), sub, None if success else "max_steps")


def expert_act(state_line: str) -> str:
    """The planner's next action for a state line (an oracle acting function for :func:`play_episode`)."""
    return solve(read_state(state_line), want_plan=False).canonical


# ---------------------------------------------------------------- generation


def random_world(level: int, rng: random.Random, kind: str | None = None) -> World:
    """A fresh game (initial state) sized for ``level``; the goal is never already satisfied."""
    while True:
        world = _random_world(level, rng, kind or rng.choice(tuple(TASK_TYPES)))
        if world is not None and not won(world):
            return world


def _random_world(level: int, rng: random.Random, kind: str) -> World | None:
    obj = rng.choice(GOAL_OBJECTS[kind])
    if kind == "look":
        target = rng.choice(sorted(LAMPS))
        required = [rng.choice(LAMP_HOSTS)]
    else:
        appliances = PROCESS[kind][3][:1] if kind in PROCESS else ()
        target = rng.choice([r for r in MINI_RECEPTACLES if r not in appliances])
        required = [target, *appliances]
    types = list(dict.fromkeys(required))
    n_recs = max(rng.choice(_LADDER[level]), len(types))
    while len(types) < n_recs:
        extra = rng.choice(MINI_RECEPTACLES)
        if extra not in types or extra in REPEATABLE:
            types.append(extra)
    rng.shuffle(types)
    recs = _number(types)
    goal = Goal(kind, obj, target)
    placed = _place_objects(goal, recs, level, rng)
    if placed is None:
        return None
    objs, where = placed
    closed = tuple(rtype(r) in OPENABLE and rng.random() < 0.8 for r in recs)
    at = NOWHERE if rng.random() < 0.5 else rng.randrange(len(recs))
    return World(goal, tuple(recs), tuple(objs), tuple(where), (0,) * len(objs), closed, at)


def _place_objects(goal: Goal, recs: list[str], level: int, rng: random.Random) -> tuple[list[str], list[int]] | None:
    """Goal objects (one more than needed w.p. 1/4), distractors and lamps, each in a random receptacle."""
    count = (2 if goal.kind == "two" else 1) + (rng.random() < 0.25)
    types = [goal.obj] * count
    others = [o for o in MINI_OBJECTS if o != goal.obj]
    types += rng.sample(others, rng.randint(*_CLUTTER[level]))
    where = [rng.randrange(len(recs)) for _ in types]
    hosts = [r for r, name in enumerate(recs) if rtype(name) not in OPENABLE]
    if goal.kind == "look" and not hosts:
        return None
    if hosts and (goal.kind == "look" or rng.random() < 0.15):
        types.append(goal.target if goal.kind == "look" else rng.choice(sorted(LAMPS)))
        where.append(rng.choice(hosts))
    order = list(range(len(types)))
    rng.shuffle(order)
    return _number([types[i] for i in order]), [where[i] for i in order]


def _number(types: list[str]) -> list[str]:
    seen: dict[str, int] = {}
    names = []
    for kind in types:
        seen[kind] = seen.get(kind, 0) + 1
        names.append(f"{kind} {seen[kind]}")
    return names


def _replay(world: World, actions: tuple[str, ...]) -> World:
    for action in actions:
        outcome = apply(world, parse_command(action))
        assert not isinstance(outcome, str), (action, outcome)
        world = outcome
    return world


def generate_state(level: int, rng: random.Random, kind: str | None = None) -> tuple[World, Solution]:
    """Sample a game, plan it, and return a state on an optimal plan whose level is ``level``."""
    while True:
        start = random_world(level, rng, kind)
        plan = solve(start)
        if plan.status != "solved":
            continue
        n = len(start.recs)
        steps = [k for k in range(plan.dist) if infer_level({"plan_len": plan.dist - k, "n_receptacles": n}) == level]
        if not steps:
            continue
        state = read_state(render_state(_replay(start, plan.plan[: rng.choice(steps)])))
        if len(render_state(state)) <= MAX_PROMPT_CHARS:
            return state, solve(state)


def generate_task(
    level: int, rng: random.Random, kind: str | None = None
) -> tuple[str, str, dict[str, Any], list, dict[str, Any]]:
    """Sample one step task at ``level``: (prompt, answer, expected, tools, features).

    >>> prompt, answer, expected, tools, features = generate_task(1, random.Random(3))
    >>> prompt.startswith("G: ") and answer in expected["optimal"] and features["plan_len"] <= 2
    True
    """
    task = make_task(*generate_state(level, rng, kind), "alfworld/tmp")
    return task.prompt, task.answer, task.expected, task.tools, task.difficulty["features"]


# ---------------------------------------------------------------- the environment


class StateLineEnvironment(LadderEnvironment):
    """What the ALFWorld step benchmarks share: a state line as the prompt, a validator that reads and sizes the
    generated world then plans it (:meth:`_plan`), and siblings drafted with the source's task type.

    Subclasses implement ``check``, ``draft(level, rng, kind)`` (``kind`` a :data:`~.world.KIND_OF` task kind
    or None for any) and :meth:`_plan`.
    """

    @abstractmethod
    def draft(self, level: int, rng: random.Random, kind: str | None = None) -> tuple[str, Callable[..., Task]]:
        """Sample one task at ``level`` (of task kind ``kind`` when given): its prompt and ``build``."""

    @abstractmethod
    def _plan(self, prompt: str, world: World) -> Callable[..., Task] | str:
        """``build(task_id, **fields)`` of the task a generated ``prompt`` (read as ``world``) states, or why it is
        rejected (``reason: detail``)."""

    def validate(
        self,
        prompt: str,
        answer: str,
        *,
        task_id: str,
        parent: Task | None = None,
        epoch: int = 0,
        generator: str | None = None,
    ) -> Validation:
        """Rebuild the world from the prompt (:func:`generated_world`), plan it (:meth:`_plan`), recompute the
        gold and accept the answer iff it passes the checker against it."""
        world = generated_world(self, prompt, answer, parent)
        if isinstance(world, Validation):
            return world
        build = self._plan(prompt, world)
        if isinstance(build, str):
            return Validation(False, build)
        return self._accept(build(task_id, **self._generated(parent, epoch, generator)), answer)

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A sibling with the source's task type, at the same level or ±1."""
        kind = KIND_OF[source.expected["task_type"]]
        level = self._sibling_level(source, rng)
        while True:
            prompt, build = self.draft(level, rng, kind)
            sibling = self._as_sibling(source, prompt, build(task_id).answer, task_id)
            if sibling is not None:
                return sibling


class AlfworldMini(StateLineEnvironment):
    """Built-in ALFWorld mini: step-level next-action prediction in household text games."""

    name = "alfworld"
    granularity = "step"
    source = "built-in mini"
    reserve_official_prompts = True

    def draft(self, level: int, rng: random.Random, kind: str | None = None) -> tuple[str, Callable[..., Task]]:
        state, solution = generate_state(level, rng, kind)
        return render_state(state), partial(make_task, state, solution)

    def _plan(self, prompt: str, world: World) -> Callable[..., Task] | str:
        """Check the world is solvable by the planner and recompute its optimal actions."""
        solution = solve(world)
        if solution.status != "solved":
            reason = {"won": "already_solved", "unsolvable": "unsolvable", "too_long": "too_hard", "budget": "budget"}[
                solution.status
            ]
            return f"{reason}: {solution.reason}"
        return partial(make_task, world, solution)

    def _official_heldout(self) -> list[Task] | None:
        """With ``data_dir`` the held-out split is the official games' steps (see :mod:`.upstream`)."""
        return load_upstream(self.data_dir) if self.data_dir else None

    def check(self, task: Task, response: str) -> CheckResult:
        """``step_match`` check of one response (see :func:`check_step`)."""
        return check_step(task, response)

    def repair_prompt(self, prompt: str, reason: str) -> str | None:
        """A receptacle or object named twice: the line with each at its first listing (`first_names`)."""
        return first_names(prompt) if reason.startswith("duplicate_name") else None

    def task_grammar(self) -> str:
        """A state line and a command (see :mod:`.task_grammar`)."""
        from genenv_engine.environments.alfworld.task_grammar import TASK_RULES

        return TASK_RULES


def generated_world(env: LadderEnvironment, prompt: str, answer: str, parent: Task | None) -> World | Validation:
    """The world a generated state line describes, or the rejection (length guard, parse error, too big)."""
    world = env._read_generated(prompt, answer, parent, read_state, PromptError, MAX_PROMPT_CHARS, MAX_ANSWER_CHARS)
    if isinstance(world, Validation):
        return world
    too_big = _size_problem(world)
    return Validation(False, f"too_big: {too_big}") if too_big else world


def _size_problem(world: World) -> str:
    mine = sum(rtype(o) == world.goal.obj for o in world.objs)
    if len(world.recs) > MAX_RECEPTACLES:
        return f"{len(world.recs)} receptacles (max {MAX_RECEPTACLES})"
    if len(world.objs) > MAX_OBJECTS:
        return f"{len(world.objs)} objects (max {MAX_OBJECTS})"
    if mine > MAX_GOAL_OBJECTS:
        return f"{mine} {world.goal.obj} (max {MAX_GOAL_OBJECTS})"
    return ""


__all__ = [
    "AlfworldMini",
    "ERROR_TYPES",
    "EPISODE_ERROR_TYPES",
    "StateLineEnvironment",
    "check_step",
    "expert_act",
    "generate_task",
    "generate_state",
    "grade_step",
    "infer_level",
    "load_upstream",
    "make_task",
    "play_episode",
    "random_world",
]
