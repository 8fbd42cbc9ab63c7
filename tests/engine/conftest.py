"""Engine test helpers: the environment checks shared by the per-benchmark files and the contract file, a plugin
module written beside the countdown example, and a small grouped-query Llama for the tests of the hand-written
Llama forwards."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

import pytest

from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import Environment


def _golds_revalidate(env: Environment, tasks: Iterable[Task]) -> None:
    for task in tasks:
        assert env.check(task, task.answer).success, task.prompt
        verdict = env.validate(task.prompt, task.answer, task_id=task.id)
        assert verdict.ok, (task.prompt, verdict.reason)
        assert (verdict.task.answer, verdict.task.expected, verdict.task.difficulty) == (
            task.answer,
            task.expected,
            task.difficulty,
        )


@pytest.fixture(scope="session")
def golds_revalidate() -> Callable[[Environment, Iterable[Task]], None]:
    """``golds_revalidate(env, tasks)`` asserts each gold passes the checker and the validator, on the
    task's own prompt, rebuilds the same answer, expected gold and difficulty."""
    return _golds_revalidate


def _assert_check_fails(env: Environment, task: Task, response: str, error: str) -> CheckResult:
    result = env.check(task, response)
    assert (result.success, result.error_type) == (False, error), response
    assert result.score < 1.0
    return result


@pytest.fixture(scope="session")
def assert_check_fails() -> Callable[[Environment, Task, str, str], CheckResult]:
    """``assert_check_fails(env, task, response, error)`` asserts the checker fails ``response`` with error type
    ``error`` and a score below 1; returns the check result."""
    return _assert_check_fails


def _assert_rejected(env: Environment, prompt: str, answer: str, reason: str) -> Validation:
    verdict = env.validate(prompt, answer, task_id="gen/x")
    assert not verdict.ok and verdict.task is None, prompt
    assert verdict.reason.startswith(reason), (prompt, verdict.reason)
    return verdict


@pytest.fixture(scope="session")
def assert_rejected() -> Callable[[Environment, str, str, str], Validation]:
    """``assert_rejected(env, prompt, answer, reason)`` asserts the validator rejects the generated pair, with no
    task and a reason starting with ``reason``; returns the verdict."""
    return _assert_rejected


COUNTDOWN = Path(__file__).resolve().parents[2] / "docs" / "examples" / "countdown"
"""The example plugin the test plugins subclass."""


@pytest.fixture
def plugin_module(tmp_path, monkeypatch) -> Callable[[str, str], ModuleType]:
    """``plugin_module(name, source)`` writes module ``name`` with ``source`` in a folder put on ``sys.path`` beside
    the countdown example and imports it; the registry's found benchmarks are this test's own, and the modules are
    forgotten afterwards."""
    from genenv_engine import environments

    monkeypatch.setattr(environments, "_FOUND", {})
    folder = tmp_path / "plugin"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(COUNTDOWN))
    monkeypatch.syspath_prepend(str(folder))
    written: list[str] = []

    def write(name: str, source: str) -> ModuleType:
        (folder / f"{name}.py").write_text(source)
        written.append(name)
        return importlib.import_module(name)

    yield write
    for module in (*written, "countdown_env"):
        sys.modules.pop(module, None)
