"""The reasoning-gym adapter: ``rg:<dataset>`` as a genenv benchmark, ``rg_<dataset>`` inside a run.

`rg_environment` (the function the registry's ``rg`` prefix names) reads a dataset's curriculum and returns an
environment class for it, once it has checked that the dataset can be one: it is registered, it has a curriculum,
the gold answer of every probed entry scores 1.0 with the dataset's own ``score_answer``, and its entries are the
same in a process with another ``PYTHONHASHSEED`` (`probe_digest` run in a child process). Any other dataset is
refused with a one-line `ConfigError` naming the condition that fails.

genenv level k is the curriculum's global level k - 1 (``set_global_level``); a dataset has as many levels as its
curriculum's longest attribute, at most `MAX_LEVELS`. A task is a specification
(`genenv_engine.environments.reasoning_gym.spec`) materialized by the dataset's own generator: its prompt the
question, its answer the gold, ``expected["spec"]`` the specification, which is what the simulator reads and
writes (`RgEnvironment.simulator_text`). Split tasks take each level's configuration and a seed drawn from the
split's seeded rng; `RgEnvironment.validate` admits an in-range specification with the gold it materializes
(the simulator writes no answer to check) and refuses any other with its reason. Success is ``score_answer ==
1.0``. ``reasoning_gym`` is imported only inside the functions that use it.
"""

from __future__ import annotations

import decimal
import functools
import hashlib
import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

from genenv_engine.environments.base import SEP, LadderEnvironment, SplitSizes
from genenv_engine.environments.reasoning_gym.spec import (
    SEED_LIMIT, Attribute, SpecError, config_of, grammar_rules, read_spec, render_value, spec_level, spec_text)
from genenv_engine.core.errors import ConfigError
from genenv_engine.core.records import CheckResult, Task, Validation

DISTRIBUTION = "reasoning-gym"
"""The distribution whose version a session records for its ``rg:`` benchmarks."""
MAX_LEVELS = 8
"""The most genenv levels a dataset gets (its curriculum's longest attribute decides, up to this)."""
PROBE_SEEDS = (0, 1, 2)
"""The seeds whose entries at every level the eligibility probe generates and scores."""
PROBE_TIMEOUT_S = 300
"""How long the determinism probe's child process may take."""
MAX_SPEC_CHARS = 600
MAX_RESPONSE_CHARS = 8000
"""A response longer than this is not scored (``too_long``)."""
CHECKER = "rg_score"
SPLIT_TRIES = 50
"""Draws a split task makes before its level counts as used up (`RgEnvironment._make_split`)."""
DRAFT_TRIES = 20
"""Seeds a split draw tries before the generator's error stops it."""
ENTRY_CACHE = 20_000
"""Materialized entries an environment keeps (its checker scores against them)."""


def version_number(version: str) -> int:
    """A release ``major.minor.patch`` as one integer (a `data_version`): ``major * 10**6 + minor * 10**3 +
    patch``, so a newer release gives a larger number.

    >>> version_number("0.1.25"), version_number("1.2.3rc1")
    (1025, 1002003)
    """
    parts = [int(re.match(r"\d*", part)[0] or 0) for part in version.split(".")[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0] * 10 ** 6 + parts[1] * 10 ** 3 + parts[2]


def rg_version() -> str:
    """The installed reasoning-gym's version; a `ConfigError` saying how to install it when it is missing."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ConfigError("benchmarks", "rg: benchmarks need the reasoning-gym package: pip install "
                                        "'genenv[environments]'") from None


def rg_environment_origin() -> tuple[str, str]:
    """The distribution and version a session records as the source of its ``rg:`` benchmarks."""
    return DISTRIBUTION, rg_version()


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


def probe_digest(dataset: str) -> str:
    """A digest of the question and gold of the entries at every level for `PROBE_SEEDS`; a `ConfigError` when
    one cannot be generated or its gold does not score 1.0 with the dataset's own ``score_answer``."""
    attributes = read_curriculum(dataset)
    digest = hashlib.sha256()
    for level in range(1, len(attributes[0].levels) + 1):
        config = config_of(attributes, [a.levels[level - 1] for a in attributes])
        for seed in PROBE_SEEDS:
            try:
                data, entry = materialize(dataset, config, seed)
                gold = str(entry["answer"])
                points = score(data, gold, entry)
            except Exception as exc:  # noqa: BLE001 - the dataset's own generator, reported in one line
                raise ConfigError("benchmarks", f"rg:{dataset}: its generator fails at level {level} "
                                                f"({type(exc).__name__}: {_line(exc)})") from None
            if points != 1.0:
                raise ConfigError("benchmarks", f"rg:{dataset}: its gold answer does not score 1.0 with its own "
                                                f"score_answer (level {level}, seed {seed}: {points})")
            digest.update(json.dumps([entry["question"], gold]).encode())
    return digest.hexdigest()


def _line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:160]


