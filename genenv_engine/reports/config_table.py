"""A session's saved config as a report shows it: nested dicts with defaults filled in, and one (key, value,
meaning) row per setting, settings this genenv version does not know included and marked.
"""

from __future__ import annotations

from dataclasses import asdict, fields, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from genenv_engine.config import RunConfig


def read_config(session_dir: Path) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """The session's config as nested dicts (defaults filled in) and one (key, value, meaning) row per setting;
    settings this genenv version does not know are listed too, marked as such."""
    from genenv_engine.config import saved_config

    return config_rows(*saved_config(session_dir / "config.toml"))


def config_rows(config: RunConfig, unknown: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[str, str, str]]]:
    """`read_config`'s nested dicts and rows of a config read by `config.saved_config`."""
    from genenv_engine.config import RunConfig, field_docs

    merged: dict[str, Any] = asdict(config)
    rows: list[tuple[str, str, str]] = []
    top_docs = field_docs(RunConfig)
    for f in fields(RunConfig):
        value = getattr(config, f.name)
        if is_dataclass(value):
            docs = field_docs(type(value))
            rows.extend(
                (f"{f.name}.{sf.name}", _fmt_value(getattr(value, sf.name)), docs.get(sf.name, "").replace("``", ""))
                for sf in fields(value)
            )
        else:
            rows.append((f.name, _fmt_value(value), top_docs.get(f.name, "").replace("``", "")))
    for key, value in unknown.items():
        *sections, name = key.split(".")
        table = merged
        for section in sections:
            table = table.setdefault(section, {})
        table[name] = value
        rows.append((key, _fmt_value(value), "(not a setting of this genenv version)"))
    rows.sort(key=lambda r: ("." in r[0], r[0]))
    return merged, rows


def _fmt_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) if value else "(none)"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in value.items()) if value else "(none)"
    if value is None:
        return "(unset)"
    return str(value)
