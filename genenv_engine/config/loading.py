"""Loading and saving a `RunConfig`: a preset (``presets/<name>.toml``, merged over the preset it ``extends``), then
an optional user TOML file, then dotted-key overrides; a saved session's ``config.toml`` read back, with the
settings this version does not know set aside for reports.

Keys of earlier versions (`genenv_engine.config.tables.RENAMED_SETTINGS`) are read from every source, with a
warning; a saved config without a setting whose default changed since reads as the run it was (`SAVED_BEFORE`).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from genenv_engine.config.run import RunConfig
from genenv_engine.config.tables import build, merge, nest, renamed
from genenv_engine.core.errors import ConfigError

PRESET_DIR = Path(__file__).parent.parent / "presets"


def preset_names() -> list[str]:
    """Names of the built-in presets."""
    return sorted(p.stem for p in PRESET_DIR.glob("*.toml"))


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a TOML file, turning syntax errors into a ConfigError naming the file."""
    try:
        return tomllib.loads(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"invalid TOML: {exc}") from None


def preset_data(name: str, _seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """A preset's settings: its file merged over the preset it names as ``extends`` (if any), so a preset that
    changes one setting of another holds that setting alone."""
    if name in _seen:
        raise ConfigError("extends", f"presets extend each other in a loop: {' -> '.join((*_seen, name))}")
    if name not in preset_names():
        raise ConfigError(
            "extends" if _seen else "preset", f"unknown preset {name!r}; known: {', '.join(preset_names())}"
        )
    data = renamed(read_toml(PRESET_DIR / f"{name}.toml"), f"preset {name}")
    parent = data.pop("extends", None)
    return merge(preset_data(parent, (*_seen, name)), data) if parent else data


def load_config(
    preset: str | None = None, config_file: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> RunConfig:
    """Build a RunConfig: preset file, then the user's TOML file, then explicit overrides."""
    data: dict[str, Any] = {}
    if config_file is not None:
        data = renamed(read_toml(config_file), str(config_file))
    name = preset or data.get("preset") or "tiny"
    base = merge(preset_data(name), data)
    base["preset"] = name
    return build(RunConfig, merge(base, renamed(nest(overrides or {}), "overrides")), "").check_paths()


def save_config(config: RunConfig, path: str | Path) -> None:
    """Write the config as TOML (atomically: temp file then rename)."""
    import tomli_w

    target = Path(path)
    tmp = target.with_suffix(".tmp")
    tmp.write_text(tomli_w.dumps(config.to_dict()))
    tmp.replace(target)


def config_from_file(path: str | Path) -> RunConfig:
    """Rebuild a RunConfig from a saved session config.toml alone."""
    return config_from_dict(read_toml(path), str(path))


SAVED_BEFORE = {
    "runtime.train_forward": "transformers",
    "runtime.static_decode": False,
    "model.sft_length_groups": 0,
}
"""Settings whose default changed after saved configs existed without them -> the value a run had before the
setting existed: a saved config (a session's, a run record's) holds every setting of its version, so one without
the key ran that way, and reads so (a user's TOML file gets today's defaults)."""


def as_saved(data: dict[str, Any]) -> dict[str, Any]:
    """A saved config's table with each `SAVED_BEFORE` setting it lacks set to the value it ran with.

    >>> as_saved({"model": {"kind": "tiny"}, "runtime": {"static_decode": True}})["runtime"]
    {'static_decode': True, 'train_forward': 'transformers'}
    """
    out = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    for dotted, before in SAVED_BEFORE.items():
        table, leaf = dotted.split(".")
        section = out.setdefault(table, {})
        if isinstance(section, dict) and leaf not in section:
            section[leaf] = before
    return out


def config_from_dict(data: dict[str, Any], source: str = "saved config") -> RunConfig:
    """Rebuild a RunConfig from `RunConfig.to_dict`'s nested dicts (paths unchecked, as for a saved session); keys
    of earlier versions are read as their new ones (`RENAMED_SETTINGS`), ``source`` naming the data in the warning,
    and a setting the data lacks whose default changed since as it ran then (`SAVED_BEFORE`)."""
    return build(RunConfig, as_saved(renamed(data, source)), "")


def saved_config(path: str | Path) -> tuple[RunConfig, dict[str, Any]]:
    """A saved config.toml as a RunConfig plus the settings this genenv version does not know (dotted key ->
    value), set aside instead of refused, so a report can read a session written by another version.

    Paths are not checked: the session may come from another machine."""
    unknown: dict[str, Any] = {}
    return build(RunConfig, as_saved(renamed(read_toml(path), str(path))), "", unknown), unknown


def replace_config(config: RunConfig, **changes: Any) -> RunConfig:
    """dataclasses.replace for RunConfig (kept here so callers need not import dataclasses)."""
    return replace(config, **changes)
