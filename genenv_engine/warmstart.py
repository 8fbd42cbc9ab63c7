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
stage 1: the simulator's SFT is the larger part (smol-l3: 36 of 46 minutes) and it would never use
it. A later run of the same key that needs the simulator loads that agent, restores the random
states and trains the simulator to the same weights as a warm start made in one go (checked bit for
bit on CPU, full and LoRA roles: `tests/engine/test_warmstart_stages.py`; CUDA kernels are not
bit-reproducible anyway). A run stopped during the simulator's SFT keeps the trained agent.

The default first run's warm start (the ``tiny`` preset, seed 0; the ``five`` preset's seed 0 too) ships inside
the package (`SHIPPED_ROOT`), so ``make run`` starts at epoch 1 in seconds: a finished entry with a
``manifest.json`` naming its cache key and the sha256 of every file. A run whose key is exactly that
key and finds no entry in its cache installs it there (`install_shipped`): the files are copied into a
temp folder, their checksums verified on the copies, and the folder moved into place like a trained
entry. A file that fails its checksum refuses the whole entry with a warning, and the run trains its
warm start as before. ``python -m genenv_engine.warmstart ship`` (``make shipped-warmstart``)
rebuilds it from a freshly trained entry; `tests/engine/test_shipped_warmstart.py` fails while the
shipped key is not the preset's, so a change of the recipe forces the rebuild.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from genenv_engine.agent import agent_prompt
from genenv_engine.config import EXECUTION_FIELDS, NO_SIMULATOR_MODES, ModelConfig, RunConfig
from genenv_engine.environments.base import Environment
from genenv_engine.events import EventSink, WarmStartProgressed, WarmStartSample, null_sink
from genenv_engine.lease import describe, waiting_lock
from genenv_engine.models import (AGENT_INFO, DONE, TORCH_RNG, load_warm_agent, warmstart_agent,
                                  warmstart_simulator)
from genenv_engine.policy import Policy
from genenv_engine.records import Task
from genenv_engine.session import file_sha256
from genenv_engine.simulator import (job_grammar, parse_and_validate, sibling_prompt, simulator_prompt,
                                     simulator_target)
from genenv_engine.trainer import sft

WARM_START_VERSION = 1
"""Bump when the warm-start recipe changes so stale caches are not reused."""


_LATER_FIELDS = {name: getattr(ModelConfig(), name) for name in (
    "hub_download", "agent_path", "simulator_path", "agent_tuning", "simulator_tuning", "lora_r", "lora_alpha",
    "lora_dropout", "lora_targets", "dtype")} | {"sft_length_groups": 0}
"""Model fields added after warm-start version 1, with the value each had before it existed (see `cache_key`;
``sft_length_groups`` was 0, off, before it became the default 4). ``sft_length_groups`` joins the key although
it computes the same gradient up to float rounding: a tiny warm start is sensitive enough to rounding that its
weights, and so its held-out, differ."""


SHIPPED_ROOT = Path(__file__).resolve().parent / "shipped" / "warmstart"
"""Warm starts shipped inside the package: one finished entry per folder, named by its cache key, with its
`MANIFEST`."""
MANIFEST = "manifest.json"
"""A shipped entry's manifest: ``key``, ``preset``, ``seed``, ``files`` (relative path -> sha256), the epoch-0
``heldout`` the training path measured on it, and how it was made."""
SHIPPED_COPY = "shipped.json"
"""The manifest as copied into the cache with an installed shipped entry (where the entry came from)."""
SHIPPED_ENV = "GENENV_SHIPPED_WARMSTART"
"""Set to ``0`` to ignore the shipped warm starts (``genenv bench warmstart`` does: it times the training)."""
SHIPPED_PARTS = ("agent", "simulator", AGENT_INFO, TORCH_RNG, DONE)
"""What of a finished entry is shipped: both roles' folders and stage one's and stage two's files."""


def cache_root() -> Path:
    """Where warm starts are cached."""
    return Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv")).expanduser()


