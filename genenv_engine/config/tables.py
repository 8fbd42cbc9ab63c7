"""Nested TOML tables: dotted keys nested, one table merged over another, keys of earlier versions moved to their
place now, a config dataclass built from a table (each value checked against its field's type) and back.

Top-level keys of earlier versions (`RENAMED_SETTINGS`: the Ray settings, now the ``[ray]`` table) are still read,
with a `RenamedSettingWarning`.
"""

from __future__ import annotations

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
}
"""Top-level keys of earlier versions -> their dotted key now; still read, with a `RenamedSettingWarning`."""


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


def renamed(data: dict[str, Any], source: str) -> dict[str, Any]:
    """``data`` (nested, as read from TOML) with the keys of earlier versions moved to their new place
    (`RENAMED_SETTINGS`), warning once per key; a key given in both spellings is an error.

    >>> import warnings
    >>> with warnings.catch_warnings():
    ...     warnings.simplefilter("ignore")
    ...     renamed({"ray": "local", "ray_workers": 4, "epochs": 2}, "run.toml")
    {'epochs': 2, 'ray': {'address': 'local', 'workers': 4}}
    """
    old = [key for key in RENAMED_SETTINGS if key in data and not (key == "ray" and isinstance(data[key], dict))]
    if not old:
        return data
    out = dict(data)
    table = dict(out["ray"]) if isinstance(out.get("ray"), dict) else {}
    for key in old:
        new = RENAMED_SETTINGS[key]
        section, leaf = new.split(".")
        check(leaf not in table, key, f"is the old spelling of {new}, which {source} also sets; keep {new} alone")
        table[leaf] = out.pop(key)
        warnings.warn(
            f"{source}: setting {key!r} is now {new!r} ([{section}] {leaf} = ...); the old key is read for now",
            RenamedSettingWarning,
            stacklevel=3,
        )
    out["ray"] = table
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
