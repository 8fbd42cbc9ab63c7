"""The engine's shared error types, in a module that imports nothing of the engine.

`ConfigError` is raised by the configuration and by any layer that checks a configured value (an environment
asked for levels its split lacks, a missing model folder); keeping it here lets those layers raise it without
importing `genenv_engine.config`. `SplitsExhausted`, a `ConfigError`, is the one line of a benchmark whose
generator runs out of new prompts at a level before its splits are full.
"""

from __future__ import annotations

from typing import Any


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the field.

    >>> str(ConfigError("curriculum.alpha", "must be in (0, 1)"))
    "config error in 'curriculum.alpha': must be in (0, 1)"
    """

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"config error in '{name}': {message}")
        self.field = name


class SplitsExhausted(ConfigError):
    """A benchmark's generator gave fewer distinct prompts at one level than its split sizes need; the message
    starts with the benchmark (``field`` is ``benchmarks``, the setting that enabled it).

    >>> str(SplitsExhausted("lineq", "level 1 gave 378 distinct prompts"))
    "benchmark 'lineq': level 1 gave 378 distinct prompts"
    """

    def __init__(self, benchmark: str, message: str) -> None:
        ValueError.__init__(self, f"benchmark {benchmark!r}: {message}")
        self.field = "benchmarks"
        self.benchmark = benchmark


class SessionBusy(RuntimeError):
    """Another live process runs the session (`genenv_engine.storage.lease`); ``holder`` is its record (PID, host,
    since, what), or None when it did not write one."""

    def __init__(self, message: str, holder: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.holder = holder


class SessionUnwritable(RuntimeError):
    """The session folder cannot take the lease or the run's writes (a read-only or lock-less filesystem)."""