def cache_key(config: RunConfig) -> str:
    """A short hash of everything that determines the warm-start weights.

    Model fields added after the first cache version join the hash only when set away from their
    defaults, so caches made before they existed stay valid; the simulator's prompt style joins it
    the same way. How an update is executed (micro-batches, log-prob chunks, gradient checkpointing)
    does not change its result, so it is left out.
    """
    model = {k: v for k, v in asdict(config.model).items()
             if k not in EXECUTION_FIELDS and (k not in _LATER_FIELDS or v != _LATER_FIELDS[k])}
    warm = asdict(config.warm_start)
    if not warm["agent_levels"]:  # a setting added later joins the key only when set (earlier keys stay valid)
        del warm["agent_levels"]
    parts: dict[str, object] = {"v": WARM_START_VERSION, "model": model, "warm": warm,
                                "seed": config.seed, "benchmarks": list(config.benchmarks)}
    from genenv_engine.environments import environment_class

    versions = {name: environment_class(name).data_version for name in config.benchmarks}
    if any(v != 1 for v in versions.values()):  # joins the key only when a benchmark's tasks have changed
        parts["data_versions"] = {name: v for name, v in versions.items() if v != 1}
    if config.simulator.prompt != "compact":
        parts["simulator_prompt"] = config.simulator.prompt
    if config.simulator.steer:
        parts["simulator_steer"] = True
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


def is_cached(config: RunConfig) -> bool:
    """Whether ``config``'s run would find its warm start cached (the agent alone is enough without a simulator)."""
    found = cached_agent(config)
    return found is not None and serves(found, config)


def cached_agent(config: RunConfig) -> Path | None:
    """The cached warm start holding ``config``'s trained agent (finished, or the agent alone), if any."""
    folder = cache_root() / "warmstart" / cache_key(config)
    return cached_folder(folder) or install_shipped(config, folder) or cached_folder(folder, AGENT_INFO)


def remove_stale_temp(root: Path | None = None) -> list[Path]:
    """Delete warm-start temp folders (``<key>.tmp<PID>``) whose training process is gone."""
    from genenv_engine.session import stale_temp_paths

    folder = (root or cache_root()) / "warmstart"
    if not folder.is_dir():
        return []
    gone = stale_temp_paths(folder, "*.tmp[0-9]*", ".tmp")
    for path in gone:
        shutil.rmtree(path, ignore_errors=True)
    return gone


def warm_start(config: RunConfig, envs: dict[str, Environment], sink: EventSink = null_sink,
               check: Callable[[], None] = lambda: None) -> tuple[Path, dict]:
    """Return the folder holding the warm-started ``agent/`` and, when the run needs one, ``simulator/``
    (training what is not cached; see the module docstring for the two stages).

    ``check`` runs between SFT steps (the loop passes its pause/stop check); a stop discards the stage it
    interrupted (a trained agent stays cached).
    """
    remove_stale_temp()
    folder = cache_root() / "warmstart" / cache_key(config)
    if not config.warm_start.cache:
        return _warm_start(config, envs, folder, sink, check)
    if (found := cached_folder(folder)) is not None:
        return found, json.loads((found / DONE).read_text())
    if not needs_simulator(config) and (half := cached_folder(folder, AGENT_INFO)) is not None:
        return half, _agent_only_info(half)

    def waiting(holder: dict | None) -> None:
        warnings.warn(f"warm start {folder.name} is being trained by {describe(holder)}: waiting to reuse it",
                      stacklevel=4)
    # one process trains an entry at a time; another one waits, then finds it cached
    with waiting_lock(entry_lock(folder), check, waiting, what="a warm start training it"):
        return _warm_start(config, envs, folder, sink, check)


def _warm_start(config: RunConfig, envs: dict[str, Environment], folder: Path, sink: EventSink,
                check: Callable[[], None]) -> tuple[Path, dict]:
    need_sim = needs_simulator(config)
    if config.warm_start.cache:
        found = cached_folder(folder) or install_shipped(config, folder)
        if found is not None:
            return found, json.loads((found / DONE).read_text())
        half = cached_folder(folder, AGENT_INFO)
        if half is not None:
            if not need_sim:
                return half, _agent_only_info(half)
            agent = load_warm_agent(config.model, half / "agent")
            rng, info = _restore(half)  # after loading: a loaded adapter's fresh layers draw torch random numbers
            return half, _finish(config, envs, half, agent, rng, info, sink, check)
    tmp = _fresh_temp(folder)
    try:
        agent, rng, info = _train_agent(config, envs, tmp, sink, check)
        _save_agent_state(tmp, rng, info)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    shutil.rmtree(folder, ignore_errors=True)
    tmp.rename(folder)
    if not need_sim:
        return folder, _agent_only_info(folder)
    return folder, _finish(config, envs, folder, agent, rng, info, sink, check)


