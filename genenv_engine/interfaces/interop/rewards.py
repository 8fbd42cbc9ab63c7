"""Rewards for exported tasks: a veRL ``compute_score`` and a TRL reward function that score with genenv's checkers.

`genenv tasks export` writes rows in veRL's layout; these functions score a model's reply to such a row with the
checker of the environment that made the task, so the rows can be trained on in veRL or TRL without writing a
reward. The task is rebuilt from the row (prompt, gold answer and the checker's structured gold, tools, level and
granularity, all in ``extra_info``) and handed with the reply to the environment's ``check``; the reward is 1.0 when
the checker accepts the reply, else 0.0 (the success genenv's own p̂ counts). The reply is parsed by the checker,
never run. Scoring needs genenv installed, and any plugin package that provides a benchmark not built in.

- veRL: ``custom_reward_function.path=reward.py custom_reward_function.name=compute_score`` (`compute_score`).
- TRL: ``GRPOTrainer(reward_funcs=[reward], train_dataset=...)`` with the exported dataset (`reward`); the trainer
  passes the dataset's columns (``data_source``, ``reward_model``, ``extra_info``) as keywords.

`write_reward_file` writes ``reward.py`` beside an export: a two-line module re-exporting both functions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from genenv_engine.core.records import Task

SOURCE_PREFIX = "genenv/"
"""Every exported row's ``data_source`` is ``genenv/<benchmark>``."""
REWARD_FILE = "reward.py"
"""The file written beside an export."""
REWARD_MODULE = '''"""Rewards for the genenv tasks exported beside this file (genenv_engine.interfaces.interop.rewards).

veRL: custom_reward_function.path=reward.py custom_reward_function.name=compute_score
TRL:  from reward import reward; GRPOTrainer(reward_funcs=[reward], train_dataset=<the exported dataset>, ...)
Scoring runs genenv's checkers: genenv (and any plugin providing a benchmark) must be installed where it runs.
"""

from genenv_engine.interfaces.interop.rewards import compute_score, reward

__all__ = ["compute_score", "reward"]
'''
"""The text of ``reward.py``."""


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
    return Task(id=str(info.get("id") or ""), benchmark=str(info["benchmark"]), prompt=prompt, answer=answer,
                expected=_json(info.get("expected"), {}), tools=_json(info.get("tools"), []),
                difficulty=difficulty, checker=str(info.get("checker") or "step_match"),
                granularity=str(info.get("granularity") or "step"))


@lru_cache(maxsize=None)
def _environment(benchmark: str):
    """The environment whose checker scores ``benchmark``'s tasks (built once per process)."""
    from genenv_engine.environments import get_environment

    try:
        return get_environment(benchmark, 0)
    except KeyError:
        raise ValueError(f"benchmark {benchmark!r} is not known here: install the package that provides it "
                         "(genenv itself for the built-in ones)") from None


def score_task(task: Task, reply: str) -> float:
    """1.0 when ``task``'s environment's checker accepts ``reply``, else 0.0."""
    return float(_environment(task.benchmark).check(task, reply).success)


def _info(extra_info: Any) -> Mapping[str, Any]:
    if not isinstance(extra_info, Mapping) or not extra_info.get("benchmark"):
        raise ValueError("a genenv row is scored from its extra_info (benchmark, prompt, expected, ...): pass the "
                         "exported row's extra_info")
    return extra_info


def compute_score(data_source: str, solution_str: str, ground_truth: str,
                  extra_info: Mapping[str, Any] | None = None) -> float:
    """veRL's reward function: 1.0 when the environment's checker accepts ``solution_str`` for the exported task,
    else 0.0. ``extra_info`` is the row's own (veRL passes it); a row that is not genenv's raises ValueError."""
    if not str(data_source).startswith(SOURCE_PREFIX):
        raise ValueError(f"data_source {data_source!r} is not a genenv task ('{SOURCE_PREFIX}<benchmark>')")
    info = _info(extra_info)
    return score_task(task_of(str(info.get("prompt") or ""), ground_truth, info), solution_str)


def reply_text(completion: Any) -> str:
    """The text of one completion as TRL passes it: a string, or chat messages (the last assistant message).

    >>> reply_text("add(a=1)"), reply_text([{"role": "assistant", "content": "add(a=1)"}])
    ('add(a=1)', 'add(a=1)')
    """
    if isinstance(completion, str):
        return completion
    replies = [m.get("content") or "" for m in completion if isinstance(m, Mapping) and m.get("role") == "assistant"]
    return replies[-1] if replies else ""


def reward(completions: list[Any], **kwargs: Any) -> list[float | None]:
    """TRL's reward function (``GRPOTrainer(reward_funcs=[reward])``): per completion, 1.0 when the environment's
    checker accepts it, else 0.0; None for a row that is not genenv's (TRL skips it). The exported dataset's
    ``data_source``, ``reward_model`` and ``extra_info`` columns arrive as keywords."""
    n = len(completions)
    sources = kwargs.get("data_source") or [None] * n
    golds = kwargs.get("reward_model") or [None] * n
    infos = kwargs.get("extra_info") or [None] * n
    out: list[float | None] = []
    for completion, source, gold, info in zip(completions, sources, golds, infos, strict=True):
        if source is not None and not str(source).startswith(SOURCE_PREFIX):
            out.append(None)
            continue
        info = _info(info)
        answer = gold.get("ground_truth", "") if isinstance(gold, Mapping) else ""
        out.append(score_task(task_of(str(info.get("prompt") or ""), answer, info), reply_text(completion)))
    return out


def reward_file(folder: str | Path) -> Path:
    """Where ``reward.py`` goes in ``folder``; ValueError when a ``reward.py`` that genenv did not write is there
    (checked before an export writes anything)."""
    path = Path(folder) / REWARD_FILE
    if path.exists() and path.read_text() != REWARD_MODULE:
        raise ValueError(f"{path} exists and is not genenv's reward module: export to another folder")
    return path


def write_reward_file(folder: str | Path) -> Path:
    """Write ``reward.py`` into ``folder`` (replacing only one genenv wrote); return its path."""
    path = reward_file(folder)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(REWARD_MODULE)
    return path
