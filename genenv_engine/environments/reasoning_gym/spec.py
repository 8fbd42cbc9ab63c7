"""Task specifications of a reasoning-gym dataset: its curriculum's attributes set within their ranges, and a seed.

A reasoning-gym question is free text that cannot be re-derived, so the simulator of an ``rg:`` benchmark writes
the *specification* of a task instead, and the dataset's own generator materializes question and gold from it.
A specification reads ``num_terms=2..4 num_digits=1..2 => seed 4821``: each curriculum attribute in the
curriculum's order, a range attribute as ``<lo>..<hi>`` (its configuration's lower and upper fields) and a scalar
one as one value, then the seed of the generator. The attributes and the seed sit either side of the
simulator's ``=>`` separator, so the text has the ``<prompt> => <answer>`` shape every output style expects.

Provides :class:`Attribute` (one attribute: its configuration fields, its setting at each genenv level and the
values a specification may give it), :func:`render_value`, :func:`spec_text`, :func:`read_spec` (a strict reader
that says why a specification is refused), :func:`spec_level` (the lowest genenv level whose configuration covers
a specification), :func:`config_of`, :func:`settings_of` and :func:`grammar_rules` (the Lark rules of a
specification, llguidance's dialect). Nothing here imports reasoning-gym: the adapter reads the curriculum into
`Attribute` records.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SEED_LIMIT = 1_000_000
"""A specification's seed is an integer in ``[0, SEED_LIMIT)``."""
SEED_PATTERN = "0|[1-9][0-9]{0,5}"
"""A seed as the reader takes it (no leading zero, fewer than seven digits)."""
assert SEED_LIMIT == 10**6, "SEED_PATTERN spells out the seed's digits"
RANGE_JOIN = ".."
"""Between a range attribute's lower and upper value."""


class SpecError(ValueError):
    """A specification that cannot be read or is out of range; the message is the validator's reason."""


def render_value(value: Any) -> str:
    """A level value as a specification writes it: compact JSON (``true``, ``0.5``, ``[1,2]``).

    >>> render_value(3), render_value(0.25), render_value(True), render_value([0.5, 0.5]), render_value("abc")
    ('3', '0.25', 'true', '[0.5,0.5]', 'abc')
    """
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class Attribute:
    """One curriculum attribute: ``fields`` (a scalar's configuration field, or a range's lower and upper field),
    ``levels`` (its setting at genenv levels 1, 2, ...: a value, or a ``(lo, hi)`` pair for a range) and
    ``values`` (what a specification may give it: the values its settings reach, in level order)."""

    name: str
    fields: tuple[str, ...]
    levels: tuple[Any, ...]
    values: tuple[Any, ...]
    ensure_interval: bool = False
    """A range whose lower value must lie below its upper value."""

    @property
    def is_range(self) -> bool:
        return len(self.fields) == 2

    def text(self, setting: Any) -> str:
        """``name=<value>`` or ``name=<lo>..<hi>``."""
        if self.is_range:
            return f"{self.name}={render_value(setting[0])}{RANGE_JOIN}{render_value(setting[1])}"
        return f"{self.name}={render_value(setting)}"

    def read(self, text: str) -> Any:
        """The setting ``text`` (what follows ``name=``) gives; a `SpecError` naming the attribute and the values
        it may take when out of range."""
        by_text = {render_value(v): v for v in self.values}
        parts = text.split(RANGE_JOIN) if self.is_range else [text]
        if len(parts) != len(self.fields) or any(p not in by_text for p in parts):
            allowed = ", ".join(by_text)
            raise SpecError(f"out_of_range: {self.name}={text} (values {allowed})")
        if not self.is_range:
            return by_text[parts[0]]
        lo, hi = (by_text[p] for p in parts)
        if lo > hi or (self.ensure_interval and lo == hi):
            raise SpecError(
                f"out_of_range: {self.name}={text} (lower {'below' if self.ensure_interval else 'at most'} upper)"
            )
        return (lo, hi)

    def level_of(self, setting: Any) -> int | None:
        """The lowest genenv level whose setting covers ``setting`` (a range inside its range, a scalar equal)."""
        for level, at in enumerate(self.levels, start=1):
            if (at[0] <= setting[0] and setting[1] <= at[1]) if self.is_range else at == setting:
                return level
        return None


def spec_text(attributes: Sequence[Attribute], settings: Sequence[Any], seed: int) -> str:
    """A specification as the simulator writes it.

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 2), (2, 3)), (2, 3))
    >>> spec_text([terms], [(2, 3)], 41)
    'num_terms=2..3 => seed 41'
    """
    return " ".join(a.text(s) for a, s in zip(attributes, settings, strict=False)) + f" => seed {seed}"


