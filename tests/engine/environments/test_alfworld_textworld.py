"""``alfworld_textworld``: generated ALFWorld PDDL games in the real TextWorld engine, Fast-Downward's plan as gold.

Skipped as a whole when the optional extra (``scripts/install_alfworld_extra.sh``) is not installed.
Checks: for every task type the planner's plan, executed in TextWorld, reaches ``won``; TextWorld's state
after each gold step agrees with the mini's rules; wrong actions fail with the mini's error types;
unsolvable and malformed generated tasks are rejected with a reason; the shared environment contract
(imported from ``test_env_contract``); episode play; official trials from an ``$ALFWORLD_DATA`` folder.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("fast_downward", reason="the ALFWorld extra is not installed")
pytest.importorskip("textworld", reason="the ALFWorld extra is not installed")

from test_env_contract import (  # noqa: E402  (the shared contract, run on this environment)
    test_every_gold_passes_and_revalidates,
    test_sibling_pairs,
    test_sibling_pairs_need_a_source,
    test_splits_deterministic_and_seeded,
    test_splits_disjoint_by_prompt,
    test_splits_sizes_levels_and_ids,
    test_validator_labels_generated_tasks,
    test_validator_rejects_copy_of_parent,
    test_validator_rejects_too_long,
    test_validator_through_simulator_text,
)

from genenv_engine.environments import get_environment  # noqa: E402
from genenv_engine.environments.alfworld.mini import ERROR_TYPES, generate_state  # noqa: E402
from genenv_engine.environments.alfworld.text import read_state, render_state  # noqa: E402
from genenv_engine.environments.alfworld.textworld.engine import Game, analyse  # noqa: E402
from genenv_engine.environments.alfworld.textworld.environment import (  # noqa: E402
    CHECKER,
    NAME,
    AlfworldTextWorld,
    load_official,
    planner_act,
    play_episode,
)
from genenv_engine.environments.alfworld.textworld.pddl import static_problem, tw_command  # noqa: E402
from genenv_engine.environments.alfworld.upstream import load_upstream  # noqa: E402
from genenv_engine.environments.alfworld.world import TASK_TYPES, apply, parse_command  # noqa: E402
from genenv_engine.environments.base import SplitSizes  # noqa: E402

CONTRACT = (
    test_every_gold_passes_and_revalidates,
    test_sibling_pairs,
    test_sibling_pairs_need_a_source,
    test_splits_deterministic_and_seeded,
    test_splits_disjoint_by_prompt,
    test_splits_sizes_levels_and_ids,
    test_validator_labels_generated_tasks,
    test_validator_rejects_copy_of_parent,
    test_validator_rejects_too_long,
    test_validator_through_simulator_text,
)
FIXTURE = Path(__file__).parents[2] / "fixtures" / "alfworld"
OWN_FIXTURE = Path(__file__).parents[2] / "fixtures" / "alfworld_textworld"
"""Two synthetic trials: the mini fixture's Book-on-Sofa one, and the same with an apple (a sofa cannot hold
one in ALFWorld, though the mini allows it)."""
SIZES = SplitSizes(seed=12, train=44, heldout=20)


class Case:
    cls = AlfworldTextWorld
    sizes = SIZES
    checker = CHECKER
    n_siblings = 12

    @staticmethod
    def family(task):
        return task.expected["task_type"]


@pytest.fixture(scope="module")
def case() -> Case:
    return Case()


@pytest.fixture(scope="module")
def env() -> AlfworldTextWorld:
    return AlfworldTextWorld(seed=0, sizes=SIZES)


def start_states(per_type: int = 3) -> list:
    """Seeded start-ish states of every task type that ALFWorld's rules allow."""
    rng, states = random.Random(11), []
    for kind in TASK_TYPES:
        found = 0
        while found < per_type:
            state, _ = generate_state(rng.choice((2, 3, 4)), rng, kind)
            if not static_problem(state):
                states.append(state)
                found += 1
    return states


# ---------------------------------------------------------------- planner and engine


def test_gold_plans_reach_the_goal_for_every_task_type():
    states = start_states()
    assert {s.goal.task_type for s in states} == set(TASK_TYPES.values())
    for state in states:
        analysis = analyse(render_state(state))
        assert analysis.status == "solved", render_state(state)
        game = Game(state)
        for command in analysis.plan:
            assert not game.won
            assert game.step(command), (render_state(state), command)
        assert game.won and game.plan == []


def test_textworld_states_agree_with_the_mini_rules():
    """After each gold step, TextWorld's facts read back as the state the mini's rules produce."""
    for state in start_states(per_type=2):
        game, mini = Game(state), state
        assert game.current_world() == mini
        for command in analyse(render_state(state)).plan:
            game.step(command)
            mini = apply(mini, parse_command(command))
            assert not isinstance(mini, str), command
            assert game.current_world() == mini, command


