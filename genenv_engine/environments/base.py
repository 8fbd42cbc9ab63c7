"""The environment interface every benchmark implements: splits, checker, validator, simulator text.

An environment owns everything benchmark-specific, so the co-evolution loop never special-cases a
benchmark: it asks for seeded splits, renders tasks for the simulator, parses and validates the
simulator's output (recomputing or checking the gold answer itself, never by eval/exec of
generated text), and scores agent responses with its checker.

Provides the :class:`Environment` ABC (with protected validator helpers shared by every benchmark:
:meth:`~Environment._guard` for the length and copy-of-parent checks, :meth:`~Environment._generated`
for a generated task's lineage fields, :meth:`~Environment._accept` for the final "the answer must
pass the checker" verdict, :meth:`~Environment._validate_step` for a step benchmark's whole validator)
and :class:`LadderEnvironment`, the base of the built-in minis whose tasks are sampled on a 4-level
difficulty ladder: memoized seeded splits (equal level quarters, prompt-disjoint, built from a
per-environment ``draft(level, rng)`` hook, the held-out split optionally replaced by official data; a level whose
prompts run out stops the build with a one-line `SplitsExhausted`)
and ``sibling_pairs`` built from a per-environment ``sibling(source, rng, task_id)`` hook.

Also :func:`near_duplicate_key` (the default template of the simulator's duplicate cap). The prompt parsing and
step-task records two or more benchmarks share are in `genenv_engine.environments.drafts`.
"""

from __future__ import annotations

import json
import random
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from genenv_engine.core.errors import SplitsExhausted
from genenv_engine.core.records import CheckResult, Task, Validation, paused_gc
from genenv_engine.environments.drafts import StepDraft, step_task

SEP = " => "
"""Separator between task and answer in simulator text (``<prompt> => <answer>``)."""


class GenerationParseError(ValueError):
    """The simulator's output does not have the required ``<task> => <answer>`` shape."""


def near_duplicate_key(prompt: str) -> str:
    """Prompt with every number masked and whitespace squeezed: tasks differing only in numbers collide (the
    default `Environment.template_key`).

    >>> near_duplicate_key("F: add(a:int,b:int) | Q: add 3 and  15")
    'F: add(a:int,b:int) | Q: add # and #'
    """
    return re.sub(r"\s+", " ", re.sub(r"\d+", "#", prompt)).strip()


@dataclass(frozen=True)
class SplitSizes:
    """How many tasks each built-in split holds."""

    seed: int = 200
    train: int = 2000
    heldout: int = 400


API_VERSION = 1
"""The version of the environment contract below (the methods, their signatures and what they must do). A class
may pin the version it was written for (``api_version = 1``); one asking for a later version than this genenv's
is refused where it is found."""

NAME_PATTERN = r"[a-z][a-z0-9_]*"
"""What a benchmark's ``name`` looks like: it is a bare TOML key and a dotted-setting part (``data_dirs.<name>``)."""


