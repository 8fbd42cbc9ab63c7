"""``genenv env check``: whether an environment keeps the environment API's contract, and how fast it checks.

Provides `check_environment` (every contract of `CONTRACTS` checked on the environment a benchmark spelling names,
any spelling the registry accepts: built-in, ``module:Class``, entry point, ``rg:<dataset>``), its result
`Conformance` (one `Failure` per broken contract, the time per ``check`` and ``validate`` call), `splits_digest`
(the fingerprint of an environment's splits that a second process, run with another ``PYTHONHASHSEED``, computes
again) and `parse_sizes` (``--sizes``); the ``genenv env`` command that prints it is
`genenv_engine.interfaces.env_command`. The checks call the environment's public methods only, as the loop does;
one that raises fails its contract with the exception's type and message, one that runs out of time with where it
was (the split being built and its level, the function running). ``--sizes run`` checks at the sizes a run builds.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

from genenv_engine.core.errors import SplitsExhausted
from genenv_engine.environments import (
    CheckResult,
    Environment,
    SplitSizes,
    Task,
    Validation,
    get_environment,
    resolve_benchmarks,
)
from genenv_engine.environments import base as _base

CONTRACTS: dict[str, str] = {
    "construct": "the class builds with the keywords (seed=, sizes=, data_dir=)",
    "splits_deterministic": "the same splits for the same seed when built again in this process",
    "splits_cross_process": "the same splits for the same seed in a second process with another PYTHONHASHSEED",
    "splits_disjoint": "seed, train and heldout lists of tasks, none empty, no prompt in two of them, unique ids "
    "starting <name>/ and benchmark <name>",
    "gold_passes": "every gold answer passes the checker (a CheckResult with success)",
    "corrupted_fails": "no task accepts both an empty answer and another task's gold, and another task's gold "
    "fails at least 9 tasks in 10",
    "validate_recomputes": "validate accepts each task's simulator text read back, as a task with the id given, "
    "split 'generated', whose own gold and the original gold pass the checker",
    "validate_rejects": "validate rejects a wrong answer and a malformed prompt, each with a reason",
    "siblings": "sibling_pairs gives the pairs asked for, each sibling a new prompt with its source as parent that "
    "validate accepts",
    "grammar": "the task grammar (when given) compiles and accepts the simulator text of the split tasks",
    "warm_start": "warm_start_prefixes gives (task, a proper prefix of its answer) pairs, the tasks in no split",
}
"""The contracts `check_environment` checks, by the name its failure lines start with."""

CHECK_SIZES = SplitSizes(seed=24, train=80, heldout=40)
"""The split sizes an environment is checked at (an environment with fixed data may keep its own)."""
SWAP_PASS_LIMIT = 0.1
"""The largest share of tasks whose checker may accept another task's gold (two tasks can share an answer)."""
SIBLINGS = 20
"""How many sibling pairs are asked for."""
CONTRACT_SECONDS = 120
"""How long one contract's checks may take before it fails as unfinished (an endless loop in the environment)."""
RUN_SIZES = "run"
"""``--sizes run``: the sizes a ``genenv run`` builds the environment at (its class's ``DEFAULT_SIZES``: a run
passes none)."""


@dataclass(frozen=True)
class Failure:
    """One broken contract: its name (a key of `CONTRACTS`) and what was found."""

    contract: str
    detail: str

    @property
    def line(self) -> str:
        """The one line ``genenv env check`` prints.

        >>> Failure("gold_passes", "1 of 2 golds fail the checker").line
        'gold_passes: 1 of 2 golds fail the checker'
        """
        return f"{self.contract}: {self.detail}"


@dataclass
class Conformance:
    """The result of `check_environment`: the benchmark's name, the contracts checked and skipped, the failures,
    and the mean seconds per ``check`` and ``validate`` call."""

    name: str
    checked: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    failures: list[Failure] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    scoring: dict[str, object] = field(default_factory=dict)
    """How a reply is scored (`scoring_of`)."""

    @property
    def ok(self) -> bool:
        return not self.failures

    def as_json(self) -> str:
        """The report as one JSON object (``genenv env check --json``)."""
        return json.dumps(
            {
                "name": self.name,
                "ok": self.ok,
                "failures": [[f.contract, f.detail] for f in self.failures],
                "checked": self.checked,
                "skipped": self.skipped,
                "seconds": self.seconds,
                "scoring": self.scoring,
            }
        )


