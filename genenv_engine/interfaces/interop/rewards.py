"""Rewards for exported tasks: a veRL ``compute_score`` and a TRL reward function that score with genenv's checkers.

`genenv tasks export` writes rows in veRL's layout; these functions score a model's reply to such a row with the
checker of the environment that made the task, so the rows can be trained on in veRL or TRL without writing a
reward. The task is rebuilt from the row (prompt, gold answer and the checker's structured gold, tools, level and
granularity, all in ``extra_info``) and handed with the reply to the environment's ``check``; the reward is the
environment's own ``reward`` of that result, the R_agent genenv trains on: 1.0 or 0.0 by the checker's success for a
structured family, the checker's score in [0, 1] for one that is not (``structured = False``; the row's
``extra_info["structured"]`` says which). `compute_success` and `success` give the success alone (1.0/0.0). The
reply is parsed by the checker, never run.

A benchmark that is not built in is found the way the session found it: the row's ``extra_info["source"]`` (the
session config's ``[environments]`` text, e.g. ``module lineq_env:LinEq``) is registered in this process, then its
class imported; genenv, and the plugin's module or package, must be importable where the rows are scored. A
benchmark that cannot be found fails once with one message, kept: its later rows fail with the same message,
without trying again.

- veRL: ``custom_reward_function.path=reward.py custom_reward_function.name=compute_score`` (`compute_score`).
- TRL: ``GRPOTrainer(reward_funcs=[reward], train_dataset=...)`` with the exported dataset (`reward`); the trainer
  passes the dataset's columns (``data_source``, ``reward_model``, ``extra_info``) as keywords.

`write_reward_file` writes ``reward.py`` beside an export: a short module re-exporting the four functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from genenv_engine.core.records import CheckResult, Task

SOURCE_PREFIX = "genenv/"
"""Every exported row's ``data_source`` is ``genenv/<benchmark>``."""
REWARD_FILE = "reward.py"
"""The file written beside an export."""
REWARD_MODULE = '''"""Rewards for the genenv tasks exported beside this file (genenv_engine.interfaces.interop.rewards).

veRL: custom_reward_function.path=reward.py custom_reward_function.name=compute_score
TRL:  from reward import reward; GRPOTrainer(reward_funcs=[reward], train_dataset=<the exported dataset>, ...)
The reward is genenv's R_agent: the checker's success (1/0), or its score for a family with structured = False;
compute_success and success give the success alone. Scoring runs genenv's checkers: genenv, and the module or
package of any benchmark not built in (extra_info["source"] says which), must be importable where it runs.
"""

from genenv_engine.interfaces.interop.rewards import compute_score, compute_success, reward, success

__all__ = ["compute_score", "compute_success", "reward", "success"]
'''
"""The text of ``reward.py``."""
REWARD_MARK = REWARD_MODULE.splitlines()[0]
"""The first line of every ``reward.py`` genenv writes (this version's or an earlier one's)."""

_ENVIRONMENTS: dict[str, Any] = {}
"""The environments built in this process, by benchmark name."""
_UNKNOWN: dict[str, str] = {}
"""The benchmarks this process could not find, by name, with the message each of their rows fails with."""


def _json(value: Any, default: Any) -> Any:
    """A JSON-text field of ``extra_info`` decoded (a value already decoded is kept); ``default`` when absent.

    >>> _json('{"calls": []}', {}), _json(None, []), _json([1], [])
    ({'calls': []}, [], [1])
    """
    if value is None or value == "":
        return default
    return json.loads(value) if isinstance(value, str) else value


def task_of(prompt: str, answer: str, info: Mapping[str, Any]) -> Task:
    """The genenv task an exported row describes: its prompt, gold answer and ``extra_info``.

    >>> t = task_of("Q", "add(a=1)", {"id": "bfcl/seed/00001", "benchmark": "bfcl", "level": 2,
    ...             "checker": "bfcl_ast", "granularity": "step", "expected": '{"calls": []}', "tools": "[]"})
    >>> t.id, t.benchmark, t.level, t.expected, t.checker
    ('bfcl/seed/00001', 'bfcl', 2, {'calls': []}, 'bfcl_ast')
    """
    level = info.get("level")
    difficulty = _json(info.get("difficulty"), {"level": level} if level is not None else {})
    return Task(
        id=str(info.get("id") or ""),
        benchmark=str(info["benchmark"]),
        prompt=prompt,
        answer=answer,
        expected=_json(info.get("expected"), {}),
        tools=_json(info.get("tools"), []),
        difficulty=difficulty,
        checker=str(info.get("checker") or "step_match"),
        granularity=str(info.get("granularity") or "step"),
    )


def _build(benchmark: str, source: str):
    """The environment of ``benchmark``: built in, found by ``source`` (registered here as a saved config's
    ``[environments]`` entry is), or an installed entry point. A one-line ValueError when none of these has it."""
    from genenv_engine.core.errors import ConfigError
    from genenv_engine.environments import BENCHMARKS, get_environment, resolve_benchmarks

    try:
        if source and benchmark not in BENCHMARKS:
            resolve_benchmarks([benchmark], {benchmark: source})
        return get_environment(benchmark, 0)
    except KeyError:
        hint = (
            "install the package that provides it (genenv itself for the built-in ones); the row records no "
            "source to find it by"
        )
    except ConfigError as exc:
        hint = str(exc).removeprefix(f"config error in '{exc.field}': ")
    except ImportError as exc:
        hint = f"it needs a package that is not installed ({exc})"
    named = f"benchmark {benchmark!r} "
    raise ValueError(hint if hint.startswith(named) else f"{named}is not known here: {hint}")


