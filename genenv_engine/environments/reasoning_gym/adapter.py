"""The reasoning-gym adapter: ``rg:<dataset>`` as a genenv benchmark, ``rg_<dataset>`` inside a run.

`rg_environment` (the function the registry's ``rg`` prefix names) reads a dataset's curriculum and returns an
environment class for it, once it has checked that the dataset can be one: it is registered, it has a curriculum,
its splits can be built (`UNBUILDABLE` names those that cannot), and
`genenv_engine.environments.reasoning_gym.eligibility` admits it (its generator finishes, its golds score 1.0, its
entries are the same across processes, its scorer refuses wrong answers, and a scorer that evaluates the reply as
code is run only where the sandbox contains it). Any other dataset is refused with a one-line
`ConfigError` naming the condition that fails.

genenv level k is the curriculum's global level k - 1 (``set_global_level``); a dataset has as many levels as its
curriculum's longest attribute, at most `MAX_LEVELS`. A task is a specification
(`genenv_engine.environments.reasoning_gym.spec`) materialized by the dataset's own generator: its prompt the
question, its answer the gold, ``expected["spec"]`` the specification, which is what the simulator reads and
writes (`RgEnvironment.simulator_text`). Split tasks take each level's configuration and a seed drawn from the
split's seeded rng; `RgEnvironment.validate` admits an in-range specification with the gold it materializes
(the simulator writes no answer to check) and refuses any other with its reason. Success is ``score_answer ==
1.0``. Every generation and score runs in the environment's worker process under a time limit
(`genenv_engine.environments.reasoning_gym.calls`): a reply never reaches the dataset's scorer in this process.
"""

from __future__ import annotations

import functools
import random
import re
import time
from collections.abc import Callable
from importlib import metadata
from typing import Any

from genenv_engine.core.errors import ConfigError
from genenv_engine.core.records import CheckResult, Task, Validation
from genenv_engine.environments.base import SEP, LadderEnvironment, SplitSizes
from genenv_engine.environments.reasoning_gym.calls import MAX_LEVELS, CallFailed, RgCalls, read_curriculum
from genenv_engine.environments.reasoning_gym.eligibility import Eligibility
from genenv_engine.environments.reasoning_gym.entry_cache import EntryCache, cache_root
from genenv_engine.environments.reasoning_gym.spec import (
    SEED_LIMIT,
    Attribute,
    SpecError,
    config_of,
    grammar_rules,
    read_spec,
    spec_level,
    spec_text,
)

DISTRIBUTION = "reasoning-gym"
"""The distribution whose version a session records for its ``rg:`` benchmarks."""
MAX_SPEC_CHARS = 600
MAX_RESPONSE_CHARS = 8000
"""A response longer than this is not scored (``too_long``), unless the dataset's golds are long (`reply_bound`)."""
GOLD_ROOM = 4
"""A dataset's reply bound is at least this many times its longest probed gold."""
CHECKER = "rg_score"
SPLIT_TRIES = 50
"""Draws a split task makes before its level counts as used up (`RgEnvironment._make_split`)."""
DRAFT_TRIES = 20
"""Seeds a split draw tries before the generator's error stops it."""
ENTRY_CACHE = 20_000
"""Materialized questions and golds an environment keeps."""
UNBUILDABLE: dict[tuple[str, str], str] = {
    ("sokoban", "0.1.25"): "its splits cannot be built in time: level 1 (6 x 6 boards, 10 boxes) gave 8 distinct "
    "puzzles in 161 seeds, each taking 1-26 s to generate (18 past the 20 s a generation may take), so a split "
    "redraws for tens of minutes",
}
"""Datasets of a reasoning-gym release refused before their eligibility probe, with why (what ``genenv env check``
found: no split can be built within a contract's time, though each entry the probe makes is fine)."""
__all__ = ["MAX_LEVELS", "RgEnvironment", "read_curriculum", "rg_environment", "rg_environment_origin"]


def version_number(version: str) -> int:
    """A release ``major.minor.patch`` as one integer (a `data_version`): ``major * 10**6 + minor * 10**3 +
    patch``, so a newer release gives a larger number.

    >>> version_number("0.1.25"), version_number("1.2.3rc1")
    (1025, 1002003)
    """
    parts = [int(re.match(r"\d*", part)[0] or 0) for part in version.split(".")[:3]]
    parts += [0] * (3 - len(parts))
    return parts[0] * 10**6 + parts[1] * 10**3 + parts[2]


