"""The grounded simulator reward (`genenv_lab.grounded`): a micro run whose test-double agent improves
after an update only on one bfcl function family gives that family's batches the larger RWR weight; the sibling
answers are stored and counted apart from the agent's training rollouts; the reward is a named strategy; the
training-signal table shows "—" where a record lacks a field; sampler mode runs the controller sampler on bfcl."""

from __future__ import annotations

import random

import pytest

from genenv_engine.ablation import signals
from genenv_engine.ablation.runs import read_session
from genenv_engine.backends.base import Completion
from genenv_engine.config import load_config
from genenv_engine.core.curriculum import rwr_weights
from genenv_engine.environments.bfcl.catalog import read_prompt
from genenv_engine.environments.bfcl.mini import generate_draft
from genenv_engine.method.loop import run
from genenv_engine.method.strategies import get, resolve
from genenv_engine.storage.session import Session
from genenv_engine.testing import USER_TURN
from genenv_engine.training.tokenizer import build_byte_tokenizer
from genenv_engine.training.trainer import RWRTrainer
from genenv_lab.grounded import SIBLINGS, probe_siblings

LEARNED, OTHER = "add", "mul"
"""The function family the test-double agent learns from an update, and the one it never does."""


class FamilySimulator:
    """Test double: every variation of one seed calls one function first: ``add`` for the first seed it is shown,
    ``mul`` for the second, and so on alternately (so each batch is of one family, whatever its seed)."""

    def __init__(self, policy) -> None:
        self.policy, self.rng, self.family, self.tokens_generated, self.tick = policy, random.Random(0), {}, 0, None

    def sync(self) -> None:
        """No weights are used."""

    def generate(self, prompts, sampling):
        out = []
        for prompt in prompts:
            family = self.family.setdefault(prompt, (LEARNED, OTHER)[len(self.family) % 2])
            draft = generate_draft(2, self.rng, first=family)
            text = f"{draft.prompt} => {draft.answer}"
            out.append(Completion(text, self.policy.encode(text)))
        return out


class FamilyLearner:
    """Test double: greedy answers are right on tasks whose first call is ``add`` once an update has been synced,
    wrong on every other task and before; sampled answers are right one time in two (so GRPO has groups to learn
    from). Keyed by the task's function, never by its batch."""

    def __init__(self, policy) -> None:
        self.policy, self.rng, self.updates, self.tokens_generated, self.tick = policy, random.Random(1), 0, 0, None

    def sync(self) -> None:
        self.updates += 1

    def generate(self, prompts, sampling):
        out = []
        for prompt in prompts:
            draft = read_prompt(USER_TURN.search(prompt).group(1))
            if sampling.greedy:
                good = draft.calls[0].name == LEARNED and self.updates > 0
            else:
                good = self.rng.random() < 0.5
            text = draft.answer if good else "nope(x=1)"
            out.append(Completion(text, self.policy.encode(text)))
        return out


def family_backends(role, policy):
    return FamilyLearner(policy) if role == "agent" else FamilySimulator(policy)


def family_of(text: str) -> str:
    """The first function a simulator target (``<prompt> => <answer>``) calls."""
    return text.rsplit("=>", 1)[1].strip().split("(")[0]


@pytest.fixture(scope="module")
def grounded_run(tmp_path_factory):
    """One epoch of a micro run with the grounded reward and the family doubles; every RWR update's examples."""
    captured = []
    original = RWRTrainer.update

    def spy(self, examples, rng, tick=lambda: None):
        captured.append(list(examples))
        return original(self, examples, rng, tick)

    cfg = load_config(
        "micro",
        overrides={
            "epochs": 1,
            "curriculum.reward": "grounded",
            "simulator.seeds_per_epoch": 4,
            "simulator.variations": 2,
            "simulator.init_replay": 0.0,
            "simulator.repairs": False,
            "simulator.duplicate_cap": 100,
        },
    )
    session = Session.create(cfg, tmp_path_factory.mktemp("grounded") / "s")
    RWRTrainer.update = spy
    try:
        run(session, backend_factory=family_backends)
    finally:
        RWRTrainer.update = original
    return session, captured


def test_the_family_the_agent_learned_gets_the_larger_rwr_weight(grounded_run):
    session, captured = grounded_run
    batches = session.store.batches(1)
    families = {
        b["id"]: {
            t.expected["calls"][0]["name"]
            for t in session.store.tasks_in_batches([b["id"]], origin="generated")[b["id"]]
        }
        for b in batches
    }
    assert all(len(f) == 1 for f in families.values())
    reward = {b["id"]: b["r_env"] for b in batches}
    learned = [reward[b] for b, f in families.items() if f == {LEARNED}]
    other = [reward[b] for b, f in families.items() if f == {OTHER}]
    assert learned and other
    assert learned == [1.0] * len(learned) and other == [0.0] * len(other)  # every sibling of add: wrong, then right
    assert all(b["in_band"] for b in batches)  # no band filter
    [examples] = captured
    tokenizer = build_byte_tokenizer()
    by_family: dict[str, set[float]] = {}
    for _, target, weight in examples:
        text = tokenizer.decode(target, skip_special_tokens=True)
        by_family.setdefault(family_of(text), set()).add(round(weight, 6))
    assert set(by_family) == {LEARNED, OTHER}
    assert min(by_family[LEARNED]) > max(by_family[OTHER])
    n_learned = sum(1 for *_, w in examples if round(w, 6) in by_family[LEARNED])
    want = rwr_weights([1.0] * n_learned + [0.0] * (len(examples) - n_learned), session.config.simulator.rwr_lambda)
    assert by_family[LEARNED] == {round(want[0], 6)} and by_family[OTHER] == {round(want[-1], 6)}


