"""Tests for ALFWorld-mini: world rules, planner (against an unpruned search), step checker, validator,
ladder, episode play and the traj_data.json loader on a hand-written fixture; the splits/siblings
contract shared by all five minis is in test_env_contract.py."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from genenv_engine.environments.alfworld.mini import (
    EPISODE_ERROR_TYPES,
    ERROR_TYPES,
    AlfworldMini,
    expert_act,
    generate_state,
    generate_task,
    infer_level,
    play_episode,
    random_world,
)
from genenv_engine.environments.alfworld.planner import action_key, solve
from genenv_engine.environments.alfworld.text import PromptError, read_state, render_state
from genenv_engine.environments.alfworld.upstream import load_upstream
from genenv_engine.environments.alfworld.world import CommandError, admissible_commands, apply, parse_command, won
from genenv_engine.environments.base import SplitSizes

SMALL = SplitSizes(seed=24, train=80, heldout=40)
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "alfworld"

HEAT = "G: put hot apple in fridge | at: - | has: - | countertop 1: apple 1; microwave 1 closed; fridge 1 closed"
HEAT_HELD = (
    "G: put hot apple in fridge | at: countertop 1 | has: apple 1 | countertop 1: mug 1; "
    "microwave 1 closed; fridge 1 closed"
)
AT_FRIDGE = "G: put hot apple in fridge | at: fridge 1 | has: hot apple 1 | microwave 1 closed; fridge 1 open"
TWO = "G: put two mug in cabinet | at: - | has: - | countertop 1: mug 1; cabinet 1 closed; diningtable 1: mug 2"
LOOK = "G: look at cd under desklamp | at: desk 1 | has: cd 1 | dresser 1; desk 1: desklamp 1"


@pytest.fixture(scope="module")
def env() -> AlfworldMini:
    return AlfworldMini(seed=0, sizes=SMALL)


def make(env: AlfworldMini, prompt: str, answer: str | None = None):
    """A task built by the validator from a hand-written prompt (its own gold when no answer given)."""
    answer = answer or solve(read_state(prompt)).canonical
    verdict = env.validate(prompt, answer, task_id="t/0")
    assert verdict.ok, verdict.reason
    return verdict.task


# ---------------------------------------------------------------- world rules


def test_state_line_round_trip_and_rules():
    world = read_state(HEAT_HELD)
    assert render_state(world) == HEAT_HELD
    assert world.held == world.obj("apple 1") and world.at == 0
    hot = apply(apply(world, parse_command("go to microwave 1")), parse_command("heat apple 1 with microwave 1"))
    assert "has: hot apple 1" in render_state(hot)
    cooled = apply(apply(hot, parse_command("go to fridge 1")), parse_command("cool apple 1 with fridge 1"))
    assert "has: cool apple 1" in render_state(cooled)  # cooling clears hot
    assert apply(world, parse_command("take mug 1 from countertop 1")) == "hands are full"
    assert apply(world, parse_command("heat apple 1 with countertop 1")) == "cannot heat with countertop 1"
    assert apply(world, parse_command("go to countertop 1")) == "already at countertop 1"
    at_fridge = apply(world, parse_command("go to fridge 1"))
    assert apply(at_fridge, parse_command("put apple 1 in/on fridge 1")) == "fridge 1 is closed"
    assert apply(at_fridge, parse_command("close fridge 1")) == "fridge 1 is already closed"
    opened = apply(at_fridge, parse_command("open fridge 1"))
    assert "fridge 1 open" in render_state(opened)
    assert (
        won(apply(apply(at_fridge, parse_command("open fridge 1")), parse_command("put apple 1 in fridge 1"))) is False
    )  # not hot yet


def test_lamps_and_admissible_commands():
    world = read_state("G: look at cd under desklamp | at: desk 1 | has: - | desk 1: cd 1, desklamp 1")
    assert apply(world, parse_command("take desklamp 1 from desk 1")) == "desklamp 1 cannot be taken"
    lit = apply(world, parse_command("use desklamp 1"))
    assert render_state(lit).endswith("desk 1: cd 1, lit desklamp 1") and not won(lit)
    assert won(apply(lit, parse_command("take cd 1 from desk 1")))
    assert apply(lit, parse_command("toggle desklamp 1")) == world
    assert admissible_commands(world) == [
        "look",
        "inventory",
        "take cd 1 from desk 1",
        "use desklamp 1",
        "toggle desklamp 1",
        "examine desk 1",
        "examine cd 1",
        "examine desklamp 1",
    ]


def test_command_parsing_forgives_case_spacing_and_put_spelling():
    assert parse_command("  Put Apple 1 In  Fridge 1. ").text == "put apple 1 in/on fridge 1"
    assert parse_command("move apple 1 to fridge 1").text == "put apple 1 in/on fridge 1"
    assert parse_command("clean knife 1 with sinkbasin 1").args == ("knife 1", "sinkbasin 1")
    for text, kind in (
        ("", "parse_error"),
        ("go to\ndesk 1", "parse_error"),
        ("x" * 101, "parse_error"),
        ("take apple from desk 1", "invalid_command"),
        ("go desk 1", "invalid_command"),
    ):
        with pytest.raises(CommandError) as err:
            parse_command(text)
        assert err.value.kind == kind


# ---------------------------------------------------------------- planner


def reference_solve(world, limit=14):
    """Unpruned breadth-first search over every admissible command (slow, exact)."""
    if won(world):
        return 0, ()
    first = [(c, apply(world, parse_command(c))) for c in admissible_commands(world)]
    frontier: dict = {}
    for i, (_, nxt) in enumerate(first):
        frontier[nxt] = frontier.get(nxt, 0) | 1 << i
    seen = {world, *frontier}
    for depth in range(1, limit + 1):
        mask = 0
        for state, m in frontier.items():
            mask |= m if won(state) else 0
        if mask:
            return depth, tuple(sorted({c for i, (c, _) in enumerate(first) if mask >> i & 1}, key=action_key))
        layer: dict = {}
        for state, m in frontier.items():
            for c in admissible_commands(state):
                nxt = apply(state, parse_command(c))
                if nxt not in seen:
                    layer[nxt] = layer.get(nxt, 0) | m
        seen.update(layer)
        frontier = layer
    return None, ()


def test_planner_matches_unpruned_search_on_random_states():
    rng = random.Random(2)
    checked = 0
    while checked < 60:
        world = random_world(rng.choice([1, 2]), rng)
        for _ in range(rng.randint(0, 8)):  # random walks reach odd states (held distractors, lit lamps...)
            world = apply(world, parse_command(rng.choice(admissible_commands(world))))
        solution = solve(world)
        if solution.status != "solved":
            continue
        assert reference_solve(world) == (solution.dist, solution.optimal), render_state(world)
        replayed = world
        for action in solution.plan:
            replayed = apply(replayed, parse_command(action))
        assert won(replayed) and len(solution.plan) == solution.dist
        checked += 1


def test_planner_statuses():
    two = solve(read_state(TWO))
    assert (two.status, two.dist, two.optimal) == ("solved", 9, ("go to countertop 1", "go to diningtable 1"))
    assert solve(read_state(TWO), max_depth=3).status == "too_long"
    assert solve(read_state(HEAT.replace("; microwave 1 closed", ""))).reason == "no microwave"
    assert solve(read_state(TWO.replace("mug 2", "cup 2"))).reason == "needs two mug"
    assert solve(read_state(LOOK.replace("desklamp", "floorlamp", 1))).reason == "no floorlamp"
    assert solve(read_state("G: put mug in desk | at: - | has: - | desk 1: mug 1")).status == "won"
    look = solve(read_state(LOOK))
    assert look.optimal == ("use desklamp 1", "toggle desklamp 1") and look.dist == 1


# ---------------------------------------------------------------- checker


def test_correct_answer_passes(env):
    task = make(env, HEAT)
    assert task.answer == "go to countertop 1"
    result = env.check(task, "go to countertop 1")
    assert (result.success, result.score, result.error_type) == (True, 1.0, None)
    assert result.sub_scores == {"parsed": 1.0, "admissible": 1.0, "optimal": 1.0, "verb": 1.0}


def test_any_optimal_action_and_spelling_variants_pass(env):
    two = make(env, TWO)
    assert two.expected["optimal"] == ["go to countertop 1", "go to diningtable 1"]
    assert env.check(two, "go to diningtable 1").success
    fridge = make(env, AT_FRIDGE)
    for response in (
        "put apple 1 in/on fridge 1",
        "put apple 1 in fridge 1",
        "PUT apple 1 on fridge 1.",
        "move apple 1 to fridge 1",
    ):
        assert env.check(fridge, response).success, response
    look = make(env, LOOK)
    assert look.answer == "use desklamp 1" and env.check(look, "toggle desklamp 1").success


@pytest.mark.parametrize(
    "prompt, response, error, score",
    [
        (HEAT, "", "parse_error", 0.0),
        (HEAT, "go to countertop 1\ntake apple 1 from countertop 1", "parse_error", 0.0),
        (HEAT, "go to " + "countertop " * 20, "parse_error", 0.0),
        (HEAT, "dance", "invalid_command", 0.0),
        (HEAT, "go to countertop", "invalid_command", 0.0),
        (HEAT, "__import__('os').system('x')", "invalid_command", 0.0),
        (HEAT, "go to microwave 9", "not_admissible", 0.0),
        (HEAT, "take apple 1 from countertop 1", "not_admissible", 0.0),
        (HEAT_HELD, "heat apple 1 with microwave 1", "not_admissible", 0.0),
        (HEAT_HELD, "put apple 1 in/on fridge 1", "not_admissible", 0.0),
        (AT_FRIDGE, "open fridge 1", "not_admissible", 0.0),
        (HEAT, "look", "suboptimal", 0.5),
        (HEAT, "inventory", "suboptimal", 0.5),
        (HEAT, "go to fridge 1", "suboptimal", 0.5),
        (HEAT_HELD, "put apple 1 in/on countertop 1", "suboptimal", 0.5),
        (HEAT_HELD, "examine countertop 1", "suboptimal", 0.5),
        (AT_FRIDGE, "close fridge 1", "suboptimal", 0.5),
    ],
)
def test_each_error_type(env, prompt, response, error, score):
    result = env.check(make(env, prompt), response)
    assert (result.success, result.error_type, result.score) == (False, error, score)
    assert result.sub_scores["optimal"] == 0.0
    assert result.sub_scores["admissible"] == (1.0 if error == "suboptimal" else 0.0)


def test_error_types_are_closed():
    assert ERROR_TYPES == ("parse_error", "invalid_command", "not_admissible", "suboptimal")
    assert EPISODE_ERROR_TYPES == ("max_steps",)


def test_verb_sub_score(env):
    task = make(env, HEAT_HELD)
    assert task.answer == "go to microwave 1"
    assert env.check(task, "go to fridge 1").sub_scores["verb"] == 1.0
    assert env.check(task, "look").sub_scores["verb"] == 0.0


# ---------------------------------------------------------------- validator


def test_validator_accepts_and_recomputes(env):
    parent = env.splits()["seed"][0]
    verdict = env.validate(
        TWO, "go to diningtable 1", task_id="gen/e1/0001", parent=parent, epoch=1, generator="sim@e1"
    )
    assert verdict.ok and verdict.reason == ""
    task = verdict.task
    assert task.answer == "go to countertop 1"
    assert task.expected["optimal"] == ["go to countertop 1", "go to diningtable 1"]
    assert task.expected["plan_len"] == 9 and len(task.expected["plan"]) == 9
    assert (task.split, task.origin, task.parent_id, task.epoch, task.generator, task.checker, task.granularity) == (
        "generated",
        "generated",
        parent.id,
        1,
        "sim@e1",
        "step_match",
        "step",
    )
    assert task.id == "gen/e1/0001" and task.benchmark == "alfworld" and task.tools == []
    assert task.difficulty == {
        "level": 4,
        "features": {
            "task_type": "pick_two_obj_and_place",
            "plan_len": 9,
            "n_receptacles": 3,
            "n_objects": 2,
            "n_closed": 1,
            "n_optimal": 2,
            "holding": False,
        },
    }


@pytest.mark.parametrize(
    "prompt, answer, reason",
    [
        (HEAT, "go to fridge 1", "answer_mismatch: suboptimal"),
        (HEAT, "go to sofa 1", "answer_mismatch: not_admissible"),
        (HEAT, "fly", "answer_mismatch: invalid_command"),
        (HEAT, "go to countertop 1\nlook", "answer_mismatch: parse_error"),
        (HEAT + "; sofa 1" * 12, "go to countertop 1", "too_long"),
        (HEAT, "go to countertop 1 " + "x" * 60, "too_long"),
        ("put apple in fridge", "look", "bad_format"),
        (HEAT.replace("put hot apple", "put a hot apple"), "go to countertop 1", "bad_goal"),
        (HEAT.replace("hot apple", "hot banana"), "go to countertop 1", "unknown_type: banana"),
        (HEAT.replace("hot apple", "hot book").replace("apple 1", "book 1"), "go to countertop 1", "bad_goal"),
        (HEAT.replace("in fridge", "in desklamp"), "go to countertop 1", "bad_goal"),
        (LOOK.replace("under desklamp", "under desk"), "use desklamp 1", "bad_goal"),
        (HEAT.replace("countertop 1:", "rooftop 1:"), "go to rooftop 1", "unknown_type: rooftop"),
        (HEAT.replace("apple 1", "banana 1"), "go to countertop 1", "unknown_type: banana"),
        (HEAT.replace("fridge 1 closed", "fridge 1 closed; fridge 1 open"), "go to countertop 1", "duplicate_name"),
        (HEAT.replace("apple 1", "apple 1, apple 1"), "go to countertop 1", "duplicate_name"),
        (HEAT.replace("countertop 1:", "countertop one:"), "go to countertop 1", "bad_receptacle"),
        (HEAT.replace("apple 1", "red apple 1"), "go to countertop 1", "bad_object"),
        (HEAT.replace("apple 1", "hot hot apple 1"), "go to countertop 1", "bad_object"),
        (HEAT.replace("fridge 1 closed", "fridge 1"), "go to countertop 1", "bad_state"),
        (HEAT.replace("countertop 1:", "countertop 1 open:"), "go to countertop 1", "bad_state"),
        (HEAT.replace("apple 1", "lit apple 1"), "go to countertop 1", "bad_state"),
        (HEAT.replace("apple 1", "hot cool apple 1"), "go to countertop 1", "bad_state"),
        (LOOK.replace("has: cd 1", "has: desklamp 2"), "look", "bad_state"),
        (HEAT.replace("apple 1", "clean hot apple 1").replace("clean hot", "hot clean"), "look", "bad_format"),
        (HEAT.replace(";", ", "), "look", "bad_object"),
        (HEAT.replace("at: -", "at: sofa 1"), "look", "inconsistent: agent at unlisted"),
        (LOOK.replace("desk 1: desklamp 1", "drawer 1 closed: desklamp 1"), "look", "inconsistent"),
        (
            "G: put mug in desk | at: - | has: - | " + "; ".join(f"shelf {i}" for i in range(1, 9)) + "; desk 1: mug 1",
            "go to desk 1",
            "too_big: 9 receptacles",
        ),
        (
            "G: put two mug in desk | at: - | has: - | desk 1; shelf 1: mug 1, mug 2, mug 3, mug 4",
            "go to shelf 1",
            "too_big: 4 mug",
        ),
        ("G: put mug in desk | at: - | has: - | desk 1: mug 1", "look", "already_solved"),
        (HEAT.replace("; microwave 1 closed", ""), "go to countertop 1", "unsolvable: no microwave"),
        (TWO.replace("mug 2", "cup 1"), "go to countertop 1", "unsolvable: needs two mug"),
    ],
)
def test_validator_rejects(env, assert_rejected, prompt, answer, reason):
    assert_rejected(env, prompt, answer, reason)


def test_read_state_errors_are_prompt_errors():
    with pytest.raises(PromptError, match="bad_format"):
        read_state("G: put mug in desk | at: - | desk 1: mug 1")


# ---------------------------------------------------------------- splits


def test_default_sizes_disjoint_and_short():
    env = AlfworldMini(seed=7)
    splits = env.splits()
    assert {k: len(v) for k, v in splits.items()} == {"seed": 200, "train": 2000, "heldout": 400}
    tasks = [t for ts in splits.values() for t in ts]
    assert all(env.check(t, t.answer).success for t in tasks)
    assert len({t.prompt for t in tasks}) == len(tasks)
    assert max(len(t.prompt) for t in tasks) <= 180 and max(len(t.answer) for t in tasks) <= 60
    assert sum(len(t.prompt) for t in tasks) / len(tasks) < 140
    assert {t.expected["task_type"] for t in tasks} == {
        "pick_and_place_simple",
        "look_at_obj_in_light",
        "pick_clean_then_place_in_recep",
        "pick_heat_then_place_in_recep",
        "pick_cool_then_place_in_recep",
        "pick_two_obj_and_place",
    }


def test_level_features_follow_the_ladder(env):
    for task in (t for ts in env.splits().values() for t in ts):
        f = task.difficulty["features"]
        assert task.level == infer_level(f)
        assert f["plan_len"] == len(task.expected["plan"]) == task.expected["plan_len"]
        assert f["n_receptacles"] <= {1: 3, 2: 4, 3: 5, 4: 6}[task.level]
        if task.level < 4:
            assert f["plan_len"] <= {1: 2, 2: 4, 3: 7}[task.level]
        else:
            assert f["plan_len"] >= 8 or f["n_receptacles"] >= 6


def test_generate_task_is_seeded():
    assert generate_task(3, random.Random(4)) == generate_task(3, random.Random(4))
    state, solution = generate_state(2, random.Random(1), kind="look")
    assert state.goal.kind == "look" and solution.status == "solved"


# ---------------------------------------------------------------- episode play


def test_expert_wins_every_game_in_optimal_steps(env):
    for task in env.splits()["heldout"][:20]:
        result = play_episode(task, expert_act, max_steps=50)
        assert result.success and result.error_type is None
        assert result.sub_scores["granularity_episode"] == 1.0
        assert result.sub_scores["steps"] == result.sub_scores["optimal_steps"] == task.expected["plan_len"]


def test_failing_episode_reports_max_steps():
    seen: list[str] = []

    def idle(state: str) -> str:
        seen.append(state)
        return "jump" if len(seen) % 2 else "look"

    result = play_episode(HEAT, idle, max_steps=6)
    assert (result.success, result.score, result.error_type) == (False, 0.0, "max_steps")
    assert result.sub_scores == {
        "granularity_episode": 1.0,
        "won": 0.0,
        "steps": 6.0,
        "optimal_steps": 7.0,
        "invalid_actions": 3.0,
    }
    assert seen[0] == HEAT and len(seen) == 6


def test_episode_from_world_with_detour():
    actions = iter(["go to fridge 1", "open fridge 1", "look", "go to countertop 1"])

    def act(state: str) -> str:
        return next(actions, None) or expert_act(state)

    result = play_episode(read_state(HEAT), act)
    assert result.success and result.sub_scores["steps"] == 9.0 and result.sub_scores["invalid_actions"] == 0.0


# ---------------------------------------------------------------- upstream loader


def test_loader_reads_fixture_trials():
    skipped: list[str] = []
    tasks = load_upstream(FIXTURE, skipped=skipped)
    assert len(tasks) == 37
    assert [s.split("/")[-3] for s in skipped] == [
        "pick_and_place_with_movable_recep-Pen-Mug-Desk-305",
        "pick_heat_then_place_in_recep-PotatoSliced-None-DiningTable-18",
    ]
    assert "is not one of ALFWorld's six" in skipped[0] and "sliced" in skipped[1]
    assert tasks[0].id == "alfworld/heldout/00000" and tasks[-1].id == "alfworld/heldout/00036"
    assert all(t.origin == "official" and t.split == "heldout" and t.checker == "step_match" for t in tasks)
    heat = [t for t in tasks if t.expected["source"].startswith("valid_seen/pick_heat")]
    assert heat[0].prompt == HEAT
    assert [t.answer for t in heat] == [
        "go to countertop 1",
        "take apple 1 from countertop 1",
        "go to microwave 1",
        "heat apple 1 with microwave 1",
        "go to fridge 1",
        "open fridge 1",
        "put apple 1 in/on fridge 1",
    ]
    assert [t.expected["step"] for t in heat] == list(range(7))
    two = [t for t in tasks if "pick_two" in t.expected["source"]]
    assert two[0].prompt == TWO and two[0].expected["optimal"] == ["go to countertop 1", "go to diningtable 1"]
    assert tasks[-1].expected["source"].startswith("valid_unseen/pick_cool_then_place_in_recep-Pot")


def test_official_golds_pass_and_revalidate(env):
    for task in load_upstream(FIXTURE):
        assert env.check(task, task.answer).success
        assert task.expected["expert"] == task.answer
        verdict = env.validate(task.prompt, task.answer, task_id="x")
        assert verdict.ok and verdict.task.difficulty == task.difficulty


def test_loader_split_selection():
    unseen = load_upstream(FIXTURE / "json_2.1.1", splits=("valid_unseen",))
    assert len(unseen) == 6 and unseen[0].prompt.startswith("G: put cool pot in diningtable")


def test_loader_malformed_json_names_file_and_line():
    with pytest.raises(ValueError, match=r"trial_T20990101_000009_000009/traj_data\.json:8:3: invalid JSON"):
        load_upstream(FIXTURE / "malformed")


def test_loader_missing_key_and_missing_folder(tmp_path):
    source = FIXTURE / "json_2.1.1" / "valid_seen" / "pick_and_place_simple-Book-None-Sofa-201"
    target = tmp_path / "json_2.1.1" / "valid_seen" / source.name
    shutil.copytree(source, target)
    path = next(target.glob("trial_*/traj_data.json"))
    data = json.loads(path.read_text())
    del data["plan"]
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"traj_data\.json: missing key 'plan\.high_pddl'"):
        load_upstream(tmp_path)
    data["plan"] = {"high_pddl": [{"high_idx": 0}]}
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match=r"high_pddl\[0\]\.discrete_action"):
        load_upstream(tmp_path)
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA layout"):
        load_upstream(tmp_path / "nowhere")


def test_env_with_data_dir_uses_official_heldout():
    env = AlfworldMini(seed=0, sizes=SMALL, data_dir=str(FIXTURE))
    splits = env.splits()
    assert len(splits["heldout"]) == 37 and all(t.origin == "official" for t in splits["heldout"])
    assert len(splits["train"]) == 80 and len(splits["seed"]) == 24
    official = {t.prompt for t in splits["heldout"]}
    assert not official & {t.prompt for t in splits["train"] + splits["seed"]}
    assert env.describe()["source"] == "upstream folder"
