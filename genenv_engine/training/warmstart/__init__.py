"""Epoch 0: both roles warm-started by supervised fine-tuning from one base, cached per key.

- `genenv_engine.training.warmstart.cache`: where entries live, the cache key, the entry lock, lookups;
- `genenv_engine.training.warmstart.shipped`: the warm starts shipped inside the package, checked and installed;
- `genenv_engine.training.warmstart.training`: each role's SFT, its pairs, progress and samples;
- `genenv_engine.training.warmstart.stages`: `warm_start`, the cached entry made in two stages;
- `genenv_engine.training.warmstart.command`: ``python -m genenv_engine.training.warmstart ship``.

The names below are those modules', resolved on first use, so importing this package loads nothing (and the
command can set the process up before torch loads).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "cache": (
        "DONE",
        "WARM_START_VERSION",
        "cache_key",
        "cache_root",
        "cached_folder",
        "entry_lock",
        "needs_simulator",
        "remove_stale_temp",
        "serves",
    ),
    "shipped": (
        "MANIFEST",
        "SHIPPED_COPY",
        "SHIPPED_ENV",
        "SHIPPED_PARTS",
        "SHIPPED_ROOT",
        "install_shipped",
        "ship",
        "shipped_folder",
        "shipped_problems",
    ),
    "training": ("SAMPLES", "SAMPLE_SHARE", "EncodedPairs", "Sample", "agent_pairs", "simulator_pairs", "tail_mean"),
    "stages": ("cached_agent", "is_cached", "warm_start"),
    "command": ("main",),
}
_HOME = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    """A submodule, or one of its names listed in ``_EXPORTS``, imported on first use."""
    if name in _EXPORTS:
        return importlib.import_module(f"{__name__}.{name}")
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_HOME[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME) | set(_EXPORTS))


if TYPE_CHECKING:
    from genenv_engine.training.warmstart.cache import (
        DONE,
        WARM_START_VERSION,
        cache_key,
        cache_root,
        cached_folder,
        entry_lock,
        needs_simulator,
        remove_stale_temp,
        serves,
    )
    from genenv_engine.training.warmstart.command import main
    from genenv_engine.training.warmstart.shipped import (
        MANIFEST,
        SHIPPED_COPY,
        SHIPPED_ENV,
        SHIPPED_PARTS,
        SHIPPED_ROOT,
        install_shipped,
        ship,
        shipped_folder,
        shipped_problems,
    )
    from genenv_engine.training.warmstart.stages import cached_agent, is_cached, warm_start
    from genenv_engine.training.warmstart.training import (
        SAMPLE_SHARE,
        SAMPLES,
        EncodedPairs,
        Sample,
        agent_pairs,
        simulator_pairs,
        tail_mean,
    )
