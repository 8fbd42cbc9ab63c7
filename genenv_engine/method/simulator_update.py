"""The simulator's update set for one epoch: reward-weighted regression data built from the store.

D_env for an epoch is this epoch's valid generations from kept (in-band) variation batches, weighted by
exp(lambda * R_env); plus older kept pairs replayed from earlier epochs; plus fresh warm-start sibling
pairs with weight 1 (a sample estimate of KL(initial simulator || simulator) that anchors the update
against mode collapse). `simulator_update` builds that set and runs the RWR trainer on it, and reports the spread of
the weights and how far the simulator has moved from its initial weights on a fixed probe set (`simulator_drift`).
A plugin's sibling that raises or runs past its time limit leaves its anchor or probe pair out; the update reports
how many per benchmark (``sibling_faults``), and the epoch goes on.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Callable
from statistics import pstdev
from typing import TYPE_CHECKING, Any

from genenv_engine.config import RunConfig
from genenv_engine.core.algorithms import low_var_kl
from genenv_engine.core.curriculum import rwr_weights
from genenv_engine.core.records import ScoredBatch, Task
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import sibling_pairs
from genenv_engine.storage.session import Session
from genenv_engine.training import simulator as sim
from genenv_engine.training.roles import Roles

if TYPE_CHECKING:
    import torch

    from genenv_engine.method.protocols import PromptNote, Strategies
    from genenv_engine.storage.store import Store
    from genenv_engine.training.policy import Policy

Pair = tuple[list[int], list[int], float]
"""One RWR example: context token ids, target token ids, weight."""


def simulator_update(
    session: Session,
    roles: Roles,
    envs: dict[str, Environment],
    gens: list[sim.Generation],
    scored: list[ScoredBatch],
    epoch: int,
    rng: random.Random,
    tick: Callable[[], None],
    plan: Strategies,
) -> dict[str, Any]:
    """RWR on valid generations of this epoch's kept batches (``scored``, weights from exp(lambda R_env)), plus
    replayed older pairs; skipped unless the run's task source (``plan``) trains the simulator."""
    cfg = session.config
    if not plan.tasks.trains_simulator:
        return {"skipped": f"simulator mode {plan.tasks.name}"}
    kept = {b.id: b for b in scored if b.in_band}
    eos = roles.simulator.tokenizer.eos_token_id
    current: list[Pair] = []
    for g in gens:
        b = kept.get(g.batch_id)
        if g.task.valid and b is not None:
            env = envs[g.seed.benchmark]
            context = rwr_context(roles.simulator, env, g.seed, g.task, cfg, g.context, plan.note)
            target = (
                roles.simulator.encode(sim.simulator_target(env, g.task, cfg.simulator.prompt))
                if g.recomputed
                else g.token_ids
            )  # admitted on the recomputed gold: learn that answer
            current.append((roles.simulator.encode(context), target + [eos], b.r_env))
    repairs = repair_pairs(roles, envs, gens, cfg, plan.note) if cfg.simulator.repairs else []
    faults: dict[str, dict[str, int]] = {}
    if not current and not repairs:
        skipped: dict[str, Any] = {
            "skipped": "no batch in the band",
            "examples": 0,
            "drift": simulator_drift(roles, envs, cfg, plan.note, faults),
        }
        return {**skipped, "sibling_faults": faults} if faults else skipped
    older = _older_pairs(session, roles, envs, epoch, plan.note) if current else []
    extra = rng.sample(older, min(len(older), int(cfg.simulator.replay * len(current))))
    examples = current + extra
    weights = rwr_weights([e[2] for e in examples], cfg.simulator.rwr_lambda) if examples else []
    anchors = _anchor_pairs(
        roles, envs, round(cfg.simulator.init_replay * (len(current) + len(repairs))), rng, cfg, plan.note, faults
    )
    weighted = [(c, t, w) for (c, t, _), w in zip(examples, weights, strict=False)] + repairs + anchors
    info: dict[str, Any] = roles.rwr.update(weighted, rng, tick)
    roles.simulator_backend.sync()
    info.update(
        {
            "current_examples": len(current),
            "replayed_examples": len(extra),
            "anchor_examples": len(anchors),
            "repair_examples": len(repairs),
            "weight_min": min(weights, default=1.0),
            "weight_max": max(weights, default=1.0),
            "weight_sd": pstdev(weights) if weights else 0.0,
            "drift": simulator_drift(roles, envs, cfg, plan.note, faults),
        }
    )
    if faults:
        info["sibling_faults"] = faults
    return info


