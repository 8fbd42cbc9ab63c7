"""The warm-start cache: where entries live, the key that names one, its lock, and lookups of finished entries.

An entry is cached per preset, model, warm-start settings and seed (``$GENENV_CACHE``, default
``~/.cache/genenv``) in a folder named by `cache_key`; it is made in a temp folder ``<key>.tmp<PID>``
(`fresh_temp`) and moved into place, and a killed run's temp folder is removed by `remove_stale_temp`. One
process trains an entry at a time, holding the OS lock file `entry_lock` names.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path

from genenv_engine.config import NO_SIMULATOR_MODES, ModelConfig, RunConfig
from genenv_engine.training.models import AGENT_INFO, DONE

WARM_START_VERSION = 1
"""Bump when the warm-start recipe changes so stale caches are not reused."""


_LATER_FIELDS = {
    name: getattr(ModelConfig(), name)
    for name in (
        "hub_download",
        "agent_path",
        "simulator_path",
        "agent_tuning",
        "simulator_tuning",
        "lora_r",
        "lora_alpha",
        "lora_dropout",
        "lora_targets",
        "dtype",
    )
} | {"sft_length_groups": 0}
"""Model fields added after warm-start version 1, with the value each had before it existed (see `cache_key`;
``sft_length_groups`` was 0, off, before it became the default 4). ``sft_length_groups`` joins the key although
it computes the same gradient up to float rounding: a tiny warm start is sensitive enough to rounding that its
weights, and so its held-out, differ."""

_MODEL_TABLE_V1 = {"threads": 2, "device": "auto"}
"""What the key hashed of two settings the ``[model]`` table held when keys were first made, now ``[runtime]``
settings the key never reads: their defaults, as constants, so that every key made at them (every preset's, the
shipped warm starts') stays byte-identical. The runtime's other settings were never hashed (or, as
``train_forward``, only away from their default)."""


def cache_root() -> Path:
    """Where warm starts are cached."""
    return Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv")).expanduser()


def cache_key(config: RunConfig) -> str:
    """A short hash of everything that determines the warm-start weights: the method's settings of the model and
    the warm start, the seed and the benchmarks, never the runtime part (`genenv_engine.config.RUNTIME_TABLES`):
    how fast, where and with what rounding a warm start is computed does not make it another one.

    Model fields added after the first cache version join the hash only when set away from their
    defaults, so caches made before they existed stay valid; the simulator's prompt style joins it
    the same way.
    """
    model = {k: v for k, v in asdict(config.model).items() if k not in _LATER_FIELDS or v != _LATER_FIELDS[k]}
    model |= _MODEL_TABLE_V1
    warm = asdict(config.warm_start)
    if not warm["agent_levels"]:  # a setting added later joins the key only when set (earlier keys stay valid)
        del warm["agent_levels"]
    parts: dict[str, object] = {
        "v": WARM_START_VERSION,
        "model": model,
        "warm": warm,
        "seed": config.seed,
        "benchmarks": list(config.benchmarks),
    }
    from genenv_engine.environments import environment_class

    versions = {name: environment_class(name).data_version for name in config.benchmarks}
    if any(v != 1 for v in versions.values()):  # joins the key only when a benchmark's tasks have changed
        parts["data_versions"] = {name: v for name, v in versions.items() if v != 1}
    if config.environments_options:  # a plugin's constructor options may change its tasks
        parts["environments_options"] = config.environments_options
    if config.simulator.prompt != "compact":
        parts["simulator_prompt"] = config.simulator.prompt
    if config.simulator.note != "auto":  # a note strategy may write its own note into the pairs (`pair_note`)
        parts["simulator_note"] = config.simulator.note
    blob = json.dumps(parts, sort_keys=True, default=list)
    return f"{config.preset}-s{config.seed}-{hashlib.sha256(blob.encode()).hexdigest()[:12]}"


def entry_lock(folder: Path) -> Path:
    """The lock file of the cache entry ``folder`` (beside the cache's entries, not among them: lock files are
    never removed, since a process may be waiting on one)."""
    return folder.parent.parent / "locks" / f"warmstart-{folder.name}.lock"


def needs_simulator(config: RunConfig) -> bool:
    """Whether a run uses the warm-started simulator: every simulator mode but ``off`` and ``sampler`` (whose tasks
    the benchmark's own generator writes).

    >>> from genenv_engine.config import load_config
    >>> needs_simulator(load_config("tiny")), needs_simulator(load_config("tiny", overrides={"simulator.mode": "off"}))
    (True, False)
    """
    return config.simulator.mode not in NO_SIMULATOR_MODES


def cached_folder(folder: Path, marker: str = DONE) -> Path | None:
    """A warm start for ``folder``'s key that holds ``marker`` (default: finished): the folder itself, or one made
    under another preset's name with the same hash (the preset name is only a readable prefix: two presets with
    equal model, warm-start settings, benchmarks and seed share one warm start)."""
    if (folder / marker).exists():
        return folder
    suffix = "-".join(folder.name.rsplit("-", 2)[-2:])  # s<seed>-<hash>; a preset name may hold dashes
    for other in sorted(folder.parent.glob(f"*-{suffix}")):
        if (other / marker).exists():
            return other
    return None


def serves(folder: Path, config: RunConfig) -> bool:
    """Whether the entry ``folder`` holds all ``config``'s run needs: both roles, or for a run without a
    simulator the agent alone."""
    return (folder / DONE).exists() or (not needs_simulator(config) and (folder / AGENT_INFO).exists())


def remove_stale_temp(root: Path | None = None) -> list[Path]:
    """Delete warm-start temp folders (``<key>.tmp<PID>``) whose training process is gone."""
    from genenv_engine.storage.session import stale_temp_paths

    folder = (root or cache_root()) / "warmstart"
    if not folder.is_dir():
        return []
    gone = stale_temp_paths(folder, "*.tmp[0-9]*", ".tmp")
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone


def fresh_temp(folder: Path) -> Path:
    """An empty temp folder ``<key>.tmp<PID>`` beside the entry ``folder``, this process's to fill and move."""
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp
