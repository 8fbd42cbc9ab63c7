"""Engine test helpers shared by the environment tests (the per-benchmark files and the contract file)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from genenv_engine.environments.base import Environment
from genenv_engine.records import Task


def _golds_revalidate(env: Environment, tasks: Iterable[Task]) -> None:
    for task in tasks:
        assert env.check(task, task.answer).success, task.prompt
        verdict = env.validate(task.prompt, task.answer, task_id=task.id)
        assert verdict.ok, (task.prompt, verdict.reason)
        assert (verdict.task.answer, verdict.task.expected, verdict.task.difficulty) == (
            task.answer, task.expected, task.difficulty)


@pytest.fixture(scope="session")
def golds_revalidate() -> Callable[[Environment, Iterable[Task]], None]:
    """``golds_revalidate(env, tasks)`` asserts each gold passes the checker and the validator, on the
    task's own prompt, rebuilds the same answer, expected gold and difficulty."""
    return _golds_revalidate