class Environment(ABC):
    """A benchmark: deterministic splits, a checker, and a validator for generated tasks.

    Required: :attr:`name`, :meth:`splits`, :meth:`check`, :meth:`validate`, :meth:`sibling_pairs` (a
    `LadderEnvironment` writes ``draft`` and ``sibling`` instead of ``splits`` and ``sibling_pairs``). Optional, each
    adding one thing to a run: :meth:`task_grammar` (grammar-constrained drafts), :meth:`repair_prompt` (mended
    drafts), :meth:`warm_start_prefixes` (extra warm-start pairs), :meth:`unseen_tasks` (oracle tasks for
    ``agent.base_source = "unseen"``), :meth:`template_key` (what the duplicate cap counts as one template). The
    engine builds one with the keywords ``(seed=, sizes=, data_dir=)``; it never runs the text a model wrote, and
    neither may an environment.
    """

    name: str = ""
    """The benchmark's name (`NAME_PATTERN`): task ids (``<name>/<split>/<index>``), settings keyed by benchmark
    and the warm-start cache use it; a name found in the ``genenv.environments`` entry-point group must equal it."""
    api_version: int = API_VERSION
    """The `API_VERSION` this class was written for."""
    data_version: int = 1
    """Bumped when the benchmark's built-in tasks change (its generator or splits): the warm-start cache key holds
    every version above 1, so a warm start trained on the earlier tasks is not reused."""
    granularity: str = "step"
    """``step`` (one action answers the task) or ``episode``; shown by ``genenv benchmarks`` and the reports."""
    source: str = "built-in mini"
    """Where the tasks come from, in words (``genenv benchmarks``)."""
    structured: bool = True
    """Structured actions are rewarded by exact success (1/0); unstructured ones by the checker's score."""
    sandboxed_check: bool = False
    """``check`` hands the reply to code that may run it: genenv calls it in a contained worker process
    (`genenv_engine.environments.sandboxed_check`)."""

    DEFAULT_SIZES = SplitSizes()
    """The split sizes when none are given."""

    def __init__(self, seed: int = 0, sizes: SplitSizes | None = None, data_dir: str | None = None) -> None:
        self.seed = seed
        self.sizes = sizes or self.DEFAULT_SIZES
        self.data_dir = data_dir
        """A user folder holding the upstream benchmark data; None uses the built-in mini only."""
        self.constructor_options: dict[str, Any] = {}
        """The keyword options genenv built it with (``environments_options``; set after ``__init__``)."""

    def describe(self) -> dict[str, object]:
        """Name, granularity, source and split sizes, for ``genenv benchmarks``."""
        return {
            "name": self.name,
            "granularity": self.granularity,
            "source": "upstream folder" if self.data_dir else self.source,
            "sizes": {k: len(v) for k, v in self.splits().items()},
        }

    @abstractmethod
    def splits(self) -> dict[str, list[Task]]:
        """Return disjoint ``seed``, ``train`` and ``heldout`` task lists, the same for the same seed in any process
        (seed the generator with a string such as ``f"{name}-splits-{seed}"``, never ``hash()``). Task ids are
        ``<name>/<split>/<index>``; ``seed`` tasks are what the simulator varies, ``train`` the agent's warm start and
        replay, ``heldout`` the evaluation: no prompt in two of them."""

    def split_at_levels(self, split: str, levels: tuple[int, ...], option: str) -> list[Task]:
        """The tasks of ``split`` at ``levels`` (all of them when empty); a ``ConfigError`` naming the config
        ``option`` that asked for them when none has one of the levels."""
        tasks = self.splits()[split]
        if not levels:
            return tasks
        chosen = [t for t in tasks if t.level in levels]
        if not chosen:
            from genenv_engine.core.errors import ConfigError

            raise ConfigError(
                option,
                f"{self.name}'s {split} split has no task at levels {list(levels)}; "
                f"its levels are {sorted({t.level for t in tasks})}",
            )
        return chosen

    @abstractmethod
    def check(self, task: Task, response: str) -> CheckResult:
        """Score one agent response against the task's gold: ``success`` (what rewards and p̂ count), a ``score`` in
        [0, 1], and on failure an ``error_type`` (a short reason the reports group by). The response is model text:
        parse it, never run it."""

    @abstractmethod
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
        """Accept or reject a generated task, recomputing its gold answer from the prompt.

        ``Validation(True, "", task)`` carries the task built from ``prompt`` with the gold the environment computed
        itself (id ``task_id``; split ``generated``, origin, ``parent_id``, ``epoch`` and ``generator`` as
        :meth:`_generated` gives them), accepted only when ``answer`` passes :meth:`check` against it
        (:meth:`_accept`). A rejection says why in ``reason`` (``<kind>: <detail>``); one whose prompt was sound and
        only the answer wrong carries the recomputed task as ``repair``. Never evaluate the prompt or answer text."""

    @abstractmethod
    def sibling_pairs(self, tasks: list[Task], rng: random.Random, n: int) -> list[tuple[Task, Task]]:
        """Return ``n`` (source, sibling) pairs of similar tasks for the simulator's warm start: each sibling a task
        :meth:`validate` accepts with ``parent=source`` (a `LadderEnvironment` builds them from ``sibling``)."""

    def warm_start_prefixes(self) -> list[tuple[Task, str]]:
        """Extra pairs for the agent's warm start alone: (task, target), the target a proper prefix of the task's
        answer, trained without an end of answer (so the pair teaches how an answer begins and that it goes on,
        not where it stops). The tasks are in no split: no rollout, replay or evaluation sees them. None by
        default; an environment whose warm start needs them (`genenv_engine.environments.chain`) says why."""
        return []

    def unseen_tasks(self, n: int, levels: tuple[int, ...] = ()) -> list[Task]:
        """``n`` new train-like tasks no split has: the oracle tasks of ``agent.base_source = "unseen"``; only
        generated benchmarks can (a `LadderEnvironment` has them from ``draft``), others raise NotImplementedError."""
        raise NotImplementedError(f"{self.name} cannot generate new tasks (its data is fixed)")

    def reward(self, result: CheckResult) -> float:
        """R_agent in [0, 1]: success for structured actions, the checker's similarity score otherwise."""
        return float(result.success) if self.structured else float(result.score)

    def simulator_text(self, task: Task) -> str:
        """Render a task as the simulator reads and writes it: ``<prompt> => <answer>``."""
        return f"{task.prompt}{SEP}{task.answer}"

    def parse_generation(self, text: str) -> tuple[str, str]:
        """Split simulator output into (prompt, answer); raise GenerationParseError if malformed."""
        if text.count(SEP) != 1:
            raise GenerationParseError(f"expected exactly one '{SEP.strip()}' separator, got {text.count(SEP)}")
        prompt, answer = (part.strip() for part in text.split(SEP))
        if not prompt or not answer:
            raise GenerationParseError("empty task or answer")
        return prompt, answer

    def task_grammar(self) -> str | None:
        """The Lark rules (llguidance's dialect) of a generated task, or None when the format is free text.

        They define the rules ``prompt`` and ``answer``: a task's prompt and its answer as :meth:`simulator_text`
        writes them (`genenv_engine.backends.grammar.task_grammar` joins them in the simulator's output style).
        The simulator's decoding then only writes strings of the grammar; it accepts every seed and train task,
        and leaves what it cannot express (a name listed once, a value the prompt fixes) to :meth:`validate`.
        """
        return None

    def repair_prompt(self, prompt: str, reason: str) -> str | None:
        """The prompt of a draft rejected for ``reason``, mended where the mend is unambiguous (a name listed twice:
        its later listing dropped), or None (the default: no mend). The simulator's validator feedback validates
        the mended prompt and, if it holds, teaches it with its gold answer (`Validation.repair`)."""
        return None

    def bucket(self, task: Task) -> str:
        """Difficulty bucket name used for the difficulty mix (default: ``L<level>``)."""
        return f"L{task.level}"

    def template_key(self, prompt: str) -> str:
        """What two generated tasks share when they are the same template: the simulator's duplicate cap
        (``simulator.duplicate_cap``) keeps that many valid generated tasks per key over a run. The default masks
        every number (`near_duplicate_key`); a family whose tasks differ only in numbers returns a key that keeps
        its distinct tasks apart (the prompt itself, or its numbers in a canonical order)."""
        return near_duplicate_key(prompt)

    # ------------------------------------------------------------ validator helpers

    @staticmethod
    def _guard(
        prompt: str, answer: str, parent: Task | None, max_prompt: int, max_answer: int, too_long: str = "too_long"
    ) -> Validation | None:
        """The rejection every validator starts with (over-long text, a copy of the parent), or None."""
        if len(prompt) > max_prompt or len(answer) > max_answer:
            return Validation(False, too_long)
        if parent is not None and prompt == parent.prompt:
            return Validation(False, "copy_of_parent")
        return None

    @classmethod
    def _read_generated(
        cls,
        prompt: str,
        answer: str,
        parent: Task | None,
        read: Any,
        error: type[Exception],
        max_prompt: int,
        max_answer: int,
        too_long: str = "too_long",
    ) -> Any:
        """``read(prompt)`` for a generated pair, or the rejection: `_guard`'s, or the reader's ``error`` as the
        reason (a benchmark's own prompt error; any other exception is a bug and propagates)."""
        rejected = cls._guard(prompt, answer, parent, max_prompt, max_answer, too_long)
        if rejected:
            return rejected
        try:
            return read(prompt)
        except error as err:
            return Validation(False, str(err))

    @staticmethod
    def _generated(parent: Task | None, epoch: int, generator: str | None) -> dict[str, Any]:
        """The split, origin and lineage fields of a task built from simulator output."""
        return {
            "split": "generated",
            "origin": "generated",
            "parent_id": parent.id if parent else None,
            "epoch": epoch,
            "generator": generator,
        }

    def _accept(self, task: Task, answer: str) -> Validation:
        """Accept ``task`` (its gold recomputed) iff the generated ``answer`` passes the checker against it; else
        reject it, with ``task`` as the repair (the prompt was sound)."""
        verdict = self.check(task, answer)
        if not verdict.success:
            return Validation(False, f"answer_mismatch: {verdict.error_type}", repair=task)
        return Validation(True, "", task)

    def _validate_step(
        self,
        prompt: str,
        answer: str,
        read: Callable[[str], StepDraft],
        error: type[Exception],
        max_prompt: int,
        max_answer: int,
        *,
        checker: str,
        task_id: str,
        parent: Task | None,
        epoch: int,
        generator: str | None,
        too_long: str = "too_long",
    ) -> Validation:
        """The whole validator of a step benchmark: the prompt read into its draft (rejections as
        :meth:`_read_generated` gives them), then the draft's :func:`step_task`, generated lineage included,
        accepted iff ``answer`` passes the checker against it (:meth:`_accept`)."""
        draft = self._read_generated(prompt, answer, parent, read, error, max_prompt, max_answer, too_long)
        if isinstance(draft, Validation):
            return draft
        return self._accept(
            step_task(
                draft, task_id, benchmark=self.name, checker=checker, **self._generated(parent, epoch, generator)
            ),
            answer,
        )


