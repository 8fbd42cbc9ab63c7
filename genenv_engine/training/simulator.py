"""The simulator role: write n task variations per seed, validate them, and cap near-duplicates.

Two prompt styles implement the paper's "original task + answer -> new similar task + answer":
``compact`` (models trained from scratch) reads a seed as ``<prompt> => <answer>`` under a ``gen``
system turn and writes one line in the same shape; ``instruct`` (instruction-tuned models) gives
an instruction, the example task, its answer and the agent's recent success rate against the
target alpha, and expects exactly ``TASK: ...`` and ``ANSWER: ...`` lines. The text is untrusted:
it is parsed strictly, the environment recomputes the gold answer, and a rejected generation is
kept with its reason (output over :data:`~genenv_engine.core.limits.MAX_GENERATION_CHARS` is rejected as
``too_long`` unparsed; a validator search that runs out of budget as ``budget``). Near-duplicates
(same prompt with numbers masked) are capped across the pool so calibration cannot be reached by
repeating a handful of tasks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from genenv_engine.backends.base import GenerationBackend, Sampling
from genenv_engine.backends.grammar import task_grammar
from genenv_engine.core.limits import BudgetExceeded, PluginError, generation_too_long, plugin_error, third_party
from genenv_engine.core.records import Task, Validation
from genenv_engine.environments.base import SEP, Environment, GenerationParseError, near_duplicate_key
from genenv_engine.training.policy import Policy

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig

SIMULATOR_SYSTEM = "gen"
"""System turn that tells the shared base model it is playing the simulator (compact style)."""
INSTRUCT_SYSTEM = (
    "You are an environment simulator. You write practice tasks for an AI agent. You are shown one example "
    "task, its correct answer, and how often the agent solved recent tasks of this benchmark. Write ONE new "
    "task of the same kind and in exactly the same format, with its correct answer. Aim for a task the agent "
    "solves at the target rate: harder if its recent success is above the target, easier if below. Reply "
    "with exactly two lines and nothing else:\nTASK: <the new task>\nANSWER: <its correct answer>"
)
"""System turn of the instruct style."""


@dataclass
class Draft:
    """One simulator output before validation: its conditioning seed, the prompt it saw, what it wrote."""

    seed: Task
    batch_id: str
    context: str
    """The templated simulator prompt (the RWR training context)."""
    text: str
    token_ids: list[int]
    task_id: str
    """The id the task gets when stored."""
    policy_version: int | None = None
    """Version of the simulator weights that wrote it (the epoch of their RWR update, 0: the warm start); set by
    the executor (`genenv_engine.executors`) and stored on the task."""


@dataclass(frozen=True)
class Generation:
    """A validated simulator output: the draft's fields and the task row to store, accepted (valid) or a record
    of the rejection with its reason."""

    seed: Task
    batch_id: str
    context: str
    """The templated simulator prompt (the RWR training context)."""
    text: str
    token_ids: list[int]
    task: Task
    task_id: str = ""
    repair: Task | None = None
    """For a draft whose prompt is sound and whose answer is wrong: the task with the gold answer recomputed
    (`Validation.repair`), which ``simulator.repairs`` teaches the simulator as the corrected target."""
    recomputed: bool = False
    """Admitted on the validator's gold rather than its own answer (`admit_on_gold`): the RWR update trains on the
    task with that gold, not on the text the simulator wrote."""
    mended: bool = False
    """Admitted as the task of its mended prompt (`admit_on_gold` with ``mended``), not of the prompt it wrote."""

    @property
    def admission(self) -> str:
        """How a valid generation was admitted, one of `genenv_engine.core.records.ADMISSIONS`."""
        return "mended" if self.mended else "on_gold" if self.recomputed else "as_written"


def success_note(benchmark: str, rate: float | None, alpha: float) -> str:
    """The recent-success line of the instruct prompt.

    >>> success_note("bfcl", 0.3125, 0.5)
    'Agent success on recent bfcl tasks: 31% (target 50%).'
    >>> success_note("bfcl", None, 0.5)
    'Agent success on recent bfcl tasks: not measured yet (target 50%).'
    """
    seen = "not measured yet" if rate is None else f"{rate:.0%}"
    return f"Agent success on recent {benchmark} tasks: {seen} (target {alpha:.0%})."


def note_fields(style: str, note: str | None) -> dict[str, str | None] | None:
    """An epoch's prompt note (`genenv_engine.method.strategies.epoch_note`) as its variation batches store it
    (``batches.prompt_note``): the compact style's steer word or the instruct style's success line; None when the
    prompt carries none.

    >>> note_fields("compact", "harder"), note_fields("compact", None)
    ({'steer': 'harder', 'success_line': None}, None)
    >>> note_fields("instruct", "Agent success on recent bfcl tasks: 25% (target 50%).")["success_line"]
    'Agent success on recent bfcl tasks: 25% (target 50%).'
    """
    if note is None:
        return None
    return {"steer": note, "success_line": None} if style == "compact" else {"steer": None, "success_line": note}


def note_text(fields: dict[str, Any] | None) -> str | None:
    """The note a prompt carried, back from its stored fields (`note_fields`'s inverse).

    >>> note_text(note_fields("compact", "same")), note_text(None)
    ('same', None)
    """
    if not fields:
        return None
    return fields.get("steer") or fields.get("success_line")


def simulator_prompt(
    policy: Policy, env: Environment, seed: Task, style: str = "compact", note: str | None = None
) -> str:
    """The simulator's chat prompt for one conditioning seed (``note``: the instruct style's success line, or the
    compact style's note, a word written before the seed as ``<word>| <seed>``). A warm-start or anchor pair's
    prompt is this on its source with the note strategy's `pair_note`."""
    if style == "compact":
        text = env.simulator_text(seed) if note is None else f"{note}| {env.simulator_text(seed)}"
        return policy.chat([{"role": "system", "content": SIMULATOR_SYSTEM}, {"role": "user", "content": text}])
    note = note or success_note(env.name, None, 0.5)
    user = f"Benchmark: {env.name}\nExample task: {seed.prompt}\nExample answer: {seed.answer}\n{note}"
    return policy.chat([{"role": "system", "content": INSTRUCT_SYSTEM}, {"role": "user", "content": user}])


def simulator_target(env: Environment, task: Task, style: str = "compact") -> str:
    """What the simulator should write for ``task`` (the supervised target of warm start and RWR)."""
    if style == "compact":
        return env.simulator_text(task)
    return f"TASK: {task.prompt}\nANSWER: {task.answer}"


def job_grammar(config: RunConfig, env: Environment) -> str | None:
    """The grammar the simulator samples ``env``'s drafts under: its task grammar in the configured output style,
    or None (free text) when ``simulator.constrained`` is off or the benchmark declares none."""
    rules = env.task_grammar() if config.simulator.constrained else None
    return None if rules is None else task_grammar(rules, config.simulator.prompt)


def parse_instruct(text: str) -> tuple[str, str]:
    """Strictly split instruct-style output into (task, answer): two lines, ``TASK:`` then ``ANSWER:``.

    >>> parse_instruct("TASK: add 2 and 3\\nANSWER: add(a=2,b=3)\\n")
    ('add 2 and 3', 'add(a=2,b=3)')
    >>> parse_instruct("Sure! TASK: add 2 and 3\\nANSWER: 5")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.base.GenerationParseError: the first line must start with 'TASK:'
    """
    lines = text.strip().split("\n")
    if len(lines) != 2:
        raise GenerationParseError(f"expected exactly two lines (TASK:, ANSWER:), got {len(lines)}")
    first, second = (line.strip() for line in lines)
    if not first.startswith("TASK:"):
        raise GenerationParseError("the first line must start with 'TASK:'")
    if not second.startswith("ANSWER:"):
        raise GenerationParseError("the second line must start with 'ANSWER:'")
    prompt, answer = first[len("TASK:") :].strip(), second[len("ANSWER:") :].strip()
    if not prompt or not answer:
        raise GenerationParseError("empty task or answer")
    return prompt, answer


def parse_output(env: Environment, text: str, style: str = "compact") -> tuple[str, str]:
    """(prompt, answer) from simulator text in ``style``; the environment's own format checks apply to both."""
    if style == "compact":
        return env.parse_generation(text)
    prompt, answer = parse_instruct(text)
    return env.parse_generation(f"{prompt}{SEP}{answer}")


def parse_and_validate(
    env: Environment, text: str, *, task_id: str, seed: Task, epoch: int, generator: str, style: str = "compact"
) -> Task:
    """Turn raw simulator text into a stored task: the environment's accepted task or an invalid record."""
    return judge(env, text, task_id=task_id, seed=seed, epoch=epoch, generator=generator, style=style)[0]


def judge(
    env: Environment, text: str, *, task_id: str, seed: Task, epoch: int, generator: str, style: str = "compact"
) -> tuple[Task, Task | None]:
    """`parse_and_validate`'s task, and its repair: the validator's when the prompt was sound and the answer wrong,
    or the task of the prompt the environment mends (a name listed twice) when that prompt holds."""
    too_long = generation_too_long(text)
    if too_long:
        return _invalid(env, task_id, text[:1000], "", too_long, seed, epoch, generator), None
    try:
        prompt, answer = parse_output(env, text, style)
    except GenerationParseError as exc:
        return _invalid(env, task_id, text, "", f"parse_error: {exc}", seed, epoch, generator), None
    try:
        verdict = env.validate(prompt, answer, task_id=task_id, parent=seed, epoch=epoch, generator=generator)
    except BudgetExceeded as exc:  # a validator that does not catch its own solver's budget
        return _invalid(env, task_id, prompt, answer, f"budget: {exc}", seed, epoch, generator), None
    except Exception as exc:
        if not third_party(env):
            raise
        return _invalid(env, task_id, prompt, answer, plugin_error(exc), seed, epoch, generator), None
    if third_party(env) and not isinstance(verdict, Validation):
        raise PluginError(env, "validate", task_id, verdict, "Validation")
    if third_party(env) and verdict.ok and not isinstance(verdict.task, Task):
        raise PluginError(env, "validate", task_id, verdict.task, "a Task in its accepted Validation")
    if verdict.ok and verdict.task is not None:
        return verdict.task, None
    try:
        repair = verdict.repair or _mended(
            env, prompt, answer, verdict.reason, task_id=task_id, seed=seed, epoch=epoch, generator=generator
        )
    except Exception:
        if not third_party(env):
            raise
        repair = None
    return _invalid(env, task_id, prompt, answer, verdict.reason, seed, epoch, generator), repair


def _mended(
    env: Environment, prompt: str, answer: str, reason: str, *, task_id: str, seed: Task, epoch: int, generator: str
) -> Task | None:
    """The repair of a draft whose prompt the environment can mend (`Environment.repair_prompt`): the mended
    prompt's task with its gold answer, if the mended prompt is valid (with the draft's answer or another)."""
    mended = env.repair_prompt(prompt, reason)
    if mended is None or mended == prompt:
        return None
    try:
        verdict = env.validate(mended, answer, task_id=task_id, parent=seed, epoch=epoch, generator=generator)
    except BudgetExceeded:
        return None
    return verdict.task if verdict.ok else verdict.repair


def _invalid(
    env: Environment, task_id: str, prompt: str, answer: str, reason: str, seed: Task, epoch: int, generator: str
) -> Task:
    return Task(
        id=task_id,
        benchmark=env.name,
        prompt=prompt,
        answer=answer,
        split="generated",
        origin="generated",
        parent_id=seed.id,
        epoch=epoch,
        generator=generator,
        valid=False,
        reason=reason,
        granularity=env.granularity,
    )


def sample(
    backend: GenerationBackend,
    policy: Policy,
    env: Environment,
    seeds: list[Task],
    n: int,
    sampling: Sampling,
    *,
    epoch: int,
    id_prefix: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 128,
    style: str = "compact",
    note: str | None = None,
    first: int = 0,
) -> list[Draft]:
    """Write ``n`` variations of each seed, unvalidated (``first``: the index of ``seeds[0]`` in the seed list the
    task ids count, when this call writes one batch of a longer list)."""
    prefix = id_prefix or f"gen/e{epoch}/{env.name}"
    contexts = [simulator_prompt(policy, env, s, style, note) for s in seeds]
    flat = [(si, v) for si in range(len(seeds)) for v in range(n)]
    outs = []
    for start in range(0, len(flat), chunk):
        part = flat[start : start + chunk]
        outs.extend(backend.generate([contexts[si] for si, _ in part], sampling))
        if progress:
            progress(min(start + chunk, len(flat)), len(flat))
    return [
        Draft(
            seeds[si],
            f"e{epoch}/{seeds[si].id}",
            contexts[si],
            comp.text,
            comp.token_ids,
            f"{prefix}/{first + si:04d}-{v}",
        )
        for (si, v), comp in zip(flat, outs, strict=False)
    ]


def validate(
    env: Environment,
    drafts: list[Draft],
    *,
    epoch: int,
    generator: str,
    origin: str = "generated",
    style: str = "compact",
) -> list[Generation]:
    """Parse and validate every draft: one `Generation` each, with its task to store (valid or not)."""
    out = []
    for d in drafts:
        task, repair = judge(env, d.text, task_id=d.task_id, seed=d.seed, epoch=epoch, generator=generator, style=style)
        out.append(
            Generation(
                d.seed,
                d.batch_id,
                d.context,
                d.text,
                d.token_ids,
                task.with_(origin=origin, simulator_version=d.policy_version),
                d.task_id,
                repair,
            )
        )
    return out


def admit_on_gold(g: Generation, mended: bool = False) -> Generation:
    """``simulator.answer_check = false``: a draft rejected only for its answer (``answer_mismatch``, with the task
    of the prompt as written, its gold recomputed, as its repair) admitted as that task; with ``mended``
    (``simulator.admit_mended``) also a draft whose prompt the environment mended into a valid task (its repair for
    any other reason); any other generation as it is. The admitted task keeps the draft's id and provenance.

    >>> seed = Task(id="s", benchmark="b", prompt="p", answer="a")
    >>> bad = Task(id="g1", benchmark="b", prompt="q", answer="9", origin="static", valid=False,
    ...            reason="answer_mismatch: value_error", epoch=2, simulator_version=1)
    >>> g = admit_on_gold(Generation(seed, "e2/b", "ctx", "q => 9", [1], bad, "g1", repair=bad.with_(answer="7")))
    >>> g.task.valid, g.task.answer, g.task.reason, g.task.origin, g.recomputed, g.mended, g.repair
    (True, '7', '', 'static', True, False, None)
    >>> other = Generation(seed, "e2/b", "ctx", "x", [1], bad.with_(reason="bad_hint: x"), "g1",
    ...                    repair=bad.with_(prompt="q2", answer="7"))
    >>> admit_on_gold(other) is other
    True
    >>> g = admit_on_gold(other, mended=True)
    >>> g.task.valid, g.task.prompt, g.task.answer, g.recomputed, g.mended
    (True, 'q2', '7', True, True)
    """
    if g.task.valid or g.repair is None:
        return g
    on_gold = g.task.reason.startswith("answer_mismatch")
    if not (on_gold or mended):
        return g
    t = g.task
    task = g.repair.with_(
        id=t.id,
        split=t.split,
        origin=t.origin,
        parent_id=t.parent_id,
        epoch=t.epoch,
        generator=t.generator,
        simulator_version=t.simulator_version,
        valid=True,
        reason="",
    )
    return replace(g, task=task, repair=None, recomputed=True, mended=not on_gold)


def per_benchmark(
    items: list[Any], envs: dict[str, Environment], fn: Callable[[str, Environment, list[Any]], list[Any]]
) -> list[Any]:
    """``fn(name, env, share)`` on each benchmark's share of ``items`` (drafts or generations, by their seed's
    benchmark), benchmark after benchmark in ``envs`` order; its results come back in ``items``' order.

    >>> from types import SimpleNamespace as Item
    >>> items = [Item(seed=Item(benchmark=b), n=i) for i, b in enumerate("abab")]
    >>> per_benchmark(items, {"a": None, "b": None}, lambda name, env, share: [f"{name}{x.n}" for x in share])
    ['a0', 'b1', 'a2', 'b3']
    """
    out: list[Any] = [None] * len(items)
    for name, env in envs.items():
        where = [i for i, item in enumerate(items) if item.seed.benchmark == name]
        for i, result in zip(where, fn(name, env, [items[i] for i in where]), strict=False):
            out[i] = result
    missing = sorted({items[i].seed.benchmark for i, result in enumerate(out) if result is None})
    if missing:
        raise KeyError(f"no environment for benchmark(s) {missing} (enabled: {sorted(envs)})")
    return out


def validate_drafts(
    envs: dict[str, Environment],
    drafts: list[Draft],
    *,
    epoch: int,
    generator: str,
    origin: str = "generated",
    style: str = "compact",
) -> list[Generation]:
    """`validate` for drafts of several benchmarks, each by its own benchmark's environment, in the drafts' order
    (what an executor runs, in this process or on a worker, for any batch of drafts)."""
    return per_benchmark(
        drafts,
        envs,
        lambda _, env, mine: validate(env, mine, epoch=epoch, generator=generator, origin=origin, style=style),
    )


def cap_duplicates(
    gens: list[Generation],
    existing_prompts: set[str],
    key_counts: Counter,
    cap: int,
    heldout_prompts: frozenset[str] = frozenset(),
    key: Callable[[str], str] = near_duplicate_key,
) -> tuple[list[Generation], dict[str, float | None]]:
    """Reject held-out copies, exact repeats of known prompts and near-duplicates beyond ``cap`` per key.

    ``key`` maps a prompt to its template (the environment's `Environment.template_key`; default numbers masked);
    ``key_counts`` holds the keys already in the pool and is updated. Returns the generations
    (the rejected ones with their reason) and the unique fraction of the valid ones before capping and how
    many were rejected.
    """
    valid = [g for g in gens if g.task.valid]
    unique = len({g.task.prompt for g in valid}) / len(valid) if valid else None
    seen = set(existing_prompts)
    rejected = 0
    out = []
    for g in gens:
        reason = None
        if g.task.valid:
            template = key(g.task.prompt)
            if g.task.prompt in heldout_prompts:
                reason = "heldout_copy: the prompt of a held-out task"
            elif g.task.prompt in seen:
                reason = "duplicate: same prompt as an earlier task"
            elif key_counts[template] >= cap:
                reason = f"duplicate_cap: {cap} tasks share this template"
            else:
                seen.add(g.task.prompt)
                key_counts[template] += 1
        if reason is not None:
            rejected += 1
            g = replace(g, task=g.task.with_(valid=False, reason=reason))
        out.append(g)
    return out, {"unique_fraction": unique, "duplicates_rejected": float(rejected)}