def rg_version() -> str:
    """The installed reasoning-gym's version; a `ConfigError` saying how to install it when it is missing."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        raise ConfigError(
            "benchmarks", "rg: benchmarks need the reasoning-gym package: pip install 'genenv-console[environments]'"
        ) from None


def rg_environment_origin() -> tuple[str, str]:
    """The distribution and version a session records as the source of its ``rg:`` benchmarks."""
    return DISTRIBUTION, rg_version()


@functools.cache
def eligibility(dataset: str) -> Eligibility:
    """The eligibility verdict on reasoning-gym dataset ``dataset``, once per process (and an admitted one read
    from the cache when another process kept it: `checked_or_kept`); a one-line `ConfigError` when the dataset is
    unknown, has no curriculum or the eligibility check refuses it."""
    version = rg_version()
    from reasoning_gym.factory import DATASETS, has_curriculum

    from genenv_engine.environments.reasoning_gym.calls import dataset_class
    from genenv_engine.environments.reasoning_gym.eligibility import checked_or_kept
    from genenv_engine.environments.reasoning_gym.scan import scan_scorer
    from genenv_engine.environments.sandbox import unavailable_reason

    if dataset not in DATASETS:
        raise ConfigError(
            "benchmarks",
            f"rg:{dataset}: unknown reasoning-gym dataset (reasoning-gym {version} "
            f"has {len(DATASETS)}: {', '.join(sorted(DATASETS)[:6])}, ...)",
        )
    if not has_curriculum(dataset):
        raise ConfigError(
            "benchmarks", f"rg:{dataset}: the reasoning-gym dataset has no curriculum, so it has no difficulty levels"
        )
    if (dataset, version) in UNBUILDABLE:
        raise ConfigError("benchmarks", f"rg:{dataset}: {UNBUILDABLE[dataset, version]}")
    findings = tuple(scan_scorer(dataset_class(dataset)))
    return checked_or_kept(dataset, findings, unavailable_reason(), version, cache_root())


def reply_bound(longest_gold: int) -> int:
    """The most characters of a reply a dataset's checker scores: `MAX_RESPONSE_CHARS`, or `GOLD_ROOM` times its
    longest probed gold where that is more (a 100 x 100 matrix's gold is 20,000 characters).

    >>> reply_bound(12), reply_bound(20_000)
    (8000, 80000)
    """
    return max(MAX_RESPONSE_CHARS, GOLD_ROOM * longest_gold)


@functools.cache
def rg_environment(dataset: str) -> type[RgEnvironment]:
    """The environment class of reasoning-gym dataset ``dataset`` (named ``rg_<dataset>``), once per process; a
    one-line `ConfigError` when the dataset is unknown, has no curriculum or `eligibility` refuses it."""
    verdict = eligibility(dataset)
    version = rg_version()
    attributes = read_curriculum(dataset)
    levels = tuple(range(1, len(attributes[0].levels) + 1))
    title = "".join(part.title() for part in dataset.split("_"))
    return type(
        f"Rg{title}",
        (RgEnvironment,),
        {
            "__module__": __name__,
            "name": f"rg_{dataset}",
            "dataset": dataset,
            "rg_version": version,
            "data_version": version_number(version),
            "ATTRIBUTES": attributes,
            "LEVELS": levels,
            "SPLIT_PLAN": tuple((split, levels) for split in ("heldout", "train", "seed")),
            "scoring": verdict.scoring,
            "contained": verdict.contained,
            "max_response": reply_bound(verdict.longest_gold),
            "source": f"reasoning-gym {version} dataset {dataset}",
        },
    )


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
    scoring: str = "direct"
    """How a reply is scored: ``sandboxed`` (the dataset's scorer evaluates text: it runs only in the contained
    worker) or ``direct`` (nothing it runs evaluates text; it still runs in the worker, under the time limit)."""
    contained: bool = True
    """The worker runs under the sandbox's containment (always for a ``sandboxed`` scorer)."""
    max_response: int = MAX_RESPONSE_CHARS
    """A longer reply is not scored (``too_long``) unless the task's own gold is long: `reply_bound` of the
    dataset's longest probed gold."""
    granularity = "step"
    structured = True

    def __init__(self, seed: int = 0, sizes: SplitSizes | None = None, data_dir: str | None = None) -> None:
        if data_dir is not None:
            raise ConfigError(f"data_dirs.{self.name}", "reasoning-gym tasks are generated; they have no upstream data")
        super().__init__(seed, sizes, data_dir)
        self._entries: dict[str, tuple[str, str]] = {}
        self.calls = RgCalls(self.dataset, self.contained)
        self.kept = EntryCache(self.dataset, self.rg_version)

    def __reduce__(self) -> tuple[Callable[..., RgEnvironment], tuple[Any, ...]]:
        return _rebuild, (self.dataset, self.seed, self.sizes, self.data_dir)

    # ------------------------------------------------------------ tasks from specifications

    def _where(self, spec: str) -> tuple[dict[str, Any], int]:
        """The configuration and seed of specification text ``spec``."""
        prompt, _, answer = spec.partition(SEP)
        settings, seed = read_spec(self.ATTRIBUTES, prompt, answer)
        return config_of(self.ATTRIBUTES, settings), seed

    def _entry(self, spec: str) -> tuple[str, str]:
        """The question and gold of specification text ``spec`` (materialized in the worker once per
        environment, or read from the entries kept on disk when their generation was slow; a `CallFailed` when
        the generator fails or runs past its time, at once when it ran past its time before)."""
        if spec not in self._entries:
            config, seed = self._where(spec)
            kept = self.kept.get(config, seed)
            if isinstance(kept, str):
                raise CallFailed(kept, "score_timeout")
            if kept is None:
                started = time.monotonic()
                try:
                    kept = self.calls.entry(config, seed)
                except CallFailed as failed:
                    if failed.genenv_reason == "score_timeout":
                        self.kept.put_failed(config, seed, failed.reason)
                    raise
                self.kept.put(config, seed, *kept, seconds=time.monotonic() - started)
            if len(self._entries) >= ENTRY_CACHE:
                self._entries.clear()
            self._entries[spec] = kept
        return self._entries[spec]

    def _draft_spec(self, settings: tuple[Any, ...], seed: int, level: int) -> tuple[str, Callable[..., Task]]:
        spec = spec_text(self.ATTRIBUTES, settings, seed)
        question, gold = self._entry(spec)
        features = {a.name: a.text(s).partition("=")[2] for a, s in zip(self.ATTRIBUTES, settings, strict=False)}

        def build(task_id: str, **fields: Any) -> Task:
            return Task(
                id=task_id,
                benchmark=self.name,
                prompt=question,
                answer=gold,
                expected={"spec": spec},
                difficulty={"level": level, "features": features},
                checker=CHECKER,
                granularity=self.granularity,
                **fields,
            )

        return question, build

    def level_settings(self, level: int) -> tuple[Any, ...]:
        """Every attribute's setting at genenv ``level`` (the curriculum's global level ``level - 1``)."""
        return tuple(a.levels[level - 1] for a in self.ATTRIBUTES)

    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        """A task at ``level``: the level's configuration and a seed drawn from ``rng`` (a seed the generator
        fails on, or does not finish within the worker's time limit, is drawn again, `DRAFT_TRIES` times at most;
        then a one-line `ConfigError` naming the last failure)."""
        settings = self.level_settings(level)
        failure = ""
        for _ in range(DRAFT_TRIES):
            try:
                return self._draft_spec(settings, rng.randrange(SEED_LIMIT), level)
            except CallFailed as failed:  # the dataset's own generator, in the worker
                failure = failed.reason
        raise ConfigError(
            "benchmarks",
            f"rg:{self.dataset}: its generator failed on {DRAFT_TRIES} seeds in a row "
            f"at level {level} (the last: {failure})",
        )

    def _make_split(
        self, split: str, n: int, levels: tuple[int, ...], rng: random.Random, seen: set[str], tries: int | None = None
    ) -> list[Task]:
        """As :meth:`LadderEnvironment._make_split`, always with a bound on the draws per task: a low level may
        have fewer distinct questions than its share of a split (``chain_sum``'s level 1 has 200), and then
        gives fewer tasks rather than drawing forever."""
        return super()._make_split(split, n, levels, rng, seen, SPLIT_TRIES if tries is None else tries)

    def unseen_tasks(self, n: int, levels: tuple[int, ...] = ()) -> list[Task]:
        """As :meth:`LadderEnvironment.unseen_tasks`, in equal shares of all the dataset's levels by default."""
        return super().unseen_tasks(n, tuple(levels) or self.LEVELS)

    # ------------------------------------------------------------ the contract

    def check(self, task: Task, response: str) -> CheckResult:
        """The dataset's own ``score_answer`` on the task's entry; success is a score of 1.0. A reply longer than
        `max_response` and `GOLD_ROOM` times the task's own gold is not scored (``too_long``)."""
        if len(response) > max(self.max_response, GOLD_ROOM * len(task.answer)):
            return CheckResult(False, 0.0, error_type="too_long")
        try:
            points = self.calls.score(*self._where(str(task.expected["spec"])), response)
        except CallFailed as failed:  # the dataset's scorer on model text, in the worker: a failure is a wrong answer
            return CheckResult(False, 0.0, error_type=failed.genenv_reason)
        except SpecError:
            return CheckResult(False, 0.0, error_type="bad_spec")
        if points != points:  # NaN
            return CheckResult(False, 0.0, error_type="score_error")
        if points == 1.0:
            return CheckResult(True, 1.0)
        return CheckResult(False, min(1.0, max(0.0, points)), error_type="wrong_answer")

    def simulator_text(self, task: Task) -> str:
        """The task's specification (``<attributes> => seed <n>``): the simulator never sees question or gold."""
        return str(task.expected["spec"])

    def validate(
        self,
        prompt: str,
        answer: str,
        *,
        task_id: str,
        parent: Task | None = None,
        epoch: int = 0,
        generator: str | None = None,
    ) -> Validation:
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
            question, gold, gold_score = self.calls.checked_entry(*self._where(spec))
            self._entries[spec] = (question, gold)
            _, build = self._draft_spec(settings, seed, level)
        except CallFailed as failed:  # the dataset's own config checks and generator, in the worker
            return Validation(False, f"bad_config: {failed.reason}")
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