def shipped_folder(config: RunConfig, root: Path | None = None) -> Path | None:
    """The shipped warm start for ``config``'s cache key, if the package holds one (unverified): its folder is
    named by the key and its manifest names the same key. Only that exact key is served, never one made under
    another preset's name or seed, and only while ``$GENENV_SHIPPED_WARMSTART`` is not ``0``.

    >>> from genenv_engine.config import load_config
    >>> shipped_folder(load_config("tiny", overrides={"seed": 7})) is None
    True
    """
    if os.environ.get(SHIPPED_ENV, "1") == "0":
        return None
    key = cache_key(config)
    folder = (SHIPPED_ROOT if root is None else root) / key
    try:
        manifest = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return folder if manifest.get("key") == key else None


def shipped_problems(folder: Path) -> list[str]:
    """What is wrong with the shipped entry ``folder``: each file its manifest lists that is missing or whose
    sha256 differs, and the finished marker if the manifest lacks it (empty: it verifies)."""
    files = json.loads((folder / MANIFEST).read_text()).get("files") or {}
    problems = [] if DONE in files else [f"{DONE} is not in {MANIFEST}"]
    for name, digest in sorted(files.items()):
        path = folder / name
        if ".." in Path(name).parts or Path(name).is_absolute():
            problems.append(f"{name}: not a path inside the entry")
        elif not path.is_file():
            problems.append(f"{name}: missing")
        elif file_sha256(path) != digest:
            problems.append(f"{name}: sha256 does not match {MANIFEST}")
    return problems


def install_shipped(config: RunConfig, folder: Path) -> Path | None:
    """Install the shipped warm start for ``config`` as the cache entry ``folder`` (the key's entry) and return
    it, or None when none is shipped for this exact key or it fails its checksums (with a warning naming the
    files: the run then trains its warm start as it would without one).

    The listed files are copied into a temp folder and their checksums verified on the copies, which is then
    moved into place in one rename (an agent-only entry of the same key is replaced: the shipped one holds the
    same agent and the simulator too). A finished entry another run made meanwhile is kept."""
    source = shipped_folder(config)
    if source is None:
        return None
    files = json.loads((source / MANIFEST).read_text()).get("files") or {}
    problems = shipped_problems(source)
    tmp = _fresh_temp(folder)
    try:
        if not problems:
            for name, digest in files.items():
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source / name, tmp / name)
                if file_sha256(tmp / name) != digest:
                    problems.append(f"{name}: sha256 of the copy does not match {MANIFEST}")
        if problems:
            warnings.warn(f"shipped warm start {source.name} refused, it will be trained instead "
                          f"({source}): " + "; ".join(problems), stacklevel=2)
            return None
        shutil.copyfile(source / MANIFEST, tmp / SHIPPED_COPY)
        if (folder / DONE).exists():  # another run finished this entry meanwhile
            return folder
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        return folder
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def ship(entry: Path, heldout: dict[str, float], config: RunConfig, made_with: str,
         root: Path | None = None) -> Path:
    """Copy the finished warm start ``entry`` (``config``'s key) into the shipped folder with its manifest,
    replacing every shipped entry of the same preset and seed (an older recipe's); ``heldout`` is the epoch-0
    held-out the training path measured on it. Returns the shipped folder."""
    root = SHIPPED_ROOT if root is None else root
    key = cache_key(config)
    if entry.name != key:
        raise ValueError(f"{entry} is not the entry of {config.preset} seed {config.seed}: its key is {key}")
    if not (entry / DONE).is_file():
        raise ValueError(f"{entry} is not a finished warm start (no {DONE})")
    missing = [part for part in SHIPPED_PARTS if not (entry / part).exists()]
    if missing:
        raise ValueError(f"{entry} lacks {', '.join(missing)}")
    files: dict[str, str] = {}
    tmp = root / f".{key}.tmp{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        for part in SHIPPED_PARTS:
            paths = sorted(p for p in (entry / part).rglob("*") if p.is_file()) if (entry / part).is_dir() \
                else [entry / part]
            for path in paths:
                name = path.relative_to(entry).as_posix()
                (tmp / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, tmp / name)
                files[name] = file_sha256(tmp / name)
        manifest = {"key": key, "preset": config.preset, "seed": config.seed, "warm_start_version": WARM_START_VERSION,
                    "heldout": heldout, "heldout_tasks": config.heldout_size, "made_with": made_with,
                    "torch": torch.__version__, "bytes": sum((tmp / n).stat().st_size for n in files),
                    "files": files}
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        for old in root.glob(f"{config.preset}-s{config.seed}-*"):
            shutil.rmtree(old)
        tmp.rename(root / key)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return root / key


