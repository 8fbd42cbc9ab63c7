"""The contract every built-in ladder environment keeps, checked on all five minis: seeded, disjoint
splits in level quarters with stable ids; every gold passes the checker and re-validates; the validator's
shared guards; sibling pairs that re-validate, stay within one level and keep the source's family.

Benchmark-specific behaviour (checkers, validator reasons, ladders, loaders) is tested in ``test_<name>_env.py``.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from genenv_engine.core.records import Task
from genenv_engine.environments.alfworld import AlfworldMini
from genenv_engine.environments.apibank import ApiBankMini
from genenv_engine.environments.bamboogle import BamboogleMini
from genenv_engine.environments.base import SEP, LadderEnvironment, SplitSizes
from genenv_engine.environments.bfcl import BfclMini
from genenv_engine.environments.travelplanner import TravelPlannerMini


@dataclass(frozen=True)
class Case:
    cls: type[LadderEnvironment]
    sizes: SplitSizes
    checker: str
    n_siblings: int
    family: Callable[[Task], object]
    """What a sibling shares with its source."""


CASES = {
    "bfcl": Case(
        BfclMini, SplitSizes(seed=30, train=120, heldout=40), "bfcl_ast", 40, lambda t: t.expected["calls"][0]["name"]
    ),
    "apibank": Case(
        ApiBankMini,
        SplitSizes(seed=30, train=120, heldout=40),
        "apibank_exec",
        40,
        lambda t: t.difficulty["features"]["target"],
    ),
    "alfworld": Case(
        AlfworldMini, SplitSizes(seed=24, train=80, heldout=40), "step_match", 30, lambda t: t.expected["task_type"]
    ),
    "bamboogle": Case(
        BamboogleMini,
        SplitSizes(seed=30, train=120, heldout=40),
        "qa_em_f1",
        40,
        lambda t: t.difficulty["features"]["action"],
    ),
    "travelplanner": Case(
        TravelPlannerMini, SplitSizes(seed=24, train=80, heldout=40), "tp_constraints", 16, lambda t: t.prompt[0]
    ),  # the origin city
}


@pytest.fixture(scope="module", params=list(CASES))
def case(request) -> Case:
    return CASES[request.param]


@pytest.fixture(scope="module")
def env(case) -> LadderEnvironment:
    return case.cls(seed=0, sizes=case.sizes)


def prompts_of(env: LadderEnvironment) -> dict[str, list[str]]:
    return {k: [t.prompt for t in v] for k, v in env.splits().items()}


# ---------------------------------------------------------------- splits


def test_splits_sizes_levels_and_ids(env, case):
    splits = env.splits()
    assert {k: len(v) for k, v in splits.items()} == {
        "seed": case.sizes.seed,
        "train": case.sizes.train,
        "heldout": case.sizes.heldout,
    }
    for name in ("train", "heldout"):
        counts = [sum(t.level == lv for t in splits[name]) for lv in (1, 2, 3, 4)]
        assert counts == [len(splits[name]) // 4] * 4
    assert {t.level for t in splits["seed"]} == {2, 3, 4}
    assert splits["train"][42].id == f"{env.name}/train/00042"
    for name, tasks in splits.items():
        assert [t.id for t in tasks] == [f"{env.name}/{name}/{i:05d}" for i in range(len(tasks))]
        assert all(
            (t.benchmark, t.split, t.origin, t.checker, t.granularity) == (env.name, name, "seed", case.checker, "step")
            for t in tasks
        )


def test_splits_deterministic_and_seeded(env, case):
    prompts = prompts_of(env)
    assert prompts == prompts_of(case.cls(seed=0, sizes=case.sizes))
    other = prompts_of(case.cls(seed=1, sizes=case.sizes))
    assert prompts["train"] != other["train"] and prompts["heldout"] != other["heldout"]
    assert env.splits() is not env.splits() and env.splits()["train"] == env.splits()["train"]


def test_splits_disjoint_by_prompt(env):
    all_prompts = [p for ps in prompts_of(env).values() for p in ps]
    assert len(set(all_prompts)) == len(all_prompts)
    assert not any(SEP in p for p in all_prompts)


def test_every_gold_passes_and_revalidates(env, golds_revalidate):
    golds_revalidate(env, (t for ts in env.splits().values() for t in ts))


def test_describe_and_bucket(env, case):
    assert env.describe() == {
        "name": env.name,
        "granularity": "step",
        "source": "built-in mini",
        "sizes": {"heldout": case.sizes.heldout, "train": case.sizes.train, "seed": case.sizes.seed},
    }
    task = env.splits()["train"][0]
    assert env.bucket(task) == f"L{task.level}"


# ---------------------------------------------------------------- validator guards


def test_validator_rejects_copy_of_parent(env):
    parent = env.splits()["seed"][3]
    verdict = env.validate(parent.prompt, parent.answer, task_id="gen/x", parent=parent)
    assert (verdict.ok, verdict.reason, verdict.task) == (False, "copy_of_parent", None)


def test_validator_rejects_too_long(env):
    task = env.splits()["train"][0]
    verdict = env.validate(task.prompt + " " * 200, task.answer, task_id="gen/x")
    assert not verdict.ok and verdict.task is None and verdict.reason.startswith("too_long")


def test_validator_through_simulator_text(env):
    task = env.splits()["train"][5]
    prompt, answer = env.parse_generation(env.simulator_text(task))
    assert env.validate(prompt, answer, task_id="g").task.answer == task.answer


def test_validator_labels_generated_tasks(env):
    parent, task = env.splits()["seed"][0], env.splits()["train"][7]
    verdict = env.validate(task.prompt, task.answer, task_id="gen/e1/0001", parent=parent, epoch=1, generator="sim@e1")
    assert verdict.ok and verdict.reason == ""
    assert (
        verdict.task.id,
        verdict.task.split,
        verdict.task.origin,
        verdict.task.parent_id,
        verdict.task.epoch,
        verdict.task.generator,
    ) == ("gen/e1/0001", "generated", "generated", parent.id, 1, "sim@e1")


# ---------------------------------------------------------------- siblings


def test_sibling_pairs(env, case):
    n = case.n_siblings
    seeds = env.splits()["seed"]
    pairs = env.sibling_pairs(seeds, random.Random(5), n)
    assert len(pairs) == n
    same_level = 0
    for source, sibling in pairs:
        assert case.family(sibling) == case.family(source)
        assert abs(sibling.level - source.level) <= 1
        assert sibling.prompt != source.prompt and sibling.parent_id == source.id
        assert (sibling.split, sibling.origin, sibling.generator) == ("generated", "generated", "builtin-sibling")
        verdict = env.validate(sibling.prompt, sibling.answer, task_id="x", parent=source)
        assert verdict.ok and verdict.task.answer == sibling.answer
        same_level += sibling.level == source.level
    assert 0 < same_level < n
    assert [b.id for _, b in pairs] == [f"{env.name}/sib/{i:05d}" for i in range(n)]
    again = env.sibling_pairs(seeds, random.Random(5), n)
    assert [b.prompt for _, b in again] == [b.prompt for _, b in pairs]


def test_sibling_pairs_need_a_source(env):
    assert env.sibling_pairs([], random.Random(0), 0) == []
    with pytest.raises(ValueError):
        env.sibling_pairs([], random.Random(0), 1)


# ---------------------------------------------------------------- genenv env check


def test_genenv_env_check_passes(case, env):
    from genenv_engine.interfaces.conformance import check_environment

    report = check_environment(env.name, sizes=case.sizes, samples=60)
    assert [failure.line for failure in report.failures] == [] and "siblings" in report.checked
