"""Command-line values: ``--set KEY=VALUE`` items as dotted-key overrides, each value parsed as TOML."""

from __future__ import annotations

import tomllib
from typing import Any

from genenv_engine.core.errors import ConfigError


def parse_value(text: str) -> Any:
    """Parse a ``--set`` value as TOML (numbers, booleans, lists), falling back to a plain string.

    >>> parse_value("0.5"), parse_value("[3, 4]"), parse_value("true"), parse_value("lora")
    (0.5, [3, 4], True, 'lora')
    """
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_sets(items: list[str]) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as dotted-key overrides, each value parsed as TOML.

    >>> parse_sets(["curriculum.beta=10", "benchmarks=['bfcl']"])
    {'curriculum.beta': 10, 'benchmarks': ['bfcl']}
    """
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ConfigError(item, "--set needs KEY=VALUE")
        out[key.strip()] = parse_value(text.strip())
    return out