def _fresh_temp(folder: Path) -> Path:
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    return tmp


def _agent_only_info(folder: Path) -> dict:
    """What an agent-only entry reports as the run's warm start."""
    info, _ = _read_agent_info(folder)
    return {**info, "key": folder.name, "simulator": "not trained: the run has no simulator (simulator.mode off)"}


def _read_agent_info(folder: Path) -> tuple[dict, list]:
    """Stage 1's figures, and apart from them the Python random state its SFT left (`_save_agent_state`)."""
    info = json.loads((folder / AGENT_INFO).read_text())
    return info, info.pop("rng")


def _train_agent(config: RunConfig, envs: dict[str, Environment], out: Path, sink: EventSink,
                 check: Callable[[], None]) -> tuple[Policy, random.Random, dict]:
    ws = config.warm_start
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    agent = warmstart_agent(config.model, config.seed)
    started = time.perf_counter()
    pairs = agent_pairs(agent, envs, config.warm_start.agent_levels)
    env0 = next(iter(envs.values()))
    shown = env0.splits()["heldout"][0]
    report = _reporter(sink, "agent", ws.agent_steps, check, lambda: _agent_sample(agent, env0, shown, config))
    micro = config.model.micro_batch
    groups = config.model.sft_length_groups
    agent_losses = sft(agent, pairs, ws.agent_steps, ws.agent_lr, ws.batch_size, rng, report, micro, groups)
    agent.save(out / "agent")
    return agent, rng, {
        "parameters": agent.num_parameters(), "agent_trainable": agent.num_trainable(), "agent_steps": ws.agent_steps,
        "agent_final_loss": tail_mean(agent_losses), "agent_seconds": round(time.perf_counter() - started, 1),
        "agent_pairs": len(pairs),
    }


def _save_agent_state(out: Path, rng: random.Random, info: dict) -> None:
    """Write the stage-one marker: the agent's figures and the random states its SFT left (read by `_restore`)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []  # a CPU run opens no GPU context
    torch.save({"cpu": torch.get_rng_state(), "cuda": cuda}, out / TORCH_RNG)
    (out / AGENT_INFO).write_text(json.dumps({**info, "rng": rng.getstate()}, indent=2))


def _restore(folder: Path) -> tuple[random.Random, dict]:
    """The Python random generator and the torch random states as the agent's SFT left them."""
    info, (version, state, gauss) = _read_agent_info(folder)
    rng = random.Random()
    rng.setstate((version, tuple(state), gauss))
    states = torch.load(folder / TORCH_RNG, weights_only=True)
    torch.set_rng_state(states["cpu"])
    if states["cuda"]:
        if torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states["cuda"])
        else:
            warnings.warn(f"{folder.name}: its agent was trained on {len(states['cuda'])} GPU(s) and this run has "
                          f"{torch.cuda.device_count()}; the simulator's warm start cannot continue the same random "
                          "states, so it will differ from a warm start made in one go", stacklevel=2)
    return rng, info


def _finish(config: RunConfig, envs: dict[str, Environment], folder: Path, agent: Policy, rng: random.Random,
            info: dict, sink: EventSink, check: Callable[[], None]) -> dict:
    """Stage 2: train the simulator of the agent-only entry ``folder`` and mark the entry finished. Another run
    that finished the same entry meanwhile wins: its simulator is kept and this one's discarded."""
    tmp = _fresh_temp(folder)
    try:
        info = {**info, **_train_simulator(config, envs, agent, folder / "agent", rng, tmp, sink, check),
                "key": folder.name}
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


