"""Warm-start training: each role's SFT, the pairs it trains on, and what it shows while it trains.

The agent is fine-tuned on the benchmarks' train splits (prompt -> gold answer, `agent_pairs`); the simulator
starts from the agent's weights and is fine-tuned on (seed -> sibling seed) pairs (`simulator_pairs`) so it can
write well-formed, valid variations. `train_agent` leaves the Python random generator as its SFT left it, and
`save_agent_state` writes it with the torch random states, so `restore` lets a later run train the simulator to
the same weights as a warm start made in one go. Each stage's figures name the machine that trained it (`built_on`).
While a role trains, its per-step callback checks for a pause or stop, reports progress and shows a few greedy
samples (`SAMPLES`). A plugin's fault is contained here as in an epoch: a sample whose check or validate raises (or
runs past its time limit) shows as failed with its reason, and a sibling pair whose sibling fails is left out of
the simulator's pairs and counted (``simulator_pairs_failed``); when no pair of a benchmark could be drawn, the warm
start stops with one line naming the environment, the method and the exception (`PluginFailed`).
"""

from __future__ import annotations

import json
import random
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from genenv_engine.config import RunConfig
from genenv_engine.core.events import EventSink, WarmStartProgressed, WarmStartSample
from genenv_engine.core.limits import PluginFailed, check_response, fault_kind
from genenv_engine.core.records import Task
from genenv_engine.environments.base import Environment
from genenv_engine.environments.plugin_worker import sibling_pairs
from genenv_engine.training.agent import agent_prompt
from genenv_engine.training.models import AGENT_INFO, TORCH_RNG, warmstart_agent, warmstart_simulator
from genenv_engine.training.policy import Policy
from genenv_engine.training.simulator import job_grammar, parse_and_validate, simulator_prompt, simulator_target
from genenv_engine.training.trainer import sft

PairNote = Callable[[Task, Task], str | None]
"""The note a (seed -> sibling) pair's prompt carries: the run's note strategy's ``pair_note``
(`genenv_engine.method.protocols.PromptNote`)."""


def no_pair_note(source: Task, sibling: Task) -> str | None:
    """The pairs of a note strategy that writes none into them (the paper's prompts)."""
    return None


def built_on() -> str:
    """The machine training here, as `genenv_engine.core.machine.machine_line` writes it (the GPU once this process
    has used one)."""
    from genenv_engine.core.machine import cpu_math_flags, local_cpu, machine_line

    gpu = torch.cuda.get_device_name() if torch.cuda.is_initialized() else None
    return machine_line(local_cpu(), cpu_math_flags(), torch.__version__, torch.backends.cpu.get_cpu_capability(), gpu)


def read_agent_info(folder: Path) -> tuple[dict, list]:
    """Stage 1's figures, and apart from them the Python random state its SFT left (`save_agent_state`)."""
    info = json.loads((folder / AGENT_INFO).read_text())
    return info, info.pop("rng")


def train_agent(
    config: RunConfig, envs: dict[str, Environment], out: Path, sink: EventSink, check: Callable[[], None]
) -> tuple[Policy, random.Random, dict]:
    """Stage 1: the agent's SFT, saved as ``out/agent``; returns the agent, the random generator as its SFT left
    it, and its figures."""
    ws = config.warm_start
    rng = random.Random(config.seed)
    torch.manual_seed(config.seed)
    agent = warmstart_agent(config.model, config.runtime, config.seed)
    started = time.perf_counter()
    pairs = agent_pairs(agent, envs, config.warm_start.agent_levels)
    env0 = next(iter(envs.values()))
    shown = env0.splits()["heldout"][0]
    report = _reporter(sink, "agent", ws.agent_steps, check, lambda: _agent_sample(agent, env0, shown, config))
    micro = config.runtime.micro_batch
    groups = config.model.sft_length_groups
    agent_losses = sft(agent, pairs, ws.agent_steps, ws.agent_lr, ws.batch_size, rng, report, micro, groups)
    agent.save(out / "agent")
    return (
        agent,
        rng,
        {
            "parameters": agent.num_parameters(),
            "agent_trainable": agent.num_trainable(),
            "agent_steps": ws.agent_steps,
            "agent_final_loss": tail_mean(agent_losses),
            "agent_seconds": round(time.perf_counter() - started, 1),
            "agent_pairs": len(pairs),
            "built_on": built_on(),
        },
    )


def save_agent_state(out: Path, rng: random.Random, info: dict) -> None:
    """Write the stage-one marker: the agent's figures and the random states its SFT left (read by `restore`)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []  # a CPU run opens no GPU context
    torch.save({"cpu": torch.get_rng_state(), "cuda": cuda}, out / TORCH_RNG)
    (out / AGENT_INFO).write_text(json.dumps({**info, "rng": rng.getstate()}, indent=2))


def restore(folder: Path) -> tuple[random.Random, dict]:
    """The Python random generator and the torch random states as the agent's SFT left them."""
    info, (version, state, gauss) = read_agent_info(folder)
    rng = random.Random()
    rng.setstate((version, tuple(state), gauss))
    states = torch.load(folder / TORCH_RNG, weights_only=True)
    torch.set_rng_state(states["cpu"])
    if states["cuda"]:
        if torch.cuda.is_available() and len(states["cuda"]) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(states["cuda"])
        else:
            warnings.warn(
                f"{folder.name}: its agent was trained on {len(states['cuda'])} GPU(s) and this run has "
                f"{torch.cuda.device_count()}; the simulator's warm start cannot continue the same random "
                "states, so it will differ from a warm start made in one go",
                stacklevel=2,
            )
    return rng, info


