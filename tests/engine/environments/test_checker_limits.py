"""The size limits and search budgets of :mod:`genenv_engine.core.limits`: pathological inputs hit them with the
stated reason, and normal inputs get exactly the verdict they got without them."""

from __future__ import annotations

import time
import warnings

import pytest

from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.core.limits import MAX_GENERATION_CHARS, MAX_RESPONSE_CHARS, Budget, BudgetExceeded, check_response
from genenv_engine.environments import PAPER_BENCHMARKS, get_environment
from genenv_engine.environments.alfworld import AlfworldMini, planner
from genenv_engine.environments.alfworld.planner import solve as plan
from genenv_engine.environments.alfworld.text import read_state
from genenv_engine.environments.alfworld.world import Goal, World
from genenv_engine.environments.base import SplitSizes
from genenv_engine.environments.travelplanner import solver
from genenv_engine.environments.travelplanner.db import sandbox
from genenv_engine.environments.travelplanner.mini import TravelPlannerMini, read_prompt
from genenv_engine.training.agent import rollout
from genenv_engine.training.simulator import parse_and_validate

SMALL = SplitSizes(seed=2, train=4, heldout=4)
HARDEST_TRIP = "E>X*3 4d 2p $99999 c:ital,ind | ?go"
"""The query the TravelPlanner step grammar allows whose completion search is largest (about 15,000 nodes)."""

_ENVS: dict[str, object] = {}


def env_of(name: str):
    if name not in _ENVS:
        _ENVS[name] = get_environment(name, 0, SMALL)
    return _ENVS[name]


def exploding_world() -> World:
    """A game far beyond the validator's size caps: 20 closed receptacles, 10 apples to heat (BFS blows up)."""
    recs = tuple(f"cabinet {i}" for i in range(1, 19)) + ("microwave 1", "fridge 1")
    objs = tuple(f"apple {i}" for i in range(1, 11))
    return World(
        Goal("heat", "apple", "fridge"),
        recs,
        objs,
        tuple(i % 18 for i in range(10)),
        (0,) * 10,
        (True,) * len(recs),
        -1,
    )