def _train_simulator(config: RunConfig, envs: dict[str, Environment], agent: Policy, agent_folder: Path,
                     rng: random.Random, out: Path, sink: EventSink, check: Callable[[], None]) -> dict:
    ws = config.warm_start
    started = time.perf_counter()
    # the simulator starts from the agent's weights (one base, two roles) unless it has its own model
    sim = warmstart_simulator(config.model, agent, agent_folder)
    sim_pairs = simulator_pairs(sim, envs, config, rng)
    env0 = next(iter(envs.values()))
    seed = env0.splits()["seed"][0]
    report = _reporter(sink, "simulator", ws.simulator_steps, check,
                       lambda: _simulator_sample(sim, env0, seed, config))
    micro = config.model.micro_batch
    groups = config.model.sft_length_groups
    sim_losses = sft(sim, sim_pairs, ws.simulator_steps, ws.simulator_lr, ws.batch_size, rng, report, micro, groups)
    sim.save(out / "simulator")
    return {
        "simulator_trainable": sim.num_trainable(), "simulator_steps": ws.simulator_steps,
        "simulator_final_loss": tail_mean(sim_losses), "simulator_seconds": round(time.perf_counter() - started, 1),
        "simulator_pairs": len(sim_pairs),
    }


class EncodedPairs(Sequence):
    """The agent's SFT pairs, each encoded the first time it is drawn: `sft` draws ``steps x batch_size`` of them,
    which for a short warm start over a large split is a small part of it (encoding all 8,000 of the chain
    benchmark's short chains took longer than a micro warm start's training)."""

    def __init__(self, tasks: list[Any], encode: Callable[[Any], tuple[list[int], list[int]]]) -> None:
        self._tasks, self._encode = tasks, encode
        self._done: dict[int, tuple[list[int], list[int]]] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        if i not in self._done:
            self._done[i] = self._encode(self._tasks[i])
        return self._done[i]


def agent_pairs(agent, envs: dict[str, Environment], levels: tuple[int, ...] = ()) -> EncodedPairs:
    """The agent's SFT pairs, encoded when first read: (prompt ids, gold answer ids and end of sequence) of every
    benchmark's train split, or of its tasks at ``levels`` (``warm_start.agent_levels``); then each benchmark's
    `warm_start_prefixes` (whatever their level), (prompt ids, the prefix's ids) with no end of sequence."""
    items: list[tuple[Task, str | None]] = [
        (t, None) for env in envs.values() for t in env.split_at_levels("train", levels, "warm_start.agent_levels")]
    items += [(t, cut) for env in envs.values() for t, cut in env.warm_start_prefixes()]

    def encode(item: tuple[Task, str | None]) -> tuple[list[int], list[int]]:
        task, cut = item
        prompt = agent.encode(agent_prompt(agent, task))
        return prompt, agent.completion_ids(task.answer) if cut is None else agent.encode(cut)
    return EncodedPairs(items, encode)