def scoring_of(env: Environment) -> dict[str, object]:
    """How ``env`` scores a reply: ``mode`` (``sandboxed``: in the contained worker because its scorer may run
    text; ``direct`` otherwise), ``contained`` (the worker's containment), and for a reasoning-gym dataset the
    eligibility check's scan findings and the shares of probed entries that accepted another entry's gold and the
    constant reply."""
    dataset = getattr(env, "dataset", "")
    if env.name.startswith("rg_") and dataset:
        from genenv_engine.environments.reasoning_gym.adapter import eligibility

        verdict = eligibility(dataset)
        return {
            "mode": verdict.scoring,
            "contained": verdict.contained,
            "findings": list(verdict.findings),
            "other_gold_share": round(verdict.other_gold_share, 4),
            "constant_share": round(verdict.constant_share, 4),
            "probed_entries": verdict.entries,
        }
    sandboxed = bool(getattr(env, "sandboxed_check", False))
    return {"mode": "sandboxed" if sandboxed else "direct", "contained": sandboxed}


class _Broken(Exception):
    """A contract found broken (its detail is the message)."""


def _where(frame: FrameType | None) -> str:
    """What the code at ``frame`` was doing, for a contract out of time: the split being built (tasks made, the
    level drawn, its distinct prompts and draws so far) when inside `LadderEnvironment._make_split`, and the
    innermost function outside the standard library; "" when neither is known."""
    parts, inner = [], None
    stdlib = os.path.dirname(os.__file__)
    while frame is not None:
        code = frame.f_code
        if inner is None and not (code.co_filename.startswith(stdlib) and "-packages" not in code.co_filename):
            inner = f"in {code.co_name} at {os.path.basename(code.co_filename)}:{frame.f_lineno}"
        if code is _base.LadderEnvironment._make_split.__code__ and not parts:
            local = frame.f_locals
            tasks, level, env = local.get("tasks"), local.get("level"), local.get("self")
            found, draws = getattr(env, "_tally", {}).get(level, (0, 0))
            parts.append(
                f"building the {local.get('split')} split ({len(tasks or ()):,} of {local.get('n'):,} "
                f"tasks made, drawing at level {level}: {found:,} distinct prompts in {draws:,} draws)"
            )
        frame = frame.f_back
    return "; ".join(parts + ([inner] if inner else []))


@contextmanager
def _time_limit(seconds: int):
    """Raise `_Broken` in the block once ``seconds`` have passed, saying where it was (`_where`; by SIGALRM; no
    limit off the main thread)."""
    if seconds <= 0 or not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(_signum: int, frame: FrameType | None) -> None:
        try:
            where = _where(frame)
        except Exception:  # noqa: BLE001 - the line without where, rather than no line
            where = ""
        raise _Broken(f"did not finish in {seconds} s" + (f": {where}" if where else ""))

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def splits_digest(env: Environment) -> str:
    """The sha256 of every split task's split, id, prompt and answer, in order: equal digests, equal splits.

    >>> from types import SimpleNamespace as Env
    >>> t = Task(id="x/seed/00000", benchmark="x", prompt="p", answer="a")
    >>> splits_digest(Env(splits=lambda: {"seed": [t]})) == splits_digest(Env(splits=lambda: {"seed": [t]}))
    True
    """
    rows = [(split, t.id, t.prompt, t.answer) for split, tasks in sorted(env.splits().items()) for t in tasks]
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def other_hash_seed(current: str | None) -> str:
    """A ``PYTHONHASHSEED`` other than ``current`` (this process's, None when random).

    >>> other_hash_seed(None), other_hash_seed("0"), other_hash_seed("7")
    ('0', '1', '0')
    """
    return "1" if current == "0" else "0"


def sizes_text(sizes: SplitSizes) -> str:
    """``seed,train,heldout``, as `parse_sizes` reads it back."""
    return f"{sizes.seed},{sizes.train},{sizes.heldout}"


def parse_sizes(text: str) -> SplitSizes | None:
    """``seed,train,heldout`` as split sizes, or ``run`` as None (the environment's own, which a run builds);
    ValueError otherwise.

    >>> parse_sizes("24,80,40"), parse_sizes("run")
    (SplitSizes(seed=24, train=80, heldout=40), None)
    """
    if text.strip() == RUN_SIZES:
        return None
    parts = text.split(",")
    if len(parts) != 3 or not all(p.strip().isdigit() for p in parts):
        raise ValueError(f"--sizes takes seed,train,heldout as three whole numbers or {RUN_SIZES!r}, not {text!r}")
    return SplitSizes(*(int(p) for p in parts))


