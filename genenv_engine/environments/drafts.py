"""The prompt parsing and step-task records two or more benchmarks share: `read_signatures` (a prompt's strict list
of function or API signatures), `first_listings` (a prompt's list with each item kept at its first listing, the
repair of a duplicate listing) and `step_task` / `step_draft` (a step task from a draft read back through a
benchmark's grammar, as BFCL-mini and API-Bank-mini build theirs), with the protocols they read (`Signed`,
`StepDraft`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any, Protocol

from genenv_engine.core.records import Task


class Signed(Protocol):
    """A catalog entry (an API, a function) that renders as one signature, e.g. ``add(a:int,b:int)``."""

    @property
    def signature(self) -> str: ...


def read_signatures(
    text: str,
    catalog: Mapping[str, Signed],
    *,
    pattern: str,
    noun: str,
    limit: int,
    error: type[Exception],
    clip: int = 20,
) -> tuple[str, ...]:
    """The names in a space-separated list of signatures, each exactly as its ``catalog`` entry renders.

    Strict, for a prompt's ``<signatures>`` head: raises ``error`` at the first fault, as
    ``bad_<noun>_list`` (a part not matching ``pattern``, shown cut to ``clip`` characters),
    ``unknown_<noun>``, ``bad_signature`` (the name is known, its parameters differ), ``duplicate_<noun>``,
    or, once all parts read, ``too_many_<noun>s`` (more than ``limit``).

    >>> from types import SimpleNamespace as Entry
    >>> catalog = {"add": Entry(signature="add(a,b)"), "neg": Entry(signature="neg(x)")}
    >>> read = lambda text: read_signatures(text, catalog, pattern=r"[a-z]+\\([a-z,]*\\)", noun="function",
    ...                                     limit=2, error=ValueError)
    >>> read("neg(x) add(a,b)")
    ('neg', 'add')
    >>> read("add(a)")
    Traceback (most recent call last):
    ...
    ValueError: bad_signature: add
    >>> read("neg(x)  add(a,b)")
    Traceback (most recent call last):
    ...
    ValueError: bad_function_list: ''
    """
    names: list[str] = []
    for sig in text.split(" "):
        name = sig.split("(", 1)[0]
        if not re.fullmatch(pattern, sig):
            raise error(f"bad_{noun}_list: {sig[:clip]!r}")
        if name not in catalog:
            raise error(f"unknown_{noun}: {name}")
        if sig != catalog[name].signature:
            raise error(f"bad_signature: {name}")
        if name in names:
            raise error(f"duplicate_{noun}: {name}")
        names.append(name)
    if len(names) > limit:
        raise error(f"too_many_{noun}s: {len(names)}")
    return tuple(names)


class StepDraft(Protocol):
    """A prompt read back through a benchmark's grammar, holding all a step task needs (e.g. BFCL-mini's and
    API-Bank-mini's ``Draft``)."""

    prompt: str

    @property
    def answer(self) -> str: ...

    @property
    def expected(self) -> dict[str, Any]: ...

    @property
    def tools(self) -> list[dict[str, Any]]: ...

    @property
    def level(self) -> int: ...

    @property
    def features(self) -> dict[str, Any]: ...


def first_listings(prompt: str, head: str, end: str = " | ") -> str | None:
    """``prompt`` with every item of its space-separated ``head`` list (``<head><items><end>...``) kept at its first
    listing only; None when the prompt has no such list or no item is listed twice.

    >>> first_listings("F: f(x) g(y) f(x) | Q: f 3", "F: ")
    'F: f(x) g(y) | Q: f 3'
    >>> first_listings("F: f(x) g(y) | Q: f 3", "F: ") is None
    True
    """
    if not prompt.startswith(head) or end not in prompt:
        return None
    items, rest = prompt[len(head) :].split(end, 1)
    kept = list(dict.fromkeys(items.split(" ")))
    return None if len(kept) == len(items.split(" ")) else f"{head}{' '.join(kept)}{end}{rest}"


def step_task(draft: StepDraft, task_id: str, *, benchmark: str, checker: str, **fields: Any) -> Task:
    """The step task of ``draft``: its prompt, gold answer, expected, tools, level and features, plus ``fields``
    (split, origin, lineage)."""
    return Task(
        id=task_id,
        benchmark=benchmark,
        prompt=draft.prompt,
        answer=draft.answer,
        expected=draft.expected,
        tools=draft.tools,
        difficulty={"level": draft.level, "features": draft.features},
        checker=checker,
        granularity="step",
        **fields,
    )


def step_draft(draft: StepDraft, *, benchmark: str, checker: str) -> tuple[str, Callable[..., Task]]:
    """What :meth:`LadderEnvironment.draft` returns for ``draft``: its prompt, and ``build(task_id, **fields)``
    making its :func:`step_task`.

    >>> from types import SimpleNamespace as Draft
    >>> draft = Draft(prompt="F: neg(x:int) | Q: negate 4", answer="neg(x=4)", expected={"calls": []}, tools=[],
    ...               level=1, features={})
    >>> prompt, build = step_draft(draft, benchmark="bfcl", checker="bfcl_ast")
    >>> task = build("bfcl/train/00000", split="train", origin="seed")
    >>> prompt == task.prompt, task.answer, task.checker, task.level
    (True, 'neg(x=4)', 'bfcl_ast', 1)
    """
    return draft.prompt, partial(step_task, draft, benchmark=benchmark, checker=checker)
