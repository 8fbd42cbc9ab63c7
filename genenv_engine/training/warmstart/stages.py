"""Epoch 0: build both roles from one base and warm-start them by supervised fine-tuning, cached.

As in the paper both policies start from one model: the agent is fine-tuned on the benchmarks'
train splits (prompt -> gold answer); the simulator starts from the agent's weights and is
fine-tuned on (seed -> sibling seed) pairs so it can write well-formed, valid variations. The
result is cached per preset, model, warm-start settings and seed (``$GENENV_CACHE``, default
``~/.cache/genenv``), because it costs minutes on CPU and is the same for every run that shares it.
An entry is made in two stages, each trained into ``<key>.tmp<PID>`` and then moved into place,
so a killed run leaves a temp folder (removed at the next warm start by `remove_stale_temp`, never
one of a process still running) and no half-written entry. One process trains an entry at a time: it
holds an OS lock on the entry (`entry_lock`) while it trains, and another run of the same key waits for it
(saying so), then finds the entry cached instead of training it a second time.

1. the agent: ``agent/``, ``agent.json`` (its figures and the Python random state its SFT left) and
   ``rng.pt`` (the torch random states), published as ``<key>/`` as soon as it is trained;
2. the simulator: ``simulator/`` moved into ``<key>/``, then ``info.json`` (both roles' figures),
   which marks the entry finished.

A run without a simulator (``simulator.mode = "off"``, and the ``unseen`` oracle arm) stops after
stage 1: the simulator's SFT is the larger part and it would never use it. A later run of the same key
that needs the simulator loads that agent, restores the random states and trains the simulator to the same
weights as a warm start made in one go (checked bit for bit on CPU, full and LoRA roles:
`tests/engine/training/test_warmstart_stages.py`; CUDA kernels are not bit-reproducible anyway). A run stopped during
the simulator's SFT keeps the trained agent.

A key whose entry is missing installs the shipped one when the package holds it
(`genenv_engine.training.warmstart.shipped`) before it trains anything.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import warnings
from collections.abc import Callable
from pathlib import Path

from genenv_engine.config import RunConfig
from genenv_engine.core.events import EventSink, null_sink
from genenv_engine.environments.base import Environment
from genenv_engine.storage.lease import describe, waiting_lock
from genenv_engine.training.models import AGENT_INFO, DONE, load_warm_agent
from genenv_engine.training.policy import Policy
from genenv_engine.training.warmstart import training
from genenv_engine.training.warmstart.cache import (
    cache_key,
    cache_root,
    cached_folder,
    entry_lock,
    fresh_temp,
    needs_simulator,
    remove_stale_temp,
    serves,
)
from genenv_engine.training.warmstart.shipped import install_shipped
from genenv_engine.training.warmstart.training import PairNote, no_pair_note


def is_cached(config: RunConfig) -> bool:
    """Whether ``config``'s run would find its warm start cached (the agent alone is enough without a simulator)."""
    found = cached_agent(config)
    return found is not None and serves(found, config)


def cached_agent(config: RunConfig) -> Path | None:
    """The cached warm start holding ``config``'s trained agent (finished, or the agent alone), if any."""
    folder = cache_root() / "warmstart" / cache_key(config)
    return cached_folder(folder) or install_shipped(config, folder) or cached_folder(folder, AGENT_INFO)


def warm_start(
    config: RunConfig,
    envs: dict[str, Environment],
    sink: EventSink = null_sink,
    check: Callable[[], None] = lambda: None,
    pair_note: PairNote = no_pair_note,
) -> tuple[Path, dict]:
    """Return the folder holding the warm-started ``agent/`` and, when the run needs one, ``simulator/``
    (training what is not cached; see the module docstring for the two stages). ``pair_note`` is the run's note
    strategy's (`genenv_engine.method.protocols.PromptNote.pair_note`): the note of the simulator's pairs.

    ``check`` runs between SFT steps (the loop passes its pause/stop check); a stop discards the stage it
    interrupted (a trained agent stays cached).
    """
    remove_stale_temp()
    folder = cache_root() / "warmstart" / cache_key(config)
    if not config.warm_start.cache:
        return _warm_start(config, envs, folder, sink, check, pair_note)
    if (found := cached_folder(folder)) is not None:
        return found, json.loads((found / DONE).read_text())
    if not needs_simulator(config) and (half := cached_folder(folder, AGENT_INFO)) is not None:
        return half, _agent_only_info(half)

    def waiting(holder: dict | None) -> None:
        warnings.warn(
            f"warm start {folder.name} is being trained by {describe(holder)}: waiting to reuse it", stacklevel=4
        )

    # one process trains an entry at a time; another one waits, then finds it cached
    with waiting_lock(entry_lock(folder), check, waiting, what="a warm start training it"):
        return _warm_start(config, envs, folder, sink, check, pair_note)


def _warm_start(
    config: RunConfig,
    envs: dict[str, Environment],
    folder: Path,
    sink: EventSink,
    check: Callable[[], None],
    pair_note: PairNote,
) -> tuple[Path, dict]:
    need_sim = needs_simulator(config)
    if config.warm_start.cache:
        found = cached_folder(folder) or install_shipped(config, folder)
        if found is not None:
            return found, json.loads((found / DONE).read_text())
        half = cached_folder(folder, AGENT_INFO)
        if half is not None:
            if not need_sim:
                return half, _agent_only_info(half)
            agent = load_warm_agent(config.model, config.runtime, half / "agent")
            # after loading: a loaded adapter's fresh layers draw torch random numbers
            rng, info = training.restore(half)
            return half, _finish(config, envs, half, agent, rng, info, sink, check, pair_note)
    tmp = fresh_temp(folder)
    try:
        agent, rng, info = training.train_agent(config, envs, tmp, sink, check)
        training.save_agent_state(tmp, rng, info)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    if not need_sim:
        return folder, _agent_only_info(folder)
    return folder, _finish(config, envs, folder, agent, rng, info, sink, check, pair_note)


def _agent_only_info(folder: Path) -> dict:
    """What an agent-only entry reports as the run's warm start."""
    info, _ = training.read_agent_info(folder)
    return {**info, "key": folder.name, "simulator": "not trained: the run has no simulator (simulator.mode off)"}


def _finish(
    config: RunConfig,
    envs: dict[str, Environment],
    folder: Path,
    agent: Policy,
    rng: random.Random,
    info: dict,
    sink: EventSink,
    check: Callable[[], None],
    pair_note: PairNote,
) -> dict:
    """Stage 2: train the simulator of the agent-only entry ``folder`` and mark the entry finished. Another run
    that finished the same entry meanwhile wins: its simulator is kept and this one's discarded."""
    tmp = fresh_temp(folder)
    try:
        info = {
            **info,
            **training.train_simulator(config, envs, agent, folder / "agent", rng, tmp, sink, check, pair_note),
            "key": folder.name,
        }
        if _install_simulator(tmp, folder, info):
            return info
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return json.loads((folder / DONE).read_text())  # the other run's


def _install_simulator(tmp: Path, folder: Path, info: dict) -> bool:
    """Move ``tmp/simulator`` into the entry, then mark it finished; False if another run finished it first."""
    if (folder / DONE).exists():
        return False
    shutil.rmtree(folder / "simulator", ignore_errors=True)  # left by a run killed before its info.json
    try:
        (tmp / "simulator").rename(folder / "simulator")
    except OSError:
        if (folder / DONE).exists():
            return False
        raise
    (tmp / DONE).write_text(json.dumps(info, indent=2))
    os.replace(tmp / DONE, folder / DONE)  # atomic: a killed run leaves no half-written marker
    return True
