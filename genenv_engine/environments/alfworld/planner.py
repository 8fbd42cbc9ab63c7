"""Breadth-first planner for the ALFWorld-mini world: optimal plan length, every optimal next action, a plan.

The planner plays the part of ALFWorld's Fast-Downward expert. One breadth-first search from a
state gives the optimal number of remaining steps (the difficulty feature ``plan_len``), the set of
admissible actions that start *some* optimal plan (what the ``step_match`` checker accepts) and one
optimal plan; an unreachable goal is reported with a short reason, so unsolvable tasks are rejected.
The search stops after :data:`MAX_STATES` distinct states (a deterministic budget, see
:mod:`genenv_engine.core.limits`), so a generated world whose search would explode is reported as ``budget``.

The search only expands actions that can start an optimal plan (a safe pruning, cross-checked against
an unpruned search in the tests): moving, opening, taking an object of the goal's type, putting down
what is held, the goal's own heat/cool/clean step, and switching on a lamp of the goal's type.
Closing, examining, taking other objects or processing them never shortens a plan. A put-down
object of another type is never needed again, so where it was dropped is forgotten.

>>> from genenv_engine.environments.alfworld.text import read_state
>>> sol = solve(read_state("G: put apple in fridge | at: - | has: - | countertop 1: apple 1; fridge 1 closed"))
>>> sol.dist, sol.optimal
(5, ('go to countertop 1',))
>>> sol.plan[1:]
('take apple 1 from countertop 1', 'go to fridge 1', 'open fridge 1', 'put apple 1 in/on fridge 1')
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from genenv_engine.core.limits import Budget, BudgetExceeded
from genenv_engine.environments.alfworld.world import HELD, LIT, PROCESS, World, rtype, won

MAX_PLAN = 16
"""Longest plan searched for; a longer optimum is reported as ``too_long``."""
MAX_STATES = 100_000
"""Search budget: distinct states one :func:`solve` may reach before giving up (status ``budget``)."""
DROPPED = -2
"""Search-only location of a put-down object of another type (it never matters again)."""
VERB_RANK = {
    v: i
    for i, v in enumerate(("go", "open", "take", "put", "heat", "cool", "clean", "use", "toggle", "close", "examine"))
}

State = tuple[int, tuple[int, ...], tuple[int, ...], tuple[bool, ...]]
Label = tuple


@dataclass(frozen=True)
class Solution:
    """What the planner found: ``status`` is ``solved``, ``won``, ``unsolvable``, ``too_long`` or ``budget``."""

    status: str
    dist: int = 0
    """Optimal number of remaining actions (0 when already won or unsolved)."""
    optimal: tuple[str, ...] = ()
    """Every admissible action that starts an optimal plan, canonical-first (see :func:`action_key`)."""
    plan: tuple[str, ...] = ()
    """One optimal plan (when asked for)."""
    reason: str = ""

    @property
    def canonical(self) -> str:
        """The gold next action: the first optimal action."""
        return self.optimal[0]


def action_key(text: str) -> tuple[int, str]:
    """Sort key of canonical actions: verb rank (go, open, take, put, heat...), then text."""
    verb = text.split(" ", 1)[0]
    return VERB_RANK.get(verb, len(VERB_RANK)), text


class _Problem:
    """Static facts of one world, and the pruned successor function over compact states."""

    def __init__(self, world: World) -> None:
        goal = world.goal
        self.world = world
        self.kind = goal.kind
        self.mine = tuple(o for o, name in enumerate(world.objs) if rtype(name) == goal.obj)
        self.lamps = tuple(o for o, name in enumerate(world.objs) if goal.kind == "look" and rtype(name) == goal.target)
        self.target = tuple(rtype(r) == goal.target for r in world.recs)
        _, self.mark, self.clears, appliances, _ = PROCESS.get(goal.kind, (None, 0, 0, (), ()))
        self.appliance = tuple(rtype(r) in appliances for r in world.recs)
        self.root: State = (world.at, world.where, world.marks, world.closed)

    def moves(self, s: State) -> Iterator[tuple[Label, State]]:
        at, where, marks, closed = s
        for r in range(len(self.target)):
            if r != at:
                yield ("go", r), (r, where, marks, closed)
        if at < 0:
            return
        if closed[at]:
            yield ("open", at), (at, where, marks, _set(closed, at, False))
        held = where.index(HELD) if HELD in where else None
        if held is not None:
            mine = held in self.mine
            if not closed[at]:
                yield ("put", held, at), (at, _set(where, held, at if mine else DROPPED), marks, closed)
            if mine and self.appliance[at] and marks[held] & self.mark != self.mark:
                yield (
                    ("proc", held, at),
                    (at, where, _set(marks, held, (marks[held] | self.mark) & ~self.clears), closed),
                )
        elif not closed[at]:
            for o in self.mine:
                if where[o] == at:
                    yield ("take", o, at), (at, _set(where, o, HELD), marks, closed)
        for lamp in self.lamps:
            if where[lamp] == at and not marks[lamp] & LIT:
                yield ("use", lamp), (at, where, _set(marks, lamp, marks[lamp] | LIT), closed)

    def won(self, s: State) -> bool:
        at, where, marks, _ = s
        if self.kind == "look":
            held = where.index(HELD) if HELD in where else None
            return held in self.mine and at >= 0 and any(where[lamp] == at and marks[lamp] & LIT for lamp in self.lamps)
        placed = [
            where[o] for o in self.mine if where[o] >= 0 and self.target[where[o]] and marks[o] & self.mark == self.mark
        ]
        if self.kind == "two":
            return len(placed) != len(set(placed))
        return bool(placed)

    def texts(self, label: Label) -> list[str]:
        recs, objs = self.world.recs, self.world.objs
        verb = label[0]
        if verb == "go":
            return [f"go to {recs[label[1]]}"]
        if verb == "open":
            return [f"open {recs[label[1]]}"]
        if verb == "use":
            return [f"use {objs[label[1]]}", f"toggle {objs[label[1]]}"]
        o, r = objs[label[1]], recs[label[2]]
        if verb == "proc":
            return [f"{PROCESS[self.kind][0]} {o} with {r}"]
        return [f"take {o} from {r}" if verb == "take" else f"put {o} in/on {r}"]


def _set(values: tuple, i: int, value: object) -> tuple:
    return values[:i] + (value,) + values[i + 1 :]


def diagnose(world: World) -> str:
    """A short reason why the goal is obviously unreachable ("" when nothing is missing)."""
    goal = world.goal
    rec_types = {rtype(r) for r in world.recs}
    count = sum(rtype(o) == goal.obj for o in world.objs)
    if count < (2 if goal.kind == "two" else 1):
        return f"needs {'two' if goal.kind == 'two' else 'a'} {goal.obj}"
    if goal.kind == "look":
        return "" if any(rtype(o) == goal.target for o in world.objs) else f"no {goal.target}"
    if goal.target not in rec_types:
        return f"no {goal.target}"
    if goal.kind in PROCESS and not rec_types & set(PROCESS[goal.kind][3]):
        return f"no {'/'.join(PROCESS[goal.kind][3])}"
    return ""


def solve(
    world: World, *, max_depth: int = MAX_PLAN, want_plan: bool = True, max_states: int | None = None
) -> Solution:
    """Breadth-first search from ``world``: optimal distance, all optimal first actions, one plan.

    ``max_states`` (default :data:`MAX_STATES`, read at call time) bounds the distinct states reached;
    past it the answer is ``Solution("budget")`` with the reason.
    """
    try:
        return _solve(world, max_depth, want_plan, Budget(MAX_STATES if max_states is None else max_states, "states"))
    except BudgetExceeded as err:
        return Solution("budget", reason=str(err))


def _solve(world: World, max_depth: int, want_plan: bool, budget: Budget) -> Solution:
    if won(world):
        return Solution("won", reason="already solved")
    missing = diagnose(world)
    if missing:
        return Solution("unsolvable", reason=missing)
    problem = _Problem(world)
    first = list(problem.moves(problem.root))
    frontier: dict[State, int] = {}
    parents: dict[State, tuple[State, Label]] = {}
    for i, (label, state) in enumerate(first):
        frontier[state] = frontier.get(state, 0) | (1 << i)
        parents.setdefault(state, (problem.root, label))
    seen = {problem.root, *frontier}
    budget.spend(len(seen))
    for depth in range(1, max_depth + 1):
        goals = [s for s in frontier if problem.won(s)]
        if goals:
            mask = 0
            for s in goals:
                mask |= frontier[s]
            optimal = [t for i, (label, _) in enumerate(first) if mask >> i & 1 for t in problem.texts(label)]
            plan = _trace(problem, parents, goals[0]) if want_plan else ()
            return Solution("solved", depth, tuple(sorted(set(optimal), key=action_key)), plan)
        if not frontier or depth == max_depth:
            break
        frontier = _expand(problem, frontier, seen, parents if want_plan else None, budget)
    if not frontier:
        return Solution("unsolvable", reason="no plan")
    return Solution("too_long", reason=f"no plan within {max_depth} steps")


def _expand(
    problem: _Problem,
    frontier: dict[State, int],
    seen: set[State],
    parents: dict[State, tuple[State, Label]] | None,
    budget: Budget,
) -> dict[State, int]:
    layer: dict[State, int] = {}
    for state, mask in frontier.items():
        for label, nxt in problem.moves(state):
            if nxt in seen:
                continue
            if nxt in layer:
                layer[nxt] |= mask
            else:
                budget.spend()
                layer[nxt] = mask
                if parents is not None:
                    parents[nxt] = (state, label)
    seen.update(layer)
    return layer


def _trace(problem: _Problem, parents: dict[State, tuple[State, Label]], state: State) -> tuple[str, ...]:
    labels = []
    while state != problem.root:
        state, label = parents[state]
        labels.append(label)
    return tuple(problem.texts(label)[0] for label in reversed(labels))