def test_plan_length_matches_the_mini_planner_and_sets_the_level(env):
    from genenv_engine.environments.alfworld.planner import solve

    tasks = env.splits()["train"]
    for task in tasks:
        assert task.expected["plan_len"] == solve(read_state(task.prompt)).dist == len(task.expected["plan"])
        assert task.difficulty["features"]["plan_len"] == task.expected["plan_len"]
    assert {t.level for t in tasks} == {1, 2, 3, 4}


def test_put_uses_alfworld_spelling():
    assert tw_command(parse_command("put mug 1 on cabinet 1")) == "move mug 1 to cabinet 1"
    assert tw_command(parse_command("move mug 1 to cabinet 1")) == "move mug 1 to cabinet 1"


# ---------------------------------------------------------------- checker


def test_checker_accepts_gold_and_every_spelling(env):
    for task in env.splits()["train"][:12]:
        assert env.check(task, task.answer).success
        assert env.check(task, task.answer.upper() + ".").success
        if task.answer.startswith("move "):
            obj, rec = task.answer[5:].split(" to ")
            assert env.check(task, f"put {obj} in/on {rec}").success


def test_checker_accepts_another_optimal_first_action():
    task_prompt = "G: put two mug in cabinet | at: - | has: - | countertop 1: mug 1; shelf 1: mug 2; cabinet 1 open"
    env = AlfworldTextWorld(seed=0, sizes=SIZES)
    verdict = env.validate(task_prompt, "go to countertop 1", task_id="g")
    assert verdict.ok and verdict.task.expected["plan_len"] == 8
    assert env.check(verdict.task, "go to shelf 1").success  # either mug first: both plans have 8 steps
    assert env.check(verdict.task, "go to cabinet 1").error_type == "suboptimal"


def test_wrong_actions_fail_with_the_right_error_type(env):
    counts = {kind: 0 for kind in ERROR_TYPES}
    for task in env.splits()["train"][:16]:
        world = read_state(task.prompt)
        wrong = {
            "parse_error": "go to\nshelf 1",
            "invalid_command": "fly to the moon",
            "not_admissible": f"take {world.objs[0]} from nowhere 1",
            "suboptimal": "look",
        }
        for kind, response in wrong.items():
            result = env.check(task, response)
            assert (result.success, result.error_type) == (False, kind), (task.prompt, response)
            assert result.score == (0.5 if kind == "suboptimal" else 0.0)
            counts[kind] += 1
    assert all(n == 16 for n in counts.values())


def test_admissible_detour_is_suboptimal_and_closed_receptacle_not_admissible():
    env = AlfworldTextWorld(seed=0, sizes=SIZES)
    prompt = "G: put apple in fridge | at: countertop 1 | has: - | countertop 1: apple 1; fridge 1 closed; desk 1"
    task = env.validate(prompt, "take apple 1 from countertop 1", task_id="g").task
    assert task.expected["plan"] == [
        "take apple 1 from countertop 1",
        "go to fridge 1",
        "open fridge 1",
        "move apple 1 to fridge 1",
    ]
    assert env.check(task, "go to desk 1").error_type == "suboptimal"
    assert env.check(task, "open fridge 1").error_type == "not_admissible"  # not at the fridge
    assert env.check(task, "heat apple 1 with countertop 1").error_type == "not_admissible"


# ---------------------------------------------------------------- validator


@pytest.mark.parametrize(
    "prompt, reason",
    [
        (
            "G: put hot potato in bed | at: - | has: - | bed 1; sidetable 1: potato 1; microwave 1 closed",
            "unsolvable: bed cannot hold potato (ALFWorld canContain)",
        ),
        (
            "G: put hot apple in fridge | at: - | has: - | countertop 1: apple 1; fridge 1 closed",
            "unsolvable: no microwave",
        ),
        (
            "G: put two mug in cabinet | at: - | has: - | countertop 1: mug 1; cabinet 1 closed",
            "unsolvable: needs two mug",
        ),
        ("G: put apple in countertop | at: - | has: - | countertop 1: apple 1", "already_solved: already solved"),
        ("G: put apple in desk | at: - | has: - | desk 1; shelf 1: apple 1; shelf 1", "duplicate_name: shelf 1"),
        ("__import__('os').system('x') | at: - | has: - | desk 1", "bad_format"),
    ],
)
def test_validator_rejects_with_reason(env, prompt, reason):
    verdict = env.validate(prompt, "go to desk 1", task_id="g")
    assert not verdict.ok and verdict.task is None
    assert verdict.reason.startswith(reason), verdict.reason


