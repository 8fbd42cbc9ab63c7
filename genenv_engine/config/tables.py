"""Nested TOML tables: dotted keys nested, one table merged over another, keys of earlier versions moved to their
place now, a config dataclass built from a table (each value checked against its field's type) and back.

Keys of earlier versions (`RENAMED_SETTINGS`: the Ray settings, now the ``[ray]`` table; the model's threads, device
and execution switches and the top-level backend and batch sizes, now the ``[runtime]`` table; the settings retired
with their study, `RETIRED_VALUES`, now a note strategy or the ``[study]`` table) are still read, with a
`RenamedSettingWarning`.
"""

from __future__ import annotations

import copy
import warnings
from dataclasses import MISSING, fields, is_dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from genenv_engine.config.checks import check, default_of
from genenv_engine.core.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Section = TypeVar("Section", bound="DataclassInstance")
"""A config dataclass `build` makes."""

RENAMED_SETTINGS = {
    "ray": "ray.address",
    "ray_workers": "ray.workers",
    "validate_batch": "ray.validate_batch",
    "ray_call_timeout": "ray.call_timeout",
    "backend": "runtime.backend",
    "rollout_batch": "runtime.rollout_batch",
    "generate_batch": "runtime.generate_batch",
    "model.threads": "runtime.threads",
    "model.device": "runtime.device",
    "model.micro_batch": "runtime.micro_batch",
    "model.logprob_chunk": "runtime.logprob_chunk",
    "model.gradient_checkpointing": "runtime.gradient_checkpointing",
    "model.train_forward": "runtime.train_forward",
    "model.inference_dtype": "runtime.inference_dtype",
    "model.static_decode": "runtime.static_decode",
    "simulator.steer": "simulator.note",
    "simulator.success_note": "simulator.note",
    "simulator.steer_hold": "study.steer_hold",
    "simulator.steer_relabel": "study.steer_relabel",
    "simulator.seed_beta": "study.seed_beta",
}
"""Dotted keys of earlier versions -> their dotted key now; still read, with a `RenamedSettingWarning`. Every one
names a value, never a table: a table under an old name (``[ray]``) is today's table of that name."""

RETIRED_VALUES: dict[str, dict[Any, Any]] = {
    "simulator.steer": {False: None, True: "steer"},
    "simulator.success_note": {True: None, False: "fixed_line"},
    "simulator.steer_hold": {False: None},
    "simulator.steer_relabel": {False: None},
    "simulator.seed_beta": {20.0: None},
}
"""The settings retired with their study, old value -> the value their new key takes (`RENAMED_SETTINGS`): the
success note's two switches became note strategies (``simulator.note``), the rest settings of the ``[study]``
table. None marks the old default, which changed nothing: a saved config holding it (every config saved before the
retirement holds every setting) drops it without a warning. A value not listed moves unchanged."""


class RenamedSettingWarning(DeprecationWarning):
    """A TOML file, saved session or override uses a key of an earlier version (`RENAMED_SETTINGS`)."""


def nest(overrides: dict[str, Any]) -> dict[str, Any]:
    """Dotted keys to nested tables: ``{"a.b": 1}`` -> ``{"a": {"b": 1}}``.

    >>> nest({"model.kind": "hf", "epochs": 2})
    {'model': {'kind': 'hf'}, 'epochs': 2}
    """
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def _table_of(data: dict[str, Any], dotted: str) -> tuple[dict[str, Any] | None, str]:
    """The table of ``data`` that holds the dotted key (None where a table on the way is missing) and its leaf."""
    *parents, leaf = dotted.split(".")
    table: Any = data
    for part in parents:
        table = table.get(part)
        if not isinstance(table, dict):
            return None, leaf
    return table, leaf


def _old_keys(data: dict[str, Any]) -> list[str]:
    """The keys of `RENAMED_SETTINGS` that ``data`` sets as values (a table under an old name is today's)."""
    out = []
    for old in RENAMED_SETTINGS:
        table, leaf = _table_of(data, old)
        if table is not None and leaf in table and not isinstance(table[leaf], dict):
            out.append(old)
    return out


