"""Sampler mode end to end on the micro preset and the chain benchmark: each difficulty sampler draws the levels it
should against a scripted agent whose success depends on the level only, every sampler arm trains the budget's
tasks, and the controller's policy is the one its stored batches replay to.

The agent is a test double (`ScriptedChainAgent`): it writes the gold chain at levels 1-2, the gold chain on every
other rollout of a level-3 task (p-hat exactly 0.5), and a wrong call at levels 4 and up. Policies, trainers,
environments and the store are real.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from genenv_engine.ablation.arms import ARMS, Plan, arm_config, check_equal_compute
from genenv_engine.backends.base import Completion, Sampling
from genenv_engine.config import ConfigError, load_config
from genenv_engine.environments import environments_of
from genenv_engine.environments.chain.grammar import join_calls, read_prompt
from genenv_engine.method.loop import run
from genenv_engine.method.samplers import controller_policy, history_of, parse_cell, schedule_levels
from genenv_engine.storage.session import Session
from genenv_engine.testing import USER_TURN, ScriptedSimulator

LEVELS = (1, 2, 3, 4, 5, 6)
SAMPLER_ARMS = ("target", "uniform-levels", "schedule", "learnability", "controller")


class ScriptedChainAgent:
    """Test double: solves chain tasks by level (see the module docstring); greedy answers follow the same rule."""

    def __init__(self, policy) -> None:
        self.policy, self.tokens_generated, self.tick = policy, 0, None
        self.level3 = 0

    def sync(self) -> None:
        """No weights are used."""

    def generate(self, prompts: list[str], sampling: Sampling) -> list[Completion]:
        out = []
        for prompt in prompts:
            draft = read_prompt(USER_TURN.search(prompt).group(1))
            gold = join_calls(draft.calls)
            if draft.level == 3:
                self.level3 += 1
                good = self.level3 % 2 == 0
            else:
                good = draft.level <= 2
            text = gold if good else "q(0)=0"
            out.append(Completion(text, self.policy.encode(text)))
        return out


def chain_agent(role, policy):
    return ScriptedChainAgent(policy) if role == "agent" else ScriptedSimulator(policy)


def sampler_session(tmp_path, sampler: str, epochs: int = 3) -> Session:
    config = load_config(
        "micro",
        overrides={
            "benchmarks": ["chain"],
            "epochs": epochs,
            "simulator.mode": "sampler",
            "curriculum.sampler": sampler,
            "simulator.seed_levels": list(LEVELS),
            "simulator.variations": 5,
            "agent.tasks_per_epoch": 20,
            "agent.steps_per_epoch": 2,
            "heldout_size": 16,
        },
    )
    return Session.create(config, tmp_path / sampler)


def levels_trained(session: Session, epoch: int) -> Counter:
    """The levels of the fresh tasks one epoch's sampler drew."""
    cells = session.store.epoch_metrics()[epoch]["sampler_cells"]["chain"]
    out: Counter = Counter()
    for cell, n in cells.items():
        out[parse_cell(cell)[0]] += n
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """One 3-epoch micro run per sampler (shared, read-only)."""
    root = tmp_path_factory.mktemp("samplers")
    out = {}
    for sampler in ("target", "uniform", "schedule", "learnability", "controller"):
        session = sampler_session(root, sampler)
        assert run(session, backend_factory=chain_agent) == {"epochs_done": 3}
        out[sampler] = session
    return out


def test_target_draws_only_the_highest_level(runs):
    for epoch in (1, 2, 3):
        assert levels_trained(runs["target"], epoch) == Counter({6: 20})


def test_uniform_draws_every_level(runs):
    seen = sum((levels_trained(runs["uniform"], e) for e in (1, 2, 3)), Counter())
    assert set(seen) == set(LEVELS) and sum(seen.values()) == 60
    weights = runs["uniform"].store.epoch_metrics()[2]["sampler_weights"]["chain"]
    assert weights == {f"L{k}": round(1 / 6, 4) for k in LEVELS}


def test_schedule_climbs_the_ladder(runs):
    for epoch in (1, 2, 3):
        drawn = set(levels_trained(runs["schedule"], epoch))
        assert drawn <= set(schedule_levels(LEVELS, epoch, 3))
    assert set(levels_trained(runs["schedule"], 3)) <= {5, 6}
    assert set(levels_trained(runs["schedule"], 1)) == {1}


def test_learnability_moves_to_the_level_the_agent_half_solves(runs):
    session = runs["learnability"]
    first = session.store.epoch_metrics()[1]["sampler_weights"]["chain"]
    assert first == {f"L{k}": round(1 / 6, 4) for k in LEVELS}  # nothing measured: every level at 1/4
    # epoch 1 rolled out some of L1-L6: p-hat 1 at L1-2, 0.5 at L3, 0 above; unmeasured levels stay at 1/4
    measured = levels_trained(session, 1)
    weights = session.store.epoch_metrics()[2]["sampler_weights"]["chain"]
    if 3 in measured:
        assert weights["L3"] > max(w for c, w in weights.items() if c != "L3" and int(c[1:]) in measured)
    for level in (1, 2, 4, 5, 6):
        if level in measured:
            assert weights[f"L{level}"] == pytest.approx(0.1 / 6, abs=1e-4)  # p (1 - p) = 0: the explore share