_GENERATED_SPLITS: dict[tuple[type, int, SplitSizes, str], dict[str, list[Task]]] = {}
"""Generated splits already made in this process, by class, seed, sizes and constructor options (a `chain`
environment's 32,600 tasks take seconds, and a run builds its environments more than once)."""

UNSEEN_TRIES = 50
"""Draws per task `LadderEnvironment.unseen_tasks` makes before giving up on a level whose prompts are used up."""
SPLIT_PATIENCE = 1000
"""Draws in a row at one level, every prompt already taken, after which `LadderEnvironment._make_split` (without
``tries``) stops with `SplitsExhausted`: the level has run out of new prompts. A level one new prompt short in 40
still passes this many draws but once in 10^11; at 200 it would stop once in 160 (and the stop costs only these)."""


def level_shares(n: int, levels: tuple[int, ...]) -> Counter[int]:
    """How many of ``n`` tasks in equal shares of ``levels`` each level has (`LadderEnvironment._make_split`).

    >>> sorted(level_shares(200, (2, 3, 4)).items())
    [(2, 67), (3, 67), (4, 66)]
    """
    return Counter(levels[i * len(levels) // n] for i in range(n))


class LadderEnvironment(Environment):
    """A benchmark whose tasks a seeded generator samples on a 4-level difficulty ladder (levels 1-4).

    Subclasses implement ``check``, ``validate``, :meth:`draft` (sample one candidate task at a level) and
    :meth:`sibling` (one validated sibling of a source task), all required; the splits, ``sibling_pairs`` and
    ``unseen_tasks`` come from them. A built-in may override :meth:`_official_heldout` to replace the generated
    held-out split with official data.
    """

    SPLIT_PLAN: tuple[tuple[str, tuple[int, ...]], ...] = (
        ("heldout", (1, 2, 3, 4)),
        ("train", (1, 2, 3, 4)),
        ("seed", (2, 3, 4)),
    )
    """Splits in generation order (one rng, so the order matters) and the levels each is drawn from."""
    KNOBS: dict[str, tuple[int, ...]] = {}
    """Difficulty knobs beside the level (name -> the values a task can be asked for with `task_at`)."""
    reserve_official_prompts: bool = False
    """Keep generated seed/train prompts off the official held-out prompts (else those may repeat one)."""

    def __init__(self, seed: int = 0, sizes: SplitSizes | None = None, data_dir: str | None = None) -> None:
        super().__init__(seed, sizes, data_dir)
        self._splits: dict[str, list[Task]] | None = None
        self._unseen: dict[tuple[int, tuple[int, ...]], list[Task]] = {}
        self._prompts: frozenset[str] | None = None
        self._tally: dict[int, list[int]] = {}
        """Level -> [distinct prompts taken, draws] while splits are built (for `SplitsExhausted`)."""
        self._needs: dict[int, dict[str, int]] = {}
        """Level -> split -> the tasks it asks of that level (for `SplitsExhausted`)."""

    def splits(self) -> dict[str, list[Task]]:
        """Seeded, prompt-disjoint splits: train/heldout in equal L1-L4 quarters, seed from L2-L4.

        Computed once per instance (callers get fresh lists), and once per process for a benchmark without user
        data (`_GENERATED_SPLITS`: the same class, seed and sizes give the same tasks). The rng is seeded with
        ``<name>-splits-<seed>``; task ids are ``<name>/<split>/<index:05d>``. When
        :meth:`_official_heldout` returns tasks they replace the generated held-out split. A level that gives no
        new prompt in `SPLIT_PATIENCE` draws in a row raises `SplitsExhausted` (its prompts found, the tasks the
        sizes ask of it).
        """
        key = (type(self), self.seed, self.sizes, json.dumps(self.constructor_options, sort_keys=True, default=repr))
        if self._splits is None and self.data_dir is None and key in _GENERATED_SPLITS:
            self._splits = _GENERATED_SPLITS[key]
        if self._splits is None:
            official = self._official_heldout()
            rng = random.Random(f"{self.name}-splits-{self.seed}")
            seen = {t.prompt for t in official} if official is not None and self.reserve_official_prompts else set()
            self._tally, self._needs = {}, {}
            for split in ("seed", "train", "heldout"):
                for levels in (levels for name, levels in self.SPLIT_PLAN if name == split):
                    for level, count in level_shares(getattr(self.sizes, split), levels).items():
                        self._needs.setdefault(level, {})[split] = count
            self._splits = {
                split: self._make_split(split, getattr(self.sizes, split), levels, rng, seen)
                for split, levels in self.SPLIT_PLAN
            }
            if official is not None:
                self._splits["heldout"] = list(official)
            elif self.data_dir is None:
                _GENERATED_SPLITS[key] = self._splits
        return {split: list(tasks) for split, tasks in self._splits.items()}

    def unseen_tasks(self, n: int, levels: tuple[int, ...] = ()) -> list[Task]:
        """``n`` train-like tasks in equal shares of ``levels`` (default all four) whose prompts no split has, so
        neither the warm start nor held-out has seen them: ids ``<name>/unseen/<index:05d>``, split ``unseen``.

        The same for the same seed, ``n`` and levels (their own rng, ``<name>-unseen-<seed>-<levels>``).
        """
        levels = tuple(levels) or (1, 2, 3, 4)
        key = (n, levels)
        if key not in self._unseen:  # a level whose prompts run out gives fewer tasks rather than looping forever
            seen = set(self._split_prompts())
            rng = random.Random(f"{self.name}-unseen-{self.seed}-{','.join(map(str, levels))}")
            self._unseen[key] = self._make_split("unseen", n, levels, rng, seen, tries=UNSEEN_TRIES)
        return list(self._unseen[key])

    def task_at(
        self,
        level: int,
        rng: random.Random,
        task_id: str,
        taken: set[str],
        knobs: dict[str, int] | None = None,
        **fields: Any,
    ) -> Task:
        """One new task at ``level`` (and ``knobs``, see :attr:`KNOBS`) drawn by the benchmark's generator, built
        with ``fields`` (split, origin, epoch, generator ...). Its prompt is in no split, so neither the warm start
        nor held-out has it, and not in ``taken`` unless `UNSEEN_TRIES` draws all were; it joins ``taken``."""
        splits = self._split_prompts()
        fallback = None
        for _ in range(UNSEEN_TRIES):
            prompt, build = self._draft_at(level, rng, knobs or {})
            if prompt in splits:
                continue
            if prompt not in taken:
                taken.add(prompt)
                return build(task_id, **fields)
            fallback = fallback or build
        if fallback is None:
            raise ValueError(
                f"{self.name}: no task at level {level} {knobs or ''} outside the splits in {UNSEEN_TRIES} draws"
            )
        return fallback(task_id, **fields)

    def _split_prompts(self) -> frozenset[str]:
        if self._prompts is None:
            self._prompts = frozenset(t.prompt for tasks in self.splits().values() for t in tasks)
        return self._prompts

    def _draft_at(self, level: int, rng: random.Random, knobs: dict[str, int]) -> tuple[str, Callable[..., Task]]:
        """:meth:`draft` with the :attr:`KNOBS` values in ``knobs`` (a benchmark with knobs overrides this)."""
        if knobs:
            raise ValueError(f"{self.name} has no difficulty knobs; got {sorted(knobs)}")
        return self.draft(level, rng)

    def _make_split(
        self, split: str, n: int, levels: tuple[int, ...], rng: random.Random, seen: set[str], tries: int | None = None
    ) -> list[Task]:
        """``n`` tasks in equal shares of ``levels`` (shuffled), redrawing any prompt already in ``seen``; with
        ``tries``, a task whose ``tries`` draws are all seen is left out (fewer tasks), without it `SPLIT_PATIENCE`
        such draws raise `SplitsExhausted` (never an endless loop)."""
        mix = [levels[i * len(levels) // n] for i in range(n)]
        rng.shuffle(mix)
        for level, count in level_shares(n, levels).items() if tries is None else ():
            self._needs.setdefault(level, {}).setdefault(split, count)
        tasks: list[Task] = []
        with paused_gc():
            for level in mix:
                tally = self._tally.setdefault(level, [0, 0])
                for _ in range(SPLIT_PATIENCE if tries is None else tries):
                    prompt, build = self.draft(level, rng)
                    tally[1] += 1
                    if prompt not in seen:
                        seen.add(prompt)
                        tally[0] += 1
                        tasks.append(build(f"{self.name}/{split}/{len(tasks):05d}", split=split, origin="seed"))
                        break
                else:
                    if tries is None:
                        raise self._exhausted(level)
        return tasks

    def _exhausted(self, level: int) -> SplitsExhausted:
        """The one line of a ``level`` out of new prompts: what it gave, what the split sizes ask of it, what to do."""
        (found, draws), needs = self._tally[level], self._needs[level]
        asked = " + ".join(f"{split} {count:,}" for split, count in needs.items())
        sizes = f"seed={self.sizes.seed}, train={self.sizes.train}, heldout={self.sizes.heldout}"
        lower = (
            f"{type(self).__name__}.DEFAULT_SIZES (now {sizes}, the sizes a run builds it at)"
            if self.sizes == self.DEFAULT_SIZES
            else f"the split sizes asked for ({sizes})"
        )
        return SplitsExhausted(
            self.name,
            f"level {level} gave {found:,} distinct prompts in {draws:,} draws; the "
            f"splits need {sum(needs.values()):,} ({asked} at level {level}): lower "
            f"{lower} or widen level {level} of its draft",
        )

    @abstractmethod
    def draft(self, level: int, rng: random.Random) -> tuple[str, Callable[..., Task]]:
        """Sample one task at ``level`` (1-4) from ``rng`` alone (so the splits are the same for the same seed): its
        prompt and ``build(task_id, **task_fields) -> Task``, the task with that prompt, its gold and
        ``difficulty={"level": level, ...}``, and the fields given (split, origin, ...). The prompt is returned
        before the task is built so a prompt already drawn costs nothing; a prompt drawn twice is redrawn."""

    def _official_heldout(self) -> list[Task] | None:
        """Official tasks that replace the generated held-out split (default: None, keep the built-in one)."""
        return None

    def sibling_pairs(self, tasks: list[Task], rng: random.Random, n: int) -> list[tuple[Task, Task]]:
        """``n`` (source, sibling) pairs: random sources, each sibling from :meth:`sibling`."""
        return [(source, self.sibling(source, rng, task_id)) for source, task_id in self.sibling_sources(tasks, rng, n)]

    def sibling_sources(self, tasks: list[Task], rng: random.Random, n: int) -> Iterator[tuple[Task, str]]:
        """The ``n`` sources of :meth:`sibling_pairs` and their siblings' ids, each source drawn from ``rng`` when
        asked for (after the previous sibling's draws)."""
        if n > 0 and not tasks:
            raise ValueError("sibling_pairs needs at least one source task")
        for i in range(n):
            yield rng.choice(tasks), f"{self.name}/sib/{i:05d}"

    @abstractmethod
    def sibling(self, source: Task, rng: random.Random, task_id: str) -> Task:
        """A task like ``source`` that :meth:`validate` accepts with ``parent=source`` (build it with
        :meth:`_as_sibling`, redrawing while that gives None), usually at a :meth:`_sibling_level`, id ``task_id``:
        the simulator's warm start learns to write tasks from these pairs."""

    @staticmethod
    def _sibling_level(source: Task, rng: random.Random, lo: int = 1, hi: int = 4) -> int:
        """The source's level w.p. 0.5, else one step up or down; clamped to ``[lo, hi]``."""
        level = source.level if rng.random() < 0.5 else source.level + rng.choice((-1, 1))
        return min(hi, max(lo, level))

    def _as_sibling(self, source: Task, prompt: str, answer: str, task_id: str) -> Task | None:
        """The task the validator builds for a candidate sibling of ``source``, or None if it rejects it."""
        verdict = self.validate(prompt, answer, task_id=task_id, parent=source, generator="builtin-sibling")
        return verdict.task if verdict.ok else None