def _digest_elsewhere(spelling: str, seed: int, sizes: SplitSizes, data_dir: str | None) -> str:
    """`splits_digest` computed by a second Python process with another ``PYTHONHASHSEED`` (this one's path)."""
    env = {
        **os.environ,
        "PYTHONHASHSEED": other_hash_seed(os.environ.get("PYTHONHASHSEED")),
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "genenv_engine.interfaces.conformance",
            spelling,
            str(seed),
            sizes_text(sizes),
            data_dir or "",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise _Broken(f"the second process failed: {last}")
    return done.stdout.strip().splitlines()[-1]


def _sample(tasks: list[Task], n: int) -> list[Task]:
    """Up to ``n`` of ``tasks`` spread evenly over the list."""
    if len(tasks) <= n:
        return list(tasks)
    return [tasks[i * len(tasks) // n] for i in range(n)]


class _Checker:
    """The contracts of one environment, in order; each method raises `_Broken` with what it found."""

    def __init__(
        self, env: Environment, spelling: str, seed: int, sizes: SplitSizes, data_dir: str | None, samples: int
    ) -> None:
        self.env, self.spelling, self.seed, self.sizes, self.data_dir = env, spelling, seed, sizes, data_dir
        self.samples = samples
        self.splits: dict[str, list[Task]] = {}
        self.tasks: list[Task] = []
        self.wrong: dict[str, str] = {}
        """Task id -> another task's gold the checker rejects for it."""
        self.timing: dict[str, list[float]] = {"check": [], "validate": []}

    def check(self, task: Task, response: str) -> CheckResult:
        start = time.perf_counter()
        result = self.env.check(task, response)
        self.timing["check"].append(time.perf_counter() - start)
        if not isinstance(result, CheckResult):
            raise _Broken(f"check returned {type(result).__name__}, not CheckResult (task {task.id})")
        return result

    def validate(self, prompt: str, answer: str, task_id: str, parent: Task | None = None) -> Validation:
        start = time.perf_counter()
        verdict = self.env.validate(prompt, answer, task_id=task_id, parent=parent, epoch=1, generator="env-check")
        self.timing["validate"].append(time.perf_counter() - start)
        if not isinstance(verdict, Validation):
            raise _Broken(f"validate returned {type(verdict).__name__}, not Validation (task {task_id})")
        return verdict

    def read_back(self, task: Task) -> tuple[str, str]:
        """The (prompt, answer) the simulator's text of ``task`` reads back as."""
        return self.env.parse_generation(self.env.simulator_text(task))

    def splits_deterministic(self) -> None:
        first = splits_digest(self.env)
        _base._GENERATED_SPLITS.pop((type(self.env), self.seed, self.sizes), None)  # built again, not remembered
        again = type(self.env)(seed=self.seed, sizes=self.sizes, data_dir=self.data_dir)
        if splits_digest(again) != first:
            raise _Broken(f"two builds with seed {self.seed} give different splits")

    def splits_cross_process(self) -> None:
        if _digest_elsewhere(self.spelling, self.seed, self.sizes, self.data_dir) != splits_digest(self.env):
            raise _Broken(
                f"a process with another PYTHONHASHSEED gives different splits for seed {self.seed} "
                "(seed random.Random with a string, never hash() or a set's order)"
            )

    def splits_disjoint(self) -> None:
        splits = self.env.splits()
        if not isinstance(splits, dict) or sorted(splits) != ["heldout", "seed", "train"]:
            raise _Broken(
                f"splits() returned {sorted(splits) if isinstance(splits, dict) else type(splits).__name__}"
                ", not the lists seed, train and heldout"
            )
        name, where, ids = self.env.name, {}, set()
        for split, tasks in splits.items():
            if not tasks:
                raise _Broken(f"the {split} split is empty")
            for _i, task in enumerate(tasks):
                if not isinstance(task, Task):
                    raise _Broken(f"the {split} split holds a {type(task).__name__}, not a Task")
                if not task.id.startswith(f"{name}/") or task.benchmark != name:
                    raise _Broken(
                        f"task {task.id} (benchmark {task.benchmark!r}) of the {split} split is not "
                        f"{name}/<split>/<index> of benchmark {name!r}"
                    )
                if task.prompt in where or task.id in ids:
                    raise _Broken(f"task {task.id} has the prompt or id of {where.get(task.prompt, task.id)}")
                where[task.prompt] = task.id
                ids.add(task.id)
        self.splits = splits
        share = self.samples // 3 + 1
        self.tasks = [t for split in ("seed", "train", "heldout") for t in _sample(splits[split], share)]

    def gold_passes(self) -> None:
        failed = [(t.id, result.error_type) for t in self.tasks if not (result := self.check(t, t.answer)).success]
        if failed:
            raise _Broken(f"{len(failed)} of {len(self.tasks)} golds fail the checker ({failed[0][0]}: {failed[0][1]})")

    def corrupted_fails(self) -> None:
        swapped, both = [], []
        for i, task in enumerate(self.tasks):
            other = next((o for o in self.tasks[i + 1 :] + self.tasks[:i] if o.answer != task.answer), None)
            if other is not None and self.check(task, other.answer).success:
                swapped.append(task.id)
                if self.check(task, "").success:
                    both.append(task.id)
            elif other is not None:
                self.wrong[task.id] = other.answer
        if both:
            raise _Broken(
                f"{len(both)} of {len(self.tasks)} tasks accept both an empty answer and another task's "
                f"gold ({both[0]})"
            )
        if len(swapped) > SWAP_PASS_LIMIT * len(self.tasks):
            raise _Broken(f"{len(swapped)} of {len(self.tasks)} tasks accept another task's gold ({swapped[0]})")

    def validate_recomputes(self) -> None:
        for i, task in enumerate(self.tasks):
            task_id = f"{self.env.name}/check/{i:05d}"
            verdict = self.validate(*self.read_back(task), task_id)
            if not verdict.ok or not isinstance(verdict.task, Task):
                raise _Broken(f"validate rejects the simulator text of {task.id} ({verdict.reason or 'no task'})")
            made = verdict.task
            if (made.id, made.split, made.epoch, made.generator) != (task_id, "generated", 1, "env-check"):
                raise _Broken(
                    f"validate's task for {task.id} has id {made.id!r}, split {made.split!r}, epoch "
                    f"{made.epoch}, generator {made.generator!r} (use _generated(parent, epoch, generator))"
                )
            for answer, what in ((made.answer, "its recomputed gold"), (task.answer, "the original gold")):
                if not self.check(made, answer).success:
                    raise _Broken(f"validate's task for {task.id} fails {what} {answer!r}")

    def validate_rejects(self) -> None:
        for i, task in enumerate(self.tasks):
            if task.id not in self.wrong:
                continue
            prompt, _ = self.read_back(task)
            verdict = self.validate(prompt, self.wrong[task.id], f"{self.env.name}/check/w{i:05d}")
            if verdict.ok or not (isinstance(verdict.reason, str) and verdict.reason.strip()):
                raise _Broken(
                    f"validate {'accepts' if verdict.ok else 'rejects without a reason'} the wrong answer "
                    f"{self.wrong[task.id]!r} to {task.id}"
                )
        if not self.wrong:
            raise _Broken("no wrong answer to try: every task accepts every other task's gold")
        verdict = self.validate("\x00 not a task", "\x00", f"{self.env.name}/check/bad")
        if verdict.ok or not (isinstance(verdict.reason, str) and verdict.reason.strip()):
            raise _Broken(f"validate {'accepts' if verdict.ok else 'rejects without a reason'} a malformed prompt")

    def siblings(self) -> None:
        sources = self.splits["seed"]
        pairs = self.env.sibling_pairs(sources, random.Random(0), SIBLINGS)
        if not isinstance(pairs, list) or len(pairs) != SIBLINGS:
            raise _Broken(
                f"sibling_pairs(seed split, rng, {SIBLINGS}) returned "
                f"{len(pairs) if isinstance(pairs, list) else type(pairs).__name__} pairs"
            )
        for source, sibling in pairs:
            if not (isinstance(source, Task) and isinstance(sibling, Task)):
                raise _Broken("a sibling pair is not two Tasks")
            if sibling.prompt == source.prompt or sibling.parent_id != source.id:
                raise _Broken(f"sibling {sibling.id} copies its source {source.id} or does not name it as parent")
            verdict = self.validate(*self.read_back(sibling), sibling.id, parent=source)
            if not verdict.ok:
                raise _Broken(f"validate rejects sibling {sibling.id} of {source.id} ({verdict.reason})")

    def grammar(self) -> str | None:
        rules = self.env.task_grammar()
        if rules is None:
            return "no task grammar"
        from genenv_engine.backends.grammar import GrammarError, matches, task_grammar
        from genenv_engine.training.tokenizer import build_byte_tokenizer

        tokenizer, grammar = build_byte_tokenizer(), task_grammar(rules, "compact")
        try:
            outside = [t.id for t in self.tasks if not matches(tokenizer, grammar, self.env.simulator_text(t))]
        except GrammarError as exc:
            raise _Broken(f"the task grammar does not compile: {exc}") from None
        if outside:
            raise _Broken(f"the task grammar refuses {len(outside)} of {len(self.tasks)} tasks ({outside[0]})")
        return None

    def warm_start(self) -> str | None:
        pairs = self.env.warm_start_prefixes()
        if not pairs:
            return "no warm-start prefixes"
        prompts = {t.prompt for tasks in self.splits.values() for t in tasks}
        for pair in pairs:
            if not (
                isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Task) and isinstance(pair[1], str)
            ):
                raise _Broken(f"a warm-start pair is {type(pair).__name__} {pair!r:.60}, not (Task, str)")
            task, target = pair
            if not (task.answer.startswith(target) and len(target) < len(task.answer)):
                raise _Broken(f"the target {target!r} of {task.id} is not a proper prefix of its answer")
            if task.prompt in prompts:
                raise _Broken(f"warm-start task {task.id} has the prompt of a split task")
        return None


ORDER: tuple[str, ...] = tuple(c for c in CONTRACTS if c != "construct")
SPLIT_CONTRACTS = {"splits_deterministic", "splits_cross_process", "splits_disjoint"}
"""Contracts that build the splits (skipped once a level has run out of prompts: `SplitsExhausted`)."""
NEEDS_SPLITS = {
    "gold_passes",
    "corrupted_fails",
    "validate_recomputes",
    "validate_rejects",
    "siblings",
    "grammar",
    "warm_start",
}
"""Contracts that read the split tasks `splits_disjoint` found (skipped when the splits are broken)."""


def check_environment(
    spelling: str,
    seed: int = 0,
    sizes: SplitSizes | None = CHECK_SIZES,
    samples: int = 100,
    data_dir: str | None = None,
    cross_process: bool = True,
    limit: int = CONTRACT_SECONDS,
) -> Conformance:
    """Every contract of `CONTRACTS` checked on the environment ``spelling`` names (a `ConfigError` when no
    environment has that name) at split ``sizes`` (None: its own, as a run builds it): at most ``samples`` split
    tasks are checked, spread over the three splits, each contract within ``limit`` seconds. A level out of new
    prompts fails the first split contract with its one line (`SplitsExhausted`) and skips the contracts after it
    that need the splits."""
    (name,), _ = resolve_benchmarks([spelling], {})
    report = Conformance(name)
    try:
        env = get_environment(name, seed, sizes, data_dir)
    except Exception as exc:  # noqa: BLE001 - the plugin's own error, reported as its contract's
        report.failures.append(Failure("construct", f"{type(exc).__name__}: {exc}"))
        return report
    report.scoring = scoring_of(env)
    if sizes is None:  # the second process builds at these (a class that keeps no sizes ignores them)
        sizes = getattr(env, "sizes", None) or CHECK_SIZES
    checker = _Checker(env, spelling, seed, sizes, data_dir, samples)
    exhausted = False
    steps: dict[str, Callable[[], str | None]] = {c: getattr(checker, c) for c in ORDER}
    if not cross_process:
        report.skipped["splits_cross_process"] = "not asked for"
        del steps["splits_cross_process"]
    for contract, step in steps.items():
        if exhausted and contract in SPLIT_CONTRACTS | NEEDS_SPLITS:
            report.skipped[contract] = "a level ran out of new prompts"
            continue
        if contract in NEEDS_SPLITS and not checker.tasks:
            report.skipped[contract] = "no split tasks to check"
            continue
        try:
            with _time_limit(limit):
                skipped = step()
        except _Broken as exc:
            report.failures.append(Failure(contract, str(exc)))
        except SplitsExhausted as exc:
            report.failures.append(Failure(contract, str(exc)))
            exhausted = True
        except Exception as exc:  # noqa: BLE001 - the plugin's own error, reported as its contract's
            report.failures.append(Failure(contract, f"raised {type(exc).__name__}: {exc}"))
        else:
            if skipped:
                report.skipped[contract] = skipped
            else:
                report.checked.append(contract)
    report.seconds = {k: sum(v) / len(v) for k, v in checker.timing.items() if v}
    return report


if __name__ == "__main__":  # the second process of splits_cross_process: spelling, seed, sizes, data_dir
    _spelling, _seed, _sizes, _data = sys.argv[1:5]
    (_name,), _ = resolve_benchmarks([_spelling], {})
    print(splits_digest(get_environment(_name, int(_seed), parse_sizes(_sizes), _data or None)))