DRIFT_PAIRS = 8
"""The size of the simulator drift's fixed probe set (`simulator_drift`)."""


def simulator_drift(
    roles: Roles,
    envs: dict[str, Environment],
    cfg: RunConfig,
    note: PromptNote,
    faults: dict[str, dict[str, int]] | None = None,
) -> float | None:
    """How far the simulator has moved from its initial weights: over a fixed probe set (`DRIFT_PAIRS` warm-start
    (seed -> sibling) pairs drawn with the run's seed, the same every epoch), the mean per target token of the k3
    estimate of KL(simulator || initial simulator) (`genenv_engine.core.algorithms.low_var_kl`, the estimate the RWR
    update's KL term uses). The tokens are fixed texts, not samples of the simulator, so it measures movement (0
    when their log-probs are unchanged) rather than the exact KL; None without a probe pair. A plugin's probe pair
    whose sibling fails is left out and counted in ``faults`` (benchmark -> fault kind -> pairs)."""
    probe = _anchor_pairs(roles, envs, DRIFT_PAIRS, random.Random(f"drift/{cfg.seed}"), cfg, note, faults)
    if not probe:
        return None
    contexts, targets = [c for c, _, _ in probe], [t for _, t, _ in probe]
    initial = _initial_logprobs(roles.simulator_init, contexts, targets)
    current = roles.simulator.row_logprobs(contexts, targets, len(probe))  # last: the simulator stays active
    per_pair = []
    for ref, now, target in zip(initial, current, targets, strict=False):
        n = min(len(target), len(now))  # the completion's tokens (the fitted pair may cut it)
        per_pair.append(float(low_var_kl(now[-n:].float(), ref[-n:].float()).mean()) if n else 0.0)
    return round(sum(per_pair) / len(per_pair), 8)


_INITIAL: weakref.WeakKeyDictionary[Policy, tuple[object, list[torch.Tensor]]] = weakref.WeakKeyDictionary()
"""Per initial simulator: the drift's probe tokens and its log-probs on them (fixed weights, fixed texts)."""


def _initial_logprobs(init: Policy, contexts: list[list[int]], targets: list[list[int]]) -> list[torch.Tensor]:
    """``init``'s `Policy.row_logprobs` of the probe pairs, computed once per run rather than every epoch (the
    initial simulator never moves; a different probe is computed afresh)."""
    key = (tuple(map(tuple, contexts)), tuple(map(tuple, targets)))
    cached = _INITIAL.get(init)
    if cached is None or cached[0] != key:
        cached = _INITIAL[init] = (key, init.row_logprobs(contexts, targets, len(contexts)))
    return cached[1]


def rwr_context(
    policy: Policy, env: Environment, seed: Task, task: Task, cfg: RunConfig, asked: str, note: PromptNote
) -> str:
    """The RWR training context of a generated ``task``: ``asked``, the prompt it was written under, or the prompt
    on ``seed`` with the note strategy's hindsight note for it (`PromptNote.hindsight`), when it gives one."""
    relabel = note.hindsight(seed, task)
    return asked if relabel is None else sim.simulator_prompt(policy, env, seed, cfg.simulator.prompt, relabel)


def repair_pairs(
    roles: Roles, envs: dict[str, Environment], gens: list[sim.Generation], cfg: RunConfig, note: PromptNote
) -> list[Pair]:
    """Validator feedback: (the prompt a rejected draft was written under -> the task with its gold answer
    recomputed), weight 1, for every draft whose prompt was sound and answer wrong (`Generation.repair`)."""
    eos = roles.simulator.tokenizer.eos_token_id
    out: list[Pair] = []
    for g in gens:
        if g.repair is None or g.task.valid:
            continue
        env = envs[g.seed.benchmark]
        context = rwr_context(roles.simulator, env, g.seed, g.repair, cfg, g.context, note)
        target = sim.simulator_target(env, g.repair, cfg.simulator.prompt)
        out.append((roles.simulator.encode(context), roles.simulator.encode(target) + [eos], 1.0))
    return out


