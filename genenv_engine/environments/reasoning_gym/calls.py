"""Every call into reasoning-gym's generators and scorers, and the worker process that makes them under a time limit.

A dataset's generator may loop forever on some seeds and its ``score_answer`` may evaluate the reply as Python, so
an ``rg:`` environment never calls either in its own process. Provides `materialize` and `score` (the calls
themselves, in a fresh decimal context), `serve` (what the worker runs: a materialized entry's question, gold and
gold score, or a reply's score, with the worker's own cache of entries) and `RgCalls`, the environment's side: one
`genenv_engine.environments.sandbox.Sandbox` per environment, contained (no file written, no process started, no
socket, no signal) wherever the machine allows and always where the dataset's scorer evaluates text, each call
bounded by `CALL_SECONDS`. A call past its bound, a worker that dies and an exception inside are all `CallFailed`
with a one-line reason (``timeout``, ``crashed``, or the exception). `read_curriculum` reads a curriculum's
configurations (no generator runs). ``reasoning_gym`` is imported only inside these functions.
"""

from __future__ import annotations

import decimal
import gc
import json
import os
from typing import Any

from genenv_engine.environments.reasoning_gym.spec import Attribute, render_value
from genenv_engine.environments.sandbox import Sandbox, SandboxError, SandboxTimeout

MAX_LEVELS = 8
"""The most genenv levels a dataset gets (its curriculum's longest attribute decides, up to this)."""
CALL_SECONDS = 20.0
"""How long one generation or score may take in the worker before it is killed and the call fails."""
WORKER_ENTRIES = 20_000
"""Materialized entries the worker keeps (it scores replies against them)."""
WORKER_GROWTH = 1 << 30
"""How many bytes the worker's kept entries may add to its resident size before it forgets them (a dataset object
can hold a whole corpus: each of ``arc_agi``'s holds every ARC task)."""


class CallFailed(RuntimeError):
    """A call into reasoning-gym that did not return: ``reason`` is ``timeout``, ``crashed`` or the exception
    (``<Type>: <message>``), ``genenv_reason`` what a rollout records."""

    def __init__(self, reason: str, genenv_reason: str = "score_error") -> None:
        super().__init__(reason)
        self.reason = reason
        self.genenv_reason = genenv_reason


def read_curriculum(dataset: str) -> tuple[Attribute, ...]:
    """The attributes of ``dataset``'s curriculum, with their settings at genenv levels 1..L (global levels
    0..L-1) and the values a specification may give them (within the level-L range; a scalar's level values).

    L is the number of levels of the curriculum's longest attribute, at most `MAX_LEVELS`, less the top levels
    whose configuration repeats the one below (a range that keeps two distinct ends reaches its widest a level
    early)."""
    from reasoning_gym.factory import create_curriculum

    curriculum = create_curriculum(dataset)
    definitions = list(curriculum.attributes.values())
    configs = []
    for level in range(min(MAX_LEVELS, max(len(d.levels) for d in definitions))):
        curriculum.set_global_level(level)
        configs.append(curriculum.generate_configuration())
    fields_of = [f for d in definitions for f in _fields(d)]
    while len(configs) > 1 and all(getattr(configs[-1], f) == getattr(configs[-2], f) for f in fields_of):
        configs.pop()  # a top level the curriculum sets as the one below it (a range already at its widest)
    attributes = []
    for d in definitions:
        fields = _fields(d)
        if len(fields) == 2:
            levels: tuple[Any, ...] = tuple((getattr(c, fields[0]), getattr(c, fields[1])) for c in configs)
            lo, hi = min(s[0] for s in levels), max(s[1] for s in levels)
            ends = [v for s in levels for v in s]
            inside = [v for v in d.levels if isinstance(v, (int, float)) and lo <= v <= hi]
            values: tuple[Any, ...] = tuple(sorted(dict.fromkeys([*inside, *ends])))
        else:
            levels = tuple(getattr(c, d.field_name) for c in configs)
            values = tuple({render_value(v): v for v in levels}.values())
        attributes.append(Attribute(d.name, fields, levels, values, bool(getattr(d, "ensure_interval", False))))
    return tuple(attributes)


def _fields(definition: Any) -> tuple[str, ...]:
    """The configuration fields a curriculum attribute sets (a range's lower and upper, a scalar's one)."""
    if hasattr(definition, "lower_field_name"):
        return (definition.lower_field_name, definition.upper_field_name)
    return (definition.field_name,)


def dataset_class(dataset: str) -> type:
    """The class reasoning-gym registers for ``dataset`` (its ``score_answer`` is what the scan reads)."""
    from reasoning_gym.factory import DATASETS

    return DATASETS[dataset][0]