def test_controller_learns_the_band_cells_from_its_stored_batches(runs):
    session = runs["controller"]
    cfg = session.config
    batches = session.store.batches()
    assert all(b["id"].split("/")[2].startswith("L") for b in batches)
    kept3 = [b for b in batches if b["epoch"] == 1 and b["in_band"]]
    assert kept3 and all(parse_cell(b["id"].split("/")[2])[0] == 3 for b in kept3)  # only L3 is in the band
    weights = session.store.epoch_metrics()[2]["sampler_weights"]["chain"]
    assert len(weights) == len(LEVELS) * 3  # level x distractors 0-2
    l3 = sum(w for c, w in weights.items() if c.startswith("L3-"))
    assert l3 > 0.5 > 3 / 18
    # the stored weights are the controller's policy replayed from the stored batches (plus the explore share)
    history = history_of(batches, "chain", 2, lambda p: cfg.curriculum.keeps(p, "chain"))
    pi = controller_policy(list(weights), history, cfg.simulator.rwr_lambda)
    assert weights == {c: round(0.9 * p + 0.1 / 18, 4) for c, p in pi.items()}


def test_every_sampler_stores_what_it_stored_before_the_strategies_were_named(runs):
    """These sessions are the sampler runs of `scripts/behaviour_fingerprint.py`; they store the same tasks, batches,
    rollouts and metrics as the code before (`test_behaviour_fingerprint.py` checks the other runs)."""
    import importlib.util
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    script = root / "scripts" / "behaviour_fingerprint.py"
    spec = importlib.util.spec_from_file_location("behaviour_fingerprint", script)
    fingerprint = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fingerprint)
    before = json.loads((root / "tests" / "engine" / "data" / "behaviour_fingerprint.json").read_text())
    for sampler, session in runs.items():
        want, mine = before[f"sampler_{sampler}"], fingerprint.dump(session.path)
        want.pop("seconds")
        assert mine == want, f"{sampler} differs at {fingerprint.first_difference(want, mine)}"


def test_every_sampler_arm_trains_the_budget_on_generated_tasks_outside_the_splits(runs):
    for session in runs.values():
        for m in session.store.epoch_metrics()[1:]:
            assert m["tasks_trained"] == 20 and m["generated"] == 20 and m["valid_fraction"] == 1.0
            assert m["simulator_update"] == {"skipped": "simulator mode sampler"}
        env = environments_of(session.config)["chain"]
        split_prompts = {t.prompt for tasks in env.splits().values() for t in tasks}
        generated = session.store.pool(["chain"])
        assert len(generated) == 60 and not split_prompts & {t.prompt for t in generated}
        assert {t.generator for t in generated} == {f"sampler:{session.config.curriculum.sampler}"}


def test_sampler_arms_have_equal_compute_with_genenv_on_the_chain_preset(tmp_path):
    plan = Plan(out=tmp_path, arms=SAMPLER_ARMS + ("trained", "frozen"), preset="chain")
    configs = {arm: arm_config(plan, arm, 0) for arm in plan.arms}
    budget = check_equal_compute(configs)
    assert budget["tasks_per_epoch"] == 80 and budget["rollouts_per_epoch"] == 640
    for arm in SAMPLER_ARMS:
        cfg = configs[arm]
        assert cfg.simulator.mode == "sampler" and cfg.curriculum.sampler == ARMS[arm][0]["curriculum.sampler"]
        assert cfg.simulator.seeds_per_epoch * cfg.simulator.variations == cfg.agent.tasks_per_epoch
    broken = dict(
        configs,
        target=arm_config(
            Plan(out=tmp_path, arms=("target",), preset="chain", sets={"agent.steps_per_epoch": 9}), "target", 0
        ),
    )
    with pytest.raises(ConfigError, match="steps_per_epoch"):
        check_equal_compute(broken)


def test_sampler_setting_needs_sampler_mode_and_a_generated_benchmark(tmp_path):
    with pytest.raises(ConfigError, match="curriculum.sampler"):
        load_config("micro", overrides={"curriculum.sampler": "target"})
    with pytest.raises(ConfigError, match="curriculum.sampler"):
        load_config("micro", overrides={"simulator.mode": "sampler", "curriculum.sampler": "hardest"})
    pytest.importorskip("bfcl_eval")
    config = load_config("micro", overrides={"simulator.mode": "sampler", "benchmarks": ["bfcl_official"]})
    session = Session.create(config, tmp_path / "official")
    with pytest.raises(ConfigError, match="generated benchmark"):
        run(session)
    assert session.store.epoch_metrics() == []  # refused before the warm start: nothing written


def test_task_at_asks_for_the_knob_and_refuses_unknown_ones():
    from genenv_engine.environments.base import SplitSizes
    from genenv_engine.environments.chain import ChainEnv

    env = ChainEnv(seed=0, sizes=SplitSizes(seed=8, train=16, heldout=8))
    rng, taken = random.Random(1), set()
    tasks = [env.task_at(5, rng, f"chain/x/{i}", taken, knobs={"distractors": 2}, split="generated") for i in range(20)]
    assert {(t.level, t.difficulty["features"]["distractors"]) for t in tasks} == {(5, 2)}
    assert len({t.prompt for t in tasks}) == 20 and taken == {t.prompt for t in tasks}
    assert all(env.validate(t.prompt, t.answer, task_id=t.id).ok for t in tasks)
    with pytest.raises(ValueError, match="knobs"):
        env.task_at(5, rng, "chain/x/y", taken, knobs={"hint": 1})