def environment_for(benchmark: str, source: str = ""):
    """The environment whose checker scores ``benchmark``'s tasks, built once per process; a benchmark that cannot
    be found raises one ValueError, kept and raised again for its later rows without looking again."""
    env = _ENVIRONMENTS.get(benchmark)
    if env is not None:
        return env
    if benchmark in _UNKNOWN:
        raise ValueError(_UNKNOWN[benchmark])
    try:
        env = _ENVIRONMENTS[benchmark] = _build(benchmark, source)
    except ValueError as exc:
        _UNKNOWN[benchmark] = str(exc)
        raise
    return env


def check_task(task: Task, reply: str, source: str = "") -> tuple[Any, CheckResult]:
    """The environment of ``task``'s benchmark (found by ``source`` when not built in) and its check of ``reply``."""
    env = environment_for(task.benchmark, source)
    return env, env.check(task, reply)


def score_task(task: Task, reply: str, source: str = "") -> float:
    """The environment's reward for ``reply``: its checker's success (1.0/0.0), or its score for an environment with
    ``structured = False``."""
    env, result = check_task(task, reply, source)
    return float(env.reward(result))


def success_task(task: Task, reply: str, source: str = "") -> float:
    """1.0 when ``task``'s environment's checker accepts ``reply``, else 0.0."""
    return float(check_task(task, reply, source)[1].success)


def _info(extra_info: Any) -> Mapping[str, Any]:
    if not isinstance(extra_info, Mapping) or not extra_info.get("benchmark"):
        raise ValueError(
            "a genenv row is scored from its extra_info (benchmark, prompt, expected, ...): pass the "
            "exported row's extra_info"
        )
    return extra_info


def _row_task(data_source: Any, answer: str, extra_info: Any) -> tuple[Task, str]:
    """The task of a genenv row and the source its benchmark is found by; ValueError for a row that is not one."""
    if not str(data_source).startswith(SOURCE_PREFIX):
        raise ValueError(f"data_source {data_source!r} is not a genenv task ('{SOURCE_PREFIX}<benchmark>')")
    info = _info(extra_info)
    return task_of(str(info.get("prompt") or ""), answer, info), str(info.get("source") or "")


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None = None
) -> float:
    """veRL's reward function: the environment's reward for ``solution_str`` on the exported task (`score_task`).
    ``extra_info`` is the row's own (veRL passes it); a row that is not genenv's raises ValueError."""
    task, source = _row_task(data_source, ground_truth, extra_info)
    return score_task(task, solution_str, source)


def compute_success(
    data_source: str, solution_str: str, ground_truth: str, extra_info: Mapping[str, Any] | None = None
) -> float:
    """`compute_score`'s arguments, the checker's success alone: 1.0 when it accepts ``solution_str``, else 0.0."""
    task, source = _row_task(data_source, ground_truth, extra_info)
    return success_task(task, solution_str, source)


def reply_text(completion: Any) -> str:
    """The text of one completion as TRL passes it: a string, or chat messages (the last assistant message).

    >>> reply_text("add(a=1)"), reply_text([{"role": "assistant", "content": "add(a=1)"}])
    ('add(a=1)', 'add(a=1)')
    """
    if isinstance(completion, str):
        return completion
    replies = [m.get("content") or "" for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return replies[-1] if replies else ""


def _per_completion(completions: list[Any], kwargs: Mapping[str, Any], scorer: Any) -> list[float | None]:
    n = len(completions)
    sources = kwargs.get("data_source") or [None] * n
    golds = kwargs.get("reward_model") or [None] * n
    infos = kwargs.get("extra_info") or [None] * n
    out: list[float | None] = []
    for completion, data_source, gold, info in zip(completions, sources, golds, infos, strict=True):
        if data_source is not None and not str(data_source).startswith(SOURCE_PREFIX):
            out.append(None)
            continue
        answer = gold.get("ground_truth", "") if isinstance(gold, Mapping) else ""
        task, source = _row_task(data_source or SOURCE_PREFIX, answer, info)
        out.append(scorer(task, reply_text(completion), source))
    return out


def reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL's reward function (``GRPOTrainer(reward_funcs=[reward])``): per completion, the environment's reward
    (`score_task`); None for a row that is not genenv's (TRL skips it). The exported dataset's ``data_source``,
    ``reward_model`` and ``extra_info`` columns arrive as keywords."""
    return _per_completion(completions, kwargs, score_task)


def success(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """`reward`'s arguments, the checker's success alone per completion (1.0/0.0; None for another dataset's row)."""
    return _per_completion(completions, kwargs, success_task)


def reward_file(folder: str | Path) -> Path:
    """Where ``reward.py`` goes in ``folder``; ValueError when a ``reward.py`` that genenv did not write is there
    (checked before an export writes anything)."""
    path = Path(folder) / REWARD_FILE
    if path.exists() and not path.read_text().startswith(REWARD_MARK):
        raise ValueError(f"{path} exists and is not genenv's reward module: export to another folder")
    return path


def write_reward_file(folder: str | Path) -> Path:
    """Write ``reward.py`` into ``folder`` (replacing only one genenv wrote); return its path."""
    path = reward_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(REWARD_MODULE)
    return path