def test_planner_itself_rejects_a_goal_alfworld_forbids():
    """Without the static check, TextWorld/Fast-Downward still find no way to put a potato on a bed."""
    prompt = "G: put hot potato in bed | at: - | has: - | bed 1; sidetable 1: potato 1; microwave 1 closed"
    analysis = analyse(prompt)
    assert analysis.status == "unsolvable" and analysis.plan == ()


def test_validator_rejects_a_wrong_generated_answer(env):
    prompt = "G: put apple in fridge | at: - | has: - | countertop 1: apple 1; fridge 1 closed; desk 1"
    for answer, error in (
        ("look", "suboptimal"),
        ("go to desk 1", "suboptimal"),
        ("open fridge 1", "not_admissible"),
        ("dance", "invalid_command"),
    ):
        verdict = env.validate(prompt, answer, task_id="g")
        assert (verdict.ok, verdict.reason) == (False, f"answer_mismatch: {error}")
    assert env.validate(prompt, "go to countertop 1", task_id="g").ok


# ---------------------------------------------------------------- episodes


def test_play_episode_with_the_planner_and_with_a_bad_agent(env):
    task = next(t for t in env.splits()["train"] if t.expected["plan_len"] >= 3)
    won = play_episode(task, planner_act)
    assert won.success and won.sub_scores["steps"] == won.sub_scores["optimal_steps"] == task.expected["plan_len"]
    lost = play_episode(task, lambda _: "dance", max_steps=5)
    assert (lost.success, lost.error_type, lost.sub_scores["invalid_actions"]) == (False, "max_steps", 5.0)


# ---------------------------------------------------------------- contract, registry, official games


def test_registered_as_package_benchmark():
    env = get_environment(NAME, seed=0, sizes=SIZES)
    assert isinstance(env, AlfworldTextWorld)
    assert env.describe() == {
        "name": NAME,
        "granularity": "step",
        "source": "package",
        "sizes": {"heldout": 20, "train": 44, "seed": 12},
    }
    assert set(env.versions) == {"alfworld", "textworld", "fast-downward-textworld"}


def test_official_trials_replanned_in_textworld():
    skipped: list[str] = []
    tasks = load_official(FIXTURE, skipped)
    mini = load_upstream(FIXTURE)
    assert len(tasks) == len(mini) == 37 and skipped[0].endswith("is not one of ALFWorld's six")
    assert [s.split("/")[-3] for s in skipped] == [
        "pick_and_place_with_movable_recep-Pen-Mug-Desk-305",
        "pick_heat_then_place_in_recep-PotatoSliced-None-DiningTable-18",
    ]
    assert [t.prompt for t in tasks] == [t.prompt for t in mini]
    assert [t.answer for t in tasks] == [tw_command(parse_command(t.answer)) for t in mini]
    assert {t.expected["task_type"] for t in tasks} == set(TASK_TYPES.values())
    for task in tasks:
        assert (task.split, task.origin, task.benchmark) == ("heldout", "official", NAME)
        assert task.answer == task.expected["expert"] and parse_command(task.answer)
        assert check_official(task)
    env = get_environment(NAME, seed=0, sizes=SIZES, data_dir=str(FIXTURE))
    assert env.describe() == {
        "name": NAME,
        "granularity": "step",
        "source": "upstream folder",
        "sizes": {"heldout": 37, "train": 44, "seed": 12},
    }
    splits = env.splits()
    assert [t.prompt for t in splits["heldout"]] == [t.prompt for t in tasks]
    assert not {t.prompt for t in tasks} & {t.prompt for t in splits["train"] + splits["seed"]}
    assert len(env.skipped) == 2


def test_official_steps_alfworld_forbids_are_skipped_with_reason():
    skipped: list[str] = []
    tasks = load_official(OWN_FIXTURE, skipped)
    assert [t.answer for t in tasks] == [
        "go to sidetable 1",
        "take book 1 from sidetable 1",
        "go to sofa 1",
        "move book 1 to sofa 1",
    ]
    assert len(load_upstream(OWN_FIXTURE)) == 8  # the mini takes both trials
    assert len(skipped) == 4 and all("Apple-None-Sofa" in s and "sofa cannot hold apple" in s for s in skipped)


def check_official(task) -> bool:
    from genenv_engine.environments.alfworld.textworld.environment import check_step

    return check_step(task, task.answer).success


@pytest.mark.parametrize("check", CONTRACT, ids=lambda check: check.__name__.removeprefix("test_"))
def test_contract(check, env, case, golds_revalidate):
    """The shared contract of ``test_env_contract`` (all but its ``describe``, which expects a built-in mini)."""
    params = check.__code__.co_varnames[: check.__code__.co_argcount]
    kwargs = {"env": env, "case": case, "golds_revalidate": golds_revalidate}
    check(**{name: kwargs[name] for name in params})


for _check in CONTRACT:  # run once, through test_contract, not again under the imported names
    globals().pop(_check.__name__)
