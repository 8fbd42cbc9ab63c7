"""The engine's shared error types, in a module that imports nothing of the engine.

`ConfigError` is raised by the configuration and by any layer that checks a configured value (an environment
asked for levels its split lacks, a missing model folder); keeping it here lets those layers raise it without
importing `genenv_engine.config`.
"""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the field.

    >>> str(ConfigError("curriculum.alpha", "must be in (0, 1)"))
    "config error in 'curriculum.alpha': must be in (0, 1)"
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"config error in '{name}': {message}")
        self.field = name