def renamed(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` (nested, as read from TOML) with the keys of earlier versions moved to their new place
    (`RENAMED_SETTINGS`), warning once per key; a key given in both spellings is an error.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     renamed({"ray": "local", "ray_workers": 4, "model": {"threads": 1, "kind": "tiny"}}, "run.toml")
    {'model': {'kind': 'tiny'}, 'ray': {'address': 'local', 'workers': 4}, 'runtime': {'threads': 1}}
    """
    old_keys = _old_keys(data)
    if not old_keys:
        return data
    out = copy.deepcopy(data)
    for old in old_keys:  # in the table's order: the old top-level ``ray`` value leaves before ``ray.*`` arrive
        new = RENAMED_SETTINGS[old]
        table, leaf = _table_of(out, old)
        assert table is not None
        value = was = table.pop(leaf)
        if old in RETIRED_VALUES:
            values = RETIRED_VALUES[old]
            value = values.get(value, value) if isinstance(value, (bool, int, float, str)) else value
            if value is None:  # the old default: nothing to carry
                continue
        *sections, new_leaf = new.split(".")
        target = out
        for part in sections:
            target = target.setdefault(part, {})
        check(new_leaf not in target, old, f"is the old spelling of {new}, which {source} also sets; keep {new} alone")
        target[new_leaf] = value
        spelled = f"{new_leaf} = {value!r}" if value is not was else f"{new_leaf} = ..."
        warnings.warn(
            f"{source}: setting {old!r}{f' = {was!r}' if value is not was else ''} is now {new!r} "
            f"([{'.'.join(sections)}] {spelled}); the old key is read for now",
            RenamedSettingWarning,
            stacklevel=3,
        )
    return out


def drop_none(value: Any) -> Any:
    """``value`` ready for TOML: None values left out of tables, tuples as lists.

    >>> drop_none({"a": None, "b": (1, 2), "c": {"d": None}})
    {'b': [1, 2], 'c': {}}
    """
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, tuple):
        return list(value)
    return value


def merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` over ``base``, table by table (a value that is not a table replaces the one under it).

    >>> merge({"epochs": 2, "agent": {"lr": 1.0, "rollouts": 8}}, {"agent": {"lr": 2.0}})
    {'epochs': 2, 'agent': {'lr': 2.0, 'rollouts': 8}}
    """
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def coerce(cls: type, name: str, value: Any, path: str) -> Any:
    """Check a TOML value against the field's default type; convert lists to tuples."""
    sample = default_of(cls, name)
    values = cls.__dataclass_fields__[name].metadata.get("values")  # type: ignore[attr-defined]
    if isinstance(sample, bool):
        check(isinstance(value, bool), path, f"must be true or false, got {value!r}")
    elif isinstance(sample, int):
        check(isinstance(value, int) and not isinstance(value, bool), path, f"must be an integer, got {value!r}")
    elif isinstance(sample, float):
        check(isinstance(value, (int, float)) and not isinstance(value, bool), path, f"must be a number, got {value!r}")
        value = float(value)
    elif isinstance(sample, str):
        check(isinstance(value, str), path, f"must be a string, got {value!r}")
    elif isinstance(sample, dict) and values is float:
        check(
            isinstance(value, dict)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value.values()),
            path,
            f"must be a table of numbers, got {value!r}",
        )
        value = {str(k): float(v) for k, v in value.items()}
    elif isinstance(sample, dict) and values is dict:
        check(
            isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()),
            path,
            f"must be a table of tables (benchmark -> options), got {value!r}",
        )
        value = {str(k): dict(v) for k, v in value.items()}
    elif isinstance(sample, dict) and values == "setting":
        check(
            isinstance(value, dict) and not any(isinstance(v, dict) for v in value.values()),
            path,
            f"must be a table of settings (name = value, no nested table), got {value!r}",
        )
        value = {str(k): list(v) if isinstance(v, tuple) else v for k, v in value.items()}
    elif isinstance(sample, dict):
        check(
            isinstance(value, dict) and all(isinstance(v, str) for v in value.values()),
            path,
            f"must be a table of strings, got {value!r}",
        )
        value = dict(value)
    elif isinstance(sample, tuple):
        if isinstance(value, str):
            value = [v.strip() for v in value.split(",") if v.strip()]
        check(isinstance(value, (list, tuple)), path, f"must be a list, got {value!r}")
        value = tuple(value)
    return value


def build(cls: type[Section], data: dict[str, Any], prefix: str, unknown: dict[str, Any] | None = None) -> Section:
    """``cls`` from nested ``data``; a key ``cls`` has no field for raises, or with ``unknown`` given is set aside
    there by dotted key."""
    known = {f.name: f for f in fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        path = f"{prefix}{key}"
        if key not in known:
            if unknown is None:
                raise ConfigError(path, f"unknown setting; known: {', '.join(known)}")
            unknown[path] = value
            continue
        sub = known[key].default_factory if known[key].default_factory is not MISSING else None
        if sub is not None and is_dataclass(sub):
            check(isinstance(value, dict), path, "must be a table")
            kwargs[key] = build(sub, value, f"{path}.", unknown)
        elif value is None:
            kwargs[key] = None
        else:
            kwargs[key] = coerce(cls, key, value, path)
    return cls(**kwargs)
