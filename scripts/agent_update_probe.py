"""Probe: can one kind of agent update raise greedy held-out from a cached warm start? (docs/results/tiny/README.md,
"Why the RL step cannot raise held-out here" table).

Loads the warm start of the ``ablation`` preset for a seed (training it into the cache if missing), then runs
``ITERS`` iterations of one update and prints greedy held-out (400 bfcl tasks, per level) after each:

- ``grpo``: 96 train tasks × 8 rollouts (T = 1), one GRPO update of ``STEPS`` optimizer steps (the loop's trainer);
- ``sft``: ``STEPS`` steps of supervised fine-tuning on gold answers (batch 32, constant lr, fresh AdamW).

Options (``key=value``): ``pos=1`` keep only positive advantages; ``kl=`` KL coefficient (0.01); ``T=`` rollout
temperature; ``tasks=`` tasks per iteration (96); ``levels=3,4`` train only on those levels; ``fresh=N`` train on
the train splits of N other bfcl generator seeds (1000..1000+N-1) instead of the base tasks, held-out prompts
excluded; ``preset=smol-ablation`` another preset's warm start (``ablation``); ``k=`` rollouts per task (8);
``tokens=`` longest answer (64); ``heldout=`` held-out tasks (400); ``cfg.KEY=VALUE`` overrides a config field (e.g.
``cfg.model.hidden_size=192``: another warm start,
trained into the cache first). Never writes outside a temporary session folder and the warm-start cache.

    python scripts/agent_update_probe.py grpo 1 5e-5 12 4
    python scripts/agent_update_probe.py sft 1 3e-4 12 8 fresh=5
"""

from __future__ import annotations

import collections
import random
import sys
import tempfile
import time

import torch

from genenv_engine.ablation.stats import paired_change
from genenv_engine.backends.base import Sampling
from genenv_engine.config import load_config
from genenv_engine.environments import get_environment
from genenv_engine.interfaces.cli import parse_sets
from genenv_engine.storage.session import Session
from genenv_engine.training.agent import agent_prompt, evaluate, grpo_groups, rollout
from genenv_engine.training.roles import load_roles
from genenv_engine.training.trainer import GRPOTrainer
from genenv_engine.training.warmstart import warm_start


def main(argv: list[str]) -> None:
    mode, seed, lr, steps, iters = argv[0], int(argv[1]), float(argv[2]), int(argv[3]), int(argv[4])
    opts = dict(a.split("=", 1) for a in argv[5:])
    overrides: dict = {"simulator.mode": "off", "seed": seed}
    overrides.update(parse_sets([f"{k[4:]}={v}" for k, v in opts.items() if k.startswith("cfg.")]))  # as --set
    cfg = load_config(opts.get("preset", "ablation"), overrides=overrides)
    session = Session.create(cfg, tempfile.mkdtemp(prefix="genenv-probe-") + "/s")
    env = get_environment("bfcl", seed)
    envs = {"bfcl": env}
    for tasks in env.splits().values():
        session.store.insert_tasks(tasks)
    folder, _ = warm_start(cfg, envs)
    roles = load_roles(session, 0, warm_start_dir=folder)
    held = env.splits()["heldout"][: int(opts.get("heldout", 400))]

    first: dict[int | None, str] = {}

    def heldout() -> str:
        """Greedy held-out and per level, with the change since the first call and its paired SE (total, L3)."""
        rate, scored = evaluate(roles.agent_backend, roles.agent, envs, held, 64, 0.5)
        levels = collections.defaultdict(list)
        for s in scored:
            levels[s.task.level].append(s.successes)
        text = f"{rate['bfcl']:.4f} " + " ".join(f"L{k}:{sum(v) / len(v):.2f}" for k, v in sorted(levels.items()))
        for level in (None, 3):
            now = "".join(str(int(s.successes > 0)) for s in scored if level is None or s.task.level == level)
            change = paired_change(first.setdefault(level, now), now)
            if change and now is not first[level]:
                text += f" | Δ{'' if level is None else f' L{level}'} {change[0]:+.3f} (paired SE {change[1]:.3f})"
        return text

    train = env.splits()["train"]
    if "fresh" in opts:
        seen = {t.prompt for t in held}
        train = [
            t
            for i in range(int(opts["fresh"]))
            for t in get_environment("bfcl", 1000 + i).splits()["train"]
            if t.prompt not in seen
        ]
    levels = {int(x) for x in opts.get("levels", "1,2,3,4").split(",")}
    train = [t for t in train if t.level in levels]
    print(f"{mode} seed {seed} lr {lr} steps {steps} {opts} pool {len(train)}; before {heldout()}", flush=True)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    policy = roles.agent
    started = time.perf_counter()
    if mode == "sft":
        pairs = [(policy.encode(agent_prompt(policy, t)), policy.completion_ids(t.answer)) for t in train]
        opt = torch.optim.AdamW(policy.parameters(), lr=lr, weight_decay=0.0)
        for it in range(iters):
            policy.model.train()
            for _ in range(steps):
                chosen = [pairs[rng.randrange(len(pairs))] for _ in range(32)]
                batch = policy.make_batch([p for p, _ in chosen], [c for _, c in chosen])
                loss = -(policy.logprobs(batch) * batch.mask).sum() / batch.mask.sum()
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
            roles.agent_backend.sync()
            print(f"iter {it} held-out {heldout()} ({time.perf_counter() - started:.0f} s)", flush=True)
        return
    if opts.get("pos"):
        import genenv_engine.training.trainer as trainer_module

        plain = trainer_module.group_advantages
        trainer_module.group_advantages = lambda r: plain(r).clamp(min=0.0)
    trainer = GRPOTrainer(
        policy,
        roles.agent_ref,
        lr,
        0.2,
        float(opts.get("kl", 0.01)),
        64,
        1,
        True,
        micro_batch=cfg.runtime.micro_batch,
        steps=steps,
    )
    n_tasks, k = int(opts.get("tasks", 96)), int(opts.get("k", 8))
    sampling = Sampling(temperature=float(opts.get("T", 1.0)), max_new_tokens=int(opts.get("tokens", 64)))
    for it in range(iters):
        scored = rollout(roles.agent_backend, policy, envs, rng.sample(train, n_tasks), k, sampling, 0.5)
        info = trainer.update(grpo_groups(policy, scored), rng)
        roles.agent_backend.sync()
        success = sum(s.successes for s in scored) / (k * n_tasks)
        print(
            f"iter {it} T-sample success {success:.3f} kl {info['kl']:.4f} held-out {heldout()} "
            f"({time.perf_counter() - started:.0f} s)",
            flush=True,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
