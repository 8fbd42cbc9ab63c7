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


# The flaky test plugin of the plugin-error and plugin-fault tests: each method raises, hangs or works as `MODE` says.
FLAKY = '''
import time

from countdown_env import Countdown

MODE = {"validate": "raise", "check": "ok", "sibling": "ok", "draft": "ok"}


class Flaky(Countdown):
    """Countdown whose loop-time validate, check, sibling and draft misbehave as MODE says (the warm start's
    validate untouched; check and sibling everywhere; draft once the splits are built, "always": there too)."""

    name = "flaky"

    def parse_generation(self, text):  # every draft reaches validate
        try:
            return super().parse_generation(text)
        except ValueError:
            return text[:40] or "x", "1"

    def validate(self, prompt, answer, *, task_id, parent=None, epoch=0, generator=None):
        if generator and generator.startswith(("simulator@", "test")):
            if MODE["validate"] == "raise":
                raise RuntimeError("boom")
            if MODE["validate"] == "sleep":
                time.sleep(60)
            if MODE["validate"] == "wrong":
                return ["not", "a", "validation"]
            if MODE["validate"] == "no_task":
                return super().validate("numbers: 3 5 8 | target: 64", "8 * (3 + 5)", task_id=task_id).__class__(
                    True, "", None)
        return super().validate(prompt, answer, task_id=task_id, parent=parent, epoch=epoch, generator=generator)

    def check(self, task, response):
        if MODE["check"] == "raise":
            raise KeyError("boom")
        if MODE["check"] == "sleep":
            time.sleep(60)
        if MODE["check"] == "wrong":
            return 1.0
        return super().check(task, response)

    def sibling(self, source, rng, task_id):
        if MODE["sibling"] == "raise":
            raise ValueError("no sibling today")
        if MODE["sibling"] == "sleep":
            time.sleep(60)
        return super().sibling(source, rng, task_id)

    def draft(self, level, rng):
        if MODE["draft"] == "always" or (MODE["draft"] == "raise" and self._splits is not None):
            raise ZeroDivisionError("draft")
        if MODE["draft"] == "sleep" and self._splits is not None:
            time.sleep(60)
        return super().draft(level, rng)
'''


@pytest.fixture
def flaky(plugin_module):
    flaky_envs = plugin_module("flaky_envs", FLAKY)
    flaky_envs.MODE.update(validate="raise", check="ok", sibling="ok", draft="ok")
    return flaky_envs