def test_the_sibling_answers_are_stored_and_counted_apart_from_training(grounded_run):
    session, _ = grounded_run
    m = session.store.epoch_metrics()[-1]
    g = m["grounded"]
    valid_fresh = len(m["task_p_hats"])
    assert g["siblings"] <= SIBLINGS * valid_fresh and g["generations"] == 2 * g["siblings"] > 0
    assert (g["success_before"], 0.0 < g["success_after"] < 1.0) == (0.0, True)
    counts = session.store.rollout_counts()[1]
    assert counts["probe_before"] == counts["probe_after"] == g["siblings"]
    assert counts["train"] == m["tasks_trained"] * session.config.agent.rollouts
    row = read_session(session.path)["epochs"][1]
    assert row["eval_generations"] == g["generations"] and row["train_rollouts"] == counts["train"]
    assert row["fresh_tasks"] == valid_fresh and row["drift"] is not None and row["drift"] >= 0
    probes = session.store.query_tasks(origin="probe", limit=1000, order="id")
    assert len(probes) == g["siblings"] and all(r["split"] == "probe" for r in probes)
    assert not any(t.origin == "probe" for t in session.store.pool(["bfcl"]))  # never trained on


def test_siblings_are_drawn_at_the_task_level_outside_the_taken_prompts():
    env = resolve_env()
    task = env.splits()["seed"][0]
    taken = {t.prompt for tasks in env.splits().values() for t in tasks}
    before = set(taken)
    sibs = probe_siblings(env, task, 4, random.Random(0), taken, epoch=3)
    assert len(sibs) == 4 and {s.level for s in sibs} == {task.level}
    assert not {s.prompt for s in sibs} & before and {s.prompt for s in sibs} <= taken
    assert {s.origin for s in sibs} == {"probe"} and {s.parent_id for s in sibs} == {task.id}
    assert {s.expected["calls"][0]["name"] for s in sibs} == {task.expected["calls"][0]["name"]}


def resolve_env():
    from genenv_engine.environments import get_environment

    return get_environment("bfcl", 0)


def test_the_reward_is_a_named_strategy():
    assert type(resolve(load_config("micro")).reward).__name__ == "CurriculumReward"
    grounded = resolve(load_config("micro", overrides={"curriculum.reward": "grounded"})).reward
    assert type(grounded).__name__ == "GroundedReward"
    assert get("reward", "grounded").__module__ == "genenv_lab.grounded"
    assert load_config("micro", overrides={"curriculum.reward": "grounded"}).curriculum.keeps(0.99, "bfcl")


def test_the_signal_table_marks_fields_a_record_lacks():
    old = {
        "epoch": 1,
        "in_band_fraction": 0.5,
        "zero_advantage_share": 0.25,
        "simulator_examples": 8,
        "tasks_trained": 10,
        "agent_steps": 4,
    }
    new = {
        **old,
        "epoch": 1,
        "band_fraction": 0.75,
        "task_band_fraction": 0.5,
        "fresh_tasks": 6,
        "train_rollouts": 40,
        "weight_min": 0.5,
        "weight_max": 1.5,
        "weight_sd": 0.25,
        "drift": 0.001,
        "eval_generations": 48,
    }
    results = {
        "arms": ["frozen", "grounded"],
        "runs": {"frozen": {"0": {"epochs": [old]}}, "grounded": {"0": {"epochs": [new]}}},
    }
    lines = signals.markdown(results)
    frozen = lines[lines.index("### GenEnv-Random (frozen)") + 4]
    grounded = lines[lines.index("### Grounded reward (grounded)") + 4]
    assert frozen == "| 1 | — | 0.500 | 0.750 | — | — | 4 | 8 | — | — | — |"
    assert grounded == "| 1 | 0.500 | 0.750 | 0.750 | 6 | 40 | 4 | 8 | 0.500–1.500 (0.250) | 0.00100 | 48 |"


def test_sampler_mode_runs_the_controller_on_bfcl(tmp_path):
    from genenv_engine.testing import scripted_backends

    cfg = load_config(
        "micro",
        overrides={
            "epochs": 1,
            "simulator.mode": "sampler",
            "curriculum.sampler": "controller",
            "simulator.seed_levels": [3, 4],
        },
    )
    session = Session.create(cfg, tmp_path / "s")
    run(session, backend_factory=scripted_backends())
    m = session.store.epoch_metrics()[-1]
    assert m["sampler"] == "controller" and m["valid"] == m["generated"] > 0
    assert set(m["difficulty_mix"]) <= {"L3", "L4"}
    assert m["tasks_trained_by_origin"].get("generated", 0) + m["tasks_trained_by_origin"].get("sampler", 0) > 0


def test_a_partial_epoch_forgets_its_siblings(tmp_path):
    from genenv_engine.core.records import Task

    session = Session.create(load_config("micro"), tmp_path / "s")
    sibling = Task(
        id="bfcl/gen/x/probe-e2-0", benchmark="bfcl", prompt="p", answer="a", origin="probe", split="probe", epoch=2
    )
    session.store.insert_tasks([sibling, sibling.with_(id="bfcl/gen/y/probe-e1-0", epoch=1)])
    session.store.drop_epochs_from(2)
    assert session.store.get_task(sibling.id) is None and session.store.get_task("bfcl/gen/y/probe-e1-0")
