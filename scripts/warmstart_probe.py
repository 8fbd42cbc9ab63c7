"""Probe: how short can the tiny warm start be? (docs/results/performance/README.md, "Why the warm start is not 3
minutes here").

    python scripts/warmstart_probe.py agent SEED STEPS LR [GROUPS=4] [BATCH=32] [SAVE_DIR]
    python scripts/warmstart_probe.py simulator SEED AGENT_DIR STEPS LR [GROUPS=4]

``agent``: SFT of a fresh tiny agent (the tiny preset's model and train split) for STEPS steps at peak LR
(cosine, as the warm start), then greedy held-out on 400 bfcl tasks, per level; prints one JSON line.
``simulator``: the simulator's SFT from a saved agent (``SAVE_DIR`` of an ``agent`` run) on sibling pairs, then
64 seeds x 4 variations at the preset's temperature (0.7), validated: valid fraction, levels, main rejections.
Writes nothing outside SAVE_DIR; no cache is read or written.
"""

from __future__ import annotations

import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

from genenv_engine.backends.openmp import choose_spin

choose_spin()  # as every entry point does, before torch loads

import torch  # noqa: E402

from genenv_engine.backends.base import Sampling
from genenv_engine.backends.hf import HFBackend
from genenv_engine.config import load_config
from genenv_engine.environments import environments_of
from genenv_engine.training.agent import evaluate, heldout_tasks
from genenv_engine.training.models import warmstart_agent, warmstart_simulator
from genenv_engine.training.policy import Policy
from genenv_engine.training.simulator import sample, validate
from genenv_engine.training.trainer import sft
from genenv_engine.training.warmstart import agent_pairs, simulator_pairs, tail_mean


def agent(seed: int, steps: int, lr: float, groups: int = 4, batch: int = 32, save: str | None = None) -> dict:
    cfg = load_config("tiny", None, {"seed": seed})
    torch.set_num_threads(cfg.runtime.threads)
    envs = environments_of(cfg)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    pol = warmstart_agent(cfg.model, cfg.runtime, seed)
    pairs = agent_pairs(pol, envs)
    started = time.perf_counter()
    losses = sft(pol, pairs, steps, lr, batch, rng, None, 0, groups)
    seconds = time.perf_counter() - started
    if save:
        pol.save(Path(save))
    rates, scored = evaluate(
        HFBackend(pol), pol, envs, heldout_tasks(envs, 400), cfg.agent.max_new_tokens, cfg.agent.success_threshold
    )
    levels: dict[str, list[int]] = {}
    for s in scored:
        levels.setdefault(envs["bfcl"].bucket(s.task), []).append(s.successes)
    return {
        "seed": seed,
        "steps": steps,
        "lr": lr,
        "groups": groups,
        "batch": batch,
        "sft_seconds": round(seconds, 1),
        "loss": tail_mean(losses),
        "heldout": rates,
        "levels": {k: round(sum(v) / len(v), 3) for k, v in sorted(levels.items())},
    }


def simulator(seed: int, folder: str, steps: int, lr: float, groups: int = 4) -> dict:
    cfg = load_config("tiny", None, {"seed": seed})
    torch.set_num_threads(cfg.runtime.threads)
    envs = environments_of(cfg)
    rng = random.Random(seed + 1000)
    pol = Policy.load(Path(folder), torch.device("cpu"), cfg.model.max_length)
    sim = warmstart_simulator(cfg.model, cfg.runtime, pol, Path(folder))
    pairs = simulator_pairs(sim, envs, cfg, rng)
    started = time.perf_counter()
    losses = sft(sim, pairs, steps, lr, cfg.warm_start.batch_size, rng, None, 0, groups)
    seconds = time.perf_counter() - started
    env = envs["bfcl"]
    seeds = env.splits()["seed"]
    draw = random.Random(7)
    torch.manual_seed(0)
    drafts = sample(
        HFBackend(sim),
        sim,
        env,
        [seeds[draw.randrange(len(seeds))] for _ in range(64)],
        4,
        Sampling(max_new_tokens=cfg.simulator.max_new_tokens, temperature=cfg.simulator.temperature),
        epoch=1,
    )
    gens = validate(env, drafts, epoch=1, generator="probe")
    valid = [g for g in gens if g.task.valid]
    return {
        "seed": seed,
        "agent": folder,
        "steps": steps,
        "lr": lr,
        "groups": groups,
        "sft_seconds": round(seconds, 1),
        "loss": tail_mean(losses),
        "valid": round(len(valid) / len(gens), 3),
        "levels": dict(sorted(Counter(env.bucket(g.task) for g in valid).items())),
        "rejections": Counter(g.task.reason for g in gens if not g.task.valid).most_common(4),
    }


if __name__ == "__main__":
    what, rest = sys.argv[1], sys.argv[2:]
    if what == "agent":
        out = agent(
            int(rest[0]),
            int(rest[1]),
            float(rest[2]),
            int(rest[3]) if len(rest) > 3 else 4,
            int(rest[4]) if len(rest) > 4 else 32,
            rest[5] if len(rest) > 5 else None,
        )
    elif what == "simulator":
        out = simulator(int(rest[0]), rest[1], int(rest[2]), float(rest[3]), int(rest[4]) if len(rest) > 4 else 4)
    else:
        sys.exit(__doc__)
    print(json.dumps(out))
