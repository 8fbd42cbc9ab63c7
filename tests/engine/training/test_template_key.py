"""The duplicate cap asks the environment what makes two tasks one template (`Environment.template_key`): the
default masks numbers as before; the countdown example keeps its distinct numeric tasks and caps reorderings of
one puzzle; the loop's cap uses each benchmark's own key."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from genenv_engine.core.records import Task
from genenv_engine.environments import get_environment
from genenv_engine.training.simulator import Generation, cap_duplicates, near_duplicate_key

EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "countdown"


@pytest.fixture
def countdown(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    import countdown_env

    yield countdown_env.Countdown()
    sys.modules.pop("countdown_env", None)


def _gens(prompts: list[str]) -> list[Generation]:
    seed = Task(id="countdown/seed/00000", benchmark="countdown", prompt="numbers: 1 2 | target: 3", answer="1 + 2")
    return [
        Generation(
            seed,
            "b",
            "ctx",
            p,
            [1],
            Task(id=f"g{i}", benchmark="countdown", prompt=p, answer="x", split="generated", origin="generated"),
        )
        for i, p in enumerate(prompts)
    ]


PROMPTS = [
    "numbers: 3 5 8 | target: 64",
    "numbers: 4 6 9 | target: 19",
    "numbers: 2 7 7 | target: 16",
    "numbers: 8 5 3 | target: 64",
    "numbers: 5 8 3 | target: 64",
    "numbers: 1 1 9 | target: 11",
]


def test_the_default_key_masks_numbers_as_the_cap_always_did():
    env = get_environment("bfcl")
    prompt = env.splits()["train"][0].prompt
    assert env.template_key(prompt) == near_duplicate_key(prompt) and "#" in env.template_key(prompt)
    assert near_duplicate_key("numbers: 3 5 8 | target: 64") == "numbers: # # # | target: #"


def test_countdown_keeps_distinct_numeric_tasks_and_caps_reorderings(countdown):
    assert countdown.template_key("numbers: 8 5 3 | target: 64") == "[3, 5, 8] -> 64"
    capped, info = cap_duplicates(_gens(PROMPTS), set(), Counter(), cap=2, key=countdown.template_key)
    assert [g.task.valid for g in capped] == [True, True, True, True, False, True]
    assert capped[4].task.reason == "duplicate_cap: 2 tasks share this template" and info["duplicates_rejected"] == 1
    masked, _ = cap_duplicates(_gens(PROMPTS), set(), Counter(), cap=2)  # the default key: one template for all
    assert [g.task.valid for g in masked] == [True, True, False, False, False, False]


def test_the_loop_caps_each_benchmark_by_its_own_key(countdown):
    from types import SimpleNamespace as Fake

    from genenv_engine.config import load_config
    from genenv_engine.method.strategies import validate_and_store

    stored: list[Task] = []
    pool = [Task(id="g0", benchmark="countdown", prompt="numbers: 9 9 | target: 18", answer="9 + 9")]
    store = Fake(pool=lambda names: pool, insert_tasks=lambda tasks, batch_id: stored.extend(tasks))
    gens = _gens(PROMPTS)
    ep = Fake(
        session=Fake(config=load_config("micro"), store=store),
        envs={"countdown": countdown},
        epoch=1,
        executor=Fake(validate=lambda drafts, **_: gens),
        emit=lambda event: None,
    )
    out, _ = validate_and_store(ep, gens, "generated")
    assert [t.valid for t in stored] == [True, True, True, True, False, True] and out["valid"] == 5