def materialize(dataset: str, config: dict[str, Any], seed: int) -> tuple[Any, dict[str, Any]]:
    """The dataset built with ``config``, ``seed`` and size 1, and its one entry (the generator's own errors
    propagate), made in a fresh default decimal context (a generator that sets the precision sets it there only).
    """
    from reasoning_gym import create_dataset

    with decimal.localcontext(decimal.Context()):
        data = create_dataset(dataset, **config, seed=seed, size=1)
        return data, data[0]


def score(data: Any, answer: str, entry: dict[str, Any]) -> float:
    """The dataset's own ``score_answer`` of ``answer`` for ``entry``, in a fresh default decimal context."""
    with decimal.localcontext(decimal.Context()):
        return float(data.score_answer(answer, entry))


_WORKER_CACHE: dict[str, tuple[Any, dict[str, Any]]] = {}
"""The worker's materialized entries by (dataset, configuration, seed)."""
_WORKER_START: list[int] = []
"""The worker's resident size when it first materialized an entry."""


def resident_bytes() -> int:
    """This process's resident size in bytes (0 where ``/proc`` does not tell)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as file:
            return int(file.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def _keep(key: str, made: tuple[Any, dict[str, Any]]) -> None:
    """Keep a materialized entry, forgetting the others first when there are `WORKER_ENTRIES` or they have grown
    the worker by `WORKER_GROWTH` bytes."""
    if not _WORKER_START:
        _WORKER_START.append(resident_bytes())
    if len(_WORKER_CACHE) >= WORKER_ENTRIES or resident_bytes() - _WORKER_START[0] > WORKER_GROWTH:
        _WORKER_CACHE.clear()
        gc.collect()
    _WORKER_CACHE[key] = made


def serve(op: str, dataset: str, config: dict[str, Any], seed: int, reply: str | None = None) -> Any:
    """What the worker runs. ``entry``: ``[question, gold]`` of the entry ``(dataset, config, seed)``;
    ``checked``: ``[question, gold, the gold's score]``; ``score``: the dataset's score of ``reply`` for that entry.
    Entries are materialized once per worker."""
    key = json.dumps([dataset, config, seed], sort_keys=True)
    if key not in _WORKER_CACHE:
        try:
            made = materialize(dataset, config, seed)
        except MemoryError:  # the kept entries took the room: forget them and try once more
            _WORKER_CACHE.clear()
            gc.collect()
            made = materialize(dataset, config, seed)
        _keep(key, made)
    data, entry = _WORKER_CACHE[key]
    if op == "score":
        return score(data, str(reply), entry)
    question, gold = str(entry["question"]), str(entry["answer"])
    return [question, gold, score(data, gold, entry)] if op == "checked" else [question, gold]


class RgCalls:
    """An environment's calls into reasoning-gym, made in its worker: ``contained`` says the worker runs under
    the sandbox's containment (the caller decides; a dataset whose scorer evaluates text is never served
    uncontained). The `Sandbox` forks the worker on the first call, takes calls from several threads in turn and
    pickles unstarted."""

    def __init__(self, dataset: str, contained: bool, seconds: float = CALL_SECONDS) -> None:
        self.dataset, self.contained, self.seconds = dataset, contained, seconds
        self._sandbox = Sandbox(serve, seconds=seconds, contained=contained, name=f"rg:{dataset}")

    def _call(self, op: str, config: dict[str, Any], seed: int, reply: str | None = None) -> Any:
        try:
            return self._sandbox.call(op, self.dataset, config, seed, reply)
        except SandboxTimeout:
            raise CallFailed(f"timeout: no result within {self.seconds:g} s", "score_timeout") from None
        except SandboxError as err:
            raise CallFailed(" ".join(str(err).split())[:200], getattr(err, "genenv_reason", "score_error")) from None

    def entry(self, config: dict[str, Any], seed: int) -> tuple[str, str]:
        """The question and gold of the entry ``(config, seed)``."""
        question, gold = self._call("entry", config, seed)
        return str(question), str(gold)

    def checked_entry(self, config: dict[str, Any], seed: int) -> tuple[str, str, float]:
        """The question, gold and the gold's own score of the entry ``(config, seed)``."""
        question, gold, points = self._call("checked", config, seed)
        return str(question), str(gold), float(points)

    def score(self, config: dict[str, Any], seed: int, reply: str) -> float:
        """The dataset's score of ``reply`` for the entry ``(config, seed)`` (a number, or `CallFailed`)."""
        points = self._call("score", config, seed, reply)
        if isinstance(points, bool) or not isinstance(points, (int, float)):
            raise CallFailed(f"the scorer answered {type(points).__name__}, not a number")
        return float(points)

    def stop(self) -> None:
        """Stop the worker (the next call starts another)."""
        self._sandbox.stop()