def simulator_pairs(sim, envs: dict[str, Environment], config: RunConfig,
                    rng: random.Random) -> list[tuple[list[int], list[int]]]:
    """The simulator's SFT pairs: (prompt on a seed, a sibling task as the target), drawn from each benchmark's
    train and seed splits, about a quarter of the steps' sequences per benchmark plus 256."""
    ws, style = config.warm_start, config.simulator.prompt
    per_env = max(1, (ws.simulator_steps * ws.batch_size) // max(1, len(envs)) // 4 + 256)
    out = []
    for env in envs.values():
        pool = env.splits()["train"] + env.splits()["seed"]
        for src, sib in env.sibling_pairs(pool, rng, per_env):
            out.append((sim.encode(sibling_prompt(sim, env, src, sib, config)),
                        sim.completion_ids(simulator_target(env, sib, style))))
    return out


def tail_mean(losses: list[float]) -> float | None:
    """Mean of the last 20 losses: the final loss a warm start reports."""
    tail = losses[-20:]
    return round(sum(tail) / len(tail), 4) if tail else None


SAMPLES = 8
"""Greedy samples each role shows during its warm start (at every eighth of its steps)."""
SAMPLE_SHARE = 0.05
"""Samples are skipped while they have taken more than this share of the role's SFT time (the last one is always
taken); greedy decoding draws no random numbers, so the trained weights are the same with or without them."""

Sample = tuple[str, str, bool, str]
"""(prompt shown, text written, ok, detail) of one warm-start sample."""


def _agent_sample(agent, env: Environment, task: Task, config: RunConfig) -> Sample:
    """The agent's greedy answer to one held-out task, checked."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend

    out = HFBackend(agent).generate([agent_prompt(agent, task)],
                                    Sampling(max_new_tokens=config.agent.max_new_tokens, greedy=True))[0].text
    return task.prompt, out, env.check(task, out).success, f"gold: {task.answer}"


def _simulator_sample(sim, env: Environment, seed: Task, config: RunConfig) -> Sample:
    """The simulator's greedy variation of one seed task, parsed and validated like an epoch's generations."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend

    style = config.simulator.prompt
    note = "same" if config.simulator.steer and style == "compact" else None
    sampling = Sampling(max_new_tokens=config.simulator.max_new_tokens, greedy=True, grammar=job_grammar(config, env))
    out = HFBackend(sim).generate([simulator_prompt(sim, env, seed, style, note)], sampling)[0].text
    task = parse_and_validate(env, out, task_id="warm-start-sample", seed=seed, epoch=0, generator="warm_start",
                              style=style)
    return seed.prompt, out, task.valid, task.reason


def _reporter(sink: EventSink, role: str, steps: int, check: Callable[[], None],
              sample: Callable[[], Sample] | None = None):
    """The per-step callback of one role's SFT: pause/stop check, progress every ~2 %, a sample every eighth."""
    every = max(1, steps // 50)
    sample_every = max(1, steps // SAMPLES)
    started = time.perf_counter()
    sampling = 0.0  # seconds spent on samples so far

    def report(step: int, loss: float) -> None:
        nonlocal sampling
        check()
        if step % every == 0 or step == steps - 1:
            sink(WarmStartProgressed(0, role, step + 1, steps, loss, round(time.perf_counter() - started, 3)))
        last = step == steps - 1
        if sample is None or not (last or (step + 1) % sample_every == 0):
            return
        if not last and sampling > SAMPLE_SHARE * (time.perf_counter() - started):
            return
        began = time.perf_counter()
        prompt, text, ok, detail = sample()
        sampling += time.perf_counter() - began
        sink(WarmStartSample(0, role, step + 1, steps, prompt, text, ok, detail))
    return report


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m genenv_engine.warmstart ship --bench FILE [--preset P] [--seed N] [--entry DIR]``: ship the
    finished warm start of the preset and seed (default: its entry in ``$GENENV_CACHE``) with the epoch-0
    held-out that ``genenv bench warmstart --json`` wrote to FILE when it trained it (``make shipped-warmstart``)."""
    import argparse

    from genenv_engine.config import load_config

    parser = argparse.ArgumentParser(prog="python -m genenv_engine.warmstart")
    sub = parser.add_subparsers(dest="command", required=True)
    cmd = sub.add_parser("ship", help="copy a finished warm start into the package with its manifest")
    cmd.add_argument("--preset", default="tiny")
    cmd.add_argument("--seed", type=int, default=0)
    cmd.add_argument("--bench", type=Path, required=True,
                     help="bench-warmstart.json of the `genenv bench warmstart --keep` run that trained the entry")
    cmd.add_argument("--entry", type=Path, help="the entry to ship (default: its key's folder in $GENENV_CACHE)")
    args = parser.parse_args(argv)
    config = load_config(args.preset, None, {"seed": args.seed})
    bench = json.loads(args.bench.read_text())
    if (bench.get("preset"), bench.get("seed"), bench.get("overrides") or []) != (args.preset, args.seed, []):
        raise SystemExit(f"{args.bench} is not a plain warm start of {args.preset} seed {args.seed}")
    entry = args.entry or cache_root() / "warmstart" / cache_key(config)
    if bench.get("kept") and Path(bench["kept"]).resolve() != entry.resolve():
        raise SystemExit(f"{args.bench} kept its warm start in {bench['kept']}, not {entry}")
    shipped = ship(entry, bench["heldout"], config,
                   f"genenv bench warmstart --preset {args.preset} --seed {args.seed} --keep "
                   f"({bench.get('seconds')} s, {bench.get('finished_at')})")
    manifest = json.loads((shipped / MANIFEST).read_text())
    print(f"shipped {shipped} ({manifest['bytes'] / 1e6:.1f} MB, {len(manifest['files'])} files, "
          f"epoch-0 held-out {manifest['heldout']})")


if __name__ == "__main__":
    main()