def _anchor_pairs(
    roles: Roles,
    envs: dict[str, Environment],
    n: int,
    rng: random.Random,
    cfg: RunConfig,
    note: PromptNote,
    faults: dict[str, dict[str, int]] | None = None,
) -> list[Pair]:
    """Fresh warm-start-style (seed -> sibling) pairs with weight 1 (their prompts carrying the note strategy's
    `PromptNote.pair_note`), spread over the benchmarks; a plugin's pair whose sibling fails is left out and counted
    in ``faults``."""
    eos = roles.simulator.tokenizer.eos_token_id
    out: list[Pair] = []
    names = sorted(envs)
    for i, name in enumerate(names):
        env = envs[name]
        share = n // len(names) + (1 if i < n % len(names) else 0)
        if share:
            pool = env.splits()["train"] + env.splits()["seed"]
            drawn = sibling_pairs(env, pool, rng, share)
            if drawn.failed and faults is not None:
                mine = faults.setdefault(name, {})
                for kind, k in drawn.failed.items():
                    mine[kind] = mine.get(kind, 0) + k
            for src, sib in drawn.pairs:
                out.append(
                    (
                        roles.simulator.encode(
                            sim.simulator_prompt(
                                roles.simulator, env, src, cfg.simulator.prompt, note.pair_note(src, sib)
                            )
                        ),
                        roles.simulator.encode(sim.simulator_target(env, sib, cfg.simulator.prompt)) + [eos],
                        1.0,
                    )
                )
    return out


def simulator_version(store: Store, epoch: int) -> int:
    """The version of the simulator weights at the start of ``epoch``: the last earlier finished epoch whose
    update took RWR steps (0: the warm start), as the agent's version is the epoch of its last update."""
    return max(
        (
            m["epoch"]
            for m in store.epoch_metrics()
            if 0 < m["epoch"] < epoch and (m.get("simulator_update") or {}).get("steps")
        ),
        default=0,
    )


def success_by_epoch(store: Store) -> dict[int, dict[str, float | None]]:
    """Each finished epoch's pooled agent success on generated tasks, per benchmark: the "recent success"
    the simulator is shown when it writes the next epoch's tasks."""
    return {m["epoch"]: m.get("generated_success_by_benchmark") or {} for m in store.epoch_metrics()}


def success_history(rates: dict[int, dict[str, float | None]], benchmark: str, epoch: int) -> list[float | None]:
    """One benchmark's measured success at epochs 1 .. ``epoch`` - 1, oldest first (None where none was
    measured): what the run's prompt note (`genenv_engine.method.strategies`) reads for ``epoch``'s prompts.

    >>> success_history({0: {}, 1: {"bfcl": 0.2}, 2: {}, 3: {"bfcl": 0.6}}, "bfcl", 3)
    [0.2, None]
    """
    return [rates.get(e, {}).get(benchmark) for e in range(1, epoch)]


def _older_pairs(
    session: Session,
    roles: Roles,
    envs: dict[str, Environment],
    epoch: int,
    note: PromptNote,
) -> list[Pair]:
    """D_env: (seed context -> generated task) pairs from earlier epochs' kept batches, with their R_env."""
    store, cfg = session.store, session.config
    style = cfg.simulator.prompt
    eos = roles.simulator.tokenizer.eos_token_id
    kept = [b for b in store.batches() if b["epoch"] < epoch and b["in_band"] and b["r_env"] is not None]
    rates = success_by_epoch(store)
    generated = store.tasks_in_batches([b["id"] for b in kept], origin="generated")
    pairs: list[Pair] = []
    for b in kept:
        seed = store.get_task(b["seed_task_id"]) if b["seed_task_id"] else None
        if seed is None or seed.benchmark not in envs:
            continue
        env = envs[seed.benchmark]
        if b.get("prompt_note") is not None:  # the note the batch's prompt carried, stored when it was written
            written = sim.note_text(b["prompt_note"])
        else:  # a batch stored before notes were (or whose prompt had none): re-derived from the history
            written = note.text(env.name, success_history(rates, env.name, b["epoch"]))
        asked = sim.simulator_prompt(roles.simulator, env, seed, style, written)
        asked_ids = roles.simulator.encode(asked)  # once per batch; a relabelled task encodes its own
        for task in generated[b["id"]]:
            text = rwr_context(roles.simulator, env, seed, task, cfg, asked, note)
            context = asked_ids if text == asked else roles.simulator.encode(text)
            pairs.append(
                (context, roles.simulator.encode(sim.simulator_target(env, task, style)) + [eos], float(b["r_env"]))
            )
    return pairs
