"""The study part of the config: the ``[study]`` table (`RunConfig.study`), settings that exist for one study and
that only the package registering them reads.

A package with study settings (this repository's lab) declares them as a frozen dataclass, one field per setting
with its docstring, and registers it with `register_settings` when its strategies are imported; it reads a run's
values with `study_settings`. The engine never reads them: `check_study`, called where a run resolves its
strategies, only checks that every key of the table is a registered setting of the right type, and runs the
dataclass's own ``check_run(config)`` (a setting that needs another of the run).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from typing import Any, TypeVar

from genenv_engine.config.checks import check
from genenv_engine.config.run import RunConfig
from genenv_engine.config.tables import build

STUDY_SETTINGS: list[type] = []
"""The registered study settings dataclasses, in registration order."""

Settings = TypeVar("Settings")


def register_settings(cls: type[Settings]) -> type[Settings]:
    """Class decorator: register a frozen dataclass of study settings (the same definition again replaces it)."""
    key = (cls.__module__, cls.__qualname__)
    STUDY_SETTINGS[:] = [c for c in STUDY_SETTINGS if (c.__module__, c.__qualname__) != key]
    STUDY_SETTINGS.append(cls)
    return cls


def study_settings(config: RunConfig, cls: type[Settings]) -> Settings:
    """The run's values of ``cls``'s settings (each absent one at its default), checked.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Probe:
    ...     rounds: int = 2
    >>> study_settings(RunConfig(study={"rounds": 5, "other": True}), Probe)
    Probe(rounds=5)
    """
    names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    return build(cls, {k: v for k, v in config.study.items() if k in names}, "study.")  # type: ignore[type-var]


def study_keys() -> dict[str, type]:
    """Every registered study setting's name -> the dataclass that declares it."""
    return {f.name: cls for cls in STUDY_SETTINGS for f in fields(cls)}


def check_study(config: RunConfig, register: Callable[[], object] = lambda: None) -> None:
    """Raise `ConfigError` unless every key of ``config``'s ``[study]`` table is a registered study setting with a
    value of its type, and each registered dataclass's ``check_run(config)`` passes; ``register`` (the strategies'
    plugin loader, whose imports register the settings) runs first when the table is not empty."""
    if not config.study:
        return
    register()
    known = study_keys()
    for key in config.study:
        check(
            key in known,
            f"study.{key}",
            f"unknown study setting; known: {', '.join(sorted(known))}"
            if known
            else "no installed package registers study settings (this repository's lab does: genenv-lab)",
        )
    for cls in STUDY_SETTINGS:
        settings: Any = study_settings(config, cls)
        if hasattr(settings, "check_run"):
            settings.check_run(config)