class FixedBackend:
    """Generation double: answers every prompt with the next of ``texts``."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        return [Completion(self.texts[i % len(self.texts)], []) for i in range(len(prompts))]


class PlainPolicy:
    def chat(self, turns: list[dict[str, str]]) -> str:
        return turns[-1]["content"]


# ---------------------------------------------------------------- size limits


@pytest.mark.parametrize("name", PAPER_BENCHMARKS)
def test_a_huge_completion_fails_as_too_long_without_reaching_the_checker(name, monkeypatch):
    env = env_of(name)
    task = env.splits()["train"][0]
    normal = check_response(env, task, task.answer)
    assert normal == env.check(task, task.answer) and normal.success  # normal input: the checker's own verdict

    def never(*_):
        raise AssertionError("the checker must not see an over-long completion")

    monkeypatch.setattr(env, "check", never)
    huge = task.answer + " " + "(" * MAX_RESPONSE_CHARS
    t0 = time.perf_counter()
    result = check_response(env, task, huge)
    assert (result.success, result.score, result.error_type) == (False, 0.0, "too_long")
    assert env.reward(result) == 0.0 and time.perf_counter() - t0 < 0.1
    assert check_response(env, task, "x" * 11, max_chars=10).error_type == "too_long"


def test_rollouts_score_over_long_completions_as_too_long_and_others_as_before():
    env = env_of("bfcl")
    tasks = env.splits()["train"][:2]
    huge = tasks[0].answer * (MAX_RESPONSE_CHARS // len(tasks[0].answer) + 1)
    scored = rollout(FixedBackend([tasks[0].answer, huge]), PlainPolicy(), {"bfcl": env}, tasks[:1], 2, Sampling(), 0.5)
    ok, long = scored[0].attempts
    assert ok.success and ok.result == env.check(tasks[0], tasks[0].answer)
    assert (long.success, long.reward, long.result.error_type) == (False, 0.0, "too_long")


@pytest.mark.parametrize("style", ["compact", "instruct"])
def test_a_huge_simulator_output_is_rejected_before_parsing(style, monkeypatch):
    env = env_of("bfcl")
    seed, task = env.splits()["seed"][0], env.splits()["train"][0]
    text = env.simulator_text(task) if style == "compact" else f"TASK: {task.prompt}\nANSWER: {task.answer}"
    normal = parse_and_validate(env, text, task_id="g/0", seed=seed, epoch=1, generator="t", style=style)
    assert normal.valid and normal.answer == task.answer  # normal input: accepted as before

    def never(_text):
        raise AssertionError("an over-long output must not be parsed")

    monkeypatch.setattr(env, "parse_generation", never)
    huge = text + "9" * MAX_GENERATION_CHARS
    stored = parse_and_validate(env, huge, task_id="g/1", seed=seed, epoch=1, generator="t", style=style)
    assert not stored.valid
    assert stored.reason == f"too_long: {len(huge)} characters of simulator output (limit {MAX_GENERATION_CHARS})"
    assert len(stored.prompt) <= 1000  # the rejection record keeps a prefix, not megabytes


# ---------------------------------------------------------------- ALFWorld-mini planner budget


def test_the_alfworld_planner_stops_an_exploding_search_with_budget():
    t0 = time.perf_counter()
    sol = plan(exploding_world())
    assert (sol.status, sol.reason) == ("budget", f"search budget of {planner.MAX_STATES} states exhausted")
    assert time.perf_counter() - t0 < 15  # 100,000 states: about a second on one core


def test_alfworld_validator_rejects_a_task_whose_search_exceeds_the_budget(monkeypatch):
    env = AlfworldMini(0, SMALL)
    task = env.splits()["train"][0]
    before = plan(read_state(task.prompt))
    assert before == plan(read_state(task.prompt), max_states=10**9)  # normal input: budget unseen
    assert env.validate(task.prompt, task.answer, task_id="v/0").ok
    monkeypatch.setattr(planner, "MAX_STATES", 3)
    verdict = env.validate(task.prompt, task.answer, task_id="v/1")
    assert (verdict.ok, verdict.reason) == (False, "budget: search budget of 3 states exhausted")


# ---------------------------------------------------------------- TravelPlanner-mini solver budget


def test_the_travel_solver_raises_past_its_budget_and_is_unchanged_below_it():
    step, db = read_prompt(HARDEST_TRIP), sandbox()
    with pytest.raises(BudgetExceeded, match="search budget of 1000 solver nodes exhausted"):
        solver.solve(step.query, (), db, max_nodes=1000)
    assert solver.solve(step.query, (), db) == solver.solve(step.query, (), db, max_nodes=10**9)


def test_travel_validator_and_checker_turn_a_spent_budget_into_a_reason(monkeypatch):
    env = TravelPlannerMini(0, SMALL)
    task = env.splits()["train"][0]
    answer = "FEC1"  # its gold first field (gold_field); the budget runs out before the answer is looked at
    monkeypatch.setattr(solver, "MAX_NODES", 1000)
    verdict = env.validate(HARDEST_TRIP, answer, task_id="v/0")
    assert (verdict.ok, verdict.reason) == (False, "budget: search budget of 1000 solver nodes exhausted")
    monkeypatch.setattr(solver, "MAX_NODES", 0)
    result = check_response(env, task, task.answer)
    assert (result.success, result.error_type) == (False, "budget")
    stored = parse_and_validate(
        env, env.simulator_text(task), task_id="g/0", seed=env.splits()["seed"][0], epoch=1, generator="t"
    )
    assert not stored.valid and stored.reason.startswith("budget: ")
    monkeypatch.undo()
    assert check_response(env, task, task.answer).success  # normal input at the default budget


def test_a_validator_that_lets_the_budget_escape_is_still_stored_with_a_reason(monkeypatch):
    env = env_of("bfcl")
    task = env.splits()["train"][0]

    def spent(*_, **__):
        Budget(0, "nodes").spend()

    monkeypatch.setattr(env, "validate", spent)
    stored = parse_and_validate(
        env, env.simulator_text(task), task_id="g/0", seed=env.splits()["seed"][0], epoch=1, generator="t"
    )
    assert (stored.valid, stored.reason) == (False, "budget: search budget of 0 nodes exhausted")


@pytest.mark.parametrize("name", ["bfcl", "apibank"])
def test_odd_literals_in_a_response_raise_no_warning(name):
    """ast.parse warns on ``1abc`` and ``'\\ '`` with a piece of the text (escape characters included)."""
    env = env_of(name)
    task = env.splits()["train"][0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for text in ("f(a=1abc)", "f(a='\\ ')", "f(a='\\\x1b[2J')", "API-Request: [F(a='\\ ')]"):
            check_response(env, task, text)
    assert caught == []
