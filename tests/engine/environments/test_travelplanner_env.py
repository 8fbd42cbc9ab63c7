"""Tests for TravelPlanner-mini: step checker, episode scoring, solver, validator, split lengths and ladder,
loader; the splits/siblings contract shared by all five minis is in test_env_contract.py."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from genenv_engine.core.records import Task
from genenv_engine.environments.base import SplitSizes
from genenv_engine.environments.travelplanner.constraints import COMMONSENSE, aggregate, score_plan
from genenv_engine.environments.travelplanner.db import CUISINES, Query, sandbox, schedule
from genenv_engine.environments.travelplanner.formats import (
    query_from_upstream,
    query_to_upstream,
    render_compact,
    to_upstream_plan,
)
from genenv_engine.environments.travelplanner.mini import (
    ERROR_TYPES,
    TravelPlannerMini,
    check_step,
    read_prompt,
    render_prompt,
)
from genenv_engine.environments.travelplanner.solver import candidates, replay, solve
from genenv_engine.environments.travelplanner.upstream import LiteralError, load_upstream, parse_literal

SMALL = SplitSizes(seed=24, train=80, heldout=40)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "travelplanner"
DB = sandbox()


@pytest.fixture(scope="module")
def env() -> TravelPlannerMini:
    return TravelPlannerMini(seed=0, sizes=SMALL)


def make(env: TravelPlannerMini, prompt: str) -> Task:
    """A step task built by the validator from a hand-written prompt and its own recomputed gold."""
    step = read_prompt(prompt)
    gold = candidates(step.query, replay(step.query, step.prefix, DB), step.slot, DB)
    for code in gold:
        verdict = env.validate(prompt, code, task_id="t/0")
        if verdict.ok:
            return verdict.task
    raise AssertionError(f"no valid answer for {prompt}")


TRIP = "A>B 1d 1p $500 | ?go"
TRIP_BF = "A>B 1d 1p $500 | dAB ?bfast"
THREE = "A>B 3d 1p $900 | dAB A2 Aa A4 A5 ?stay"


# ---------------------------------------------------------------- step checker


def test_gold_and_other_feasible_answers_pass(env):
    task = make(env, TRIP)
    assert task.answer == "dAB"
    assert task.expected["gold"] == "dAB" and task.expected["field"] == "go" and task.expected["day"] == 1
    for answer in ("dAB", " FAB1 ", "FAB2", "tAB"):
        result = env.check(task, answer)
        assert (result.success, result.score, result.error_type) == (True, 1.0, None), answer
    assert env.check(task, "dAB").sub_scores == dict.fromkeys(
        ("parsed", "in_sandbox", "commonsense", "hard", "completable"), 1.0
    )
    assert make(env, TRIP_BF).answer == "B1"  # B1 ($9) is the cheapest restaurant in Arden or Brook


STEP_CASES = [
    (TRIP, "zz!", "parse_error"),
    (TRIP, "", "parse_error"),
    (TRIP, "b1", "parse_error"),
    (TRIP, "B1", "wrong_kind"),
    (TRIP_BF, "Ba", "wrong_kind"),
    (TRIP, "FAB9", "not_in_sandbox"),
    (TRIP, "dAG", "not_in_sandbox"),
    (TRIP_BF, "B9", "not_in_sandbox"),
    (TRIP, "-", "violates_commonsense:complete_information"),
    (TRIP_BF, "C1", "violates_commonsense:within_current_city"),
    (THREE, "Ah1", "violates_commonsense:within_current_city"),
    (TRIP, "FBA1", "violates_commonsense:reasonable_city_route"),
    (TRIP, "FAC1", "violates_commonsense:reasonable_city_route"),
    ("A>B 1d 1p $500 | dAB B1 Ba ?lunch", "B1", "violates_commonsense:diverse_restaurants"),
    ("A>B 3d 1p $900 | dAB A2 Ba A4 A5 Bh2 / B3 ?sight", "Ba", "violates_commonsense:diverse_attractions"),
    (
        "A>B 3d 1p $900 | dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / ?go",
        "FBA1",
        "violates_commonsense:non_conflicting_transportation",
    ),
    ("K>C 3d 1p $2000 | dKC C1 Ca C2 C3 Ch1 / C4 Cb C5 C6 ?stay", "Ch2", "violates_commonsense:minimum_nights"),
    ("K>X*2 5d 1p $3000 | dKC C1 Ca C2 C3 Ch2 / C4 Cb C5 C6 ?stay", "Ch1", "violates_commonsense:minimum_nights"),
    ("A>B 3d 1p $900 h:pets | dAB A2 Aa A4 A5 ?stay", "Bh3", "violates_hard:room_rule"),
    ("A>B 3d 1p $1500 r:entire | dAB A2 Aa A4 A5 ?stay", "Bh2", "violates_hard:room_type"),
    ("A>B 3d 1p $900 t:noflight | ?go", "FAB1", "violates_hard:transportation"),
    ("A>B 1d 1p $110 | ?go", "FAB1", "violates_hard:budget"),
    ("A>B 1d 1p $500 c:mex | dAB A2 Aa B1 ?dinner", "B3", "infeasible_continuation"),
    ("A>B 1d 1p $500 c:mex | dAB A2 Aa B1 ?dinner", "A4", "infeasible_continuation"),
]


@pytest.mark.parametrize("prompt, response, error", STEP_CASES)
def test_each_step_error_type(env, assert_check_fails, prompt, response, error):
    assert_check_fails(env, make(env, prompt), response, error)


def test_step_fixes_pass(env):
    assert env.check(make(env, "A>B 1d 1p $500 c:mex | dAB A2 Aa B1 ?dinner"), "B7").success
    assert env.check(make(env, "A>B 3d 1p $900 h:pets | dAB A2 Aa A4 A5 ?stay"), "Bh2").success
    assert env.check(make(env, "K>C 3d 1p $2000 | dKC C1 Ca C2 C3 Ch1 / C4 Cb C5 C6 ?stay"), "Ch1").success
    assert env.check(make(env, "A>B 3d 1p $900 | dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / ?go"), "dBA").success


@pytest.mark.parametrize("response", ["__import__('os')", "B1;B2", "B1 B2", "x" * 500, "FAB1\nrm -rf /"])
def test_hostile_responses_are_parse_errors(env, response):
    result = env.check(make(env, TRIP), response)
    assert (result.success, result.score, result.error_type) == (False, 0.0, "parse_error")


def test_partial_credit_follows_stages(env):
    task = make(env, TRIP)
    assert env.check(task, "FAB9").score == pytest.approx(0.2)
    assert env.check(task, "FAC1").score == pytest.approx(0.4)
    budget = make(env, "A>B 1d 1p $110 | ?go")
    assert env.check(budget, "FAB1").sub_scores == {
        "parsed": 1.0,
        "in_sandbox": 1.0,
        "commonsense": 1.0,
        "hard": 1.0,
        "completable": 0.0,
    }


# ---------------------------------------------------------------- episode scoring


def _gold(query: Query) -> str:
    return render_compact(query, solve(query, (), DB).codes)


DAY = Query("A", "B", 1, 1, 1, 500)
TRI = Query("A", "B", 3, 1, 1, 900)


def test_gold_plan_passes_all_checks():
    plan = _gold(TRI)
    assert plan == "dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / dBA A6 Ab A8 B1"
    result = score_plan(TRI, plan)
    assert result.success and result.error_type is None
    assert {k: result.sub_scores[k] for k in ("cs_passed", "cs_total", "hd_passed", "hd_total", "unchecked")} == {
        "cs_passed": 8.0,
        "cs_total": 8.0,
        "hd_passed": 1.0,
        "hd_total": 1.0,
        "unchecked": 0.0,
    }
    assert all(result.sub_scores[f"cs:{c}"] == 1.0 for c in COMMONSENSE)


EPISODE_CASES = [
    (DAY, "nonsense words", "parse_error"),
    (DAY, "dAB A2 Aa B9 B7 dBA", "not_in_sandbox"),
    (DAY, "dAB A2 Aa - B7 dBA", "violates_commonsense:complete_information"),
    (TRI, "dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2", "violates_commonsense:complete_information"),
    (DAY, "dAB A2 Aa C1 B7 dBA", "violates_commonsense:within_current_city"),
    (DAY, "dAB B2 Ba B1 B7 dBC", "violates_commonsense:reasonable_city_route"),
    (DAY, "dAB A2 Aa B1 B1 dBA", "violates_commonsense:diverse_restaurants"),
    (TRI, "dAB A2 Aa A4 A5 Bh2 / B3 Aa B5 B7 Bh2 / dBA A6 Ab A8 B1", "violates_commonsense:within_current_city"),
    (TRI, "dAB A2 Ba A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / dBA A6 Ab A8 B1", "violates_commonsense:diverse_attractions"),
    (DAY, "dAB A2 Aa B1 B7 FBA1", "violates_commonsense:non_conflicting_transportation"),
    (
        Query("K", "C", 3, 1, 1, 2000),
        "dKC C1 Ca C2 C3 Ch1 / C4 Cb C5 C6 Ch2 / dCK K6 Cc K7 K8",
        "violates_commonsense:minimum_nights",
    ),
    (Query("A", "B", 3, 1, 1, 300), None, "violates_hard:budget"),
    (
        Query("A", "B", 3, 1, 1, 900, house_rule="pets"),
        "dAB A2 Aa A4 A5 Bh3 / B3 Ba B5 B7 Bh3 / dBA A6 Ab A8 B1",
        "violates_hard:room_rule",
    ),
    (Query("A", "B", 3, 1, 1, 900, room_type="entire"), None, "violates_hard:room_type"),
    (Query("A", "B", 3, 1, 1, 900, cuisines=("french",)), None, "violates_hard:cuisine"),
    (Query("A", "B", 3, 1, 1, 900, transport="nodrive"), None, "violates_hard:transportation"),
]


def _episode_task(query: Query) -> Task:
    return Task(
        id="tp/ep",
        benchmark="travelplanner",
        prompt="plan it",
        answer="",
        expected={"query": query_to_upstream(query, DB)},
        checker="tp_constraints",
        granularity="episode",
    )


@pytest.mark.parametrize("query, plan, error", EPISODE_CASES)
def test_each_episode_error_type(env, query, plan, error):
    result = env.check(_episode_task(query), plan or _gold(TRI))
    assert (result.success, result.error_type) == (False, error)
    assert result.sub_scores["final"] == 0.0


def test_error_types_are_closed_and_all_covered():
    covered = {e for _, _, e in STEP_CASES} | {e for _, _, e in EPISODE_CASES}
    assert covered == set(ERROR_TYPES)
    assert len(ERROR_TYPES) == 3 + 7 + 5 + 1


def test_items_must_be_of_their_field_kind():
    assert score_plan(TRI, "dAB A2 Aa A4 A5 B3 / B3 Ba B5 B7 Bh2 / dBA A6 Ab A8 B1").error_type == "parse_error"
    records = to_upstream_plan(TRI, solve(TRI, (), DB).codes, DB)
    records[0]["accommodation"] = records[1]["lunch"]  # a restaurant's "Name, City" as the stay
    assert score_plan(TRI, records).error_type == "not_in_sandbox"
    assert score_plan(TRI, "[" * 5000).error_type == "parse_error"


def test_hard_checks_gated_by_sandbox_and_completeness():
    q = Query("A", "B", 3, 1, 1, 900, house_rule="pets")
    result = score_plan(q, "dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / dBA A6 Ab A8 B9")
    assert result.error_type == "not_in_sandbox"
    assert (result.sub_scores["hd_passed"], result.sub_scores["hd_total"]) == (0.0, 2.0)
    assert result.sub_scores["cs_micro"] == pytest.approx(7 / 8)
    assert result.sub_scores["four_rate_mean"] == pytest.approx((7 / 8 + 0 + 0 + 0) / 4)


def test_upstream_plan_records_score_like_compact():
    records = to_upstream_plan(TRI, solve(TRI, (), DB).codes, DB)
    assert records[0]["current_city"] == "from Arden to Brook"
    assert records[0]["transportation"].startswith("Self-driving, from Arden to Brook")
    assert records[1]["current_city"] == "Brook" and records[1]["transportation"] == "-"
    assert records[2]["accommodation"] == "-"
    assert score_plan(TRI, records).success
    assert score_plan(query_to_upstream(TRI, DB), records).success
    records[1]["lunch"] = "Nowhere Diner, Brook"
    assert score_plan(TRI, records).error_type == "not_in_sandbox"


def test_aggregate_rates():
    plans = [_gold(TRI), "dAB A2 Aa A4 A5 Bh2 / B3 Ba B5 B7 Bh2 / dBA A6 Ab A8 A6", "junk"]
    rates = aggregate([score_plan(TRI, p) for p in plans])
    assert rates["n"] == 3 and rates["delivery_rate"] == pytest.approx(2 / 3)
    assert rates["cs_micro"] == pytest.approx((8 + 7 + 0) / 24)
    assert rates["cs_macro"] == pytest.approx(1 / 3)
    assert rates["hd_micro"] == pytest.approx((1 + 1 + 0) / 3)
    assert rates["hd_macro"] == pytest.approx(2 / 3)
    assert rates["final_pass"] == pytest.approx(1 / 3)
    assert rates["four_rate_mean"] == pytest.approx((15 / 24 + 1 / 3 + 2 / 3 + 2 / 3) / 4)
    assert aggregate([]) == {}


def test_query_round_trip():
    q = Query("A", "Y", 5, 2, 3, 2400, "children", ("thai", "mex"), "notshared", "nodrive", ("2022-03-01",) * 5)
    row = query_to_upstream(q, DB)
    assert row["local_constraint"] == {
        "house rule": "children under 10",
        "cuisine": ["Thai", "Mexican"],
        "room type": "not shared room",
        "transportation": "no self-driving",
    }
    assert (row["dest"], row["level"]) == ("Yarrow", "hard")
    assert query_from_upstream(row, DB) == q


# ---------------------------------------------------------------- solver


def _brute_min(query: Query, prefix: tuple[str, ...] = ()) -> int | None:
    """Cheapest valid completion by exhaustive branch-and-bound search, judged by :func:`score_plan`."""
    slots, best = schedule(query.days, query.cities), [10**9]
    unlimited = replace(query, budget=10**6)

    def walk(plan: list[str], cost: int) -> None:
        if cost >= best[0]:
            return
        if len(plan) == len(slots):
            if score_plan(unlimited, render_compact(query, plan)).success:
                best[0] = cost
            return
        slot = slots[len(plan)]
        options = candidates(query, replay(query, tuple(plan), DB), slot, DB)
        for code in options[:2] if slot.kind == "sight" else options:  # attractions are free: two suffice
            walk(plan + [code], cost + DB.item_cost(code, query.people))

    walk(list(prefix), sum(DB.item_cost(c, query.people) for c in prefix))
    return best[0] if best[0] < 10**9 else None


@pytest.mark.parametrize(
    "query, prefix",
    [
        (Query("L", "C", 1, 1, 2, 0, cuisines=("ital", "mex")), ()),
        (Query("G", "J", 1, 1, 4, 0, cuisines=("bbq", "jpn")), ("tGJ", "G2")),
        (Query("C", "J", 1, 1, 5, 0, transport="noflight"), ()),
        (Query("K", "C", 3, 1, 2, 0, cuisines=("thai",)), tuple("dKC C1 Ca C2 C3 Ch1 C4 Cb C5 C6".split())),
        (
            Query("K", "X", 5, 2, 2, 0, house_rule="pets"),
            tuple("dKC C1 Ca C2 C3 Ch1 C4 Cb C5 C6 Ch1 dCB B1 Ba B2 B3 Bh2 B4 Bb B5 B6".split()),
        ),
    ],
)
def test_solver_matches_exhaustive_search(query, prefix):
    found = solve(query, prefix, DB)
    assert (found.cost if found else None) == _brute_min(query, prefix)


def test_solver_gold_plans_pass_scoring(env):
    for task in env.splits()["train"][:40]:
        step = read_prompt(task.prompt)
        plan = task.expected["gold_plan"]
        assert plan.startswith(render_compact(step.query, step.prefix))
        assert score_plan(step.query, plan).success, task.prompt


# ---------------------------------------------------------------- validator


def test_validator_accepts_and_recomputes(env):
    parent = env.splits()["seed"][0]
    verdict = env.validate(
        "A>B 3d 2p $1500 h:pets | dAB A2 Aa A4 A5 ?stay",
        "Bh1",
        task_id="gen/e1/0001",
        parent=parent,
        epoch=1,
        generator="sim@e1",
    )
    assert verdict.ok and verdict.reason == ""
    task = verdict.task
    assert task.answer == "Bh2"
    assert (task.split, task.origin, task.parent_id, task.epoch, task.generator, task.checker, task.granularity) == (
        "generated",
        "generated",
        parent.id,
        1,
        "sim@e1",
        "tp_constraints",
        "step",
    )
    assert task.difficulty["level"] == 2
    features = task.difficulty["features"]
    assert {
        k: features[k] for k in ("days", "cities", "people", "n_constraints", "tight", "step", "n_steps", "field")
    } == {
        "days": 3,
        "cities": 1,
        "people": 2,
        "n_constraints": 1,
        "tight": False,
        "step": 5,
        "n_steps": 16,
        "field": "stay",
    }
    assert task.expected["query"]["local_constraint"]["house rule"] == "pets"
    assert task.expected["prefix"] == ["dAB", "A2", "Aa", "A4", "A5"]


@pytest.mark.parametrize(
    "prompt, answer, reason",
    [
        (TRIP, "FAC1", "answer_mismatch: violates_commonsense:reasonable_city_route"),
        (TRIP, "??", "answer_mismatch: parse_error"),
        ("A>B 1d 1p $500", "dAB", "bad_format"),
        ("lorem ipsum => x", "dAB", "bad_format"),
        ("A>Q 1d 1p $500 | ?go", "dAB", "bad_query"),
        ("A>A 1d 1p $500 | ?go", "dAB", "bad_query"),
        ("A>X*2 5d 1p $5000 | ?go", "dAB", "bad_query"),
        ("A>B 1d 1p $500 h:pets | ?go", "dAB", "bad_query"),
        ("A>B 3d 1p $500 r:entire h:pets | ?go", "dAB", "bad_query"),
        ("A>B 3d 1p $500 c:mex,thai | ?go", "dAB", "bad_query"),
        ("A>B 3d 1p $500 c:sushi | ?go", "dAB", "bad_query"),
        ("A>B 1d 1p $500 | dAB A2 Aa B1 B7", "dBA", "bad_plan"),
        ("A>B 1d 1p $500 | dAB A2 / ?go", "dBA", "bad_plan"),
        ("A>B 1d 1p $500 | dAB A2 Aa B1 B7 dBA / ?go", "dAB", "bad_plan"),
        ("A>B 1d 1p $500 | dAB A2 Aa B1 ?lunch", "B7", "wrong_field"),
        ("A>B 1d 1p $500 | dAB C2 ?sight", "Ba", "bad_prefix: violates_commonsense:within_current_city"),
        ("A>B 1d 1p $500 | FAB9 ?bfast", "B1", "bad_prefix: not_in_sandbox"),
        ("A>B 1d 1p $120 | FAB1 ?bfast", "B1", "infeasible_prefix"),
        ("A>B 1d 1p $500 | ?go" + " " * 200, "dAB", "too_long"),
    ],
)
def test_validator_rejects(env, assert_rejected, prompt, answer, reason):
    assert_rejected(env, prompt, answer, reason)


def test_render_and_read_are_inverse():
    q = read_prompt("A>Y*2 5d 2p $2400 h:pets c:thai r:notshared | ?go").query
    for k in (0, 5, 6, 11, 26):
        prefix = solve(q, (), DB).codes[:k]
        step = read_prompt(render_prompt(q, prefix))
        assert step.prefix == prefix and step.query == q


# ---------------------------------------------------------------- splits


def test_splits_short(env):
    tasks = [t for ts in env.splits().values() for t in ts]
    assert max(len(t.prompt) for t in tasks) <= 180
    assert max(len(t.prompt) for t in tasks if t.level == 1) <= 60
    assert max(len(t.answer) for t in tasks) <= 4


def test_level_features_follow_the_ladder(env):
    for task in (t for ts in env.splits().values() for t in ts):
        f, level = task.difficulty["features"], task.level
        assert (f["days"], f["cities"]) == {1: (1, 1), 2: (3, 1), 3: (3, 1), 4: (5, 2)}[level]
        assert f["n_constraints"] in {1: (0,), 2: (1,), 3: (0, 1, 2), 4: (3,)}[level]
        assert level != 3 or f["n_constraints"] == 2 or f["tight"]
        assert level == 3 or not f["tight"]
        assert 0 <= f["step"] < f["n_steps"] == len(schedule(f["days"], f["cities"]))
        n = f["n_constraints"]
        assert task.expected["query"]["level"] == ("easy" if n == 0 else "medium" if n <= 2 else "hard")


def test_gold_is_the_cheapest_completable_field(env):
    for task in env.splits()["heldout"][:20]:
        step = read_prompt(task.prompt)
        options = candidates(step.query, replay(step.query, step.prefix, DB), step.slot, DB)
        cheaper = options[: options.index(task.answer)]
        assert all(not check_step(step.query, step.prefix, c).success for c in cheaper)


def test_sandbox_shape():
    assert len(CUISINES) == 8 and sorted(DB.regions) == ["X", "Y", "Z"]
    for city in DB.cities:
        assert sum(r.city == city for r in DB.restaurants.values()) == 8
        assert sum(a.city == city for a in DB.attractions.values()) == 5
        stays = [s for s in DB.stays.values() if s.city == city]
        assert len(stays) == 4 and {s.room_type for s in stays} == {"entire", "private", "shared"}
        assert len({c for r in DB.restaurants.values() if r.city == city for c in r.cuisines}) >= 5
    assert DB is sandbox() and DB.item_cost("FAB1", 2) == 2 * DB.legs["FAB1"].unit_cost


# ---------------------------------------------------------------- upstream loader


def test_loader_reads_the_fixture():
    tasks = load_upstream(FIXTURES)
    assert [t.id for t in tasks] == [f"travelplanner/heldout/{i:05d}" for i in range(3)]
    assert all(
        t.origin == "official" and t.split == "heldout" and t.granularity == "episode" and t.checker == "tp_constraints"
        for t in tasks
    )
    assert [t.level for t in tasks] == [2, 4, 3]
    first = tasks[0]
    assert first.prompt.startswith("Please plan a 3-day trip from Fernvale to Ostara")
    assert first.expected["query"]["local_constraint"]["cuisine"] is None
    assert first.expected["query"]["date"] == ["2022-03-16", "2022-03-17", "2022-03-18"]
    assert len(first.expected["annotated_plan"]) == 3 and first.answer.startswith('[{"days": 1')
    assert tasks[1].expected["query"]["budget"] == 4200
    assert tasks[1].difficulty["features"] == {
        "days": 5,
        "cities": 2,
        "people": 3,
        "n_constraints": 3,
        "upstream_level": "hard",
    }
    assert tasks[1].answer == "" and tasks[1].expected["annotated_plan"] is None


def test_official_heldout_is_scored_without_the_database():
    env = TravelPlannerMini(seed=0, sizes=SplitSizes(seed=2, train=4, heldout=4), data_dir=str(FIXTURES))
    heldout = env.splits()["heldout"]
    assert len(heldout) == 3 and env.describe()["source"] == "upstream folder"
    good = env.check(heldout[0], heldout[0].answer)
    assert good.success and good.sub_scores["unchecked"] == 3.0 and good.sub_scores["cs_total"] == 6.0
    plan = heldout[0].expected["annotated_plan"]
    repeated = [dict(day) for day in plan]
    repeated[1]["lunch"] = repeated[0]["lunch"]
    assert env.check(heldout[0], str(repeated)).error_type == "violates_commonsense:diverse_restaurants"
    flown = env.check(heldout[2], "[" + ",".join(['{"current_city": "x"}'] * 3) + "]")
    assert flown.error_type == "violates_commonsense:complete_information"
    junk = env.check(heldout[1], "no plan")
    assert (junk.success, junk.error_type, junk.score) == (False, "parse_error", 0.0)


def test_loader_errors_name_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"bad[/\\]validation\.csv:3: bad local_constraint: not a literal"):
        load_upstream(FIXTURES / "bad")
    (tmp_path / "validation.csv").write_text("org,dest,days\nA,B,3\n")
    with pytest.raises(ValueError, match=r"validation\.csv: missing column\(s\) visiting_city_number"):
        load_upstream(tmp_path)
    with pytest.raises(FileNotFoundError, match="no TravelPlanner query CSV"):
        load_upstream(tmp_path / "nowhere")
    header = (FIXTURES / "validation.csv").read_text().splitlines()[0]
    (tmp_path / "train.csv").write_text(header + "\nA,B,three,1,[],1,{},100,q,easy,,\n")
    with pytest.raises(ValueError, match=r"train\.csv:2: days is not a number"):
        load_upstream(tmp_path / "train.csv")


def test_literal_walker_never_executes(tmp_path):
    marker = tmp_path / "pwned"
    for text in (f"open('{marker}', 'w')", "{**{'a': 1}}", "[x for x in 'ab']", "1 + 2", "lambda: 0"):
        with pytest.raises(LiteralError):
            parse_literal(text)
    assert not marker.exists()
    assert parse_literal("[{'a': (1, -2.5, None, True)}]") == [{"a": [1, -2.5, None, True]}]
