"""A plugin whose ``check`` hands the reply to code that runs it sets ``sandboxed_check``: genenv then calls the check
in the contained worker, where the reply writes nothing and starts nothing (the same check called directly does
both), a check that does not end fails as ``score_timeout``, and a gold still scores."""

from __future__ import annotations

import os

import pytest

from genenv_engine import environments
from genenv_engine.environments.sandbox import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None, reason=f"no containment: {unavailable_reason()}")

EVALUATING = '''
from countdown_env import Countdown


class Evaluating(Countdown):
    """Countdown whose check first evaluates the reply as Python (what a careless third-party scorer does)."""

    name = "evaluating"
    sandboxed_check = True

    def check(self, task, response):
        if response.startswith("run:"):
            eval(response[4:])
        if response == "forever":
            while True:
                pass
        return super().check(task, response)
'''


@pytest.fixture
def evaluating(plugin_module):
    plugin_module("evaluating_env", EVALUATING)
    (name,), _ = environments.resolve_benchmarks(["evaluating_env:Evaluating"], {})
    return environments.get_environment(name, 0, environments.SplitSizes(seed=4, train=4, heldout=4))


def test_the_reply_acts_only_when_the_check_is_called_outside_the_worker(evaluating, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    task = evaluating.splits()["train"][0]
    replies = [f"run:open({str(out / 'written')!r}, 'w')", f"run:__import__('os').system('touch {out / 'spawned'}')"]
    for reply in replies:
        result = evaluating.check(task, reply)
        assert (result.success, result.error_type is not None) == (False, True)
    assert os.listdir(out) == []
    assert evaluating.check(task, task.answer).success
    for reply in replies:  # the control: the class's own check, in this process
        type(evaluating).check(evaluating, task, reply)
    assert sorted(os.listdir(out)) == ["spawned", "written"]


def test_a_check_that_does_not_end_fails_as_score_timeout_and_the_next_one_scores(evaluating):
    from genenv_engine.environments import sandboxed_check

    sandboxed_check(evaluating, seconds=1)
    task = evaluating.splits()["train"][0]
    result = evaluating.check(task, "forever")
    assert (result.success, result.error_type) == (False, "score_timeout")
    assert evaluating.check(task, task.answer).success