def _child_digest(dataset: str) -> str:
    """`probe_digest` in a child process whose ``PYTHONHASHSEED`` differs from this one's."""
    env = dict(os.environ)
    env["PYTHONHASHSEED"] = "1" if env.get("PYTHONHASHSEED") == "0" else "0"
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join([root, *filter(None, [env.get("PYTHONPATH")])])
    code = ("import sys\nfrom genenv_engine.environments.reasoning_gym.adapter import probe_digest\n"
            "print('\\ndigest', probe_digest(sys.argv[1]))")  # after whatever the generator prints
    done = subprocess.run([sys.executable, "-c", code, dataset], env=env, capture_output=True, text=True,
                          timeout=PROBE_TIMEOUT_S, check=False)
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ConfigError("benchmarks", f"rg:{dataset}: the determinism probe failed in a child process ({tail})")
    found = re.findall(r"^digest ([0-9a-f]{64})$", done.stdout, flags=re.MULTILINE)
    if not found:
        raise ConfigError("benchmarks", f"rg:{dataset}: the determinism probe's child process gave no digest")
    return found[-1]


@functools.cache
def rg_environment(dataset: str) -> type[RgEnvironment]:
    """The environment class of reasoning-gym dataset ``dataset`` (named ``rg_<dataset>``), once per process; a
    one-line `ConfigError` when the dataset is unknown, has no curriculum, its generator fails at a level, a gold
    does not score 1.0 or its entries are not the same across processes."""
    version = rg_version()
    from reasoning_gym.factory import DATASETS, has_curriculum

    if dataset not in DATASETS:
        raise ConfigError("benchmarks", f"rg:{dataset}: unknown reasoning-gym dataset (reasoning-gym {version} "
                                        f"has {len(DATASETS)}: {', '.join(sorted(DATASETS)[:6])}, ...)")
    if not has_curriculum(dataset):
        raise ConfigError("benchmarks", f"rg:{dataset}: the reasoning-gym dataset has no curriculum, so it has no "
                                        "difficulty levels")
    here = probe_digest(dataset)
    if _child_digest(dataset) != here:
        raise ConfigError("benchmarks", f"rg:{dataset}: not deterministic: its entries differ in a process with "
                                        "another PYTHONHASHSEED")
    attributes = read_curriculum(dataset)
    levels = tuple(range(1, len(attributes[0].levels) + 1))
    title = "".join(part.title() for part in dataset.split("_"))
    return type(f"Rg{title}", (RgEnvironment,), {
        "__module__": __name__, "name": f"rg_{dataset}", "dataset": dataset, "rg_version": version,
        "data_version": version_number(version), "ATTRIBUTES": attributes, "LEVELS": levels,
        "SPLIT_PLAN": tuple((split, levels) for split in ("heldout", "train", "seed")),
        "source": f"reasoning-gym {version} dataset {dataset}"})


def _rebuild(dataset: str, seed: int, sizes: SplitSizes, data_dir: str | None) -> RgEnvironment:
    return rg_environment(dataset)(seed=seed, sizes=sizes, data_dir=data_dir)


