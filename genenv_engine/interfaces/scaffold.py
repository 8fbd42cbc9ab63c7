"""``genenv env new NAME``: a package holding a new environment, ready to install, check and run.

Provides `write_package`, which writes a folder with a ``pyproject.toml`` registering the environment in the
``genenv.environments`` entry-point group and depending on this project's distribution (`genenv_engine.DISTRIBUTION`,
not the unrelated ``genenv`` on the package index), the environment module (a small working family, "add the given
numbers", to replace with one's own) and its tests (the conformance check of `genenv_engine.interfaces.conformance`
and the checker on a known task); `names_of` gives the module, class and distribution names a benchmark name becomes.
"""

from __future__ import annotations

import re
from pathlib import Path

from genenv_engine import DISTRIBUTION
from genenv_engine.core.errors import ConfigError
from genenv_engine.environments import BENCHMARKS, ENTRY_POINT_GROUP, NAME_PATTERN

MODULE = '''"""{cls}, a genenv environment: add the given numbers.

A task reads ``add: 3 5 8``; its answer is the sum, ``16``. Level k gives k + 1 numbers. Replace the family with
your own, keeping the contract docs/guide/environments.md states, and check it with ``genenv env check {name}``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

from genenv_engine.environments import CheckResult, LadderEnvironment, Task, Validation

NUMBER = r"[1-9][0-9]{{0,2}}"
PROMPT = re.compile(rf"add: ({{NUMBER}}(?: {{NUMBER}}){{{{1,4}}}})")


class {cls}(LadderEnvironment):
    """Add 2-5 given numbers (level 1-4)."""

    name = "{name}"
    api_version = 1
    data_version = 1
    source = "{dist} package"

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        numbers = [rng.randint(1, 999) for _ in range(level + 1)]
        prompt = "add: " + " ".join(map(str, numbers))
        return prompt, lambda task_id, **fields: self.task(prompt, numbers, task_id, **fields)

    def task(self, prompt: str, numbers: list[int], task_id: str, **fields) -> Task:
        return Task(id=task_id, benchmark=self.name, prompt=prompt, answer=str(sum(numbers)),
                    expected={{"numbers": numbers}}, difficulty={{"level": len(numbers) - 1, "features": {{}}}},
                    checker="{name}", **fields)

    def check(self, task: Task, response: str) -> CheckResult:
        text = response.strip()
        if not re.fullmatch(r"[0-9]{{1,5}}", text):
            return CheckResult(False, 0.0, error_type="not_a_number")
        if int(text) != sum(task.expected["numbers"]):
            return CheckResult(False, 0.0, error_type="wrong_sum")
        return CheckResult(True, 1.0)

    def validate(self, prompt: str, answer: str, *, task_id: str, parent: Task | None = None,
                 epoch: int = 0, generator: str | None = None) -> Validation:
        rejected = self._guard(prompt, answer, parent, max_prompt=40, max_answer=8)
        if rejected:
            return rejected
        match = PROMPT.fullmatch(prompt)
        if match is None:
            return Validation(False, "bad_prompt")
        numbers = [int(n) for n in match[1].split()]  # the gold is recomputed from the prompt alone
        return self._accept(self.task(prompt, numbers, task_id, **self._generated(parent, epoch, generator)),
                            answer)

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        while True:
            prompt, build = self.draft(self._sibling_level(source, rng), rng)
            task = self._as_sibling(source, prompt, build(task_id).answer, task_id)
            if task is not None:
                return task

    def template_key(self, prompt: str) -> str:
        """Tasks differing in their numbers are different tasks here (the default masks numbers)."""
        return prompt
'''

TESTS = '''"""Tests of the {name} environment: genenv's conformance check, and the checker on a known task."""

from genenv_engine.interfaces.conformance import check_environment

from {module} import {cls}


def test_the_environment_keeps_the_contract():
    report = check_environment("{module}:{cls}")
    assert [failure.line for failure in report.failures] == []


def test_validate_recomputes_the_sum():
    env = {cls}()
    verdict = env.validate("add: 3 5 8", "16", task_id="{name}/gen/1")
    assert verdict.ok and verdict.task.answer == "16" and verdict.task.level == 2
    wrong = env.validate("add: 3 5 8", "15", task_id="{name}/gen/2")
    assert not wrong.ok and wrong.reason == "answer_mismatch: wrong_sum"
    assert env.validate("add: 3", "3", task_id="{name}/gen/3").reason == "bad_prompt"
'''

PYPROJECT = """# The {name} environment for genenv: `pip install .` registers it, so
# `genenv run --benchmarks {name}` and `genenv env check {name}` find it by name.
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{cls}, a genenv environment"
requires-python = ">=3.11"
# genenv is installed as {genenv}; "genenv" on the package index is an unrelated project
dependencies = ["{genenv}"]

[project.entry-points."{group}"]
{name} = "{module}:{cls}"

[tool.setuptools]
py-modules = ["{module}"]

[tool.pytest.ini_options]
pythonpath = ["."]
"""


def names_of(name: str) -> dict[str, str]:
    """The names a benchmark ``name`` becomes: its module, class and distribution (a `ConfigError` for a name that
    is not `NAME_PATTERN` or is a built-in's).

    >>> names_of("word_sums")
    {'name': 'word_sums', 'module': 'word_sums_env', 'cls': 'WordSums', 'dist': 'word-sums-env'}
    """
    if not re.fullmatch(NAME_PATTERN, name):
        raise ConfigError(
            "name", f"{name!r} is not a benchmark name: lowercase letters, digits and '_', starting with a letter"
        )
    if name in BENCHMARKS:
        raise ConfigError("name", f"{name!r} is a built-in benchmark's name; give it another")
    return {
        "name": name,
        "module": f"{name}_env",
        "cls": "".join(p.capitalize() for p in name.split("_") if p),
        "dist": f"{name.replace('_', '-')}-env",
    }


def write_package(name: str, folder: Path | None = None) -> Path:
    """Write the package of a new environment ``name`` into ``folder`` (default ``./<name>``, which must not
    exist): ``pyproject.toml``, ``<name>_env.py`` and ``tests/test_<name>_env.py``. Returns the folder."""
    names = names_of(name)
    folder = Path(folder if folder is not None else name)
    if folder.exists():
        raise FileExistsError(f"{folder} exists; give env new a new folder with --out")
    (folder / "tests").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT.format(group=ENTRY_POINT_GROUP, genenv=DISTRIBUTION, **names))
    (folder / f"{names['module']}.py").write_text(MODULE.format(**names))
    (folder / "tests" / f"test_{names['module']}.py").write_text(TESTS.format(**names))
    return folder