def read_spec(attributes: Sequence[Attribute], prompt: str, answer: str) -> tuple[tuple[Any, ...], int]:
    """The settings and seed of a specification's two sides (``prompt``: the attributes; ``answer``:
    ``seed <n>``); a `SpecError` whose message is the reason (``bad_spec``, ``out_of_range``, ``bad_seed``).

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 2), (2, 3)), (2, 3))
    >>> people = Attribute("n_people", ("n_people",), (2, 3), (2, 3))
    >>> read_spec([terms, people], "num_terms=2..3 n_people=3", "seed 7")
    (((2, 3), 3), 7)
    >>> read_spec([terms, people], "num_terms=2..9 n_people=3", "seed 7")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.reasoning_gym.spec.SpecError: out_of_range: num_terms=2..9 (values 2, 3)
    >>> read_spec([terms, people], "n_people=3 num_terms=2..3", "seed 7")
    Traceback (most recent call last):
    ...
    genenv_engine.environments.reasoning_gym.spec.SpecError: bad_spec: expected num_terms=... first, got 'n_people=3'
    """
    parts = prompt.split(" ")
    if len(parts) != len(attributes):
        raise SpecError(
            f"bad_spec: {len(attributes)} attributes ({', '.join(a.name for a in attributes)}), got {len(parts)} parts"
        )
    settings = []
    for i, (attribute, part) in enumerate(zip(attributes, parts, strict=False)):
        name, eq, value = part.partition("=")
        if name != attribute.name or not eq:
            place = "first" if i == 0 else f"after {attributes[i - 1].name}"
            raise SpecError(f"bad_spec: expected {attribute.name}=... {place}, got {part[:30]!r}")
        settings.append(attribute.read(value))
    match = re.fullmatch(f"seed ({SEED_PATTERN})", answer)
    if match is None:
        raise SpecError(f"bad_seed: expected 'seed <0-{SEED_LIMIT - 1}>', got {answer[:30]!r}")
    return tuple(settings), int(match[1])


def spec_level(attributes: Sequence[Attribute], settings: Sequence[Any]) -> int:
    """The lowest genenv level whose configuration covers every setting (each attribute's `Attribute.level_of`).

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 2), (2, 3), (2, 4)), (2, 3, 4))
    >>> people = Attribute("n_people", ("n_people",), (2, 3, 4), (2, 3, 4))
    >>> spec_level([terms, people], [(3, 3), 2]), spec_level([terms, people], [(2, 4), 3])
    (2, 3)
    """
    levels = [a.level_of(s) for a, s in zip(attributes, settings, strict=False)]
    missing = [a.text(s) for a, s, level in zip(attributes, settings, levels, strict=False) if level is None]
    if missing:
        raise SpecError(f"out_of_range: {' '.join(missing)} is no level's setting")
    return max([1, *levels])  # type: ignore[list-item]


def config_of(attributes: Sequence[Attribute], settings: Sequence[Any]) -> dict[str, Any]:
    """The configuration fields a specification sets.

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 2),), (2,))
    >>> people = Attribute("n_people", ("n_people",), (2,), (2,))
    >>> config_of([terms, people], [(2, 5), 3])
    {'min_terms': 2, 'max_terms': 5, 'n_people': 3}
    """
    config: dict[str, Any] = {}
    for attribute, setting in zip(attributes, settings, strict=False):
        config.update(zip(attribute.fields, setting if attribute.is_range else (setting,), strict=False))
    return config


def settings_of(attribute: Attribute) -> list[Any]:
    """Every setting a specification may give ``attribute``: a scalar's values, a range's ordered pairs of values
    (the lower below the upper when the range must keep two distinct ends).

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 3), (2, 4)), (2, 3, 4), ensure_interval=True)
    >>> settings_of(terms)
    [(2, 3), (2, 4), (3, 4)]
    """
    if not attribute.is_range:
        return list(attribute.values)
    values = attribute.values
    return [(lo, hi) for i, lo in enumerate(values) for hi in values[i + attribute.ensure_interval :]]


def grammar_rules(attributes: Sequence[Attribute]) -> str:
    """The Lark rules (``prompt``: the attributes in order, each one of its `settings_of`; ``answer``: the seed)
    of a specification: every string of them is in range.

    >>> terms = Attribute("num_terms", ("min_terms", "max_terms"), ((2, 2), (2, 3)), (2, 3))
    >>> print(grammar_rules([terms]))
    prompt: a0
    answer: "seed " SEED
    a0: "num_terms=2..2" | "num_terms=2..3" | "num_terms=3..3"
    SEED: /0|[1-9][0-9]{0,5}/
    """
    lines = ["prompt: " + ' " " '.join(f"a{i}" for i in range(len(attributes))), 'answer: "seed " SEED']
    for i, attribute in enumerate(attributes):
        lines.append(f"a{i}: " + " | ".join(json.dumps(attribute.text(s)) for s in settings_of(attribute)))
    lines.append(f"SEED: /{SEED_PATTERN}/")
    return "\n".join(lines)