def train_simulator(
    config: RunConfig,
    envs: dict[str, Environment],
    agent: Policy,
    agent_folder: Path,
    rng: random.Random,
    out: Path,
    sink: EventSink,
    check: Callable[[], None],
    pair_note: PairNote = no_pair_note,
) -> dict:
    """Stage 2: the simulator's SFT from the agent saved in ``agent_folder``, saved as ``out/simulator``, its pairs'
    prompts carrying ``pair_note``; returns its figures."""
    ws = config.warm_start
    started = time.perf_counter()
    # the simulator starts from the agent's weights (one base, two roles) unless it has its own model
    sim = warmstart_simulator(config.model, config.runtime, agent, agent_folder)
    failed: dict[str, dict[str, int]] = {}
    sim_pairs = simulator_pairs(sim, envs, config, rng, failed, pair_note)
    env0 = next(iter(envs.values()))
    seed = env0.splits()["seed"][0]
    report = _reporter(
        sink, "simulator", ws.simulator_steps, check, lambda: _simulator_sample(sim, env0, seed, config, pair_note)
    )
    micro = config.runtime.micro_batch
    groups = config.model.sft_length_groups
    sim_losses = sft(sim, sim_pairs, ws.simulator_steps, ws.simulator_lr, ws.batch_size, rng, report, micro, groups)
    sim.save(out / "simulator")
    return {
        "simulator_trainable": sim.num_trainable(),
        "simulator_steps": ws.simulator_steps,
        "simulator_final_loss": tail_mean(sim_losses),
        "simulator_seconds": round(time.perf_counter() - started, 1),
        "simulator_pairs": len(sim_pairs),
        "simulator_built_on": built_on(),
        **({"simulator_pairs_failed": failed} if failed else {}),
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
        (t, None) for env in envs.values() for t in env.split_at_levels("train", levels, "warm_start.agent_levels")
    ]
    items += [(t, cut) for env in envs.values() for t, cut in env.warm_start_prefixes()]

    def encode(item: tuple[Task, str | None]) -> tuple[list[int], list[int]]:
        task, cut = item
        prompt = agent.encode(agent_prompt(agent, task))
        return prompt, agent.completion_ids(task.answer) if cut is None else agent.encode(cut)

    return EncodedPairs(items, encode)


def simulator_pairs(
    sim,
    envs: dict[str, Environment],
    config: RunConfig,
    rng: random.Random,
    failed: dict[str, dict[str, int]] | None = None,
    pair_note: PairNote = no_pair_note,
) -> list[tuple[list[int], list[int]]]:
    """The simulator's SFT pairs: (prompt on a seed with ``pair_note``, a sibling task as the target), drawn from each
    benchmark's train and seed splits, about a quarter of the steps' sequences per benchmark plus 256. A plugin's pair
    whose sibling fails is left out and counted in ``failed`` (benchmark -> fault kind -> pairs); `PluginFailed` when
    none of a benchmark's could be drawn (the simulator would learn nothing of it)."""
    ws, style = config.warm_start, config.simulator.prompt
    per_env = max(1, (ws.simulator_steps * ws.batch_size) // max(1, len(envs)) // 4 + 256)
    out = []
    for env in envs.values():
        pool = env.splits()["train"] + env.splits()["seed"]
        drawn = sibling_pairs(env, pool, rng, per_env)
        if drawn.failed and not drawn.pairs:
            raise PluginFailed(
                env,
                "sibling",
                drawn.error,
                f"for every warm-start pair of the simulator ({sum(drawn.failed.values())} of {per_env})",
            )
        if drawn.failed and failed is not None:
            failed[env.name] = dict(drawn.failed)
        for src, sib in drawn.pairs:
            out.append(
                (
                    sim.encode(simulator_prompt(sim, env, src, style, pair_note(src, sib))),
                    sim.completion_ids(simulator_target(env, sib, style)),
                )
            )
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

    out = (
        HFBackend(agent)
        .generate([agent_prompt(agent, task)], Sampling(max_new_tokens=config.agent.max_new_tokens, greedy=True))[0]
        .text
    )
    result = check_response(env, task, out)  # a plugin's fault fails the sample, named, as it fails a rollout
    fault = f" ({result.error_type})" if fault_kind(result.error_type) else ""
    return task.prompt, out, result.success, f"gold: {task.answer}{fault}"


def _simulator_sample(sim, env: Environment, seed: Task, config: RunConfig, pair_note: PairNote) -> Sample:
    """The simulator's greedy variation of one seed task (its prompt carrying the pair note of the seed with itself),
    parsed and validated like an epoch's generations."""
    from genenv_engine.backends.base import Sampling
    from genenv_engine.backends.hf import HFBackend

    style = config.simulator.prompt
    note = pair_note(seed, seed)
    sampling = Sampling(max_new_tokens=config.simulator.max_new_tokens, greedy=True, grammar=job_grammar(config, env))
    out = HFBackend(sim).generate([simulator_prompt(sim, env, seed, style, note)], sampling)[0].text
    task = parse_and_validate(
        env, out, task_id="warm-start-sample", seed=seed, epoch=0, generator="warm_start", style=style
    )
    return seed.prompt, out, task.valid, task.reason


def _reporter(
    sink: EventSink, role: str, steps: int, check: Callable[[], None], sample: Callable[[], Sample] | None = None
):
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