class RgEnvironment(LadderEnvironment):
    """A reasoning-gym dataset as a genenv benchmark (`rg_environment` makes one subclass per dataset)."""

    dataset: str = ""
    """The reasoning-gym dataset's name."""
    rg_version: str = ""
    """The reasoning-gym release the tasks come from (`data_version` is its `version_number`)."""
    ATTRIBUTES: tuple[Attribute, ...] = ()
    LEVELS: tuple[int, ...] = ()
    granularity = "step"
    structured = True

    def __init__(self, seed: int = 0, sizes: SplitSizes | None = None, data_dir: str | None = None) -> None:
        if data_dir is not None:
            raise ConfigError(f"data_dirs.{self.name}", "reasoning-gym tasks are generated; they have no upstream "
                                                        "data")
        super().__init__(seed, sizes, data_dir)
        self._entries: dict[str, tuple[Any, dict[str, Any]]] = {}

    def __reduce__(self) -> tuple[Callable[..., RgEnvironment], tuple[Any, ...]]:
        return _rebuild, (self.dataset, self.seed, self.sizes, self.data_dir)

    # ------------------------------------------------------------ tasks from specifications

    def _entry(self, spec: str) -> tuple[Any, dict[str, Any]]:
        """The dataset and entry of specification text ``spec`` (materialized once per environment)."""
        if spec not in self._entries:
            prompt, _, answer = spec.partition(SEP)
            settings, seed = read_spec(self.ATTRIBUTES, prompt, answer)
            if len(self._entries) >= ENTRY_CACHE:
                self._entries.clear()
            self._entries[spec] = materialize(self.dataset, config_of(self.ATTRIBUTES, settings), seed)
        return self._entries[spec]

    def _draft_spec(self, settings: tuple[Any, ...], seed: int, level: int) -> tuple[str, Callable[..., Task]]:
        spec = spec_text(self.ATTRIBUTES, settings, seed)
        _, entry = self._entry(spec)
        features = {a.name: a.text(s).partition("=")[2] for a, s in zip(self.ATTRIBUTES, settings)}

        def build(task_id: str, **fields: Any) -> Task:
            return Task(id=task_id, benchmark=self.name, prompt=str(entry["question"]), answer=str(entry["answer"]),
                        expected={"spec": spec}, difficulty={"level": level, "features": features},
                        checker=CHECKER, granularity=self.granularity, **fields)

        return str(entry["question"]), build

    def level_settings(self, level: int) -> tuple[Any, ...]:
        """Every attribute's setting at genenv ``level`` (the curriculum's global level ``level - 1``)."""
        return tuple(a.levels[level - 1] for a in self.ATTRIBUTES)

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        """A task at ``level``: the level's configuration and a seed drawn from ``rng`` (a seed the generator
        fails on is drawn again, `DRAFT_TRIES` times at most)."""
        settings = self.level_settings(level)
        for _ in range(DRAFT_TRIES - 1):
            try:
                return self._draft_spec(settings, rng.randrange(SEED_LIMIT), level)
            except Exception:  # noqa: BLE001 - the dataset's own generator
                pass
        return self._draft_spec(settings, rng.randrange(SEED_LIMIT), level)  # the last try's error propagates

    def _make_split(self, split: str, n: int, levels: tuple[int, ...], rng: random.Random,
                    seen: set[str], tries: int | None = None) -> list[Task]:
        """As :meth:`LadderEnvironment._make_split`, always with a bound on the draws per task: a low level may
        have fewer distinct questions than its share of a split (``chain_sum``'s level 1 has 200), and then
        gives fewer tasks rather than drawing forever."""
        return super()._make_split(split, n, levels, rng, seen, SPLIT_TRIES if tries is None else tries)

    def unseen_tasks(self, n: int, levels: tuple[int, ...] = ()) -> list[Task]:
        """As :meth:`LadderEnvironment.unseen_tasks`, in equal shares of all the dataset's levels by default."""
        return super().unseen_tasks(n, tuple(levels) or self.LEVELS)

    # ------------------------------------------------------------ the contract

    def check(self, task: Task, response: str) -> CheckResult:
        """The dataset's own ``score_answer`` on the task's entry; success is a score of 1.0."""
        if len(response) > MAX_RESPONSE_CHARS:
            return CheckResult(False, 0.0, error_type="too_long")
        data, entry = self._entry(str(task.expected["spec"]))
        try:
            points = score(data, response, entry)
        except Exception:  # noqa: BLE001 - the dataset's scorer on model text: a failure is a wrong answer
            return CheckResult(False, 0.0, error_type="score_error")
        if points == 1.0:
            return CheckResult(True, 1.0)
        return CheckResult(False, min(1.0, max(0.0, points)), error_type="wrong_answer")

    def simulator_text(self, task: Task) -> str:
        """The task's specification (``<attributes> => seed <n>``): the simulator never sees question or gold."""
        return str(task.expected["spec"])

    def validate(self, prompt: str, answer: str, *, task_id: str, parent: Task | None = None,
                 epoch: int = 0, generator: str | None = None) -> Validation:
        """Admit a specification (``prompt``: the attributes, ``answer``: ``seed <n>``) within the curriculum's
        ranges with the question and gold the dataset's generator materializes from it; refuse any other with
        its reason (``bad_spec``, ``out_of_range``, ``bad_seed``, ``bad_config``, ``gold_fails``)."""
        if len(prompt) > MAX_SPEC_CHARS or len(answer) > 20:
            return Validation(False, "too_long")
        spec = f"{prompt}{SEP}{answer}"
        if parent is not None and parent.expected.get("spec") == spec:
            return Validation(False, "copy_of_parent")
        try:
            settings, seed = read_spec(self.ATTRIBUTES, prompt, answer)
            level = spec_level(self.ATTRIBUTES, settings)
        except SpecError as err:
            return Validation(False, str(err))
        try:
            _, build = self._draft_spec(settings, seed, level)
            data, entry = self._entry(spec)
            gold_score = score(data, str(entry["answer"]), entry)
        except Exception as exc:  # noqa: BLE001 - the dataset's own config checks and generator
            return Validation(False, f"bad_config: {type(exc).__name__}: {_line(exc)}")
        if gold_score != 1.0:
            return Validation(False, f"gold_fails: its gold scores {gold_score}")
        return Validation(True, "", build(task_id, **self._generated(parent, epoch, generator)))

    def task_grammar(self) -> str:
        """The Lark rules of a specification (`grammar_rules`)."""
        return grammar_rules(self.ATTRIBUTES)

    def template_key(self, prompt: str) -> str:
        """The question itself: two specifications that materialize different questions are different tasks,
        though many datasets' questions differ only in their numbers (``count_bits``: one template for all)."""
        return prompt

    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A specification near the source's: the configuration of the source's level or one next to it, with
        one range attribute narrowed half the time, and a new seed."""
        top = len(self.LEVELS)
        while True:
            settings = list(self.level_settings(self._sibling_level(source, rng, 1, top)))
            ranges = [i for i, a in enumerate(self.ATTRIBUTES) if a.is_range]
            if ranges and rng.random() < 0.5:
                i = rng.choice(ranges)
                settings[i] = self._narrowed(self.ATTRIBUTES[i], settings[i], rng)
            attributes, _, seed = spec_text(self.ATTRIBUTES, settings, rng.randrange(SEED_LIMIT)).partition(SEP)
            sibling = self._as_sibling(source, attributes, seed, task_id)
            if sibling is not None:
                return sibling

    @staticmethod
    def _narrowed(attribute: Attribute, setting: tuple[Any, Any], rng: random.Random) -> tuple[Any, Any]:
        """A sub-range of ``setting`` over the attribute's values (two distinct ends if the attribute needs)."""
        inside = [v for v in attribute.values if setting[0] <= v <= setting[1]]
        lo = rng.choice(inside[:-1] if attribute.ensure_interval and len(inside) > 1 else inside)
        above = [v for v in inside if v > lo or (v == lo and not attribute.ensure_interval)]
        return (lo, rng.choice(above)) if above else setting
